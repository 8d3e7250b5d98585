//! Stopping a session: the run in flight is cancelled first (through the run loop's hooks),
//! writable `s3_mount` entries are written back to their buckets (`mounts.rs`), what the
//! session learnt is read back for its memory consolidation (`memory.rs`), the workspace
//! is archived to the blob store without the mounted paths, the sandbox removed, and `stopped` recorded
//! with its event in one transaction. Also what other paths share with a stop: archiving a
//! live workspace and recording a stop (the reconciler's `restart`).

use crate::lease::not_found;
use crate::Sessions;
use futures::StreamExt;
use sandbox_agents_domain::event::{EventType, NewEvent};
use sandbox_agents_domain::session::{SessionStatus, StoppedReason};
use sandbox_agents_domain::{ProjectId, SessionId};
use sandbox_agents_errors::{Result, ServiceError};
use sandbox_agents_sandbox::WORKDIR;
use sandbox_agents_store::memory_consolidations::{self, NewConsolidation};
use sandbox_agents_store::sessions::{self, SessionRecord};
use sandbox_agents_store::{events, garbage};
use serde_json::json;
use std::time::Duration;

/// The blob key of a session's workspace archive; unique per stop, so the previous archive
/// stays valid until the row points at the new one.
fn archive_key(id: SessionId) -> String {
    format!(
        "sessions/{id}/workspace-{}.tar",
        uuid::Uuid::now_v7().simple()
    )
}

impl Sessions {
    /// Archives the workspace of a running sandbox to the blob store, without the session's
    /// `s3_mount` paths (staged again at the next boot); returns the key.
    pub(crate) async fn archive_workspace(
        &self,
        id: SessionId,
        sandbox: &str,
    ) -> Result<(String, u64)> {
        let st = &self.inner;
        let key = archive_key(id);
        let stream = st.backend.get_archive(sandbox, WORKDIR).await?;
        let stream = stream
            .map(|r| r.map_err(|e| std::io::Error::other(e.to_string())))
            .boxed();
        let stream = self.without_mounts(id, stream).await?;
        let size = st
            .blobs
            .put(&key, stream)
            .await
            .map_err(|e| anyhow::anyhow!("archiving the workspace: {e}"))?;
        Ok((key, size))
    }

    /// Stops a session: archives the workspace, removes the sandbox, and records
    /// `stopped` with `reason`. Stopping a session that is not up returns it unchanged.
    /// A run in flight is cancelled first (see [`crate::RunHooks::before_stop`]).
    #[tracing::instrument(skip_all, fields(session.id = %id, reason = reason.as_str()))]
    pub async fn stop(
        &self,
        project: Option<ProjectId>,
        id: SessionId,
        reason: StoppedReason,
    ) -> Result<SessionRecord> {
        let st = &self.inner;
        if let Some(p) = project {
            sessions::get(&st.db, p, id)
                .await
                .map_err(|e| not_found(e, id))?;
        }
        if !self.runs().before_stop(id, reason).await? {
            // An idle release that found a run in flight: the session is not idle after all.
            if let Some(row) = sessions::get_for_worker(&st.db, id).await? {
                return Ok(row);
            }
        }
        // A stop the server chose itself (idle, lifetime, disk) does not wait for another
        // operation on the session: its sweep or check comes again. Waiting would hold up
        // the sweep's other work for as long as that operation takes.
        let lease = if matches!(
            reason,
            StoppedReason::Idle | StoppedReason::Lifetime | StoppedReason::Disk
        ) {
            self.try_lease(id).await?.ok_or_else(|| {
                ServiceError::Conflict(
                    "another operation is working on this session; the next sweep tries again"
                        .into(),
                )
            })?
        } else {
            self.lease(id).await?
        };
        let result = self.stop_locked(project, id, reason).await;
        lease.release().await;
        // Its sandbox's room may go to a queued boot.
        self.admit_queued();
        result
    }

