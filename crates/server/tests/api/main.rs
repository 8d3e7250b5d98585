//! One integration-test binary: every module drives real servers on real PostgreSQL.

mod agents;
mod auth;
mod client_tools;
mod conventions;
mod event_log;
mod fanout;
mod files;
mod git_keys;
mod isolation;
mod key_rotation;
mod models;
mod openapi;
mod operators;
mod pool;
mod ports;
mod preview_origin;
mod process;
mod project_delete;
mod runs;
mod sandboxes;
mod secrets;
mod sessions;
mod streaming;
mod webhooks;
mod web_security;
mod webhooks_crash;
