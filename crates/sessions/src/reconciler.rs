//! The reconciler: on start, sessions are reconciled with the sandboxes that exist, and
//! sandboxes nobody owns are removed (also on every periodic sweep).

use crate::Sessions;
use sandbox_agents_domain::session::SessionStatus;
use sandbox_agents_domain::session::StoppedReason;
use sandbox_agents_domain::SessionId;
use sandbox_agents_errors::Result;
use sandbox_agents_store::{sandbox_pool, session_leases, sessions};
use std::collections::HashMap;

impl Sessions {
    /// After a (re)start: sessions whose sandbox survived are adopted; running sessions
    /// whose sandbox is gone become `stopped` with reason `restart`; sessions caught
    /// mid-boot by a process that is gone are booted again (those another live process boots
    /// are left to it), and queued ones that fit now. Then sandboxes no session owns are
    /// removed. First of all, runs a previous process left `running` are failed (their
    /// workers died with it).
    #[tracing::instrument(skip_all)]
    pub async fn reconcile_on_start(&self) -> Result<()> {
        let st = &self.inner;
        self.runs().recover().await?;
        for s in sessions::active(&st.db).await? {
            let id = s.id;
            if s.status == SessionStatus::Provisioning {
                continue;
            }
            let found = match &s.sandbox_id {
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
        self.redrive_boots().await?;
        self.admit_queued();
        self.sweep_orphans().await
    }

    /// A running session whose sandbox is gone or no longer running: stopped, reason
    /// `restart`. A sandbox that still exists (it exited, say after a host reboot) keeps
    /// its filesystem, so its workspace is archived first and comes back at the next start.
    /// Its memory consolidation is queued like a stop's: from the exited sandbox's
    /// `MEMORY.md` when it still exists, else from the copy read back at the end of its last
    /// run (`memory.rs`), with the transcript the database holds; a user expects what the
    /// agent wrote during the turns that finished to outlive the sandbox.
    async fn mark_lost(&self, id: SessionId) -> Result<()> {
        let st = &self.inner;
        let mut archive = None;
        let Some(s) = sessions::get_for_worker(&st.db, id).await? else {
            return Ok(());
        };
        let mut exists = false;
        if let Some(c) = &s.sandbox_id {
            exists = st.backend.inspect(c).await?.is_some();
            if exists {
                if let Err(e) = self.write_back_mounts(id, c).await {
                    tracing::warn!(session.id = %id, error = %e, "could not write an exited sandbox's s3 mounts back; their changes are lost");
                }
                match self.archive_workspace(id, c).await {
                    Ok((key, _)) => archive = Some(key),
                    Err(e) => {
                        tracing::warn!(session.id = %id, error = %e, "could not archive an exited sandbox's workspace")
                    }
                }
            }
        }
        let sandbox = s.sandbox_id.as_deref().filter(|_| exists);
        let memory = self.capture_memory(&s, sandbox).await;
        if let Some(c) = &s.sandbox_id {
            let _ = st.backend.remove(c).await;
        }
        if self
            .record_stopped(
                id,
                StoppedReason::Restart,
                archive.as_deref(),
                memory.as_ref(),
            )
            .await?
            .is_some()
        {
            tracing::warn!(session.id = %id, "the session's sandbox is gone; marked stopped (restart)");
        }
        Ok(())
    }

    /// Removes this deployment's sandboxes that no session owns (a crash between creating a
    /// sandbox and recording it, or a session deleted while its removal failed), and the
    /// workspace volumes no sandbox uses (a sandbox removed behind the server's back), and
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
        let mut alive = self.alive_processes();
        for c in listed.iter().filter(|c| c.pool.is_none()) {
            let session = c
                .session
                .as_deref()
                .and_then(|s| uuid::Uuid::try_parse(s).ok());
            let owned = match session.and_then(|s| owners.get(&s).map(|o| (s, o))) {
                // The session exists and names it.
                Some((_, Some(sandbox))) if sandbox == &c.id => true,
                // Or a boot in flight is making it (names none yet, or still the one an
                // unfinished boot left).
                Some((s, _)) => {
                    self.owned_while_booting(SessionId(s), &c.id, &mut alive)
                        .await?
                }
                None => false,
            };
            if !owned {
                tracing::warn!(container.id = %c.id, session = ?c.session, "removing a container no session owns");
                st.backend.remove(&c.id).await?;
            }
        }
        self.sweep_pool(&pool_rows, &listed).await?;
        st.backend.remove_strays().await?;
        // Replace what the sweep removed (a no-op without a pool or before `start_pool`).
        st.pool.want();
        Ok(())
    }

    /// Whether `sandbox`, of a session whose row named another one, or none, when the sweep
    /// listed them, is still owned. Read again: a boot (of this process or
    /// another) may have recorded it since. A sandbox the row names is owned, whatever its status by
    /// now: removing it would leave a running session without its sandbox (seen when a
    /// restart swept while another process committed a boot). One a `provisioning` session's
    /// boot is making is owned while a live process drives that boot; when none does (its
    /// process died, or the boot could not record it), the boot sweep boots the session
    /// again with a new sandbox, and this one is nobody's.
    async fn owned_while_booting(
        &self,
        id: SessionId,
        sandbox: &str,
        alive: &mut crate::liveness::AliveProcesses<'_>,
    ) -> Result<bool> {
        // One read: a row read twice may run on the sandbox by the second read.
        let Some(owner) = session_leases::sandbox_owner(&self.inner.db, id).await? else {
            return Ok(false);
        };
        if owner.sandbox_id.as_deref() == Some(sandbox) {
            return Ok(true);
        }
        if !owner.provisioning {
            return Ok(false);
        }
        let (boot_worker, lease_worker) = (owner.boot_worker, owner.lease_worker);
        self.boot_driven(id, boot_worker, lease_worker, alive).await
    }
}
