//! The `sessions` table. Appends to a session's event log lock its row (see
//! [`crate::events::append`]), so every transaction that changes a session's row and announces
//! it takes the lock in the same order: row first, then events.

use crate::error::{Error, Result};
use sandbox_agents_domain::agent_version::{AgentPins, VersionPin};
use sandbox_agents_domain::budget::Budget;
use sandbox_agents_domain::manifest::ManifestSpec;
use sandbox_agents_domain::network::{NetworkPolicy, SessionNetwork};
use sandbox_agents_domain::session::{
    PortTarget, SandboxResources, Session, SessionActivity, SessionStatus, StoppedReason,
};
use sandbox_agents_domain::tools::SecretBinding;
use sandbox_agents_domain::{AgentId, ProjectId, SessionId};
use serde_json::{Map, Value};
use sqlx::types::Json;
use sqlx::PgExecutor;
use std::collections::BTreeMap;
use time::OffsetDateTime;
use uuid::Uuid;

mod network;
pub use network::{network_layers, network_layers_by_sandbox, SandboxEgress};
mod sandbox;
pub use sandbox::{arm_boot_egress, hold_sandbox};

/// A session row.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct SessionRecord {
    pub id: SessionId,
    pub project_id: ProjectId,
    pub agent_id: AgentId,
    pub title: String,
    pub status: SessionStatus,
    pub activity: SessionActivity,
    pub error: Option<String>,
    pub stopped_reason: Option<StoppedReason>,
    pub backend: String,
    pub sandbox_id: Option<String>,
    pub exposed_ports: Vec<i32>,
    pub workdir: String,
    pub model: Option<String>,
    pub instructions: Option<String>,
    pub manifest: Option<Json<ManifestSpec>>,
    pub usage: Json<Map<String, Value>>,
    pub metadata: Json<Map<String, Value>>,
    pub created_at: OffsetDateTime,
    pub updated_at: OffsetDateTime,
    pub last_event_at: Option<OffsetDateTime>,
    pub image: Option<String>,
    pub secret_bindings: Json<Vec<sandbox_agents_domain::tools::SecretBinding>>,
    pub workspace_archive: Option<String>,
    pub boot_snapshot_id: Option<Uuid>,
    pub last_used_at: OffsetDateTime,
    /// Sandbox port → where the control plane reaches it, while running.
    pub port_map: Json<std::collections::BTreeMap<String, PortTarget>>,
    /// The environment every command in the sandbox runs with (the manifest's, at boot).
    pub sandbox_env: Json<std::collections::BTreeMap<String, String>>,
    /// The secret variables of the sandbox that is up, sealed with the session's id as
    /// associated data (see the runtime's `credentials::secrets`); None when none is up.
    pub sandbox_secrets: Option<Vec<u8>>,
    /// The session's own idle TTL; None: the agent's, else the server's default.
    pub idle_ttl_seconds: Option<i64>,
    /// Seconds from `created_at` after which the sandbox is stopped for good; None: no limit.
    pub max_lifetime_seconds: Option<i64>,
    /// The sandbox's own resources; None: the server's defaults.
    pub resources: Option<Json<SandboxResources>>,
    /// Its network policies (inherited and own); None on rows from before them: open.
    pub network: Option<Json<SessionNetwork>>,
    /// Limits on what its turns spend; None: no budget.
    pub budget: Option<Json<Budget>>,
    /// The version of its agent it runs; None: the current one, whatever it is ("latest").
    pub agent_version: Option<i64>,
    /// The versions of the agents it runs (its own and its subagents'), as they were when it
    /// pinned; None for "latest".
    pub agent_pins: Option<Json<AgentPins>>,
    /// The names of its agent's MCP servers it uses; None: all of them.
    pub mcp_servers: Option<Vec<String>>,
}

impl SessionRecord {
    pub fn session_id(&self) -> SessionId {
        self.id
    }

