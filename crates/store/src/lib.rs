//! Everything that speaks SQL. One module per table; functions take an executor (or a
//! connection inside the caller's transaction), so the caller decides what commits together.
//! Every project-scoped query filters by `project_id` here, so a handler cannot forget to.

pub mod admission;
pub mod agent_memories;
pub mod agents;
pub mod api_keys;
pub mod bundles;
pub mod database;
pub mod deliveries;
pub mod deployment;
pub mod e2b;
pub mod egress_ca;
pub mod embedded;
pub mod environments;
pub mod error;
pub mod events;
pub mod garbage;
pub mod git_keys;
pub mod hub;
pub mod liveness;
pub mod memberships;
pub mod memory_consolidations;
pub mod metrics;
pub mod notebook;
pub mod people;
pub mod project_ids;
pub mod project_spend;
pub mod projects;
pub mod run_admission;
pub mod runs;
pub mod s3_mounts;
pub mod sandbox_pool;
pub mod schedules;
pub mod sealed;
pub mod secrets;
pub mod session_egress;
pub mod session_leases;
pub mod session_memories;
pub mod session_view;
pub mod sessions;
pub mod snapshots;
pub mod tool_calls;
pub mod usage;
pub mod webhooks;

pub use database::{connect, migrate, ping, servers_connected, Db};
pub use error::{Error, Result};
pub use hub::{EventHub, LiveEvent, Shared, Subscription};
pub use project_ids::ProjectIds;
