//! Types shared by every layer of the control plane: identifiers, the agent definition and its
//! validation, sessions, the event catalogue, and the FastAPI-style validation errors the
//! published client expects. Nothing here performs IO.

pub mod agent;
pub mod agent_version;
pub mod budget;
pub mod bundle;
pub mod ca;
pub mod e2b;
pub mod egress;
pub mod environment;
pub mod event;
pub mod git_key;
pub mod git_source;
pub mod identity;
pub mod ids;
pub mod manifest;
pub mod mcp;
pub mod memory;
pub mod network;
pub mod notebook;
pub mod openapi;
pub mod patch;
pub mod permissions;
pub mod process;
pub mod runtime_class;
pub mod schedule;
pub mod secret;
pub mod secret_binding;
pub mod session;
pub mod skills;
pub mod slug;
pub mod state;
pub mod text;
pub mod tools;
pub mod usage;
pub mod validation;
pub mod webhook;

pub use ids::{AgentId, DeliveryId, ProjectId, RunId, SessionId, WebhookId};
pub use patch::Patch;
pub use slug::Slug;
pub use validation::{FieldError, Violations};