    pub fn to_wire(&self) -> Session {
        Session {
            id: self.id.to_string(),
            agent_id: self.agent_id.to_string(),
            title: self.title.clone(),
            status: self.status,
            activity: self.activity,
            error: self.error.clone(),
            stopped_reason: self.stopped_reason,
            backend: self.backend.clone(),
            container_id: self.sandbox_id.clone(), // public name (openapi/openapi.json)
            exposed_ports: self.exposed_ports.clone(),
            workdir: self.workdir.clone(),
            model: self.model.clone(),
            usage: self.usage.0.clone(),
            metadata: self.metadata.0.clone(),
            created_at: self.created_at,
            updated_at: self.updated_at,
            last_event_at: self.last_event_at,
            idle_ttl_seconds: self.idle_ttl_seconds,
            max_lifetime_seconds: self.max_lifetime_seconds,
            expires_at: self.expires_at(),
            resources: self.resources.as_ref().map(|r| r.0.clone()),
            environment_id: None,
            environment_name: None,
            network: self.network().own,
            network_layers: self.network().layers(),
            budget: self.budget(),
            agent_version: VersionPin::from_column(self.agent_version),
            mcp_servers: self.mcp_servers.clone(),
        }
    }

    /// The versions its turns run each agent at (None: as they are now).
    pub fn pins(&self) -> Option<&AgentPins> {
        self.agent_pins.as_ref().map(|p| &p.0)
    }

    /// Its budget, when it has one.
    pub fn budget(&self) -> Option<Budget> {
        self.budget.as_ref().map(|b| b.0)
    }

    /// Its network policies; a row from before them has none (open).
    pub fn network(&self) -> SessionNetwork {
        self.network
            .as_ref()
            .map(|n| n.0.clone())
            .unwrap_or_default()
    }

    /// When the lifetime limit stops the sandbox; None without one.
    pub fn expires_at(&self) -> Option<OffsetDateTime> {
        self.max_lifetime_seconds
            .map(|s| self.created_at + time::Duration::seconds(s))
    }

    /// Whether the lifetime limit has passed (the sandbox may not be started again).
    pub fn lifetime_over(&self) -> bool {
        self.expires_at()
            .is_some_and(|at| at <= OffsetDateTime::now_utc())
    }
}

/// `query_as!` into [`SessionRecord`] with its columns (and the Rust types of its jsonb
/// columns, short names only: an alias is an identifier, which PostgreSQL cuts at 63 bytes)
/// spliced in at compile time between `$head` and `$tail`: never `format!`, nor
/// `*`, which also reads columns the record leaves out (`conversation`, `first_prompt`).
macro_rules! session_query {
    ($head:literal, $tail:literal $(, $arg:expr)* $(,)?) => {
        sqlx::query_as!(
            SessionRecord,
            $head
                + r#"id as "id: SessionId", project_id as "project_id: ProjectId",
                    agent_id as "agent_id: AgentId", title, status as "status: SessionStatus",
                    activity as "activity: SessionActivity", error,
                    stopped_reason as "stopped_reason: StoppedReason", backend,
                    sandbox_id, exposed_ports, workdir, model, instructions,
                    manifest as "manifest: Json<ManifestSpec>",
                    usage as "usage: Json<Map<String, Value>>",
                    metadata as "metadata: Json<Map<String, Value>>",
                    created_at, updated_at, last_event_at, image,
                    secret_bindings as "secret_bindings: Json<Vec<SecretBinding>>",
                    workspace_archive, boot_snapshot_id, last_used_at,
                    port_map as "port_map: Json<BTreeMap<String, PortTarget>>",
                    sandbox_env as "sandbox_env: Json<BTreeMap<String, String>>",
                    sandbox_secrets, idle_ttl_seconds, max_lifetime_seconds,
                    resources as "resources: Json<SandboxResources>",
                    network as "network: Json<SessionNetwork>",
                    budget as "budget: Json<Budget>", agent_version,
                    agent_pins as "agent_pins: Json<AgentPins>", mcp_servers"#
                + $tail
            $(, $arg)*
        )
    };
}