    async fn stop_locked(
        &self,
        project: Option<ProjectId>,
        id: SessionId,
        reason: StoppedReason,
    ) -> Result<SessionRecord> {
        let st = &self.inner;
        let s = match project {
            Some(p) => sessions::get(&st.db, p, id)
                .await
                .map_err(|e| not_found(e, id))?,
            None => sessions::get_for_worker(&st.db, id)
                .await?
                .ok_or_else(|| ServiceError::NotFound(format!("session '{id}' not found")))?,
        };
        if !matches!(
            s.status,
            SessionStatus::Running | SessionStatus::Provisioning
        ) {
            return Ok(s);
        }
        if reason == StoppedReason::Idle {
            // The reaper chose this session before taking its lease; a use recorded since
            // (an exec's touch, from any process) means it is not idle after all.
            let ttl = st.settings.idle_ttl.as_secs() as i64;
            if !sessions::is_idle_expired(&st.db, id, ttl).await? {
                tracing::info!("used since the idle reaper chose it; kept running");
                return Ok(s);
            }
        }
        let mut archive = None;
        let mut memory = None;
        if let Some(sandbox) = &s.sandbox_id {
            if s.status == SessionStatus::Running {
                // Before anything is removed: a write-back that fails stops the stop, so the
                // changes are still in the sandbox (an idle release is tried again later).
                self.write_back_mounts(id, sandbox).await?;
                // What the session learnt, read while its sandbox runs; consolidated later.
                memory = self.capture_memory(&s, Some(sandbox)).await;
            }
            let archived = self.archive_workspace(id, sandbox).await;
            // Whether a failed archive leaves something to keep: a sandbox that is still up.
            let still_up = match &archived {
                Err(_) => {
                    matches!(st.backend.inspect(sandbox).await, Ok(Some(ref c)) if c.running)
                }
                Ok(_) => false,
            };
            match archived {
                Ok((key, size)) => {
                    tracing::debug!(bytes = size, "workspace archived");
                    archive = Some(key);
                }
                // A stop the server chose itself (idle, lifetime, disk) is not worth the
                // workspace: the sandbox keeps running and the next sweep tries again. One a
                // person asked for (or a restart) goes ahead, keeping the previous archive.
                Err(e)
                    if still_up
                        && matches!(
                            reason,
                            StoppedReason::Idle | StoppedReason::Lifetime | StoppedReason::Disk
                        ) =>
                {
                    tracing::warn!(error = %e, "the workspace could not be archived; the sandbox keeps running");
                    return Err(ServiceError::Conflict(format!(
                        "the workspace could not be archived ({e}); the sandbox keeps running so nothing is lost"
                    )));
                }
                Err(e) => {
                    tracing::warn!(error = %e, "the workspace could not be archived; the previous archive is kept")
                }
            }
            if let Err(e) = st.backend.stop(sandbox, Duration::from_secs(2)).await {
                tracing::debug!(error = %e, "stopping the container");
            }
            st.backend.remove(sandbox).await?;
        }
        let Some(row) = self
            .record_stopped(id, reason, archive.as_deref(), memory.as_ref())
            .await?
        else {
            return sessions::get_for_worker(&st.db, id)
                .await?
                .ok_or_else(|| ServiceError::NotFound(format!("session '{id}' not found")));
        };
        if let (Some(_), Some(_)) = (&s.workspace_archive, &archive) {
            self.spawn_collect();
        }
        tracing::info!("session stopped");
        Ok(row)
    }

    /// Records the stop: the row says `stopped` (with `reason`, and the new workspace archive
    /// when there is one) in the transaction that writes `session.status_stopped`, with the
    /// memory consolidation the stop queues, if any. `None` when the session was not up
    /// (someone else stopped or deleted it).
    pub(crate) async fn record_stopped(
        &self,
        id: SessionId,
        reason: StoppedReason,
        archive: Option<&str>,
        memory: Option<&NewConsolidation>,
    ) -> Result<Option<SessionRecord>> {
        let mut tx = self.inner.db.begin().await?;
        if archive.is_some() {
            // The previous archive goes with this transaction (the caller collects it).
            garbage::queue_replaced_archive(&mut *tx, id, archive).await?;
        }
        let Some(row) = sessions::mark_stopped(&mut tx, id, reason, archive).await? else {
            return Ok(None);
        };
        if let Some(m) = memory {
            memory_consolidations::enqueue(&mut *tx, m).await?;
        }
        let payload = json!({"reason": reason.as_str()});
        events::append(
            &mut tx,
            id,
            &[NewEvent::new(
                EventType::SessionStatusStopped,
                None,
                payload,
            )],
        )
        .await?;
        tx.commit().await?;
        Ok(Some(row))
    }
}
