//! Creating a session: the request checked against its agent, the row and its
//! `session.created` event in one transaction (with the first prompt, if any, and a lock on
//! every bound secret), then a boot in the background.

use crate::Sessions;
use sandbox_agents_credentials::secrets;
use sandbox_agents_domain::agent::{AgentRecord, AgentRef, Capability};
use sandbox_agents_domain::agent_version::VersionPin;
use sandbox_agents_domain::event::{EventType, NewEvent};
use sandbox_agents_domain::manifest::EntrySpec;
use sandbox_agents_domain::network::{LayerSource, NetworkLayer, SessionNetwork};
use sandbox_agents_domain::session::{SessionCreate, MIN_DISK_MB};
use sandbox_agents_domain::tools::validate_secret_bindings;
use sandbox_agents_domain::{ProjectId, SessionId, Violations};
use sandbox_agents_errors::{Result, ServiceError};
use sandbox_agents_store::environments::{self, EnvironmentRecord, EnvironmentRef};
use sandbox_agents_store::sessions::{self, NewSession, SessionRecord};
use sandbox_agents_store::snapshots::SnapshotRecord;
use sandbox_agents_store::{agents, events, snapshots};
use serde_json::{json, Value};

/// A new session, checked, with its row made ([`Sessions::prepare`]).
pub struct Prepared {
    project: ProjectId,
    new: NewSession,
    agent: AgentRecord,
    pin: VersionPin,
    environment: Option<EnvironmentRecord>,
    body: SessionCreate,
    worker: i32,
}

impl Prepared {
    pub fn id(&self) -> SessionId {
        self.new.id
    }
}

impl Sessions {
    /// Creates the session row and its `session.created` event, then boots the sandbox in the
    /// background. Returns the row, `provisioning`.
    #[tracing::instrument(skip_all, fields(project.id = %project))]
    pub async fn create(&self, project: ProjectId, body: SessionCreate) -> Result<SessionRecord> {
        let prepared = self.prepare(project, body).await?;
        let mut tx = self.inner.db.begin().await?;
        let row = self.insert_prepared(&mut tx, &prepared).await?;
        tx.commit().await?;
        self.after_create(&row);
        Ok(row)
    }