/// What a new session row starts from. Status is always `provisioning`: the row exists before
/// any sandbox does.
#[derive(Clone, Debug)]
pub struct NewSession {
    pub id: SessionId,
    pub project: ProjectId,
    pub agent: AgentId,
    pub title: String,
    pub backend: String,
    pub exposed_ports: Vec<i32>,
    pub model: Option<String>,
    pub instructions: Option<String>,
    pub manifest: Option<ManifestSpec>,
    pub metadata: Map<String, Value>,
    pub image: Option<String>,
    pub secret_bindings: Vec<sandbox_agents_domain::tools::SecretBinding>,
    pub boot_snapshot_id: Option<Uuid>,
    pub idle_ttl_seconds: Option<i64>,
    pub max_lifetime_seconds: Option<i64>,
    pub resources: Option<SandboxResources>,
    /// The agent's and the environment's policies, copied now, and the session's own.
    pub network: SessionNetwork,
    /// Its own budget, else the agent's, copied now.
    pub budget: Option<Budget>,
    /// The agent version it pins (None: "latest"), and the pins of every agent it runs.
    pub agent_version: Option<i64>,
    pub agent_pins: Option<AgentPins>,
    /// The agent's MCP servers it narrows to; None: all.
    pub mcp_servers: Option<Vec<String>>,
}

#[tracing::instrument(skip_all, fields(session.id = %s.id))]
pub async fn insert(db: impl PgExecutor<'_>, s: &NewSession) -> Result<SessionRecord> {
    Ok(session_query!(
        "insert into sessions (id, project_id, agent_id, title, backend, exposed_ports, model, instructions, manifest,
                               metadata, image, secret_bindings, boot_snapshot_id, workdir,
                               idle_ttl_seconds, max_lifetime_seconds, resources, network, budget,
                               agent_version, agent_pins, mcp_servers)
         values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, '/workspace', $14, $15, $16, $17, $18,
                 $19, $20, $21)
         returning ",
        "",
        s.id.0,
        s.project.0,
        s.agent.0,
        &s.title,
        &s.backend,
        &s.exposed_ports,
        s.model.as_deref(),
        s.instructions.as_deref(),
        s.manifest.as_ref().map(Json) as _,
        Json(&s.metadata) as _,
        s.image.as_deref(),
        Json(&s.secret_bindings) as _,
        s.boot_snapshot_id,
        s.idle_ttl_seconds,
        s.max_lifetime_seconds,
        s.resources.as_ref().map(Json) as _,
        Json(&s.network) as _,
        s.budget.as_ref().map(Json) as _,
        s.agent_version,
        s.agent_pins.as_ref().map(Json) as _,
        s.mcp_servers.as_deref(),
    )
    .fetch_one(db)
    .await?)
}

#[tracing::instrument(skip_all, fields(session.id = %id))]
pub async fn get(
    db: impl PgExecutor<'_>,
    project: ProjectId,
    id: SessionId,
) -> Result<SessionRecord> {
    session_query!(
        "select ",
        " from sessions where project_id = $1 and id = $2",
        project.0,
        id.0,
    )
    .fetch_optional(db)
    .await?
    .ok_or(Error::NotFound)
}

/// Filters of `GET /api/sessions`.
#[derive(Clone, Debug, Default)]
pub struct ListFilter {
    pub agent: Option<AgentId>,
    pub status: Option<SessionStatus>,
    /// Only sessions created in this environment.
    pub environment: Option<Uuid>,
}

