//! One integration-test binary: every module drives real servers on real PostgreSQL.

mod agents;
mod conventions;
mod event_log;
mod fanout;
mod files;
mod models;
mod openapi;
mod pool;
mod ports;
mod runs;
mod sandboxes;
mod sessions;
mod streaming;
