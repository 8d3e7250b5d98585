//! The disk limit of a sandbox (`--sandbox-disk-mb`): what a sandbox writes to its own
//! filesystem lands on the Docker host's disk, which every sandbox and the server share, and
//! Docker's overlay storage on the usual filesystems (ext4, xfs without project quotas) has no
//! per-container size. So the limit is enforced by measurement: on its own timer, the backend
//! reports each running sandbox's written bytes and a sandbox over the limit is stopped, its
//! reason `disk`. The stop archives `/workspace` as any stop does (what was written elsewhere,
//! `/tmp` and the like, goes with the container); when the archive cannot be written the
//! sandbox is left running for the next check rather than removed. A start brings the
//! workspace back. The check's interval bounds how far past the limit a sandbox gets.

use crate::Sessions;
use sandbox_agents_domain::session::StoppedReason;
use sandbox_agents_errors::Result;
use sandbox_agents_store::sessions;

impl Sessions {
    /// Stops every running sandbox of this deployment over the disk limit; returns how many.
    /// Nothing to do without a limit.
    pub async fn enforce_disk_limit(&self) -> Result<usize> {
        let st = &self.inner;
        let Some(limit) = st.settings.disk_limit else {
            return Ok(0);
        };
        let over: Vec<(String, u64)> = st
            .backend
            .disk_usage()
            .await?
            .into_iter()
            .filter(|(_, bytes)| *bytes > limit)
            .collect();
        if over.is_empty() {
            return Ok(0);
        }
        let containers: Vec<String> = over.iter().map(|(id, _)| id.clone()).collect();
        let owners = sessions::running_in_containers(&st.db, &containers).await?;
        for (session, container) in &owners {
            let bytes = over
                .iter()
                .find(|(id, _)| id == container)
                .map_or(0, |(_, b)| *b);
            tracing::warn!(session.id = %session, bytes, limit, "stopping a sandbox over the disk limit");
            metrics::counter!("sandbox_agents_sandboxes_over_disk_limit_total").increment(1);
            if let Err(e) = self.stop(None, *session, StoppedReason::Disk).await {
                tracing::warn!(session.id = %session, error = %e, "could not stop a sandbox over the disk limit");
            }
        }
        Ok(owners.len())
    }

    /// The disk limit's timer until shutdown (only with a limit).
    pub(crate) fn spawn_disk_worker(&self) {
        if self.inner.settings.disk_limit.is_none() {
            return;
        }
        self.every(self.inner.settings.disk_check_interval, |rt| async move {
            if let Err(e) = rt.enforce_disk_limit().await {
                tracing::warn!(error = %e, "the disk limit check failed");
            }
        });
    }
}