/// One page, newest first, and the number of rows matching the filter.
#[tracing::instrument(skip_all, fields(project.id = %project))]
pub async fn list(
    db: &mut sqlx::PgConnection,
    project: ProjectId,
    filter: &ListFilter,
    limit: i64,
    offset: i64,
) -> Result<(Vec<SessionRecord>, i64)> {
    let agent = filter.agent.map(|a| a.0);
    let status = filter.status;
    let environment = filter.environment;
    let rows = session_query!(
        "select ",
        " from sessions
         where project_id = $1 and ($2::uuid is null or agent_id = $2) and ($3::text is null or status = $3)
           and ($6::uuid is null or exists (select 1 from environment_sessions es
                                            where es.session_id = sessions.id and es.environment_id = $6))
         order by created_at desc, id desc
         limit $4 offset $5",
        project.0,
        agent,
        status as _,
        limit,
        offset,
        environment,
    )
    .fetch_all(&mut *db)
    .await?;
    let total = sqlx::query_scalar!(
        r#"select count(*) as "total!" from sessions
         where project_id = $1 and ($2::uuid is null or agent_id = $2) and ($3::text is null or status = $3)
           and ($4::uuid is null or exists (select 1 from environment_sessions es
                                            where es.session_id = sessions.id and es.environment_id = $4))"#,
        project.0,
        agent,
        status as _,
        environment,
    )
    .fetch_one(&mut *db)
    .await?;
    Ok((rows, total))
}

/// What `PATCH /api/sessions/{id}` changes; `None` leaves a field as it is.
#[derive(Clone, Debug, Default)]
pub struct SessionUpdate<'a> {
    pub title: Option<&'a str>,
    /// Merged: keys with a value are set, keys with null removed, others kept.
    pub metadata: Option<&'a Map<String, Value>>,
    /// The session's own network policy: `Some(None)` removes it. The inherited ones never
    /// change.
    pub network: Option<Option<&'a NetworkPolicy>>,
    /// A new budget: `Some(None)` removes it.
    pub budget: Option<Option<&'a Budget>>,
}

/// Changes the title, merges metadata and sets the session's own network policy, in one
/// statement. Works in any sandbox state.
#[tracing::instrument(skip_all, fields(session.id = %id))]
pub async fn update(
    db: impl PgExecutor<'_>,
    project: ProjectId,
    id: SessionId,
    u: &SessionUpdate<'_>,
) -> Result<SessionRecord> {
    let (set, remove): (Map<String, Value>, Vec<String>) = match u.metadata {
        None => (Map::new(), Vec::new()),
        Some(m) => (
            m.iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            m.iter()
                .filter(|(_, v)| v.is_null())
                .map(|(k, _)| k.clone())
                .collect(),
        ),
    };
    // `own` is written into the stored value (a row from before policies gets one with no
    // inherited layers, which is what it read as), so the inherited layers stay as created.
    let own = u.network.map(|own| Json(own.cloned()));
    session_query!(
        "update sessions
         set title = coalesce($3, title), metadata = (metadata || $4) - $5::text[],
             network = case when $6::jsonb is null then network
                            else jsonb_set(coalesce(network, '{\"inherited\": []}'), '{own}', $6) end,
             budget = case when $7 then $8 else budget end,
             updated_at = now()
         where project_id = $1 and id = $2
         returning ",
        "",
        project.0,
        id.0,
        u.title,
        Json(set) as _,
        &remove,
        own as _,
        u.budget.is_some(),
        u.budget.flatten().map(Json) as _,
    )
    .fetch_optional(db)
    .await?
    .ok_or(Error::NotFound)
}

/// Whether any session references the agent.
pub async fn count_for_agent(
    db: impl PgExecutor<'_>,
    project: ProjectId,
    agent: AgentId,
) -> Result<i64> {
    Ok(sqlx::query_scalar!(
        r#"select count(*) as "n!" from sessions where project_id = $1 and agent_id = $2"#,
        project.0,
        agent.0,
    )
    .fetch_one(db)
    .await?)
}

/// Deletes a session and, through the cascade, its runs and its log; tells live streams
/// in the same transaction, so they end once it commits.
#[tracing::instrument(skip_all, fields(session.id = %id))]
pub async fn delete(tx: &mut sqlx::PgConnection, project: ProjectId, id: SessionId) -> Result<()> {
    crate::garbage::queue_session(&mut *tx, project, id).await?;
    let r = sqlx::query!(
        "delete from sessions where project_id = $1 and id = $2",
        project.0,
        id.0
    )
    .execute(&mut *tx)
    .await?;
    if r.rows_affected() == 0 {
        return Err(Error::NotFound);
    }
    crate::events::notify_deleted(&mut *tx, id).await
}

