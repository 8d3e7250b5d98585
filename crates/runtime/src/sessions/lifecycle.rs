//! Create, boot, stop, start and delete. A row change and the event announcing it always
//! commit in one transaction (the event log locks the session row), so a reader who sees
//! `session.status_running` finds the row running.

pub(crate) use super::not_found;
use super::{Runtime, SessionLock};
use crate::credentials::secrets;
use crate::error::{Result, RuntimeError};
use crate::manifest::build_archive;
use bytes::Bytes;
use futures::StreamExt;
use sandbox_agents_domain::agent::AgentRef;
use sandbox_agents_domain::event::{EventType, NewEvent};
use sandbox_agents_domain::session::SessionCreate;
use sandbox_agents_domain::tools::validate_secret_bindings;
use sandbox_agents_domain::{ProjectId, SessionId, Violations};
use sandbox_agents_sandbox::{Sandbox, SandboxSpec, WORKDIR};
use sandbox_agents_store::sessions::{self, NewSession, SessionRecord};
use sandbox_agents_store::{agents, events, garbage, snapshots};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::time::Duration;

/// Why a session stopped, as `stopped_reason` and the event's `reason` say it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopReason {
    Requested,
    Idle,
    Restart,
}

impl StopReason {
    pub fn as_str(self) -> &'static str {
        match self {
            StopReason::Requested => "requested",
            StopReason::Idle => "idle",
            StopReason::Restart => "restart",
        }
    }
}

/// The blob key of a session's workspace archive; unique per stop, so the previous archive
/// stays valid until the row points at the new one.
fn archive_key(id: SessionId) -> String {
    format!(
        "sessions/{id}/workspace-{}.tar",
        uuid::Uuid::now_v7().simple()
    )
}

impl Runtime {
    /// Creates the session row and its `session.created` event, then boots the sandbox in the
    /// background. Returns the row, `provisioning`.
    #[tracing::instrument(skip_all, fields(project.id = %project))]
    pub async fn create(&self, project: ProjectId, body: SessionCreate) -> Result<SessionRecord> {
        let st = &self.inner;
        let agent = agents::get(&st.db, project, &AgentRef::parse(&body.agent_id))
            .await
            .map_err(|e| match e {
                sandbox_agents_store::Error::NotFound => RuntimeError::NotFound(format!(
                    "agent '{}' not found in this project",
                    body.agent_id
                )),
                other => other.into(),
            })?;
        if agent.archived_at.is_some() {
            return Err(RuntimeError::Conflict(format!(
                "agent '{}' is archived and cannot start sessions; unarchive it first",
                agent.slug
            )));
        }
        let mut v = Violations::new();
        if let Some(m) = &body.manifest {
            m.validate(&["manifest"], &mut v);
        }
        validate_secret_bindings(&body.secret_bindings, "secret_bindings", &mut v);
        for (field, value) in [("model", &body.model), ("instructions", &body.instructions)] {
            if value
                .as_deref()
                .is_some_and(|s| s.trim().is_empty() && field == "model")
            {
                v.push(
                    "string_too_short",
                    &[field],
                    "model must not be empty; send null to use the agent's",
                    Value::from(""),
                );
            }
        }
        if let Some(reason) = agent.spec.unsupported() {
            v.push(
                "value_error",
                &["agent_id"],
                reason,
                Value::from(body.agent_id.as_str()),
            );
        }
        if body.environment_id.is_some() {
            v.push(
                "value_error",
                &["environment_id"],
                "environments are not supported by this server yet; leave environment_id null",
                Value::Null,
            );
        }
        v.into_result().map_err(RuntimeError::Validation)?;
        let manifest = match &body.manifest {
            Some(m) => agent.spec.manifest.merged_with(m),
            None => agent.spec.manifest.clone(),
        };
        if let Err((path, reason)) = st.settings.manifest.check(&manifest) {
            return Err(RuntimeError::field(
                &["manifest", "entries", &path],
                reason,
                Value::from(path.as_str()),
            ));
        }
        let snapshot = match &body.from_snapshot_id {
            None => None,
            Some(raw) => {
                let not_found = || {
                    RuntimeError::NotFound(format!("snapshot '{raw}' not found in this project"))
                };
                let id = uuid::Uuid::try_parse(raw).map_err(|_| not_found())?;
                Some(
                    snapshots::get(&st.db, project, id)
                        .await
                        .map_err(|e| match e {
                            sandbox_agents_store::Error::NotFound => not_found(),
                            other => other.into(),
                        })?,
                )
            }
        };
        let image = snapshot
            .as_ref()
            .and_then(|s| s.image.clone())
            .or_else(|| agent.spec.image.clone());
        let new = NewSession {
            id: SessionId::new(),
            project,
            agent: agent.id,
            title: body.title.clone(),
            backend: st.backend.name().to_owned(),
            exposed_ports: agent
                .spec
                .exposed_ports
                .iter()
                .map(|p| i32::from(*p))
                .collect(),
            model: Some(
                body.model
                    .clone()
                    .or_else(|| agent.spec.model.clone())
                    .unwrap_or_else(|| st.settings.default_model.clone()),
            ),
            instructions: body.instructions.clone(),
            manifest: body.manifest.clone(),
            metadata: body.metadata.clone(),
            image,
            secret_bindings: body.secret_bindings.clone(),
            boot_snapshot_id: snapshot.map(|s| s.id),
        };
        let mut tx = st.db.begin().await?;
        secrets::check_bound(
            &mut tx,
            project,
            &agent.spec.secret_bindings,
            &body.secret_bindings,
        )
        .await?;
        let row = sessions::insert(&mut *tx, &new).await?;
        if let Some(prompt) = &body.prompt {
            sandbox_agents_store::runs::set_first_prompt(&mut tx, new.id, prompt).await?;
        }
        events::append(
            &mut tx,
            new.id,
            &[NewEvent::new(
                EventType::SessionCreated,
                None,
                json!({"agent_id": agent.id.to_string(), "title": body.title}),
            )],
        )
        .await?;
        tx.commit().await?;
        tracing::info!(session.id = %new.id, agent.id = %agent.id, "session created");
        self.spawn_boot(new.id);
        Ok(row)
    }

