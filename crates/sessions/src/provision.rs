//! Getting a booting session its sandbox: one from the warm pool or a new one, with the
//! workspace it starts from (the archive of its last stop, the snapshot it forks, or its
//! manifest staged by `sandbox-agents-workspace`, its `git_repo` entries checked out inside
//! the sandbox by `checkout.rs`), its `s3_mount` entries staged from their buckets by the
//! control plane (`mounts.rs`, at every boot: archives leave them out), the agent's skills (`skills.rs`) and memory (`memory.rs`), the extra CA certificates
//! in its trust store (`trust.rs`), and the environment its commands run with.

use crate::Sessions;
use bytes::Bytes;
use sandbox_agents_credentials::secrets;
use sandbox_agents_domain::agent::AgentRef;
use sandbox_agents_domain::skills::SessionSkills;
use sandbox_agents_errors::{Result, ServiceError};
use sandbox_agents_sandbox::{Sandbox, SandboxSpec, WORKDIR};
use sandbox_agents_store::sessions::SessionRecord;
use sandbox_agents_store::{agents, sessions, snapshots};
use sandbox_agents_workspace::{build_archive, git_checkouts, ByteStream};
use std::collections::BTreeMap;

/// A sandbox a boot got ready, and what the row records of it.
pub(crate) struct Booted {
    pub sandbox: Sandbox,
    /// The manifest's variables, passed with every command.
    pub env: BTreeMap<String, String>,
    pub secrets: secrets::Resolved,
    /// What the agent's skills source staged.
    pub skills: Option<SessionSkills>,
    /// The sandbox came from the warm pool.
    pub pooled: bool,
}