    /// Checks a new session against its agent (at the version it pins), its environment, its
    /// snapshot and the deployment, and makes its row: everything before the transaction
    /// that inserts it ([`Sessions::insert_prepared`]), which a caller may share (a
    /// schedule's fire inserts the session in the transaction that records the fire).
    pub async fn prepare(&self, project: ProjectId, body: SessionCreate) -> Result<Prepared> {
        let st = &self.inner;
        let agent = agents::get(&st.db, project, &AgentRef::parse(&body.agent_id))
            .await
            .map_err(|e| match e {
                sandbox_agents_store::Error::NotFound => ServiceError::NotFound(format!(
                    "agent '{}' not found in this project",
                    body.agent_id
                )),
                other => other.into(),
            })?;
        if agent.archived_at.is_some() {
            return Err(ServiceError::Conflict(format!(
                "agent '{}' is archived and cannot start sessions; unarchive it first",
                agent.slug
            )));
        }
        // The version it runs, checked and copied from below: its current one unless it asks.
        let pin = body
            .agent_version
            .unwrap_or(VersionPin::Version(agent.version));
        let agent = match pin {
            VersionPin::Version(v) if v != agent.version => {
                crate::pin::at_version(&st.db, agent, v).await?
            }
            _ => agent,
        };
        check_request(&body, &agent, &st.settings)?;
        let manifest = match &body.manifest {
            Some(m) => agent.spec.manifest.merged_with(m),
            None => agent.spec.manifest.clone(),
        };
        if let Err((path, reason)) = st.settings.manifest.check(&manifest) {
            return Err(ServiceError::field(
                &["manifest", "entries", &path],
                reason,
                Value::from(path.as_str()),
            ));
        }
        if !st.backend.capabilities().system_files {
            let mounted = manifest
                .entries
                .iter()
                .find(|(_, e)| matches!(e, EntrySpec::S3Mount { .. }));
            if let Some((path, _)) = mounted {
                // Refused now, not left to fail the boot: a bucket is staged as root.
                return Err(ServiceError::Conflict(format!(
                    "the s3_mount entry '{path}' cannot be staged by this deployment's sandbox \
                     backend ({}), which has no root in a sandbox; leave it out, or use a \
                     deployment on the docker backend",
                    st.backend.name()
                )));
            }
            let for_egress = agent
                .spec
                .secret_bindings
                .iter()
                .chain(&body.secret_bindings)
                .find(|b| b.inject.is_some() || b.placeholder.is_some());
            if let Some(binding) = for_egress.filter(|_| st.settings.egress_proxy) {
                // The proxy adds these inside TLS it ends with the deployment's egress CA,
                // which only root can make a sandbox trust: refused now, not a 502 later.
                return Err(ServiceError::Conflict(format!(
                    "the secret binding of '{}' is for egress (inject or placeholder), which \
                     this deployment's sandbox backend ({}) cannot apply: the proxy adds it \
                     inside TLS with the deployment's CA, and a sandbox without root cannot \
                     trust that CA; bind it as env, or use a deployment on the docker backend",
                    binding.secret,
                    st.backend.name()
                )));
            }
        }
        let snapshot = match &body.from_snapshot_id {
            None => None,
            Some(raw) => Some(self.fork_source(project, raw).await?),
        };
        let environment = self.environment_of(project, &body, &agent).await?;
        // Refused now rather than at its boot: a runtime class this server does not offer
        // (any more: agents and environments are checked when they are saved).
        let runtime_class = agent.spec.runtime_class.as_ref().or_else(|| {
            environment
                .as_ref()
                .and_then(|e| e.config.0.runtime_class.as_ref())
        });
        if let Some(class) = runtime_class {
            if let Some(why) = sandbox_agents_domain::runtime_class::not_offered(
                class,
                &st.settings.runtime_classes,
            ) {
                return Err(ServiceError::Conflict(why));
            }
        }
        if body.prompt.is_some() {
            // The first prompt is a turn: none starts over the project's monthly limit.
            crate::refuse_over_monthly_limit(&st.db, project).await?;
        }
        if let Some(env) = environment.as_ref().filter(|e| e.build_digest.is_some()) {
            // Refused now rather than left to wait for a build that can never happen.
            if !st.backend.capabilities().image_builds {
                return Err(ServiceError::Conflict(format!(
                    "environment '{}' installs packages, which takes an image build, and this \
                     deployment's sandbox backend ({}) builds no images: use an environment \
                     without packages, or a deployment on the docker backend",
                    env.name,
                    st.backend.name()
                )));
            }
        }
        // A fork boots its snapshot's image (the packages are in it); else the environment's
        // (its build's, or its configuration's image), else the agent's.
        let image = snapshot
            .as_ref()
            .and_then(|s| s.image.clone())
            .or_else(|| environment.as_ref().and_then(environment_image))
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
            idle_ttl_seconds: body.idle_ttl_seconds,
            max_lifetime_seconds: body.max_lifetime_seconds,
            resources: body.resources.clone().filter(|r| !r.is_default()),
            network: network_of(&body, &agent, environment.as_ref()),
            // Its own (`{}`: none, whatever the agent's), else the agent's, copied now.
            budget: body.budget.or(agent.spec.budget).filter(|b| !b.is_empty()),
            agent_version: pin.version(),
            agent_pins: None,
            mcp_servers: body.mcp_servers.clone(),
        };
        // Stamped with this process's key in the transaction that makes the row, so no sweep
        // ever sees it provisioning with nobody on its boot.
        let worker = self.worker_key().await?;
        Ok(Prepared {
            project,
            new,
            agent,
            pin,
            environment,
            body,
            worker,
        })
    }

    /// Inserts a prepared session in `tx`: its row (with its pins, read now), its boot's
    /// stamp, its environment, its first prompt and `session.created`, with a lock on every
    /// bound secret. The caller commits, then calls [`Sessions::after_create`].
    pub async fn insert_prepared(
        &self,
        tx: &mut sqlx::PgConnection,
        p: &Prepared,
    ) -> Result<SessionRecord> {
        let Prepared {
            project,
            new,
            agent,
            pin,
            environment,
            body,
            worker,
        } = p;
        let (project, pin, worker) = (*project, *pin, *worker);
        let mut new = new.clone();
        if let VersionPin::Version(_) = pin {
            // Its subagents run as they are now, for as long as it lives.
            new.agent_pins = Some(crate::pin::pins_of(tx, project, agent).await?);
        }
        secrets::check_bound(
            tx,
            project,
            &agent.spec.secret_bindings,
            &body.secret_bindings,
        )
        .await?;
        let row = sessions::insert(&mut *tx, &new).await?;
        sandbox_agents_store::session_leases::stamp_boot(&mut *tx, new.id, worker).await?;
        if let Some(env) = &environment {
            environments::attach_session(&mut *tx, new.id, env.id, env.build_digest.as_deref())
                .await?;
        }
        if let Some(prompt) = &body.prompt {
            sandbox_agents_store::runs::set_first_prompt(tx, new.id, prompt).await?;
        }
        events::append(
            tx,
            new.id,
            &[NewEvent::new(
                EventType::SessionCreated,
                None,
                json!({"agent_id": agent.id.to_string(), "title": body.title, "agent_version": pin}),
            )],
        )
        .await?;
        tracing::info!(session.id = %new.id, agent.id = %agent.id, "session created");
        Ok(row)
    }

    /// After the commit of [`Sessions::insert_prepared`]: the boot, and the lifetime's end.
    pub fn after_create(&self, row: &SessionRecord) {
        self.spawn_boot(row.id);
        if let Some(at) = row.expires_at() {
            self.schedule_lifetime_end(at);
        }
    }

    /// The environment a session starts in: its own `environment_id`, else its agent's, else
    /// none (the server's default). Unknown: 404; archived: 409.
    async fn environment_of(
        &self,
        project: ProjectId,
        body: &SessionCreate,
        agent: &AgentRecord,
    ) -> Result<Option<EnvironmentRecord>> {
        let Some(raw) = body
            .environment_id
            .as_deref()
            .or(agent.spec.environment_id.as_deref())
        else {
            // The kernel's packages come from somewhere: the project's `analysis` environment.
            let python = agent
                .spec
                .capabilities
                .as_ref()
                .is_some_and(|c| c.contains(&Capability::Python));
            if !python {
                return Ok(None);
            }
            let analysis = self.environments().analysis_environment(project).await?;
            return Ok(Some(analysis));
        };
        let env = environments::get(&self.inner.db, project, &EnvironmentRef::parse(raw))
            .await
            .map_err(|e| match e {
                sandbox_agents_store::Error::NotFound => {
                    ServiceError::NotFound(format!("environment '{raw}' not found in this project"))
                }
                other => other.into(),
            })?;
        if env.archived_at.is_some() {
            return Err(ServiceError::Conflict(format!(
                "environment '{}' is archived and cannot start sessions; use another environment",
                env.name
            )));
        }
        Ok(Some(env))
    }

    /// The snapshot a session forks (`from_snapshot_id`): any snapshot of the project; 404
    /// otherwise.
    async fn fork_source(&self, project: ProjectId, raw: &str) -> Result<SnapshotRecord> {
        let not_found =
            || ServiceError::NotFound(format!("snapshot '{raw}' not found in this project"));
        let id = uuid::Uuid::try_parse(raw).map_err(|_| not_found())?;
        snapshots::get(&self.inner.db, project, id)
            .await
            .map_err(|e| match e {
                sandbox_agents_store::Error::NotFound => not_found(),
                other => other.into(),
            })
    }
}

