//! What the control plane does with sessions and their sandboxes: boot them from a manifest,
//! archive and stop them, wake them, delete them without leaks, run commands in them, and the
//! background workers that release idle sandboxes and reconcile containers with sessions.

pub mod blobs;
pub mod credentials;
pub mod error;
mod garbage;
pub mod manifest;
mod projects;
pub mod runs;
pub mod sessions;

pub use error::{Result, RuntimeError};
pub use sessions::{Runtime, RuntimeSettings};