impl Sessions {
    /// Takes a sandbox from the warm pool or creates one, and fills its workspace; removes it
    /// again if that fails. Returns it with the environment its commands are to run with: the
    /// manifest's, and the secret variables (resolved first, so a missing secret costs no
    /// sandbox).
    pub(crate) async fn boot_sandbox(&self, s: &SessionRecord) -> Result<Booted> {
        let st = &self.inner;
        let agent =
            agents::resolve(&st.db, s.project_id, &AgentRef::Id(s.agent_id), s.pins()).await?;
        let manifest = match &s.manifest {
            Some(m) => agent.spec.manifest.merged_with(&m.0),
            None => agent.spec.manifest.clone(),
        };
        let resolved = self
            .inner
            .credentials
            .resolve_secrets(
                s.project_id,
                s.session_id(),
                &agent.spec.secret_bindings,
                &s.secret_bindings,
            )
            .await?;
        if !resolved.egress.is_empty() && !st.settings.egress_proxy {
            return Err(ServiceError::BadRequest(
                "this session binds secrets for egress (inject or placeholder), which only a server run with --egress-proxy applies; without it the sandbox would send the placeholder, or nothing, instead of the secret. Bind them as env, or run the server with --egress-proxy".into(),
            ));
        }
        let runtime_class = self.runtime_class_of(s, &agent).await?;
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
            limits: limits_of(&st.settings.limits, s.resources.as_ref().map(|r| &r.0)),
            runtime_class,
        };
        if let Some(stale) = &s.sandbox_id {
            // A provisioning row with a sandbox: an earlier boot took one from the pool and
            // did not finish (the process died). Nobody else can be using it.
            tracing::info!(container.id = %stale, "removing the sandbox of an unfinished boot");
            st.backend.remove(stale).await?;
        }
        let (sandbox, pooled) = match self.claim_pooled(s.session_id(), &spec).await? {
            Some(sandbox) => (sandbox, true),
            None => {
                let sandbox = st.backend.create(&spec).await?;
                // Owned from now on, as a claimed one is: the egress proxy serves the boot's
                // own fetches under the session's policy, and a boot that dies leaves the
                // row naming the sandbox for the next boot to remove.
                // Not provisioning any more (stopped meanwhile): the end of the boot finds
                // that out and removes the sandbox, as it does after a claim.
                if let Err(e) = sessions::hold_sandbox(&st.db, s.session_id(), &sandbox.id).await {
                    let _ = st.backend.remove(&sandbox.id).await;
                    return Err(e.into());
                }
                (sandbox, false)
            }
        };
        // The trust store's variables, then the manifest's (which win: a manifest may point a
        // tool at a bundle of its own).
        let mut env = crate::trust::ca_env(st.settings.extra_ca.as_ref());
        env.extend(manifest.environment.clone());
        let fresh = s.workspace_archive.is_none() && s.boot_snapshot_id.is_none();
        let filled: Result<Option<SessionSkills>> = async {
            // Before the checkouts, which go out through the proxy as the session's. Written
            // even when there are none: an earlier attempt's, for bindings since changed,
            // must not serve this sandbox. (Without the proxy no credential applies.)
            if st.settings.egress_proxy {
                let sealed = sandbox_agents_credentials::egress::seal_egress(
                    st.credentials.master_key(),
                    s.session_id(),
                    &resolved.egress,
                )?;
                sessions::arm_boot_egress(&st.db, s.session_id(), &sandbox.id, sealed.as_deref())
                    .await?;
            }
            if !pooled {
                // A pooled sandbox got its certificates when it was pooled (`fill_pool`).
                self.install_extra_ca(&sandbox.id).await?;
            }
            if let Some(key) = &s.workspace_archive {
                // The archive a stop made: entries are `workspace/...`, so it goes to `/`.
                let tar = self.blob_stream(key).await?;
                st.backend.put_archive_stream(&sandbox.id, "/", tar).await?;
            } else if let Some(snap) = s.boot_snapshot_id {
                let snap = snapshots::get(&st.db, s.project_id, snap).await?;
                let tar = self.blob_stream(&snap.archive).await?;
                st.backend.put_archive_stream(&sandbox.id, "/", tar).await?;
            } else if !manifest.entries.is_empty() {
                // Checkouts first, so that files of the manifest inside a checkout's path are
                // laid over it rather than refused.
                let checkouts = git_checkouts(&manifest)
                    .map_err(|e| ServiceError::BadRequest(e.to_string()))?;
                for (path, src) in &checkouts {
                    self.checkout_in_sandbox(&sandbox.id, src, path, &env)
                        .await?;
                }
                let mounted = sandbox_agents_workspace::s3::mounts(&manifest).len();
                if checkouts.len() + mounted < manifest.entries.len() {
                    let policy = st.settings.manifest.clone();
                    let manifest = manifest.clone();
                    let tar =
                        tokio::task::spawn_blocking(move || build_archive(&manifest, &policy))
                            .await
                            .map_err(|e| anyhow::anyhow!("building the manifest: {e}"))?
                            .map_err(|e| ServiceError::BadRequest(e.to_string()))?;
                    st.backend
                        .put_archive(&sandbox.id, WORKDIR, Bytes::from(tar))
                        .await?;
                }
            }
            // Whatever the workspace came from (archives and snapshots leave buckets out),
            // the mounts come from their buckets, laid over it.
            self.stage_mounts(s.id, &manifest, &sandbox.id).await?;
            let skills = self
                .stage_skills(s, &agent, &sandbox.id, fresh, &env)
                .await?;
            self.stage_memory(s, &agent, &sandbox.id).await?;
            Ok(skills)
        }
        .await;
        match filled {
            Ok(skills) => Ok(Booted {
                sandbox,
                env,
                secrets: resolved,
                skills,
                pooled,
            }),
            Err(e) => {
                let _ = st.backend.remove(&sandbox.id).await;
                Err(e)
            }
        }
    }

    /// A blob, streamed: archives go from the blob store into a sandbox without being held in
    /// memory.
    pub(crate) async fn blob_stream(&self, key: &str) -> Result<ByteStream> {
        self.inner
            .blobs
            .get(key)
            .await
            .map_err(|e| anyhow::anyhow!("reading {key}: {e}").into())
    }
}

impl Sessions {
    /// The runtime class a boot of `s` runs under: its agent's, else its environment's, else
    /// none (the backend's default); read at each boot, so an edit applies from the next. One
    /// the server no longer offers (its operator changed the list) fails the boot saying so.
    async fn runtime_class_of(
        &self,
        s: &SessionRecord,
        agent: &sandbox_agents_domain::agent::AgentRecord,
    ) -> Result<Option<String>> {
        let class = match &agent.spec.runtime_class {
            Some(c) => Some(c.clone()),
            None => {
                sandbox_agents_store::environments::session_runtime_class(
                    &self.inner.db,
                    s.session_id(),
                )
                .await?
            }
        };
        if let Some(c) = &class {
            if let Some(why) = sandbox_agents_domain::runtime_class::not_offered(
                c,
                &self.inner.settings.runtime_classes,
            ) {
                return Err(ServiceError::Conflict(why));
            }
        }
        Ok(class)
    }
}

/// The sandbox's limits: the session's resources where it sets them, the defaults otherwise.
/// (Different limits keep a session off the warm pool: a pooled sandbox has the defaults.)
fn limits_of(
    defaults: &sandbox_agents_sandbox::Limits,
    resources: Option<&sandbox_agents_domain::session::SandboxResources>,
) -> sandbox_agents_sandbox::Limits {
    let mut limits = defaults.clone();
    if let Some(r) = resources {
        if let Some(cpus) = r.cpus {
            limits.cpus = cpus;
        }
        if let Some(mb) = r.memory_mb {
            limits.memory_bytes = mb * 1024 * 1024;
        }
    }
    limits
}
