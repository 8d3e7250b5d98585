//! The E2B-compatible API's service (issue 40): each E2B sandbox is a session of ours, so it
//! has our projects, keys, limits, egress policy, usage and event log, and shows in the UI.
//!
//! Mapping:
//! * `templateID` picks the session's agent and environment: `base` (the default) is the
//!   project's `e2b` agent with its own environment (none: the server's default image);
//!   `code-interpreter-v1` is the project's `e2b-code-interpreter` agent, which has the
//!   `python` capability and so boots in the built-in `analysis` environment; any other
//!   template names an environment of the project (by id or name) for the `e2b` agent. Both
//!   agents are made on first use and are ordinary agents people may edit (image, network,
//!   limits);
//! * `timeout` is the session's lifetime (`max_lifetime_seconds`), from now: set again by a
//!   timeout call or a connect; a sandbox whose lifetime has passed is gone (a kill ends it
//!   now);
//! * pause is our stop (the workspace is archived; a process's memory is not kept), connect
//!   is our start (the workspace comes back); sandboxes are never released for idleness;
//! * `envVars` are the session's manifest variables, `metadata` its metadata,
//!   `allow_internet_access: false` a policy of the session's own that opens nothing;
//! * the envd access token is a keyed hash of the session's id under the master key: nothing
//!   to store, and nothing one sandbox's token says about another's.

use sandbox_agents_domain::agent::AgentRef;
pub mod envd;
pub mod interpreter;

use sandbox_agents_domain::e2b::{
    check_timeout, ConnectSandbox, NewSandbox, SandboxCreated, SandboxDetail, SandboxState,
    BASE_TEMPLATE, CODE_INTERPRETER_TEMPLATE, DEFAULT_TIMEOUT_SECONDS, ENVD_VERSION,
    MAX_LIST_LIMIT,
};
use sandbox_agents_domain::session::{SessionCreate, SessionStatus, StoppedReason};
use sandbox_agents_domain::{ProjectId, SessionId};
use sandbox_agents_errors::{Result, ServiceError};
use sandbox_agents_sessions::Sessions;
use sandbox_agents_store::e2b::{self as store, Cursor, E2bSandboxRecord};
use sandbox_agents_store::{agents, Db};
use serde_json::{json, Map, Value};
use std::time::Duration;
use time::OffsetDateTime;

/// How long create (and a connect that resumes) waits for the sandbox to run: E2B's
/// create answers with a sandbox that takes commands.
pub const READY_WITHIN: Duration = Duration::from_secs(300);
/// Most metadata pairs and environment variables a create takes.
pub const MAX_METADATA: usize = 64;
pub const MAX_ENV_VARS: usize = 256;

const AGENT: &str = "e2b";
const INTERPRETER_AGENT: &str = "e2b-code-interpreter";

/// One page of a list, and where the next begins.
pub struct Page {
    pub sandboxes: Vec<SandboxDetail>,
    pub next_token: Option<String>,
}

/// What a list asks for.
#[derive(Default)]
pub struct ListQuery {
    pub metadata: Map<String, Value>,
    /// Empty: both states.
    pub states: Vec<SandboxState>,
    pub next_token: Option<String>,
    pub limit: Option<i64>,
}

/// The next event the session's log gets (any: the caller re-reads what it waits for); never,
/// once live events are gone.
async fn next_event(live: &mut Option<sandbox_agents_store::Subscription>) {
    use sandbox_agents_store::LiveEvent;
    let Some(sub) = live else {
        return std::future::pending().await;
    };
    match sub.rx.recv().await {
        Ok(LiveEvent::Closed) | Err(tokio::sync::broadcast::error::RecvError::Closed) => {
            *live = None;
        }
        _ => {}
    }
}

#[derive(Clone)]
pub struct E2b {
    db: Db,
    /// Live events, which a create's wait for its sandbox wakes on (None: it polls).
    hub: Option<sandbox_agents_store::EventHub>,
    sessions: Sessions,
    /// `--e2b-domain`: the domain of sandbox hosts (`{port}-{id}.{domain}`), when served.
    domain: Option<String>,
    /// The processes E2B clients started through this server process, while they run.
    processes: envd::Processes,
}

