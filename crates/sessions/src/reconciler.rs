//! The reconciler: on start, sessions are reconciled with the containers that exist, and
//! containers nobody owns are removed (also on every periodic sweep).

use crate::Sessions;
use sandbox_agents_domain::session::SessionStatus;
use sandbox_agents_domain::session::StoppedReason;
use sandbox_agents_domain::SessionId;
use sandbox_agents_errors::Result;
use sandbox_agents_store::{sandbox_pool, sessions};
use std::collections::HashMap;

impl Sessions {
    /// After a (re)start: sessions whose container survived are adopted; running sessions
    /// whose container is gone become `stopped` with reason `restart`; sessions caught
    /// mid-boot are booted again. Then containers no session owns are removed. First of all,
    /// runs a previous process left `running` are failed (their workers died with it).
    #[tracing::instrument(skip_all)]
    pub async fn reconcile_on_start(&self) -> Result<()> {
        let st = &self.inner;
        self.runs().recover().await?;
        for s in sessions::active(&st.db).await? {
            let id = s.id;
            if s.status == SessionStatus::Provisioning {
                tracing::info!(session.id = %id, "booting a session a previous run left provisioning");
                self.spawn_boot(id);
                continue;
            }
            let found = match &s.container_id {
                Some(c) => st.backend.inspect(c).await?,
                None => None,
            };
            match found {
                Some(c) if c.running => {
                    tracing::info!(session.id = %id, "adopted a running sandbox")
                }
                _ => self.mark_lost(id).await?,
            }
        }
        self.sweep_orphans().await
    }

    /// A running session whose sandbox is gone or no longer running: stopped, reason
    /// `restart`. A container that still exists (it exited, say after a host reboot) keeps
    /// its filesystem, so its workspace is archived first and comes back at the next start.
    async fn mark_lost(&self, id: SessionId) -> Result<()> {
        let st = &self.inner;
        let mut archive = None;
        let container = sessions::get_for_worker(&st.db, id)
            .await?
            .and_then(|s| s.container_id);
        if let Some(c) = container {
            if st.backend.inspect(&c).await?.is_some() {
                if let Err(e) = self.write_back_mounts(id, &c).await {
                    tracing::warn!(session.id = %id, error = %e, "could not write an exited sandbox's s3 mounts back; their changes are lost");
                }
                match self.archive_workspace(id, &c).await {
                    Ok((key, _)) => archive = Some(key),
                    Err(e) => {
                        tracing::warn!(session.id = %id, error = %e, "could not archive an exited sandbox's workspace")
                    }
                }
            }
            let _ = st.backend.remove(&c).await;
        }
        if self
            // No memory consolidation: the sandbox is gone or exited, and what its session
            // learnt since its last stop is not read back from a dead one.
            .record_stopped(id, StoppedReason::Restart, archive.as_deref(), None)
            .await?
            .is_some()
        {
            tracing::warn!(session.id = %id, "the session's sandbox is gone; marked stopped (restart)");
        }
        Ok(())
    }

    /// Removes this deployment's containers that no session owns (a crash between creating a
    /// container and recording it, or a session deleted while its removal failed), and
    /// reconciles the warm pool: pooled sandboxes are kept while their rows own them, and
    /// removed when dead, surplus, of another image, or when the pool is disabled.
    #[tracing::instrument(skip_all)]
    pub async fn sweep_orphans(&self) -> Result<()> {
        let st = &self.inner;
        // Pool rows are read before the listing (see `sweep_pool`).
        let pool_rows = sandbox_pool::list(&st.db).await?;
        let listed = st.backend.list().await?;
        let ids: Vec<uuid::Uuid> = listed
            .iter()
            .filter_map(|c| c.session.as_deref())
            .filter_map(|s| uuid::Uuid::try_parse(s).ok())
            .collect();
        let owners: HashMap<uuid::Uuid, Option<String>> = sessions::existing(&st.db, &ids)
            .await?
            .into_iter()
            .collect();
        for c in listed.iter().filter(|c| c.pool.is_none()) {
            let session = c
                .session
                .as_deref()
                .and_then(|s| uuid::Uuid::try_parse(s).ok());
            let owned = match session.and_then(|s| owners.get(&s)) {
                // The session exists: its container, or one a boot in flight is creating.
                Some(Some(container)) => container == &c.id,
                Some(None) => {
                    // Read again: a boot (of this process or another) may have recorded the
                    // container since `existing` read the row. A container the row names is
                    // owned, whatever its status by now: removing it would leave a running
                    // session without its sandbox (seen when a restart swept while another
                    // process committed a boot).
                    let row =
                        sessions::get_for_worker(&st.db, SessionId(session.expect("matched")))
                            .await?;
                    row.is_some_and(|r| {
                        r.status == SessionStatus::Provisioning
                            || r.container_id.as_deref() == Some(c.id.as_str())
                    })
                }
                None => false,
            };
            if !owned {
                tracing::warn!(container.id = %c.id, session = ?c.session, "removing a container no session owns");
                st.backend.remove(&c.id).await?;
            }
        }
        self.sweep_pool(&pool_rows, &listed).await?;
        // Replace what the sweep removed (a no-op without a pool or before `start_pool`).
        st.pool_wanted.notify_one();
        Ok(())
    }
}
