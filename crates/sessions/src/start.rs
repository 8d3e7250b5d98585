//! Starting a stopped (or failed) session again, and deleting one without leaks.

use crate::lease::not_found;
use crate::Sessions;
use sandbox_agents_domain::{ProjectId, SessionId};
use sandbox_agents_errors::{Result, ServiceError};
use sandbox_agents_store::sessions::{self, SessionRecord};

impl Sessions {
    /// Brings a stopped (or failed) session back: provisioning now, running once booted.
    #[tracing::instrument(skip_all, fields(session.id = %id))]
    pub async fn start(&self, project: ProjectId, id: SessionId) -> Result<SessionRecord> {
        let (row, changed) = sessions::mark_provisioning(&self.inner.db, project, id)
            .await
            .map_err(|e| not_found(e, id))?;
        if !changed && row.lifetime_over() {
            return Err(lifetime_over(&row));
        }
        if changed {
            self.spawn_boot(id);
        }
        Ok(row)
    }

    /// Destroys the sandbox, the session, its log and its workspace archive (queued as
    /// garbage in the deleting transaction). Snapshots stay (a fork may use them).
    #[tracing::instrument(skip_all, fields(session.id = %id))]
    pub async fn delete(&self, project: ProjectId, id: SessionId) -> Result<()> {
        let st = &self.inner;
        let lease = self.lease(id).await?;
        let result = async {
            let s = sessions::get(&st.db, project, id)
                .await
                .map_err(|e| not_found(e, id))?;
            if let Some(sandbox) = &s.sandbox_id {
                st.backend.remove(sandbox).await?;
            }
            let mut tx = st.db.begin().await?;
            sessions::delete(&mut tx, project, id)
                .await
                .map_err(|e| not_found(e, id))?;
            tx.commit().await?;
            // The workspace archive was queued as garbage by the delete.
            if s.workspace_archive.is_some() {
                self.spawn_collect();
            }
            tracing::info!("session deleted");
            Ok(())
        }
        .await;
        lease.release().await;
        self.admit_queued();
        result
    }
}

/// The refusal to boot a session whose `max_lifetime_seconds` has passed.
pub(crate) fn lifetime_over(s: &SessionRecord) -> ServiceError {
    ServiceError::Conflict(format!(
        "this session reached its max_lifetime_seconds ({} s) and cannot be started again; its files and transcript can still be read, or start a new session",
        s.max_lifetime_seconds.unwrap_or_default()
    ))
}