// ---- For the runtime's workers, which act on sessions of every project. ----

/// A session by id, whatever its project: for background work that got the id from the
/// database itself, never from a caller.
pub async fn get_for_worker(
    db: impl PgExecutor<'_>,
    id: SessionId,
) -> Result<Option<SessionRecord>> {
    Ok(
        session_query!("select ", " from sessions where id = $1", id.0)
            .fetch_optional(db)
            .await?,
    )
}

/// The running session whose sandbox is `sandbox_id`, if any.
pub async fn running_with_sandbox(
    db: impl PgExecutor<'_>,
    sandbox_id: &str,
) -> Result<Option<SessionId>> {
    Ok(sqlx::query_scalar!(
        r#"select id as "id: SessionId" from sessions where status = 'running' and sandbox_id = $1"#,
        sandbox_id
    )
    .fetch_optional(db)
    .await?)
}

/// Sessions whose sandbox is booting or up.
pub async fn active(db: impl PgExecutor<'_>) -> Result<Vec<SessionRecord>> {
    Ok(session_query!(
        "select ",
        " from sessions where status in ('provisioning', 'running') order by created_at",
    )
    .fetch_all(db)
    .await?)
}

/// What a boot seals for its sandbox (by the credentials service): its secret variables and
/// the credentials the egress proxy applies for it. Every statement that takes the sandbox
/// away clears both, so neither outlives the sandbox.
#[derive(Clone, Copy, Debug, Default)]
pub struct SandboxSealed<'a> {
    pub secrets: Option<&'a [u8]>,
    pub egress_credentials: Option<&'a [u8]>,
}

/// A boot finished: the row says running from the same transaction that announces it.
/// `None` when the session is no longer provisioning (deleted, or stopped meanwhile).
pub async fn mark_running(
    tx: &mut sqlx::PgConnection,
    id: SessionId,
    sandbox_id: &str,
    workdir: &str,
    port_map: &std::collections::BTreeMap<String, PortTarget>,
    env: &std::collections::BTreeMap<String, String>,
    sealed: SandboxSealed<'_>,
) -> Result<Option<SessionRecord>> {
    Ok(session_query!(
        "update sessions
         set status = 'running', sandbox_id = $2, workdir = $3, port_map = $4, error = null,
             stopped_reason = null, boot_snapshot_id = null, last_used_at = now(), updated_at = now(),
             sandbox_env = $5, sandbox_secrets = $6, egress_credentials = $7
         where id = $1 and status = 'provisioning'
         returning ",
        "",
        id.0,
        sandbox_id,
        workdir,
        Json(port_map) as _,
        Json(env) as _,
        sealed.secrets,
        sealed.egress_credentials,
    )
    .fetch_optional(&mut *tx)
    .await?)
}

/// A boot failed. `None` when the session is no longer provisioning.
pub async fn mark_boot_failed(
    tx: &mut sqlx::PgConnection,
    id: SessionId,
    error: &str,
) -> Result<Option<SessionRecord>> {
    Ok(session_query!(
        "update sessions set status = 'error', error = $2, sandbox_id = null, port_map = '{}', sandbox_secrets = null, egress_credentials = null, updated_at = now()
         where id = $1 and status = 'provisioning'
         returning ",
        "",
        id.0,
        error,
    )
    .fetch_optional(&mut *tx)
    .await?)
}

/// The running session's sandbox `sandbox_id` ended without being asked to (killed,
/// evicted, its node lost): `error`, saying why. `None` when the session no longer runs on
/// that sandbox (a stop or another replica got there first).
pub async fn mark_sandbox_lost(
    tx: &mut sqlx::PgConnection,
    id: SessionId,
    sandbox_id: &str,
    error: &str,
) -> Result<Option<SessionRecord>> {
    Ok(session_query!(
        "update sessions set status = 'error', error = $3, sandbox_id = null, port_map = '{}', sandbox_secrets = null, egress_credentials = null, activity = 'idle', updated_at = now()
         where id = $1 and status = 'running' and sandbox_id = $2
         returning ",
        "",
        id.0,
        sandbox_id,
        error,
    )
    .fetch_optional(&mut *tx)
    .await?)
}

