//! Booting a `provisioning` session under its lease, and recording the outcome: `running`
//! (with the sealed secret variables, and the first prompt started in the same transaction)
//! or `error`, each with its event in one transaction, so a reader who sees
//! `session.status_running` finds the row running. Getting the sandbox itself is
//! `provision.rs`.

use crate::boot_queue::TakenOn;
use crate::provision::Booted;
use crate::Sessions;
use sandbox_agents_credentials::secrets;
use sandbox_agents_domain::event::{EventType, NewEvent};
use sandbox_agents_domain::session::{PortTarget, SessionStatus};
use sandbox_agents_domain::state::BuildStatus;
use sandbox_agents_domain::{ProjectId, SessionId};
use sandbox_agents_errors::{Result, ServiceError};
use sandbox_agents_sandbox::PUBLISH_IP;
use sandbox_agents_store::sessions::SessionRecord;
use sandbox_agents_store::{environments, events, sessions};
use serde_json::json;
use std::collections::BTreeMap;

/// What a boot left its session waiting for, if anything.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Waiting {
    /// Nothing: it is running, failed, or was not this boot's to do.
    Nothing,
    /// Its environment's image build.
    Build,
    /// Room under the sandbox limits.
    Admission,
}

impl Sessions {
    /// Wakes an asleep session for a run that needs its sandbox: `provisioning` now, then
    /// booted in the caller's task rather than in the background, so the caller can wait for
    /// it to run (or, when a task of this process already boots it, left to that task).
    pub async fn wake(&self, project: ProjectId, id: SessionId) -> Result<()> {
        let (row, changed) = sessions::mark_provisioning(&self.inner.db, project, id).await?;
        if !changed && row.lifetime_over() {
            return Err(crate::start::lifetime_over(&row));
        }
        match self.take_on_boot(id) {
            Some(taken) => self.boot(&taken).await,
            None => Ok(()),
        }
    }

    /// Boots a `provisioning` session this process took on, once its turn among the boots
    /// comes (`boot_queue.rs`), unless another process is already working on it.
    #[tracing::instrument(skip_all, fields(session.id = %taken.id))]
    pub(crate) async fn boot(&self, taken: &TakenOn) -> Result<()> {
        let id = taken.id;
        loop {
            let Some(_turn) = self.boot_turn(taken).await? else {
                return Ok(());
            };
            let Some(lease) = self.try_lease(id).await? else {
                tracing::debug!("another process is working on this session");
                return Ok(());
            };
            let result = {
                let _booting = self.inner.pool.booting();
                self.boot_locked(id).await
            };
            lease.release().await;
            // Replace a pooled sandbox this boot may have taken, now that it no longer
            // competes with the boot (a no-op without a pool).
            self.inner.pool.want();
            match result {
                // A build that finished while this boot looked may have found the session's
                // lease taken and left it: look again now that the lease is free.
                Ok(Waiting::Build) if !self.build_still_running(id).await? => continue,
                // Queued sessions are booted by whoever frees room (`admit_queued`).
                Ok(Waiting::Nothing) => {
                    self.admit_queued();
                    return Ok(());
                }
                other => return other.map(|_| ()),
            }
        }
    }

    /// Boots the sessions that waited for the environment build of `digest` (it finished,
    /// ready or failed): each boots, or records the build's failure.
    pub async fn boot_waiting(&self, digest: &str) -> Result<()> {
        for id in environments::waiting_sessions(&self.inner.db, digest).await? {
            tracing::info!(session.id = %id, "its environment's build finished; booting");
            self.spawn_boot(id);
        }
        Ok(())
    }

    async fn build_still_running(&self, id: SessionId) -> Result<bool> {
        Ok(environments::session_build(&self.inner.db, id)
            .await?
            .is_some_and(|b| b.status == BuildStatus::Building))
    }

    /// The boot itself; the caller holds the session's lease. Records `running` or `error`,
    /// each with its event, in one transaction; or leaves the session `provisioning`, waiting
    /// for its environment's image build (whose end boots it) or for room under the sandbox
    /// limits (`admission.rs`).
    pub(crate) async fn boot_locked(&self, id: SessionId) -> Result<Waiting> {
        let st = &self.inner;
        let Some(s) = sessions::get_for_worker(&st.db, id).await? else {
            return Ok(Waiting::Nothing);
        };
        if s.status != SessionStatus::Provisioning {
            return Ok(Waiting::Nothing);
        }
        let build = environments::session_build(&st.db, id).await?;
        let path = if build.is_some() {
            "environment"
        } else {
            "cold"
        };
        if let Some(build) = build {
            match build.status {
                BuildStatus::Building => {
                    tracing::info!(environment = %build.environment, "waiting for the environment's image build");
                    return Ok(Waiting::Build);
                }
                BuildStatus::Failed => {
                    let e = ServiceError::BadRequest(format!(
                        "the image of environment '{}' failed to build: {}",
                        build.environment,
                        build.error.unwrap_or_default()
                    ));
                    self.record_boot_failed(id, &e).await?;
                    return Ok(Waiting::Nothing);
                }
                BuildStatus::Ready => {}
            }
        }
        if !self.admit(&s).await? {
            return Ok(Waiting::Admission);
        }
        let started = std::time::Instant::now();
        match self.boot_sandbox(&s).await {
            Ok(booted) => {
                let path = if booted.pooled { "pool" } else { path };
                metrics::histogram!("sandbox_agents_session_boot_duration_seconds", "path" => path)
                    .record(started.elapsed());
                match self.record_running(&s, &booted, started).await {
                    Ok(()) => Ok(()),
                    Err(e) => {
                        self.discard_unrecorded(id, &booted.sandbox.id).await;
                        if e.is_transient() {
                            // Tried again by the caller, with a new sandbox.
                            Err(e)
                        } else {
                            self.record_boot_failed(id, &e).await
                        }
                    }
                }
            }
            // A busy or unreachable database says nothing of the session: the boot is tried
            // again (its sandbox is gone: `boot_sandbox` removes what it made on a failure).
            Err(e) if e.is_transient() => Err(e),
            Err(e) => {
                metrics::counter!("sandbox_agents_session_boot_failures_total", "path" => path)
                    .increment(1);
                self.record_boot_failed(id, &e).await
            }
        }
        .map(|()| Waiting::Nothing)
    }