    /// Boots in the background; the outcome lands in the row and the log.
    pub(crate) fn spawn_boot(&self, id: SessionId) {
        let rt = self.clone();
        self.inner.tasks.spawn(async move {
            if let Err(e) = rt.boot(id).await {
                tracing::error!(session.id = %id, error = %e, "a boot could not record its outcome");
            }
        });
    }

    /// Boots a `provisioning` session, unless another process is already doing it.
    #[tracing::instrument(skip_all, fields(session.id = %id))]
    pub(crate) async fn boot(&self, id: SessionId) -> Result<()> {
        let Some(lock) = SessionLock::try_acquire(&self.inner.db, id).await? else {
            tracing::debug!("another process is working on this session");
            return Ok(());
        };
        let result = self.boot_locked(id).await;
        lock.release().await;
        // Replace a pooled sandbox this boot may have taken, now that it no longer competes
        // with the boot (a no-op without a pool).
        self.inner.pool_wanted.notify_one();
        result
    }

    /// The boot itself; the caller holds the session's lock. Records `running` or `error`,
    /// each with its event, in one transaction.
    pub(crate) async fn boot_locked(&self, id: SessionId) -> Result<()> {
        let st = &self.inner;
        let Some(s) = sessions::get_for_worker(&st.db, id).await? else {
            return Ok(());
        };
        if s.status != "provisioning" {
            return Ok(());
        }
        let started = std::time::Instant::now();
        match self.boot_sandbox(&s).await {
            Ok((sandbox, env, secrets)) => {
                let sealed = secrets::seal_env(&st.settings.master_key, id, &secrets.env)?;
                let ports: BTreeMap<String, u16> = sandbox
                    .ports
                    .iter()
                    .map(|(c, h)| (c.to_string(), h.port()))
                    .collect();
                let mut tx = st.db.begin().await?;
                match sessions::mark_running(
                    &mut tx,
                    id,
                    &sandbox.id,
                    &sandbox.workdir,
                    &ports,
                    &env,
                    sealed.as_deref(),
                )
                .await?
                {
                    Some(_) => {
                        sandbox_agents_store::secrets::mark_used(
                            &mut *tx,
                            ProjectId(s.project_id),
                            &secrets.ids,
                        )
                        .await?;
                        events::append(
                            &mut tx,
                            id,
                            &[NewEvent::new(
                                EventType::SessionStatusRunning,
                                None,
                                json!({"backend": st.backend.name(), "container_id": sandbox.id}),
                            )],
                        )
                        .await?;
                        let first = self.start_first_prompt(&mut tx, &s).await?;
                        tx.commit().await?;
                        tracing::info!(container.id = %sandbox.id, ms = started.elapsed().as_millis() as u64, "session running");
                        if let Some(run) = first {
                            self.spawn_drive(ProjectId(s.project_id), id, run, false);
                        }
                    }
                    None => {
                        drop(tx);
                        tracing::info!(
                            "the session changed while booting; removing the new sandbox"
                        );
                        let _ = st.backend.remove(&sandbox.id).await;
                    }
                }
            }
            Err(e) => {
                let msg = format!("the sandbox failed to start: {e}");
                tracing::warn!(error = %msg, "boot failed");
                let mut tx = st.db.begin().await?;
                if sessions::mark_boot_failed(&mut tx, id, &msg)
                    .await?
                    .is_some()
                {
                    // A first prompt dies with the boot: its session.status_error (no run)
                    // already ends every wait for it.
                    sandbox_agents_store::runs::take_first_prompt(&mut tx, id).await?;
                    events::append(
                        &mut tx,
                        id,
                        &[NewEvent::new(
                            EventType::SessionStatusError,
                            None,
                            json!({"error": msg}),
                        )],
                    )
                    .await?;
                    tx.commit().await?;
                }
            }
        }
        Ok(())
    }