/// The sandbox is gone and the workspace archived (or lost, with `archive` None keeping the
/// previous archive). `None` when the session was not running or provisioning.
pub async fn mark_stopped(
    tx: &mut sqlx::PgConnection,
    id: SessionId,
    reason: StoppedReason,
    archive: Option<&str>,
) -> Result<Option<SessionRecord>> {
    Ok(session_query!(
        "update sessions
         set status = 'stopped', stopped_reason = $2, sandbox_id = null, port_map = '{}', sandbox_secrets = null, egress_credentials = null,
             workspace_archive = coalesce($3, workspace_archive), activity = 'idle', updated_at = now()
         where id = $1 and status in ('running', 'provisioning')
         returning ",
        "",
        id.0,
        reason as _,
        archive,
    )
    .fetch_optional(&mut *tx)
    .await?)
}

/// Start: a stopped or failed session goes back to provisioning (the boot follows). Returns
/// the row as it now is; a session already booting or running is returned unchanged.
pub async fn mark_provisioning(
    db: impl PgExecutor<'_> + Copy,
    project: ProjectId,
    id: SessionId,
) -> Result<(SessionRecord, bool)> {
    let changed = session_query!(
        "update sessions set status = 'provisioning', error = null, stopped_reason = null, updated_at = now(),
                            admitted = false, queued_at = null
         where project_id = $1 and id = $2 and status in ('stopped', 'error')
           and (max_lifetime_seconds is null
                or created_at + make_interval(secs => max_lifetime_seconds) > now())
         returning ",
        "",
        project.0,
        id.0,
    )
    .fetch_optional(db)
    .await?;
    match changed {
        Some(s) => Ok((s, true)),
        None => Ok((get(db, project, id).await?, false)),
    }
}

/// The sandbox was used now: the idle reaper measures from here.
pub async fn touch(db: impl PgExecutor<'_>, id: SessionId) -> Result<()> {
    sqlx::query!(
        "update sessions set last_used_at = now() where id = $1",
        id.0
    )
    .execute(db)
    .await?;
    Ok(())
}

/// The running sessions whose sandbox is one of `sandboxes` (ids), with it.
pub async fn running_in_sandboxes(
    db: impl PgExecutor<'_>,
    sandboxes: &[String],
) -> Result<Vec<RunningSandbox>> {
    let rows = sqlx::query!(
        r#"select id, sandbox_id as "sandbox_id!", (resources->>'disk_mb')::bigint as disk_mb
         from sessions
         where status = 'running' and sandbox_id = any($1)"#,
        sandboxes,
    )
    .fetch_all(db)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| RunningSandbox {
            session: SessionId(r.id),
            sandbox: r.sandbox_id,
            disk_mb: r.disk_mb,
        })
        .collect())
}

/// A running session's sandbox, for the disk limit.
#[derive(Clone, Debug)]
pub struct RunningSandbox {
    pub session: SessionId,
    pub sandbox: String,
    /// The session's own disk limit (`resources.disk_mb`), if it set one.
    pub disk_mb: Option<i64>,
}

/// Whether any running session set a disk limit of its own: without a server-wide limit, the
/// disk check lists the sandboxes' sizes (costly for the backend: Docker walks every layer)
/// only then.
pub async fn any_running_with_disk_limit(db: impl PgExecutor<'_>) -> Result<bool> {
    let any = sqlx::query_scalar!(
        r#"select exists (select 1 from sessions
                          where status = 'running' and resources->>'disk_mb' is not null) as "any!""#
    )
    .fetch_one(db)
    .await?;
    Ok(any)
}

