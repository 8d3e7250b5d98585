//! Runs: one turn of the agent loop (API.md §2.5, §4.3-4.7).
//!
//! Invariants:
//! * `POST .../messages` claims the session (`activity: busy`), inserts the run and appends
//!   `user.message` in **one** transaction; a second message meanwhile gets 409.
//! * Exactly one terminal event per run, appended in the transaction that moves the run out of
//!   `running` ([`Runtime::finish_run`] updates only a `running` row, so whoever finishes
//!   first writes it and everybody else writes nothing). That transaction also sets the
//!   session `idle`, adds the turn's usage to the session's and saves the conversation.
//! * Interrupt and stop return only after the cancelled terminal event is committed.
//! * A run is driven by the process whose liveness key it carries; a run whose process is gone
//!   is failed by the recovery sweep ([`liveness`]). A parked run has no process and survives
//!   restarts until its calls are answered or it is cancelled.

mod client_tools;
mod liveness;
mod park;
mod tools;
mod usage;
mod worker;

use crate::error::{Result, RuntimeError};
use crate::sessions::Runtime;
use sandbox_agents_domain::agent::Transport;
use sandbox_agents_domain::event::{EventType, NewEvent};
use sandbox_agents_domain::tools::ClientTool;
use sandbox_agents_domain::Violations;
use sandbox_agents_domain::{ProjectId, RunId, SessionId};
use sandbox_agents_model::ModelClient;
use sandbox_agents_store::events;
use sandbox_agents_store::runs::{self, Finish, NewRun, Refusal, RunRecord};
use sandbox_agents_store::sessions::{self, SessionRecord};
use sandbox_agents_store::{agents, tool_calls};
use serde_json::{json, Map, Value};
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

pub use tools::MAX_TOOL_OUTPUT;
pub(crate) use worker::Stop;

/// Model steps a run may take when the message does not say.
pub const DEFAULT_MAX_TURNS: i64 = 25;
/// The most a message may ask for.
pub const MAX_MAX_TURNS: i64 = 1000;
/// How long an interrupt waits for the worker to write the cancelled terminal event before
/// writing it itself (the worker then finds its run finished and stops).
const CANCEL_GRACE: Duration = Duration::from_secs(5);

/// The model clients, one per configured transport.
#[derive(Clone, Debug, Default)]
pub struct ModelClients {
    /// `proxy` and `litellm`: a LiteLLM proxy.
    pub proxy: Option<ModelClient>,
    /// `openai`: OpenAI directly.
    pub openai: Option<ModelClient>,
}

impl ModelClients {
    /// The client for a transport, or the reason there is none.
    pub fn for_transport(&self, t: Transport) -> std::result::Result<&ModelClient, String> {
        match t {
            Transport::Proxy | Transport::Litellm => self.proxy.as_ref().ok_or_else(|| {
                "no model proxy is configured for this agent's transport; set LITELLM_PROXY_API_BASE (and LITELLM_PROXY_API_KEY) on the server".into()
            }),
            Transport::Openai => self.openai.as_ref().ok_or_else(|| {
                "OpenAI is not configured for this agent's transport 'openai'; set OPENAI_API_KEY (and OPENAI_BASE_URL) on the server".into()
            }),
        }
    }
}

/// The runs this process drives, by run id, with their cancellation tokens.
#[derive(Default)]
pub struct LocalRuns(Mutex<HashMap<RunId, CancellationToken>>);

impl LocalRuns {
    fn insert(&self, id: RunId) -> CancellationToken {
        let t = CancellationToken::new();
        self.0.lock().expect("not poisoned").insert(id, t.clone());
        t
    }

    fn remove(&self, id: RunId) {
        self.0.lock().expect("not poisoned").remove(&id);
    }

    fn cancel(&self, id: RunId) -> bool {
        match self.0.lock().expect("not poisoned").get(&id) {
            Some(t) => {
                t.cancel();
                true
            }
            None => false,
        }
    }
}

/// How a run ended, before it is written down.
#[derive(Clone, Debug)]
pub(crate) enum Outcome {
    Completed(String),
    Cancelled,
    MaxTurns(i64),
    Failed(String),
}