    /// Records a booted sandbox: `running`, with the sealed secret variables and egress
    /// credentials and the secrets marked used, `session.status_running`, and the first
    /// prompt started, in one transaction; the first prompt is driven after it commits. A
    /// session that changed meanwhile (stopped, deleted) gets nothing, and the new sandbox is
    /// removed.
    async fn record_running(
        &self,
        s: &SessionRecord,
        booted: &Booted,
        started: std::time::Instant,
    ) -> Result<()> {
        let st = &self.inner;
        let (sandbox, env, secrets) = (&booted.sandbox, &booted.env, &booted.secrets);
        let id = s.session_id();
        let sealed = secrets::seal_env(st.credentials.master_key(), id, &secrets.env)?;
        let egress = sandbox_agents_credentials::egress::seal_egress(
            st.credentials.master_key(),
            id,
            &secrets.egress,
        )?;
        let ports: BTreeMap<String, PortTarget> = sandbox
            .ports
            .iter()
            .map(|(c, a)| (c.to_string(), PortTarget::from_addr(*a, PUBLISH_IP)))
            .collect();
        let mut tx = st.db.begin().await?;
        match sessions::mark_running(
            &mut tx,
            id,
            &sandbox.id,
            &sandbox.workdir,
            &ports,
            env,
            sessions::SandboxSealed {
                secrets: sealed.as_deref(),
                egress_credentials: egress.as_deref(),
            },
        )
        .await?
        {
            Some(_) => {
                sessions::set_skills(&mut tx, id, booted.skills.as_ref()).await?;
                sandbox_agents_store::secrets::mark_used(&mut *tx, s.project_id, &secrets.ids)
                    .await?;
                events::append(
                    &mut tx,
                    id,
                    &[NewEvent::new(
                        EventType::SessionStatusRunning,
                        None,
                        json!({"backend": st.backend.name(), "container_id": sandbox.id}), // public key
                    )],
                )
                .await?;
                let first = self.runs().start_first_prompt(&mut tx, s).await?;
                tx.commit().await?;
                tracing::info!(container.id = %sandbox.id, ms = started.elapsed().as_millis() as u64, "session running");
                if let Some(run) = first {
                    self.runs().drive(s.project_id, id, run);
                }
            }
            None => {
                drop(tx);
                tracing::info!("the session changed while booting; removing the new sandbox");
                let _ = st.backend.remove(&sandbox.id).await;
            }
        }
        Ok(())
    }

    /// Removes the sandbox of a boot that could not record it (the boot is tried again with a
    /// new one), unless the row runs on it after all: a commit whose answer was lost. When
    /// the row cannot be read either, the sandbox stays for the orphan sweep, which removes it
    /// once no live process boots its session or the row names another.
    async fn discard_unrecorded(&self, id: SessionId, sandbox: &str) {
        let st = &self.inner;
        match sessions::get_for_worker(&st.db, id).await {
            // (A provisioning row may name it too: a claim from the warm pool records its
            // sandbox before the boot ends.)
            Ok(Some(row))
                if row.status == SessionStatus::Running
                    && row.sandbox_id.as_deref() == Some(sandbox) => {}
            Ok(_) => {
                if let Err(e) = st.backend.remove(sandbox).await {
                    tracing::warn!(container.id = %sandbox, error = %e, "could not remove the sandbox of a boot that could not record it; the orphan sweep will");
                }
            }
            Err(e) => {
                tracing::warn!(container.id = %sandbox, error = %e, "could not tell whether a boot's sandbox was recorded; the orphan sweep decides")
            }
        }
    }

    /// Records a failed boot: `error` with `session.status_error`, in one transaction. A
    /// first prompt dies with the boot.
    async fn record_boot_failed(&self, id: SessionId, e: &ServiceError) -> Result<()> {
        // The session's error and its event say what the user can act on, and a reference
        // for causes of ours (the map logs the full error under it, so it is not logged here).
        let msg = format!("the sandbox failed to start: {}", e.for_user().detail);
        tracing::warn!(said = %msg, "boot failed");
        let mut tx = self.inner.db.begin().await?;
        if sessions::mark_boot_failed(&mut tx, id, &msg)
            .await?
            .is_some()
        {
            // A first prompt dies with the boot: its session.status_error (no run)
            // already ends every wait for it.
            sandbox_agents_store::runs::take_first_prompt(&mut tx, id).await?;
            events::append(&mut tx, id, &[status_error(&msg)]).await?;
            tx.commit().await?;
        }
        Ok(())
    }
}

/// The session's `session.status_error` (no run) saying `message`: a failed boot's, or a
/// sandbox's that ended on its own (`lost.rs`).
pub(crate) fn status_error(message: &str) -> NewEvent {
    NewEvent::new(
        EventType::SessionStatusError,
        None,
        json!({"error": message}),
    )
}