/// Running, idle sessions unused for longer than their own `idle_ttl_seconds`, else their
/// agent's, else `default_ttl` (0 means never).
pub async fn idle_expired(
    db: impl PgExecutor<'_>,
    default_ttl_secs: i64,
) -> Result<Vec<SessionId>> {
    let rows = sqlx::query_scalar!(
        "select s.id from sessions s join agents a on a.id = s.agent_id
         where s.status = 'running' and s.activity = 'idle'
           and coalesce(s.idle_ttl_seconds, (a.spec->>'idle_ttl_seconds')::bigint, $1) > 0
           and s.last_used_at < now() - make_interval(secs => coalesce(s.idle_ttl_seconds, (a.spec->>'idle_ttl_seconds')::bigint, $1))",
        default_ttl_secs,
    )
    .fetch_all(db)
    .await?;
    Ok(rows.into_iter().map(SessionId).collect())
}

/// Whether one running session is (still) past its idle TTL, by the same rule as
/// [`idle_expired`]: the reaper asks again under the session's lock, since a use may have
/// been recorded between its query and the stop.
pub async fn is_idle_expired(
    db: impl PgExecutor<'_>,
    id: SessionId,
    default_ttl_secs: i64,
) -> Result<bool> {
    let row = sqlx::query_scalar!(
        "select s.id from sessions s join agents a on a.id = s.agent_id
         where s.id = $2 and s.status = 'running' and s.activity = 'idle'
           and coalesce(s.idle_ttl_seconds, (a.spec->>'idle_ttl_seconds')::bigint, $1) > 0
           and s.last_used_at < now() - make_interval(secs => coalesce(s.idle_ttl_seconds, (a.spec->>'idle_ttl_seconds')::bigint, $1))",
        default_ttl_secs,
        id.0,
    )
    .fetch_optional(db)
    .await?;
    Ok(row.is_some())
}

/// Sessions with a sandbox (running or booting) whose `max_lifetime_seconds` has passed.
pub async fn lifetime_expired(db: impl PgExecutor<'_>) -> Result<Vec<SessionId>> {
    let rows = sqlx::query_scalar!(
        "select id from sessions
         where max_lifetime_seconds is not null and status in ('provisioning', 'running')
           and created_at + make_interval(secs => max_lifetime_seconds) <= now()",
    )
    .fetch_all(db)
    .await?;
    Ok(rows.into_iter().map(SessionId).collect())
}

/// Asleep sessions (stopped for idleness) whose lifetime has passed are stopped for good:
/// their `stopped_reason` becomes `lifetime`, so a message no longer wakes them. Returns how
/// many.
pub async fn retire_asleep_past_lifetime(db: impl PgExecutor<'_>) -> Result<u64> {
    Ok(sqlx::query!(
        "update sessions set stopped_reason = 'lifetime', updated_at = now()
         where max_lifetime_seconds is not null and status = 'stopped' and stopped_reason = 'idle'
           and created_at + make_interval(secs => max_lifetime_seconds) <= now()",
    )
    .execute(db)
    .await?
    .rows_affected())
}

/// Which of `sandboxes` (ids) a session records as its sandbox: the orphan sweep's
/// "does anybody own this pool sandbox".
pub async fn owning_sandboxes(
    db: impl PgExecutor<'_>,
    sandboxes: &[String],
) -> Result<Vec<String>> {
    Ok(sqlx::query_scalar!(
        r#"select sandbox_id as "sandbox_id!" from sessions where sandbox_id = any($1)"#,
        sandboxes,
    )
    .fetch_all(db)
    .await?)
}

/// Every session id, for the reconciler's "does anybody own this sandbox".
pub async fn existing(
    db: impl PgExecutor<'_>,
    ids: &[Uuid],
) -> Result<Vec<(Uuid, Option<String>)>> {
    let rows = sqlx::query!(
        "select id, sandbox_id from sessions where id = any($1)",
        ids
    )
    .fetch_all(db)
    .await?;
    Ok(rows.into_iter().map(|r| (r.id, r.sandbox_id)).collect())
}