    /// Takes a sandbox from the warm pool or creates one, and fills its workspace; removes it
    /// again if that fails. Returns it with the environment its commands are to run with: the
    /// manifest's, and the secret variables (resolved first, so a missing secret costs no
    /// sandbox).
    async fn boot_sandbox(
        &self,
        s: &SessionRecord,
    ) -> Result<(Sandbox, BTreeMap<String, String>, secrets::Resolved)> {
        let st = &self.inner;
        let agent = agents::get(
            &st.db,
            ProjectId(s.project_id),
            &AgentRef::Id(s.agent_id.into()),
        )
        .await?;
        let manifest = match &s.manifest {
            Some(m) => agent.spec.manifest.merged_with(&m.0),
            None => agent.spec.manifest.clone(),
        };
        let resolved = self
            .resolve_secrets(
                ProjectId(s.project_id),
                &agent.spec.secret_bindings,
                &s.secret_bindings,
            )
            .await?;
        let spec = SandboxSpec {
            session: s.id.to_string(),
            image: s
                .image
                .clone()
                .or_else(|| agent.spec.image.clone())
                .unwrap_or_else(|| st.settings.default_image.clone()),
            // Passed with every exec instead (see `exec::sandbox_env`): a pooled sandbox
            // could not have it, and this way no sandbox differs from another.
            env: BTreeMap::new(),
            exposed_ports: s
                .exposed_ports
                .iter()
                .filter_map(|p| u16::try_from(*p).ok())
                .collect(),
            limits: st.settings.limits.clone(),
        };
        if let Some(stale) = &s.container_id {
            // A provisioning row with a container: an earlier boot took one from the pool and
            // did not finish (the process died). Nobody else can be using it.
            tracing::info!(container.id = %stale, "removing the sandbox of an unfinished boot");
            st.backend.remove(stale).await?;
        }
        let sandbox = match self.claim_pooled(s.session_id(), &spec).await? {
            Some(sandbox) => sandbox,
            None => st.backend.create(&spec).await?,
        };
        let env = manifest.environment.clone();
        let filled: Result<()> = async {
            if let Some(key) = &s.workspace_archive {
                // The archive a stop made: entries are `workspace/...`, so it goes to `/`.
                let tar = self.blob_stream(key).await?;
                st.backend.put_archive_stream(&sandbox.id, "/", tar).await?;
            } else if let Some(snap) = s.boot_snapshot_id {
                let snap = snapshots::get(&st.db, ProjectId(s.project_id), snap).await?;
                let tar = self.blob_stream(&snap.archive).await?;
                st.backend.put_archive_stream(&sandbox.id, "/", tar).await?;
            } else if !manifest.entries.is_empty() {
                let policy = st.settings.manifest.clone();
                let tar = tokio::task::spawn_blocking(move || build_archive(&manifest, &policy))
                    .await
                    .map_err(|e| anyhow::anyhow!("building the manifest: {e}"))?
                    .map_err(|e| RuntimeError::BadRequest(e.to_string()))?;
                st.backend
                    .put_archive(&sandbox.id, WORKDIR, Bytes::from(tar))
                    .await?;
            }
            Ok(())
        }
        .await;
        if let Err(e) = filled {
            let _ = st.backend.remove(&sandbox.id).await;
            return Err(e);
        }
        Ok((sandbox, env, resolved))
    }

    /// A blob, streamed: archives go from the blob store into a sandbox without being held in
    /// memory.
    pub(crate) async fn blob_stream(&self, key: &str) -> Result<crate::blobs::ByteStream> {
        self.inner
            .blobs
            .get(key)
            .await
            .map_err(|e| anyhow::anyhow!("reading {key}: {e}").into())
    }

    /// Archives the workspace of a running sandbox to the blob store; returns the key.
    pub(crate) async fn archive_workspace(
        &self,
        id: SessionId,
        container: &str,
    ) -> Result<(String, u64)> {
        let st = &self.inner;
        let key = archive_key(id);
        let stream = st.backend.get_archive(container, WORKDIR).await?;
        let stream = stream
            .map(|r| r.map_err(|e| std::io::Error::other(e.to_string())))
            .boxed();
        let size = st
            .blobs
            .put(&key, stream)
            .await
            .map_err(|e| anyhow::anyhow!("archiving the workspace: {e}"))?;
        Ok((key, size))
    }