impl Runtime {
    /// Starts a turn: 409 unless the session is running and idle, or asleep (§9.10). Returns
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
        let max_turns = max_turns.unwrap_or(DEFAULT_MAX_TURNS);
        if !(1..=MAX_MAX_TURNS).contains(&max_turns) {
            return Err(RuntimeError::field(
                &["max_turns"],
                format!("max_turns is at least 1 and at most {MAX_MAX_TURNS}"),
                Value::from(max_turns),
            ));
        }
        let mut v = Violations::new();
        sandbox_agents_domain::tools::validate_client_tools(client_tools, "client_tools", &mut v);
        v.into_result().map_err(RuntimeError::Validation)?;
        let st = &self.inner;
        let session = sessions::get(&st.db, project, id)
            .await
            .map_err(|e| crate::sessions::not_found(e, id))?;
        let agent = agents::get(
            &st.db,
            project,
            &sandbox_agents_domain::agent::AgentRef::Id(session.agent_id.into()),
        )
        .await?;
        if let Some(reason) = agent.spec.unsupported() {
            return Err(RuntimeError::field(&[], reason, Value::Null));
        }
        let tools = client_tools::merge(&agent.spec.client_tools, client_tools);
        let worker = self.worker_key().await?;
        let run_id = RunId::new();
        let mut tx = st.db.begin().await?;
        let claimed = runs::claim_session(&mut tx, project, id)
            .await
            .map_err(|e| crate::sessions::not_found(e, id))?;
        let status = claimed.map_err(|r| RuntimeError::Conflict(refusal_message(r).into()))?;
        let run = start_run(
            &mut tx,
            id,
            run_id,
            &prompt,
            max_turns as i32,
            &tools,
            worker,
        )
        .await?;
        tx.commit().await?;
        let wake = status == "stopped";
        self.spawn_drive(project, id, run_id, wake);
        tracing::info!(run.id = %run_id, wake, "run started");
        Ok(run)
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
        let project = ProjectId(s.project_id);
        let Some(prompt) = runs::take_first_prompt(tx, id).await? else {
            return Ok(None);
        };
        let agent = agents::get(
            &mut *tx,
            project,
            &sandbox_agents_domain::agent::AgentRef::Id(s.agent_id.into()),
        )
        .await?;
        let worker = self.worker_key().await?;
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
            worker,
        )
        .await?;
        tracing::info!(run.id = %run, "first prompt started");
        Ok(Some(run))
    }

    /// Drives a run this process took (new, resumed, or a session's first prompt) in the
    /// background.
    pub(crate) fn spawn_drive(&self, project: ProjectId, id: SessionId, run: RunId, wake: bool) {
        let token = self.inner.runs.insert(run);
        let rt = self.clone();
        self.inner.tasks.spawn(async move {
            rt.drive(project, id, run, wake, token).await;
            rt.inner.runs.remove(run);
        });
    }

    /// Cancels the session's run in flight and returns the session once the cancelled
    /// terminal event is committed. Without a run in flight the session is returned as is.
    #[tracing::instrument(skip_all, fields(session.id = %id))]
    pub async fn interrupt(&self, project: ProjectId, id: SessionId) -> Result<SessionRecord> {
        sessions::get(&self.inner.db, project, id)
            .await
            .map_err(|e| crate::sessions::not_found(e, id))?;
        self.cancel_run_of(id).await?;
        sessions::get(&self.inner.db, project, id)
            .await
            .map_err(|e| crate::sessions::not_found(e, id))
    }

    /// Cancels the session's run in flight, if any, and waits until its terminal event is
    /// committed: by the worker when it answers within [`CANCEL_GRACE`], else here.
    pub(crate) async fn cancel_run_of(&self, id: SessionId) -> Result<()> {
        let db = &self.inner.db;
        let Some(run) = runs::running_for_session(db, id).await? else {
            return Ok(());
        };
        let run_id = run.run_id();
        if run.parked {
            // Nobody drives a parked run: cancel it here. Its calls stop being pending in the
            // same transaction.
            let conversation = self.parked_conversation(id, &run).await?;
            self.finish_run(
                id,
                run_id,
                &Outcome::Cancelled,
                run.turns,
                &run.usage.0,
                Some(&conversation),
            )
            .await?;
            return Ok(());
        }
        runs::request_cancel(db, run_id).await?;
        self.inner.runs.cancel(run_id);
        let deadline = Instant::now() + CANCEL_GRACE;
        while Instant::now() < deadline {
            match runs::get(db, run_id).await? {
                Some(r) if r.status == "running" => {}
                _ => return Ok(()),
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        tracing::warn!(run.id = %run_id, "the run's worker did not stop in time; cancelling it here");
        self.finish_run(
            id,
            run_id,
            &Outcome::Cancelled,
            run.turns,
            &Map::new(),
            None,
        )
        .await?;
        Ok(())
    }

    /// What a stop does about runs, before it takes the session's lock: a run in flight is
    /// cancelled (its terminal event comes before the stop's); an idle release finds a run
    /// that started meanwhile and gives up, returning the session as it is.
    pub(crate) async fn before_stop(
        &self,
        project: Option<ProjectId>,
        id: SessionId,
        reason: crate::sessions::StopReason,
    ) -> Result<Option<SessionRecord>> {
        let db = &self.inner.db;
        if let Some(p) = project {
            sessions::get(db, p, id)
                .await
                .map_err(|e| crate::sessions::not_found(e, id))?;
        }
        if reason != crate::sessions::StopReason::Idle {
            self.cancel_run_of(id).await?;
            return Ok(None);
        }
        // A parked run waits on people, not on the sandbox: the sandbox may sleep meanwhile,
        // and the answer wakes it.
        match runs::running_for_session(db, id).await? {
            None => Ok(None),
            Some(r) if r.parked => Ok(None),
            Some(_) => Ok(sessions::get_for_worker(db, id).await?),
        }
    }

    /// Writes a run's end: the run row, the session's activity, usage and conversation, and
    /// the terminal event, in one transaction. `false` when the run had already finished
    /// (nothing is written).
    pub(crate) async fn finish_run(
        &self,
        session: SessionId,
        run: RunId,
        outcome: &Outcome,
        turns: i32,
        usage: &Map<String, Value>,
        conversation: Option<&[Value]>,
    ) -> Result<bool> {
        let (status, stop_reason, final_output, error, kind) = match outcome {
            Outcome::Completed(text) => (
                "completed",
                "end_turn",
                Some(text.clone()),
                None,
                EventType::SessionStatusIdle,
            ),
            Outcome::Cancelled => (
                "cancelled",
                "cancelled",
                None,
                None,
                EventType::SessionStatusIdle,
            ),
            Outcome::MaxTurns(n) => (
                "failed",
                "max_turns",
                None,
                Some(format!(
                    "the turn reached its limit of {n} model steps before the model finished"
                )),
                EventType::SessionStatusError,
            ),
            Outcome::Failed(e) => (
                "failed",
                "error",
                None,
                Some(e.clone()),
                EventType::SessionStatusError,
            ),
        };
        let mut tx = self.inner.db.begin().await?;
        let finished = runs::finish(
            &mut tx,
            run,
            &Finish {
                status,
                stop_reason,
                final_output: final_output.as_deref(),
                error: error.as_deref(),
                turns,
                usage,
            },
        )
        .await?;
        if finished.is_none() {
            return Ok(false);
        }
        tool_calls::cancel_pending(&mut tx, run).await?;
        let mut session_usage = runs::lock_session_usage(&mut tx, session).await?;
        usage::add_into(&mut session_usage, usage);
        runs::release_session(&mut tx, session, &session_usage, conversation).await?;
        let marks = events::boot_marks(&mut *tx, session).await?;
        let sandbox_seconds = sandbox_agents_domain::session::sandbox_seconds(
            &marks,
            time::OffsetDateTime::now_utc(),
        );
        let mut payload = json!({
            "final_output": final_output,
            "stop_reason": stop_reason,
            "run_status": status,
            "turns": turns,
            "usage": usage,
            "session_usage": session_usage,
            "sandbox_seconds": sandbox_seconds,
        });
        if let Some(e) = &error {
            payload["error"] = Value::from(e.as_str());
        }
        events::append(&mut tx, session, &[NewEvent::new(kind, Some(run), payload)]).await?;
        tx.commit().await?;
        tracing::info!(run.id = %run, status, stop_reason, turns, "run finished");
        Ok(true)
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
    worker: i32,
) -> Result<RunRecord> {
    let run = runs::insert(
        &mut *tx,
        &NewRun {
            id: run_id,
            session: id,
            prompt,
            max_turns,
            client_tools,
            worker,
        },
    )
    .await?;
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
