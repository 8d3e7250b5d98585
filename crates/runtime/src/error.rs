//! What runtime operations fail with; the API maps each to its status.

use sandbox_agents_domain::FieldError;

#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    Conflict(String),
    #[error("{0}")]
    BadRequest(String),
    #[error("validation failed")]
    Validation(Vec<FieldError>),
    #[error(transparent)]
    Store(#[from] sandbox_agents_store::Error),
    #[error(transparent)]
    Sandbox(#[from] sandbox_agents_sandbox::SandboxError),
    #[error(transparent)]
    Internal(#[from] anyhow::Error),
}

pub type Result<T, E = RuntimeError> = std::result::Result<T, E>;

impl RuntimeError {
    pub fn field(loc: &[&str], msg: impl Into<String>, input: serde_json::Value) -> Self {
        let mut full = vec![serde_json::Value::from("body")];
        full.extend(loc.iter().map(|s| serde_json::Value::from(*s)));
        RuntimeError::Validation(vec![FieldError {
            kind: "value_error".into(),
            loc: full,
            msg: msg.into(),
            input,
        }])
    }
}

impl From<sqlx::Error> for RuntimeError {
    fn from(e: sqlx::Error) -> Self {
        RuntimeError::Store(e.into())
    }
}
