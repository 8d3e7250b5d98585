//! Starting a turn: `POST .../messages` claims the session (`activity: busy`), inserts the run
//! and appends `user.message` in **one** transaction, so a second message meanwhile gets 409;
//! a session's first prompt starts the same way inside its boot's transaction. The run is
//! then driven in the background (`drive.rs`).

use crate::client_tools;
use crate::liveness::Driver;
use crate::Runs;
use sandbox_agents_domain::event::{EventType, NewEvent};
use sandbox_agents_domain::session::SessionStatus;
use sandbox_agents_domain::tools::ClientTool;
use sandbox_agents_domain::Violations;
use sandbox_agents_domain::{ProjectId, RunId, SessionId};
use sandbox_agents_errors::{Result, ServiceError};
use sandbox_agents_sessions::not_found;
use sandbox_agents_store::agents;
use sandbox_agents_store::events;
use sandbox_agents_store::runs::{self, NewRun, Refusal, RunRecord};
use sandbox_agents_store::sessions::{self, SessionRecord};
use serde_json::{json, Value};
use tracing::Instrument;

/// Model steps a run may take when the message does not say.
pub const DEFAULT_MAX_TURNS: i64 = 25;
/// The most a message may ask for.
pub const MAX_MAX_TURNS: i64 = 1000;

/// A message checked for its session ([`Runs::prepare_message`]).
pub struct PreparedMessage {
    project: ProjectId,
    id: SessionId,
    prompt: String,
    max_turns: i32,
    tools: Vec<ClientTool>,
    driver: Driver,
}

impl Runs {
    /// Starts a turn: 409 unless the session is running and idle, or asleep (stopped or idle
    /// released, which the turn wakes). Returns
    /// the `running` run at once; a background worker drives the loop (waking an asleep
    /// session first).
    #[tracing::instrument(skip_all, fields(session.id = %id))]
    pub async fn send_message(
        &self,
        project: ProjectId,
        id: SessionId,
        prompt: String,
        max_turns: Option<i64>,
        client_tools: &[ClientTool],
    ) -> Result<RunRecord> {
        let message = self
            .prepare_message(project, id, prompt, max_turns, client_tools)
            .await?;
        let mut tx = self.inner.db.begin().await?;
        let (run, wake) = self
            .start_prepared(&mut tx, &message)
            .await?
            .map_err(|r| ServiceError::Conflict(refusal_message(r).into()))?;
        tx.commit().await?;
        self.spawn_drive(project, id, run.id, wake);
        tracing::info!(run.id = %run.id, wake, "run started");
        Ok(run)
    }

    /// Checks a message for session `id` (its limits, its client tools against its agent at
    /// the version it runs, the project's month) before anything is written: what
    /// [`Runs::start_prepared`] starts, in a transaction a caller may share (a schedule's
    /// fire starts its run in the transaction that records the fire).
    pub async fn prepare_message(
        &self,
        project: ProjectId,
        id: SessionId,
        prompt: String,
        max_turns: Option<i64>,
        client_tools: &[ClientTool],
    ) -> Result<PreparedMessage> {
        let max_turns = max_turns.unwrap_or(DEFAULT_MAX_TURNS);
        if !(1..=MAX_MAX_TURNS).contains(&max_turns) {
            return Err(ServiceError::field(
                &["max_turns"],
                format!("max_turns is at least 1 and at most {MAX_MAX_TURNS}"),
                Value::from(max_turns),
            ));
        }
        let mut v = Violations::new();
        sandbox_agents_domain::tools::validate_client_tools(client_tools, "client_tools", &mut v);
        v.into_result().map_err(ServiceError::Validation)?;
        let st = &self.inner;
        let session = sessions::get(&st.db, project, id)
            .await
            .map_err(|e| not_found(e, id))?;
        let agent = agents::resolve(
            &st.db,
            project,
            &sandbox_agents_domain::agent::AgentRef::Id(session.agent_id),
            session.pins(),
        )
        .await?;
        let mut v = Violations::new();
        sandbox_agents_domain::agent::python_tool_is_free(
            agent.spec.capabilities.as_deref(),
            client_tools,
            "client_tools",
            &mut v,
        );
        v.into_result().map_err(ServiceError::Validation)?;
        let tools = client_tools::merge(&agent.spec.client_tools, client_tools);
        // Before anything is written: a project over its month's limit starts no turn.
        sandbox_agents_sessions::refuse_over_monthly_limit(&st.db, project).await?;
        let driver = self.driver(&st.db, project).await?;
        Ok(PreparedMessage {
            project,
            id,
            prompt,
            max_turns: max_turns as i32,
            tools,
            driver,
        })
    }

