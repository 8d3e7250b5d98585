//! Client tools: tools the caller runs. The control plane writes the call, waits
//! for `POST tool-results` (ordinary calls, up to their timeout) or parks the run (deferrable
//! calls), and gives the model the answer.
//!
//! Invariants (with the `tool_calls` migration):
//! * a call is pending from the commit of its `agent.client_tool_call` event, so an answer may
//!   come before the worker waits for it, or before the run parks;
//! * the transaction that takes a call out of `pending` writes what became of it (the
//!   `agent.client_tool_result` event) and, for the last answer a parked run waited on, claims
//!   the session and takes the run for this process, so exactly one process continues it;
//! * every transaction locks the run row first, then the call rows, then the session row.

use crate::finish::Outcome;
use crate::liveness::Driver;
use crate::stop::Stop;
use crate::Runs;
use sandbox_agents_domain::event::{EventType, NewEvent};
use sandbox_agents_domain::session::ClientToolCall;
use sandbox_agents_domain::session::{RunStatus, SessionStatus};
use sandbox_agents_domain::state::{ApprovalFor, ToolCallStatus, ToolDecision};
use sandbox_agents_domain::tools::{ClientTool, DEFAULT_CLIENT_TOOL_TIMEOUT_SECONDS};
use sandbox_agents_domain::{ProjectId, RunId, SessionId};
use sandbox_agents_errors::{Result, ServiceError};
use sandbox_agents_model::{Message, ToolSpec};
use sandbox_agents_sessions::not_found;
use sandbox_agents_store::tool_calls::{self, ToolCallRecord};
use sandbox_agents_store::{events, runs, sessions, LiveEvent};
use serde_json::json;
use std::time::Duration;
use time::OffsetDateTime;
use tokio_util::sync::CancellationToken;

/// How often a run waiting on a client re-reads its calls even without news from the hub.
const RECHECK: Duration = Duration::from_secs(2);
/// How often it polls when the process has no hub.
const POLL: Duration = Duration::from_millis(200);

/// The client tools a turn offers: the agent's, with the turn's added; a turn declaration
/// with an agent tool's name replaces it (the turn's declaration wins).
pub(crate) fn merge(agent: &[ClientTool], turn: &[ClientTool]) -> Vec<ClientTool> {
    let mut out: Vec<ClientTool> = agent
        .iter()
        .filter(|a| !turn.iter().any(|t| t.name == a.name))
        .cloned()
        .collect();
    out.extend(turn.iter().cloned());
    out
}

/// What the model is told about a client tool.
pub(crate) fn spec(t: &ClientTool) -> ToolSpec {
    ToolSpec {
        name: t.name.clone(),
        description: t.description.clone(),
        parameters: t.parameters.clone(),
    }
}

/// When an ordinary call stops waiting.
pub(crate) fn deadline(t: &ClientTool, from: OffsetDateTime) -> OffsetDateTime {
    let secs = t
        .timeout_seconds
        .unwrap_or(DEFAULT_CLIENT_TOOL_TIMEOUT_SECONDS);
    from + Duration::from_secs_f64(secs)
}

/// The message the model gets for a call that is no longer pending (and was not run by the
/// run itself).
pub(crate) fn answer(call: &ToolCallRecord) -> Message {
    let output = call.output.clone().unwrap_or_default();
    let content = match (call.status, call.is_error) {
        // A denial is worded for the model already (`approvals::denial`).
        _ if call.decision == Some(ToolDecision::Deny) => output,
        // Allowed, but the run ends before running it (`approvals::settle` runs it).
        _ if call.runs_when_continued() => {
            "The turn ended before this allowed call could run.".to_owned()
        }
        (ToolCallStatus::Answered, false) => output,
        (ToolCallStatus::Answered, true) => format!("error: the tool failed: {output}"),
        (ToolCallStatus::TimedOut, _) => output,
        _ => "The turn was interrupted before the client answered.".to_owned(),
    };
    Message::tool(call.call_id.clone(), content)
}

fn to_wire(c: &ToolCallRecord) -> ClientToolCall {
    ClientToolCall {
        call_id: c.call_id.clone(),
        tool: c.tool.clone(),
        arguments: c.arguments.clone(),
        run_id: Some(c.run_id.to_string()),
        seq: c.seq,
        deferrable: c.deferrable,
    }
}

