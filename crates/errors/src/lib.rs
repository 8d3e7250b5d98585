//! What the services (`workspace`, `credentials`, `sessions`, `agent`) fail with, and the one
//! map from each failure to what a user is told of it ([`ServiceError::for_user`]: a status
//! and a detail), which the API's answers and the event log's failure texts both use.
//!
//! Why a crate of its own: every service crate returns these errors and the API maps them,
//! so the type sits below all of them. Putting it in one of the services would make the
//! others depend on that one for nothing but its error type; putting it in `domain` would
//! give `domain` IO dependencies (the store's and the sandbox backend's errors).

mod user_error;

use sandbox_agents_domain::FieldError;
pub use user_error::{Detail, Status, UserError};

#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    Conflict(String),
    #[error("{0}")]
    BadRequest(String),
    /// The caller may not do this (the sandbox user may not read or write a path).
    #[error("{0}")]
    Forbidden(String),
    /// Over a documented limit.
    #[error("{0}")]
    TooLarge(String),
    /// A spending limit is reached (the project's monthly spend): nothing is done until an
    /// operator raises it or the period ends. Not retried by clients, unlike a 429.
    #[error("{0}")]
    SpendLimit(String),
    #[error("validation failed")]
    Validation(Vec<FieldError>),
    #[error(transparent)]
    Store(#[from] sandbox_agents_store::Error),
    #[error(transparent)]
    Sandbox(#[from] sandbox_agents_sandbox::SandboxError),
    #[error(transparent)]
    Internal(#[from] anyhow::Error),
}

pub type Result<T, E = ServiceError> = std::result::Result<T, E>;

/// A fresh reference for a failure's log line: 12 hex digits, unique enough to find one line.
pub fn new_reference() -> String {
    uuid::Uuid::new_v4().simple().to_string()[..12].to_owned()
}

/// What a user is told of a failure whose cause is ours (the database, the sandbox backend,
/// a bug): `internal error (reference <id>)`. The cause goes to the log under that reference,
/// so an operator can find it and no user sees hosts, queries or backend messages.
pub fn internal_reference(cause: &(dyn std::error::Error + 'static)) -> String {
    let reference = new_reference();
    let mut chain = cause.to_string();
    let mut source = cause.source();
    while let Some(s) = source {
        chain.push_str(": ");
        chain.push_str(&s.to_string());
        source = s.source();
    }
    tracing::error!(reference = %reference, error = %chain, "internal error");
    format!("internal error (reference {reference})")
}

impl ServiceError {
    /// A database failure that trying again later may get past (see
    /// `sandbox_agents_store::Error::is_transient`).
    pub fn is_transient(&self) -> bool {
        matches!(self, ServiceError::Store(e) if e.is_transient())
    }

    pub fn field(loc: &[&str], msg: impl Into<String>, input: serde_json::Value) -> Self {
        let mut full = vec![serde_json::Value::from("body")];
        full.extend(loc.iter().map(|s| serde_json::Value::from(*s)));
        ServiceError::Validation(vec![FieldError {
            kind: "value_error".into(),
            loc: full,
            msg: msg.into(),
            input,
        }])
    }
}

impl From<sqlx::Error> for ServiceError {
    fn from(e: sqlx::Error) -> Self {
        ServiceError::Store(e.into())
    }
}
