//! Ending the sandbox (`POST /v1/shutdown`): how a backend whose sandboxes cannot be stopped
//! from outside and kept (a Kubernetes pod) stops one. The daemon signals `SIGTERM` to every
//! process the sandbox user owns, waits until none is left or the grace period ends, sends
//! `SIGKILL` to what remains, and exits; its container's init (or the daemon itself, as the
//! container's process) then ends, and the container with it.
//!
//! `kill(-1, sig)` reaches every process the caller may signal except the caller and the pid
//! namespace's init, which is exactly the sandbox's processes: the daemon runs as the sandbox
//! user, and an init of the image (tini) exits when the daemon, its child, does.

use super::error::Json;
use super::Failure;
use crate::proto::ErrorKind;
use nix::errno::Errno;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use std::time::{Duration, Instant};

#[derive(serde::Deserialize)]
pub struct ShutdownRequest {
    /// How long the sandbox's processes have after `SIGTERM`.
    grace_ms: u64,
}

/// At most this long, whatever is asked: a stop must end.
const MAX_GRACE: Duration = Duration::from_secs(300);

/// Answers at once (`202`), then ends the sandbox in the background. The answer usually
/// leaves while the processes have their grace; when nothing was left to wait for, the
/// connection may close first, which a caller takes as the same answer.
///
/// Refused to a daemon running as root: `kill(-1)` from root reaches every process it can
/// see, which outside a sandbox is the whole machine's.
pub async fn shutdown(Json(req): Json<ShutdownRequest>) -> Result<axum::http::StatusCode, Failure> {
    if nix::unistd::geteuid().is_root() {
        return Err(Failure::new(
            ErrorKind::PermissionDenied,
            "a daemon running as root does not end every process it can see".to_owned(),
        ));
    }
    let grace = Duration::from_millis(req.grace_ms).min(MAX_GRACE);
    tokio::spawn(async move {
        end_everything(grace).await;
        std::process::exit(0);
    });
    Ok(axum::http::StatusCode::ACCEPTED)
}

/// Whether any process but this one (and init) is left to signal.
fn others_left() -> bool {
    !matches!(kill(Pid::from_raw(-1), None), Err(Errno::ESRCH))
}

async fn end_everything(grace: Duration) {
    let _ = kill(Pid::from_raw(-1), Signal::SIGTERM);
    let deadline = Instant::now() + grace;
    while others_left() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let _ = kill(Pid::from_raw(-1), Signal::SIGKILL);
}