impl E2b {
    pub fn new(
        db: Db,
        sessions: Sessions,
        hub: Option<sandbox_agents_store::EventHub>,
        domain: Option<String>,
    ) -> Self {
        Self {
            db,
            hub,
            sessions,
            domain,
            processes: envd::Processes::default(),
        }
    }

    /// `--e2b-domain`, when sandboxes are also reached by host name (`{port}-{id}.{domain}`).
    pub fn domain(&self) -> Option<&str> {
        self.domain.as_deref()
    }

    /// The envd access token of sandbox `id`.
    pub fn access_token(&self, id: SessionId) -> String {
        self.token("envd", id)
    }

    /// The traffic access token of sandbox `id`: what the SDKs send to the code interpreter's
    /// `/contexts`, which carry no access token.
    pub fn traffic_token(&self, id: SessionId) -> String {
        self.token("traffic", id)
    }

    /// A keyed hash of the sandbox's id under the master key, one label per kind of token.
    fn token(&self, kind: &str, id: SessionId) -> String {
        let hash = self
            .sessions
            .credentials()
            .master_key()
            .keyed_hash(format!("sandbox-agents e2b {kind} token v1:{}", id.0).as_bytes());
        hex::encode(hash)
    }

    /// Creates a sandbox and waits until it runs.
    #[tracing::instrument(skip_all, fields(project.id = %project))]
    pub async fn create(&self, project: ProjectId, req: NewSandbox) -> Result<SandboxCreated> {
        let timeout = check_timeout(req.timeout.unwrap_or(DEFAULT_TIMEOUT_SECONDS))
            .map_err(ServiceError::BadRequest)?;
        if req.auto_pause == Some(true) {
            return Err(ServiceError::BadRequest(
                "autoPause is not served: a sandbox ends at its timeout (pause it yourself to keep its files)".into(),
            ));
        }
        let metadata = req.metadata.unwrap_or_default();
        let env = req.env_vars.unwrap_or_default();
        if metadata.len() > MAX_METADATA || env.len() > MAX_ENV_VARS {
            return Err(ServiceError::BadRequest(format!(
                "at most {MAX_METADATA} metadata pairs and {MAX_ENV_VARS} envVars"
            )));
        }
        let template = req
            .template_id
            .filter(|t| !t.trim().is_empty())
            .unwrap_or_else(|| BASE_TEMPLATE.to_owned());
        if template.len() > 200 {
            return Err(ServiceError::BadRequest(
                "templateID is at most 200 bytes".into(),
            ));
        }
        let agent = self.agent_for(project, &template).await?;
        let environment = match template.as_str() {
            BASE_TEMPLATE | CODE_INTERPRETER_TEMPLATE => None,
            other => Some(other.to_owned()),
        };
        let mut body = json!({
            "agent_id": agent,
            "title": format!("E2B sandbox ({template})"),
            "metadata": metadata,
            "environment_id": environment,
            "manifest": {"environment": env},
            "idle_ttl_seconds": 0,
            "max_lifetime_seconds": timeout,
        });
        if req.allow_internet_access == Some(false) {
            body["network"] = json!({"egress": "none"});
        }
        let body: SessionCreate = serde_json::from_value(body)
            .map_err(|e| ServiceError::BadRequest(format!("the sandbox's settings: {e}")))?;
        let prepared = self.sessions.prepare(project, body).await?;
        let id = prepared.id();
        let mut tx = self.db.begin().await?;
        let row = self.sessions.insert_prepared(&mut tx, &prepared).await?;
        store::insert(&mut *tx, project, id, &template).await?;
        tx.commit().await?;
        self.sessions.after_create(&row);
        tracing::info!(session.id = %id, %template, "created an E2B sandbox");
        if let Err(e) = self.wait_running(project, id).await {
            // A sandbox that could not start is no sandbox: ended, so it lists nowhere, and
            // kept as a session whose error says why.
            let _ = store::end(&self.db, project, id).await;
            return Err(e);
        }
        Ok(self.created(id, template))
    }