/// What a create request may not ask for, whatever the database holds: an invalid manifest
/// or secret binding, an empty model, limits out of range. 422 with every violation at once.
fn check_request(
    body: &SessionCreate,
    agent: &AgentRecord,
    settings: &crate::SessionSettings,
) -> Result<()> {
    let mut v = Violations::new();
    check_limits(body, settings, &mut v);
    if let Some(m) = &body.manifest {
        m.validate(&["manifest"], &mut v);
    }
    validate_secret_bindings(&body.secret_bindings, "secret_bindings", &mut v);
    if let Some(n) = &body.network {
        n.validate(&mut v, &["network"]);
    }
    if let Some(b) = &body.budget {
        b.validate(&mut v, &["budget"]);
    }
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
    check_mcp_servers(body, agent, &mut v);
    if agent.spec.workspace_source.is_some() && agent.spec.skills_source.is_none() {
        v.push(
            "value_error",
            &["agent_id"],
            "the agent's workspace_source stages its skills source's tree, but it has no skills_source; set one or remove the workspace_source",
            Value::from(body.agent_id.as_str()),
        );
    }
    v.into_result().map_err(ServiceError::Validation)
}

/// The session's network layers: copies of its agent's and its environment's policies as
/// they are now (a later edit of either applies to sessions created afterwards, as the rest
/// of a session's configuration does), and its own.
fn network_of(
    body: &SessionCreate,
    agent: &AgentRecord,
    environment: Option<&EnvironmentRecord>,
) -> SessionNetwork {
    let agent_layer = NetworkLayer {
        from: LayerSource::Agent,
        policy: agent.spec.network.clone(),
    };
    let environment_layer = environment.map(|e| NetworkLayer {
        from: LayerSource::Environment,
        policy: e.config.0.network.clone(),
    });
    SessionNetwork {
        inherited: std::iter::once(agent_layer)
            .chain(environment_layer)
            .collect(),
        own: body.network.clone(),
    }
}

