//! The disk limit of a sandbox (`--sandbox-disk-mb`): what a sandbox writes to its own
//! filesystem lands on the disk of the host that runs it, which sandboxes (and, on one Docker
//! host, the server) share, and a backend's storage need not bound each sandbox (Docker's
//! overlay storage on the usual filesystems, ext4 or xfs without project quotas, has no
//! per-sandbox size). So the limit is enforced by measurement: on its own timer, the backend
//! reports each running sandbox's written bytes and a sandbox over the limit is stopped, its
//! reason `disk`. The stop archives `/workspace` as any stop does (what was written elsewhere,
//! `/tmp` and the like, goes with the sandbox); when the archive cannot be written the
//! sandbox is left running for the next check rather than removed. A start brings the
//! workspace back. The check's interval bounds how far past the limit a sandbox gets.
//!
//! A session may set a lower limit of its own (`resources.disk_mb`), which holds even when the
//! server's is off. Without a server-wide limit the check asks the database first and lists
//! the sandboxes' sizes, which is costly for the backend (Docker walks every container's
//! layer), only when a running session has a limit of its own.

use crate::Sessions;
use sandbox_agents_domain::session::{StoppedReason, MIN_DISK_MB};
use sandbox_agents_errors::Result;
use sandbox_agents_store::sessions;
use std::collections::HashMap;

impl Sessions {
    /// Stops every running sandbox of this deployment over its disk limit (its session's own,
    /// else the server's); returns how many.
    pub async fn enforce_disk_limit(&self) -> Result<usize> {
        let st = &self.inner;
        let server = st.settings.disk_limit;
        if server.is_none() && !sessions::any_running_with_disk_limit(&st.db).await? {
            return Ok(0);
        }
        // No limit is below the least a session may ask for, or the server's: smaller
        // sandboxes are not asked about.
        let floor = server.map_or(MIN_DISK_BYTES, |s| s.min(MIN_DISK_BYTES));
        let usage: HashMap<String, u64> = st
            .backend
            .disk_usage()
            .await?
            .into_iter()
            .filter(|(_, bytes)| *bytes > floor)
            .collect();
        if usage.is_empty() {
            return Ok(0);
        }
        let sandboxes: Vec<String> = usage.keys().cloned().collect();
        let mut stopped = 0;
        for running in sessions::running_in_sandboxes(&st.db, &sandboxes).await? {
            let Some(limit) = limit_of(running.disk_mb, server) else {
                continue;
            };
            let own = Some(limit) != server;
            let bytes = usage.get(&running.sandbox).copied().unwrap_or(0);
            if bytes <= limit {
                continue;
            }
            let session = running.session;
            tracing::warn!(session.id = %session, bytes, limit, own, "stopping a sandbox over its disk limit");
            metrics::counter!("sandbox_agents_sandboxes_over_disk_limit_total").increment(1);
            stopped += 1;
            if let Err(e) = self.stop(None, session, StoppedReason::Disk).await {
                tracing::warn!(session.id = %session, error = %e, "could not stop a sandbox over its disk limit");
            }
        }
        Ok(stopped)
    }

    /// The disk limit's timer until shutdown (always: a session may set a limit of its own).
    pub(crate) fn spawn_disk_worker(&self) {
        self.every(self.inner.settings.disk_check_interval, |rt| async move {
            if let Err(e) = rt.enforce_disk_limit().await {
                tracing::warn!(error = %e, "the disk limit check failed");
            }
        });
    }
}

pub(crate) const MIB: u64 = 1024 * 1024;
const MIN_DISK_BYTES: u64 = MIN_DISK_MB as u64 * MIB;

/// The bytes a sandbox may write: the lower of its session's own limit (MiB) and the server's.
/// The lower, not the session's: a session's limit was checked against the server's when it
/// was created, and the server's may have been lowered (or turned on) since.
fn limit_of(own_mb: Option<i64>, server: Option<u64>) -> Option<u64> {
    let own = own_mb
        .and_then(|mb| u64::try_from(mb).ok())
        .map(|mb| mb.saturating_mul(MIB));
    match (own, server) {
        (Some(o), Some(s)) => Some(o.min(s)),
        (o, s) => o.or(s),
    }
}

#[cfg(test)]
mod tests {
    use super::{limit_of, MIB};

    #[test]
    fn a_sandbox_gets_the_lower_of_its_own_limit_and_the_servers() {
        assert_eq!(limit_of(None, None), None);
        assert_eq!(limit_of(Some(20), None), Some(20 * MIB));
        assert_eq!(limit_of(None, Some(10 * MIB)), Some(10 * MIB));
        assert_eq!(limit_of(Some(20), Some(100 * MIB)), Some(20 * MIB));
        // The server's was lowered below what the session asked for when it was created.
        assert_eq!(limit_of(Some(20), Some(8 * MIB)), Some(8 * MIB));
        assert_eq!(limit_of(Some(-1), Some(8 * MIB)), Some(8 * MIB));
    }
}