/// `agent.client_tool_result`: the answer the model receives, marked like the call's other
/// events (`subagent`) when a subagent's frame made the call.
fn result_event(run: RunId, call: &ToolCallRecord, output: &str, is_error: bool) -> NewEvent {
    let mut payload = json!({
        "call_id": call.call_id,
        "tool": call.tool,
        "output": output,
        "is_error": is_error,
    });
    if call.status == ToolCallStatus::TimedOut {
        payload["timed_out"] = true.into();
    }
    if let Some(mark) = &call.subagent {
        payload["subagent"] = mark.0.clone();
    }
    NewEvent::new(EventType::AgentClientToolResult, Some(run), payload)
}

impl Runs {
    /// `GET tool-calls`: what the session waits on now (ordinary calls held open and parked
    /// deferrable calls), oldest first.
    pub async fn pending_tool_calls(
        &self,
        project: ProjectId,
        id: SessionId,
    ) -> Result<Vec<ClientToolCall>> {
        let db = &self.inner.db;
        sessions::get(db, project, id)
            .await
            .map_err(|e| not_found(e, id))?;
        Ok(tool_calls::pending_for_session(db, id)
            .await?
            .iter()
            .map(to_wire)
            .collect())
    }

    /// `POST tool-results`: answers a pending call (404 when nothing waits on `call_id`). The
    /// last answer a parked run waited on continues that run here.
    #[tracing::instrument(skip_all, fields(session.id = %id, call_id = %call_id))]
    pub async fn submit_tool_result(
        &self,
        project: ProjectId,
        id: SessionId,
        call_id: &str,
        output: &str,
        is_error: bool,
    ) -> Result<()> {
        let db = &self.inner.db;
        sessions::get(db, project, id)
            .await
            .map_err(|e| not_found(e, id))?;
        let driver = self.driver(db, project).await?;
        let mut tx = db.begin().await?;
        let call = tool_calls::lock_pending(&mut tx, id, call_id)
            .await?
            .ok_or_else(|| {
                ServiceError::NotFound(format!(
                    "no tool call '{call_id}' is waiting in this session: it was answered, timed out or cancelled, or never made"
                ))
            })?;
        // A call that waits for a person is not the caller's to answer until allowed.
        let allowed_client = call.approval == Some(ApprovalFor::Client)
            && call.decision == Some(ToolDecision::Allow);
        if call.approval.is_some() && !allowed_client {
            return Err(ServiceError::Conflict(format!(
                "the call '{call_id}' waits for a person's decision, not a result: POST tool-confirmations with a decision"
            )));
        }
        let run = RunId(call.run_id);
        tool_calls::resolve(&mut tx, call.id, ToolCallStatus::Answered, output, is_error).await?;
        events::append(&mut tx, id, &[result_event(run, &call, output, is_error)]).await?;
        let resume = self.take_if_ready(&mut tx, id, run, driver).await?;
        tx.commit().await?;
        tracing::info!(run.id = %run, deferrable = call.deferrable, "client tool answered");
        if let Some(wake) = resume {
            self.spawn_drive(project, id, run, wake);
        }
        Ok(())
    }

    /// Inside a transaction that holds the run's lock: when the run is parked and nothing is
    /// pending any more, claims the session and takes the run for this process. `Some(wake)`
    /// when the caller must continue it after commit (`wake`: the session is asleep).
    pub(crate) async fn take_if_ready(
        &self,
        tx: &mut sqlx::PgConnection,
        id: SessionId,
        run: RunId,
        driver: Driver,
    ) -> Result<Option<bool>> {
        let Some(r) = runs::lock(&mut *tx, run).await? else {
            return Ok(None);
        };
        if r.status != RunStatus::Running
            || !r.parked
            || tool_calls::count_pending(&mut *tx, run).await? > 0
        {
            return Ok(None);
        }
        let Some(status) = runs::claim_for_resume(&mut *tx, id).await? else {
            tracing::info!(run.id = %run, "every parked call is answered, but the session cannot run now; the recovery sweep continues the run");
            return Ok(None);
        };
        if !runs::unpark(&mut *tx, run, driver.worker, driver.admitted).await? {
            return Ok(None);
        }
        Ok(Some(status == SessionStatus::Stopped))
    }