/// Restore: the next boot starts from the snapshot (its archive, and its image when it has
/// one) instead of the session's own workspace.
pub async fn prepare_restore(
    db: impl PgExecutor<'_>,
    id: SessionId,
    snapshot: Uuid,
    image: Option<&str>,
) -> Result<()> {
    sqlx::query!(
        "update sessions
         set status = 'provisioning', sandbox_id = null, port_map = '{}', sandbox_secrets = null, egress_credentials = null, error = null, stopped_reason = null,
             -- A running session keeps its room under the sandbox limits through a restore.
             admitted = (status = 'running' or (status = 'provisioning' and admitted)), queued_at = null,
             boot_snapshot_id = $2, workspace_archive = null, image = coalesce($3, image), updated_at = now()
         where id = $1",
        id.0,
        snapshot,
        image,
    )
    .execute(db)
    .await?;
    Ok(())
}

/// Records what a boot staged of the agent's skills source; call it in the transaction that
/// marks the boot running (`None` clears what an earlier boot staged).
pub async fn set_skills(
    tx: &mut sqlx::PgConnection,
    id: SessionId,
    skills: Option<&sandbox_agents_domain::skills::SessionSkills>,
) -> Result<()> {
    sqlx::query!(
        "update sessions set skills = $2 where id = $1",
        id.0,
        skills.map(Json) as _,
    )
    .execute(&mut *tx)
    .await?;
    Ok(())
}

/// The skills the session's last boot staged; `None` when it staged none.
pub async fn skills(
    db: impl PgExecutor<'_>,
    id: SessionId,
) -> Result<Option<sandbox_agents_domain::skills::SessionSkills>> {
    let row = sqlx::query_scalar!(
        r#"select skills as "skills: Json<sandbox_agents_domain::skills::SessionSkills>"
           from sessions where id = $1"#,
        id.0,
    )
    .fetch_optional(db)
    .await?;
    Ok(row.flatten().map(|j| j.0))
}

/// Who holds a session's conversation after handoffs: the holder's slug (`None`: the session's
/// own agent) and the agents that handed over on the way, oldest first.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Holder {
    pub agent: Option<String>,
    pub stack: Vec<String>,
}

/// The session's conversation holder (the default for a session that is gone).
pub async fn holder(db: impl PgExecutor<'_>, id: SessionId) -> Result<Holder> {
    let row = sqlx::query!(
        r#"select holder, handoff_stack as "handoff_stack: Json<Vec<String>>"
           from sessions where id = $1"#,
        id.0,
    )
    .fetch_optional(db)
    .await?;
    Ok(row
        .map(|r| Holder {
            agent: r.holder,
            stack: r.handoff_stack.0,
        })
        .unwrap_or_default())
}

/// Records a handoff's result, in the transaction that appends its `agent.handoff` event.
pub async fn set_holder(tx: &mut sqlx::PgConnection, id: SessionId, h: &Holder) -> Result<()> {
    sqlx::query!(
        "update sessions set holder = $2, handoff_stack = $3 where id = $1",
        id.0,
        h.agent.as_deref(),
        Json(&h.stack) as _,
    )
    .execute(&mut *tx)
    .await?;
    Ok(())
}

/// Sets the version of its agent the session runs (None: "latest") and its pins. `NotFound`
/// when the project has no such session.
#[tracing::instrument(skip_all, fields(session.id = %id))]
pub async fn set_agent_version(
    db: impl PgExecutor<'_>,
    project: ProjectId,
    id: SessionId,
    version: Option<i64>,
    pins: Option<&AgentPins>,
) -> Result<()> {
    let done = sqlx::query!(
        "update sessions set agent_version = $3, agent_pins = $4, updated_at = now()
         where project_id = $1 and id = $2",
        project.0,
        id.0,
        version,
        pins.map(Json) as _,
    )
    .execute(db)
    .await?;
    if done.rows_affected() == 0 {
        return Err(Error::NotFound);
    }
    Ok(())
}