    /// A sandbox that has not ended.
    pub async fn get(&self, project: ProjectId, id: SessionId) -> Result<SandboxDetail> {
        let row = self.live(project, id).await?;
        let mut detail = self.detail(&row);
        detail.envd_access_token = Some(self.access_token(id));
        Ok(detail)
    }

    /// One page of the project's sandboxes, oldest first.
    pub async fn list(&self, project: ProjectId, q: ListQuery) -> Result<Page> {
        let limit = q.limit.unwrap_or(MAX_LIST_LIMIT);
        if !(1..=MAX_LIST_LIMIT).contains(&limit) {
            return Err(ServiceError::BadRequest(format!(
                "limit is 1 to {MAX_LIST_LIMIT}"
            )));
        }
        let after = q.next_token.as_deref().map(parse_token).transpose()?;
        let states: Vec<&str> = if q.states.is_empty() {
            vec!["running", "paused"]
        } else {
            q.states.iter().map(|s| s.as_str()).collect()
        };
        // One more than a page says whether another follows.
        let mut rows =
            store::list(&self.db, project, &q.metadata, &states, after, limit + 1).await?;
        let more = rows.len() as i64 > limit;
        rows.truncate(limit as usize);
        let next_token = more.then(|| rows.last().map(token)).flatten();
        Ok(Page {
            sandboxes: rows.iter().map(|r| self.detail(r)).collect(),
            next_token,
        })
    }