/// The image an environment's sessions boot: its build's once there is one (a session waits
/// for it), else its configuration's; none: the agent's or the server's default.
fn environment_image(env: &EnvironmentRecord) -> Option<String> {
    match &env.build_digest {
        Some(_) => env.build_image.clone(),
        None => env.config.0.image.clone(),
    }
}

/// A session's `mcp_servers` only narrow its agent's: each names one of the agent's (at the
/// version it runs), once.
fn check_mcp_servers(body: &SessionCreate, agent: &AgentRecord, v: &mut Violations) {
    let Some(names) = &body.mcp_servers else {
        return;
    };
    let known: Vec<&str> = agent
        .spec
        .mcp_servers
        .iter()
        .map(|s| s.name.as_str())
        .collect();
    for (i, name) in names.iter().enumerate() {
        let at = ["mcp_servers", &i.to_string()];
        if !known.contains(&name.as_str()) {
            v.push(
                "value_error",
                &at,
                if known.is_empty() {
                    "the agent has no MCP servers; a session only narrows its agent's".to_owned()
                } else {
                    format!(
                        "the agent has no MCP server named '{name}' (it has: {}); a session only narrows its agent's",
                        known.join(", ")
                    )
                },
                Value::from(name.as_str()),
            );
        } else if names[..i].contains(name) {
            v.push(
                "value_error",
                &at,
                format!("'{name}' is named twice"),
                Value::from(name.as_str()),
            );
        }
    }
}

/// The session's own idle TTL, lifetime and resources: in range, and nothing this backend
/// cannot give (a GPU is refused, never quietly left out).
fn check_limits(body: &SessionCreate, settings: &crate::SessionSettings, v: &mut Violations) {
    use sandbox_agents_domain::session::MAX_SESSION_SECONDS;
    if let Some(t) = body.idle_ttl_seconds {
        if !(0..=MAX_SESSION_SECONDS).contains(&t) {
            v.push(
                "value_error",
                &["idle_ttl_seconds"],
                format!("idle_ttl_seconds is 0 (never released) to {MAX_SESSION_SECONDS} (a year); null: the agent's"),
                Value::from(t),
            );
        }
    }
    if let Some(t) = body.max_lifetime_seconds {
        if !(1..=MAX_SESSION_SECONDS).contains(&t) {
            v.push(
                "value_error",
                &["max_lifetime_seconds"],
                format!(
                    "max_lifetime_seconds is 1 to {MAX_SESSION_SECONDS} (a year); null: no limit"
                ),
                Value::from(t),
            );
        }
    }
    let Some(r) = &body.resources else { return };
    if let Some(c) = r.cpus {
        if !(c.is_finite() && c > 0.0 && c <= settings.max_cpus) {
            v.push(
                "value_error",
                &["resources", "cpus"],
                format!(
                    "cpus is more than 0 and at most {} on this server (--sandbox-max-cpus)",
                    settings.max_cpus
                ),
                Value::from(c),
            );
        }
    }
    if let Some(m) = r.memory_mb {
        if !(64..=settings.max_memory_mb).contains(&m) {
            v.push(
                "value_error",
                &["resources", "memory_mb"],
                format!(
                    "memory_mb is 64 to {} on this server (--sandbox-max-memory-mb)",
                    settings.max_memory_mb
                ),
                Value::from(m),
            );
        }
    }
    if let Some(d) = r.disk_mb {
        use crate::disk::MIB;
        // A session may only lower the server's limit (given in whole MiB); without one, the
        // bound keeps the limit in bytes in range.
        let (max, message) = match settings.disk_limit {
            Some(bytes) => {
                let max = i64::try_from(bytes / MIB).unwrap_or(i64::MAX);
                let message = if max < MIN_DISK_MB {
                    format!("this server's disk limit (--sandbox-disk-mb) is {max} MiB, below the {MIN_DISK_MB} a session may ask for: leave disk_mb out")
                } else {
                    format!("disk_mb is {MIN_DISK_MB} to {max} on this server (--sandbox-disk-mb)")
                };
                (max, message)
            }
            None => {
                let max = i64::MAX / MIB as i64;
                (max, format!("disk_mb is {MIN_DISK_MB} to {max}"))
            }
        };
        if !(MIN_DISK_MB..=max).contains(&d) {
            v.push(
                "value_error",
                &["resources", "disk_mb"],
                message,
                Value::from(d),
            );
        }
    }
    if let Some(g) = r.gpus.filter(|g| *g != 0) {
        v.push(
            "value_error",
            &["resources", "gpus"],
            "this server's sandboxes have no GPUs (the Docker backend gives none); send 0 or null, or run the work where GPUs are",
            Value::from(g),
        );
    }
}