    /// Stops a session: archives the workspace, removes the container, and records
    /// `stopped` with `reason`. Stopping a session that is not up returns it unchanged.
    /// A run in flight is cancelled first (see [`Runtime::before_stop`]).
    #[tracing::instrument(skip_all, fields(session.id = %id, reason = reason.as_str()))]
    pub async fn stop(
        &self,
        project: Option<ProjectId>,
        id: SessionId,
        reason: StopReason,
    ) -> Result<SessionRecord> {
        let st = &self.inner;
        if let Some(row) = self.before_stop(project, id, reason).await? {
            return Ok(row);
        }
        let lock = SessionLock::acquire(&st.db, id).await?;
        let result = self.stop_locked(project, id, reason).await;
        lock.release().await;
        result
    }

    async fn stop_locked(
        &self,
        project: Option<ProjectId>,
        id: SessionId,
        reason: StopReason,
    ) -> Result<SessionRecord> {
        let st = &self.inner;
        let s = match project {
            Some(p) => sessions::get(&st.db, p, id)
                .await
                .map_err(|e| not_found(e, id))?,
            None => sessions::get_for_worker(&st.db, id)
                .await?
                .ok_or_else(|| RuntimeError::NotFound(format!("session '{id}' not found")))?,
        };
        if !matches!(s.status.as_str(), "running" | "provisioning") {
            return Ok(s);
        }
        if reason == StopReason::Idle {
            // The reaper chose this session before taking its lock; a use recorded since
            // (an exec's touch, from any process) means it is not idle after all.
            let ttl = st.settings.idle_ttl.as_secs() as i64;
            if !sessions::is_idle_expired(&st.db, id, ttl).await? {
                tracing::info!("used since the idle reaper chose it; kept running");
                return Ok(s);
            }
        }
        let mut archive = None;
        if let Some(container) = &s.container_id {
            match self.archive_workspace(id, container).await {
                Ok((key, size)) => {
                    tracing::debug!(bytes = size, "workspace archived");
                    archive = Some(key);
                }
                Err(e) => {
                    tracing::warn!(error = %e, "the workspace could not be archived; the previous archive is kept")
                }
            }
            if let Err(e) = st.backend.stop(container, Duration::from_secs(2)).await {
                tracing::debug!(error = %e, "stopping the container");
            }
            st.backend.remove(container).await?;
        }
        let Some(row) = self.record_stopped(id, reason, archive.as_deref()).await? else {
            return sessions::get_for_worker(&st.db, id)
                .await?
                .ok_or_else(|| RuntimeError::NotFound(format!("session '{id}' not found")));
        };
        if let (Some(_), Some(_)) = (&s.workspace_archive, &archive) {
            self.spawn_collect();
        }
        tracing::info!("session stopped");
        Ok(row)
    }

    /// Records the stop: the row says `stopped` (with `reason`, and the new workspace archive
    /// when there is one) in the transaction that writes `session.status_stopped`. `None`
    /// when the session was not up (someone else stopped or deleted it).
    pub(crate) async fn record_stopped(
        &self,
        id: SessionId,
        reason: StopReason,
        archive: Option<&str>,
    ) -> Result<Option<SessionRecord>> {
        let mut tx = self.inner.db.begin().await?;
        if archive.is_some() {
            // The previous archive goes with this transaction (the caller collects it).
            garbage::queue_replaced_archive(&mut *tx, id, archive).await?;
        }
        let Some(row) = sessions::mark_stopped(&mut tx, id, reason.as_str(), archive).await? else {
            return Ok(None);
        };
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

    /// Brings a stopped (or failed) session back: provisioning now, running once booted.
    #[tracing::instrument(skip_all, fields(session.id = %id))]
    pub async fn start(&self, project: ProjectId, id: SessionId) -> Result<SessionRecord> {
        let (row, changed) = sessions::mark_provisioning(&self.inner.db, project, id)
            .await
            .map_err(|e| not_found(e, id))?;
        if changed {
            self.spawn_boot(id);
        }
        Ok(row)
    }

    /// Destroys the container, the session, its log and its workspace archive (queued as
    /// garbage in the deleting transaction). Snapshots stay (a fork may use them).
    #[tracing::instrument(skip_all, fields(session.id = %id))]
    pub async fn delete(&self, project: ProjectId, id: SessionId) -> Result<()> {
        let st = &self.inner;
        let lock = SessionLock::acquire(&st.db, id).await?;
        let result = async {
            let s = sessions::get(&st.db, project, id)
                .await
                .map_err(|e| not_found(e, id))?;
            if let Some(container) = &s.container_id {
                st.backend.remove(container).await?;
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
        lock.release().await;
        result
    }
}