    /// Kills a sandbox: its lifetime ends now and its sandbox is stopped. `NotFound` when it
    /// does not exist or has ended already.
    #[tracing::instrument(skip_all, fields(session.id = %id))]
    pub async fn kill(&self, project: ProjectId, id: SessionId) -> Result<()> {
        self.live(project, id).await?;
        store::end(&self.db, project, id).await?;
        // Ended already: a stop that cannot run now (a boot or a start holds the session)
        // is left to the lifetime sweep, which stops it as soon as it can.
        match self
            .sessions
            .stop(Some(project), id, StoppedReason::Lifetime)
            .await
        {
            Ok(_) => Ok(()),
            Err(ServiceError::Conflict(why)) => {
                tracing::info!(session.id = %id, %why, "a killed sandbox is stopped by the lifetime sweep");
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    /// The sandbox now ends `seconds` from now.
    pub async fn set_timeout(&self, project: ProjectId, id: SessionId, seconds: i64) -> Result<()> {
        let seconds = check_timeout(seconds).map_err(ServiceError::BadRequest)?;
        self.live(project, id).await?;
        store::end_in(&self.db, project, id, seconds).await?;
        self.sessions
            .schedule_lifetime_end(OffsetDateTime::now_utc() + time::Duration::seconds(seconds));
        Ok(())
    }

    /// Pauses a running sandbox (our stop); `Conflict` when it is paused already.
    #[tracing::instrument(skip_all, fields(session.id = %id))]
    pub async fn pause(&self, project: ProjectId, id: SessionId) -> Result<()> {
        let row = self.live(project, id).await?;
        if state_of(row.status) == SandboxState::Paused {
            return Err(ServiceError::Conflict(format!(
                "sandbox {} is paused already",
                id.0
            )));
        }
        self.sessions
            .stop(Some(project), id, StoppedReason::Requested)
            .await?;
        Ok(())
    }

    /// Connects to a sandbox, resuming it when paused (our start) and waiting until it runs;
    /// with `timeout`, its lifetime ends that long from now. True when it was resumed.
    #[tracing::instrument(skip_all, fields(session.id = %id))]
    /// `only_resume`: the older resume call, a 409 (changing nothing) when it runs already.
    pub async fn connect(
        &self,
        project: ProjectId,
        id: SessionId,
        req: ConnectSandbox,
        only_resume: bool,
    ) -> Result<(bool, SandboxCreated)> {
        let timeout = req
            .timeout
            .map(check_timeout)
            .transpose()
            .map_err(ServiceError::BadRequest)?;
        let row = self.live(project, id).await?;
        let resumed = matches!(row.status, SessionStatus::Stopped | SessionStatus::Error);
        if only_resume && !resumed {
            return Err(ServiceError::Conflict(format!(
                "sandbox {} is running already",
                id.0
            )));
        }
        if let Some(t) = timeout {
            store::end_in(&self.db, project, id, t).await?;
            self.sessions
                .schedule_lifetime_end(OffsetDateTime::now_utc() + time::Duration::seconds(t));
        }
        if resumed {
            self.sessions.start(project, id).await?;
        }
        self.wait_running(project, id).await?;
        Ok((resumed, self.created(id, row.template)))
    }

    /// The project's sandbox `id` that has not ended; `NotFound` otherwise.
    async fn live(&self, project: ProjectId, id: SessionId) -> Result<E2bSandboxRecord> {
        match store::get(&self.db, project, id).await {
            Ok(row) if !row.ended => Ok(row),
            Ok(_) | Err(sandbox_agents_store::Error::NotFound) => Err(ServiceError::NotFound(
                format!("sandbox {} not found", id.0),
            )),
            Err(e) => Err(e.into()),
        }
    }

    /// Polls the session until it runs (or its boot fails), within [`READY_WITHIN`].
    async fn wait_running(&self, project: ProjectId, id: SessionId) -> Result<()> {
        let deadline = tokio::time::Instant::now() + READY_WITHIN;
        // Subscribed before the first read, so a status written in between wakes the wait;
        // without live events (the hub's connection lost) it polls.
        let mut live = match &self.hub {
            Some(hub) => hub.subscribe(id).await.ok(),
            None => None,
        };
        let mut pause = Duration::from_millis(20);
        loop {
            let row = sandbox_agents_store::sessions::get(&self.db, project, id).await?;
            match row.status {
                SessionStatus::Running => return Ok(()),
                // The boot's reason is the caller's to read (a missing image, a build that
                // failed), not an internal error hidden behind a reference.
                SessionStatus::Error => {
                    return Err(ServiceError::Conflict(format!(
                        "the sandbox could not start: {}",
                        row.error.unwrap_or_default()
                    )))
                }
                SessionStatus::Stopped => {
                    return Err(ServiceError::Conflict(format!(
                        "sandbox {} stopped while it started",
                        id.0
                    )))
                }
                SessionStatus::Provisioning => {}
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(ServiceError::Conflict(format!(
                    "sandbox {} did not start within {} s",
                    id.0,
                    READY_WITHIN.as_secs()
                )));
            }
            tokio::select! {
                _ = tokio::time::sleep(pause) => {}
                _ = next_event(&mut live) => {}
            }
            pause = (pause * 2).min(Duration::from_millis(250));
        }
    }

    /// The agent a template's sandboxes run under, made on first use.
    async fn agent_for(&self, project: ProjectId, template: &str) -> Result<String> {
        let (slug, spec) = if template == CODE_INTERPRETER_TEMPLATE {
            (
                INTERPRETER_AGENT,
                json!({"slug": INTERPRETER_AGENT, "name": "E2B code interpreter",
                       "description": "Made by the server for E2B sandboxes of the code-interpreter-v1 template: they boot in the analysis environment. Edit it to change their image, network or limits.",
                       "capabilities": ["python"]}),
            )
        } else {
            (
                AGENT,
                json!({"slug": AGENT, "name": "E2B sandboxes",
                       "description": "Made by the server for sandboxes created through the E2B API. Edit it to change their image, network or limits."}),
            )
        };
        let slug_ref = AgentRef::parse(slug);
        match agents::get(&self.db, project, &slug_ref).await {
            Ok(_) => return Ok(slug.to_owned()),
            Err(sandbox_agents_store::Error::NotFound) => {}
            Err(e) => return Err(e.into()),
        }
        let body: sandbox_agents_domain::agent::AgentCreate =
            serde_json::from_value(spec).expect("the built-in agent's body");
        let (slug_parsed, spec) = body.into_spec().expect("a valid built-in agent");
        match sandbox_agents_agent::definitions::create(
            &self.db,
            project,
            &slug_parsed,
            spec,
            &[],
            None,
        )
        .await
        {
            // Two first creates at once: the other made it.
            Ok(_) | Err(ServiceError::Conflict(_)) => Ok(slug.to_owned()),
            Err(ServiceError::Store(sandbox_agents_store::Error::Conflict(_))) => {
                Ok(slug.to_owned())
            }
            Err(e) => Err(e),
        }
    }

    fn created(&self, id: SessionId, template: String) -> SandboxCreated {
        SandboxCreated {
            alias: template.clone(),
            template_id: template,
            sandbox_id: id.0.to_string(),
            client_id: "sandbox-agents".into(),
            envd_version: ENVD_VERSION.into(),
            envd_access_token: self.access_token(id),
            traffic_access_token: Some(self.traffic_token(id)),
            domain: self.domain.clone(),
        }
    }

    fn detail(&self, row: &E2bSandboxRecord) -> SandboxDetail {
        let settings = self.sessions.settings();
        let resources = row.resources.as_ref().map(|r| &r.0);
        let cpus = resources
            .and_then(|r| r.cpus)
            .unwrap_or(settings.limits.cpus);
        let memory_mb = resources
            .and_then(|r| r.memory_mb)
            .unwrap_or(settings.limits.memory_bytes / (1024 * 1024));
        let disk_mb = resources
            .and_then(|r| r.disk_mb)
            .or(settings.disk_limit.map(|b| (b / (1024 * 1024)) as i64))
            .unwrap_or(0);
        let end_at = row
            .max_lifetime_seconds
            .map(|s| row.created_at + time::Duration::seconds(s))
            .unwrap_or(row.created_at);
        SandboxDetail {
            template_id: row.template.clone(),
            sandbox_id: row.id.0.to_string(),
            client_id: "sandbox-agents".into(),
            alias: row.template.clone(),
            started_at: row.created_at,
            end_at,
            envd_version: ENVD_VERSION.into(),
            cpu_count: cpus.ceil() as i64,
            memory_mb,
            disk_size_mb: disk_mb,
            state: state_of(row.status),
            metadata: row.metadata.0.clone(),
            envd_access_token: None,
            domain: self.domain.clone(),
        }
    }
}

fn state_of(status: SessionStatus) -> SandboxState {
    match status {
        SessionStatus::Provisioning | SessionStatus::Running => SandboxState::Running,
        SessionStatus::Stopped | SessionStatus::Error => SandboxState::Paused,
    }
}

/// A list's `x-next-token`: where the last row of the page sits.
fn token(row: &E2bSandboxRecord) -> String {
    format!(
        "{}.{}",
        row.listed_at.unix_timestamp_nanos(),
        row.id.0.simple()
    )
}

fn parse_token(raw: &str) -> Result<Cursor> {
    let bad = || ServiceError::BadRequest(format!("'{raw}' is not a nextToken this server gave"));
    let (at, id) = raw.split_once('.').ok_or_else(bad)?;
    let nanos: i128 = at.parse().map_err(|_| bad())?;
    Ok(Cursor {
        created_at: OffsetDateTime::from_unix_timestamp_nanos(nanos).map_err(|_| bad())?,
        session: uuid::Uuid::try_parse(id).map_err(|_| bad())?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_round_trip_and_garbage_is_refused() {
        let at = OffsetDateTime::from_unix_timestamp_nanos(1_765_000_000_123_456_789).unwrap();
        let id = uuid::Uuid::new_v4();
        let raw = format!("{}.{}", at.unix_timestamp_nanos(), id.simple());
        assert_eq!(
            parse_token(&raw).unwrap(),
            Cursor {
                created_at: at,
                session: id
            }
        );
        for bad in ["", "x", "1.y", "z.00000000000000000000000000000000"] {
            assert!(parse_token(bad).is_err(), "{bad}");
        }
    }
}
