//! One module per resource; handlers are thin: extract, parse, call the store, map.

pub mod agents;
pub mod api_keys;
pub mod deliveries;
pub mod environments;
pub mod events;
pub mod files;
pub mod git_keys;
pub mod identity;
pub mod lifecycle;
pub mod memory;
pub mod models;
pub mod ports;
pub mod processes;
pub mod projects;
pub mod runs;
pub mod sandbox_files;
pub mod secrets;
pub mod sessions;
pub mod sign_in;
pub mod skill_bundles;
pub mod snapshots;
pub mod system;
pub mod terminal;
pub mod usage;
pub mod users;
pub mod webhooks;