    /// In `tx`: claims the session and starts the prepared message's run (`user.message`
    /// with it). `Ok(Err(refusal))` when the session cannot take it now (busy, parked,
    /// stopped...); else the run and whether its session must be woken. The caller commits,
    /// then drives it ([`Runs::spawn_drive`]).
    pub async fn start_prepared(
        &self,
        tx: &mut sqlx::PgConnection,
        m: &PreparedMessage,
    ) -> Result<std::result::Result<(RunRecord, bool), Refusal>> {
        let claimed = runs::claim_session(tx, m.project, m.id)
            .await
            .map_err(|e| not_found(e, m.id))?;
        let status = match claimed {
            Ok(s) => s,
            Err(r) => return Ok(Err(r)),
        };
        let run = start_run(
            tx,
            m.id,
            RunId::new(),
            &m.prompt,
            m.max_turns,
            &m.tools,
            m.driver,
        )
        .await?;
        Ok(Ok((run, status == SessionStatus::Stopped)))
    }

    /// `create(prompt=...)`: in the transaction that records the first boot's
    /// `session.status_running`, starts the first turn (claim, run, `user.message`), so its
    /// events follow the boot's and its terminal event is the first in the log. The caller
    /// drives the returned run after commit.
    pub(crate) async fn start_first_prompt(
        &self,
        tx: &mut sqlx::PgConnection,
        s: &SessionRecord,
    ) -> Result<Option<RunId>> {
        let id = s.session_id();
        let project = s.project_id;
        let Some(prompt) = runs::take_first_prompt(tx, id).await? else {
            return Ok(None);
        };
        let agent = agents::resolve(
            &mut *tx,
            project,
            &sandbox_agents_domain::agent::AgentRef::Id(s.agent_id),
            s.pins(),
        )
        .await?;
        let driver = self.driver(&mut *tx, project).await?;
        if let Err(r) = runs::claim_session(tx, project, id).await? {
            tracing::warn!(session.id = %id, refusal = ?r, "the first prompt could not start");
            return Ok(None);
        }
        let run = RunId::new();
        let max_turns = DEFAULT_MAX_TURNS as i32;
        start_run(
            tx,
            id,
            run,
            &prompt,
            max_turns,
            &agent.spec.client_tools,
            driver,
        )
        .await?;
        tracing::info!(run.id = %run, "first prompt started");
        Ok(Some(run))
    }

    /// Drives a run this process took (new, resumed, or a session's first prompt) in the
    /// background.
    pub fn spawn_drive(&self, project: ProjectId, id: SessionId, run: RunId, wake: bool) {
        let token = self.inner.runs.insert(run);
        let driving = Driving {
            rt: self.clone(),
            run,
        };
        // A child of the caller's span (the request that sent the message, when there is
        // one): its request id and trace go on with the turn, however long it runs.
        let span = tracing::info_span!("run", run.id = %run, session.id = %id);
        self.inner.sessions.spawn(
            async move {
                driving.rt.drive(project, id, run, wake, token).await;
                drop(driving);
            }
            .instrument(span),
        );
    }
}

/// A run's driver while it lives. Dropped when the driver ends, by a panic too: the run is no
/// longer this process's to drive (the recovery sweep fails it if its end was not written),
/// and its slot under the run limits is free.
struct Driving {
    rt: Runs,
    run: RunId,
}

impl Drop for Driving {
    fn drop(&mut self) {
        self.rt.inner.runs.remove(self.run);
        self.rt.room_for_runs();
    }
}

fn refusal_message(r: Refusal) -> &'static str {
    match r {
        Refusal::Busy => {
            "a turn is already in flight in this session; wait for it to end or interrupt it"
        }
        Refusal::Parked => {
            "a turn in this session waits on client tool results (GET tool-calls lists them); answer them or interrupt the turn first"
        }
        Refusal::Provisioning => {
            "the session is still starting; send the message once it is running"
        }
        Refusal::Error => "the session failed; start it again before sending a message",
        Refusal::Stopped => "the session is stopped; start it before sending a message",
        Refusal::LifetimeOver => {
            "this session reached its max_lifetime_seconds and cannot be started again; start a new session"
        }
    }
}

/// Claims nothing: inserts the run and appends its `user.message`, in the caller's transaction
/// (which already claimed the session).
pub(crate) async fn start_run(
    tx: &mut sqlx::PgConnection,
    id: SessionId,
    run_id: RunId,
    prompt: &str,
    max_turns: i32,
    client_tools: &[ClientTool],
    driver: Driver,
) -> Result<RunRecord> {
    let run = runs::insert(
        &mut *tx,
        &NewRun {
            id: run_id,
            session: id,
            prompt,
            max_turns,
            client_tools,
            worker: driver.worker,
            admitted: driver.admitted,
        },
    )
    .await?;
    // Counted at the insert: a start whose transaction then rolls back is counted too (rare:
    // the checks that refuse a message come before it).
    metrics::counter!("sandbox_agents_runs_started_total").increment(1);
    events::append(
        tx,
        id,
        &[NewEvent::new(
            EventType::UserMessage,
            Some(run_id),
            json!({ "text": prompt }),
        )],
    )
    .await?;
    Ok(run)
}