    /// Continues a parked run whose calls are all answered, if this process can take it.
    pub(crate) async fn resume_parked(&self, id: SessionId, run: RunId) -> Result<()> {
        let Some(s) = sessions::get_for_worker(&self.inner.db, id).await? else {
            return Ok(());
        };
        let driver = self.driver(&self.inner.db, s.project_id).await?;
        let mut tx = self.inner.db.begin().await?;
        let resume = self.take_if_ready(&mut tx, id, run, driver).await?;
        tx.commit().await?;
        if let Some(wake) = resume {
            tracing::info!(run.id = %run, "continuing a parked run whose calls were answered");
            self.spawn_drive(s.project_id, id, run, wake);
        }
        Ok(())
    }

    /// Waits until every call in `ids` is answered or timed out (writing the timeouts) and
    /// returns them in order. Cancellation of the run ends the wait.
    pub(crate) async fn wait_for_answers(
        &self,
        id: SessionId,
        run: RunId,
        ids: &[i64],
        token: &CancellationToken,
    ) -> std::result::Result<Vec<ToolCallRecord>, Stop> {
        let db = &self.inner.db;
        // Subscribe before the first read, so an answer committed in between is not missed.
        let mut sub = match self.inner.hub.get() {
            Some(hub) => hub.subscribe(id).await.ok(),
            None => None,
        };
        loop {
            let calls = tool_calls::by_ids(db, ids).await?;
            let now = OffsetDateTime::now_utc();
            let mut next: Option<OffsetDateTime> = None;
            for c in calls.iter().filter(|c| c.is_pending()) {
                match c.deadline {
                    Some(d) if d <= now => self.time_out(id, run, c).await?,
                    Some(d) => next = Some(next.map_or(d, |n| n.min(d))),
                    None => {}
                }
            }
            if calls.iter().all(|c| !c.is_pending()) {
                return Ok(calls);
            }
            if calls
                .iter()
                .any(|c| c.is_pending() && c.deadline.is_some_and(|d| d <= now))
            {
                continue; // re-read what the timeouts wrote
            }
            let until_deadline = next
                .map(|n| (n - now).try_into().unwrap_or(Duration::ZERO))
                .unwrap_or(RECHECK);
            let pause = until_deadline.min(if sub.is_some() { RECHECK } else { POLL });
            tokio::select! {
                _ = token.cancelled() => return Err(Stop::Outcome(Outcome::Cancelled)),
                _ = tokio::time::sleep(pause) => {}
                _ = answered(&mut sub) => {}
            }
            self.check_cancelled(run, token).await?;
        }
    }

    /// Gives up on an ordinary call: the model is told the client did not answer in time.
    async fn time_out(
        &self,
        id: SessionId,
        run: RunId,
        call: &ToolCallRecord,
    ) -> std::result::Result<(), Stop> {
        let mut tx = self.inner.db.begin().await?;
        match runs::lock(&mut tx, run).await? {
            Some(r) if r.status == RunStatus::Running => {}
            _ => return Err(Stop::Gone),
        }
        let waited = call
            .deadline
            .map(|d| (d - call.created_at).as_seconds_f64())
            .unwrap_or(DEFAULT_CLIENT_TOOL_TIMEOUT_SECONDS);
        let output = format!(
            "The client did not answer within {} seconds.",
            waited.round()
        );
        if tool_calls::resolve(&mut tx, call.id, ToolCallStatus::TimedOut, &output, true).await? {
            let mut timed_out = call.clone();
            timed_out.status = ToolCallStatus::TimedOut;
            events::append(&mut tx, id, &[result_event(run, &timed_out, &output, true)]).await?;
        }
        tx.commit().await?;
        tracing::info!(run.id = %run, call_id = %call.call_id, "a client did not answer in time");
        Ok(())
    }
}

/// Resolves when the subscription carries a client tool result (or falls behind, or ends):
/// a sign to re-read the calls. Never resolves without a subscription.
async fn answered(sub: &mut Option<sandbox_agents_store::Subscription>) {
    let Some(s) = sub else {
        return std::future::pending().await;
    };
    loop {
        match s.rx.recv().await {
            Ok(LiveEvent::Stored(e)) if e.kind == EventType::AgentClientToolResult.as_str() => {
                return
            }
            Ok(LiveEvent::Stored(_)) | Ok(LiveEvent::Ephemeral(_)) => {}
            Ok(LiveEvent::Deleted) => return,
            Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => return,
            Ok(LiveEvent::Closed) | Err(tokio::sync::broadcast::error::RecvError::Closed) => {
                *sub = None;
                return;
            }
        }
    }
}
