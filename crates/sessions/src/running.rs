//! The one answer for an operation that needs a sandbox up: which sandbox it is, or the 409
//! that says what the session is instead (`stopped, idle`, `provisioning`, ...).

use sandbox_agents_domain::session::SessionStatus;
use sandbox_agents_errors::{Result, ServiceError};
use sandbox_agents_store::sessions::SessionRecord;

/// The 409 for a session whose sandbox is not up.
pub fn not_running(s: &SessionRecord) -> ServiceError {
    let state = match s.stopped_reason {
        Some(r) if s.status == SessionStatus::Stopped => format!("stopped, {r}"),
        _ => s.status.to_string(),
    };
    ServiceError::Conflict(format!(
        "session is not running (it is {state}); start it first"
    ))
}

/// The sandbox id of a session whose sandbox is up; [`not_running`] otherwise.
pub fn require_running(s: &SessionRecord) -> Result<&str> {
    match (s.status, &s.sandbox_id) {
        (SessionStatus::Running, Some(sandbox)) => Ok(sandbox),
        _ => Err(not_running(s)),
    }
}
