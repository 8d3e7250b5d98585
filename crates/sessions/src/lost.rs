//! Sandboxes that end on their own while their session runs: killed for memory, evicted,
//! their node lost, removed by someone else. A backend that watches its sandboxes reports
//! each end ([`SandboxBackend::ended`]); the session then fails at once with the reason,
//! its run in flight fails with it, and the next start boots a new sandbox, instead of the
//! loss showing only as the next command's error.
//!
//! Every replica of the control plane sees every end; each takes the session's lease and
//! records the loss only if the session still runs on that sandbox, so one records it and a
//! stop in progress (whose own end is reported too) is never taken for a loss.
//!
//! [`SandboxBackend::ended`]: sandbox_agents_sandbox::SandboxBackend::ended

use crate::Sessions;
use futures::StreamExt;
use sandbox_agents_errors::Result;
use sandbox_agents_sandbox::SandboxEnded;
use sandbox_agents_store::{events, sessions};

impl Sessions {
    /// Follows the backend's ends of sandboxes until shutdown; nothing for a backend that does
    /// not watch them.
    pub fn spawn_sandbox_watch(&self) {
        let Some(mut ended) = self.inner.backend.ended() else {
            return;
        };
        let rt = self.clone();
        tokio::spawn(async move {
            let shutdown = rt.inner.shutdown.clone();
            loop {
                let next = tokio::select! {
                    next = ended.next() => next,
                    _ = shutdown.cancelled() => return,
                };
                let Some(end) = next else { return };
                // Each on its own: one waiting for a lease holds up no other.
                let rt = rt.clone();
                tokio::spawn(async move {
                    if let Err(e) = rt.sandbox_ended(&end).await {
                        tracing::warn!(sandbox.id = %end.id, error = %e, "could not record a sandbox's end");
                    }
                });
            }
        });
    }

    /// Records that `end.id` ended, if a session still runs on it.
    #[tracing::instrument(skip_all, fields(sandbox.id = %end.id))]
    pub async fn sandbox_ended(&self, end: &SandboxEnded) -> Result<()> {
        let st = &self.inner;
        let Some(id) = sessions::running_with_sandbox(&st.db, &end.id).await? else {
            return Ok(());
        };
        let lease = self.lease(id).await?;
        let message = format!(
            "the sandbox ended while the session ran: {}; start the session to boot a new one (the workspace comes back as of its last stop)",
            end.reason
        );
        let recorded = async {
            let mut tx = st.db.begin().await?;
            let lost = sessions::mark_sandbox_lost(&mut tx, id, &end.id, &message).await?;
            if lost.is_some() {
                events::append(&mut tx, id, &[crate::boot::status_error(&message)]).await?;
            }
            tx.commit().await?;
            Ok::<_, sandbox_agents_errors::ServiceError>(lost.is_some())
        }
        .await;
        lease.release().await;
        if recorded? {
            tracing::warn!(session.id = %id, reason = %end.reason, "a session's sandbox ended on its own");
            // Only the process that recorded the loss ends the run, so it ends once.
            self.runs().sandbox_lost(id, &message).await?;
            if let Err(e) = st.backend.remove(&end.id).await {
                tracing::warn!(error = %e, "could not remove the ended sandbox; the orphan sweep will");
            }
            self.admit_queued();
        }
        Ok(())
    }
}
