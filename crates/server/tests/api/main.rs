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
mod models;
mod openapi;
mod pool;
mod ports;
mod process;
mod runs;
mod sandboxes;
mod sessions;
mod streaming;
mod webhooks;
mod webhooks_crash;
