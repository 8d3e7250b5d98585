//! Approvals: calls an agent's permissions say to `ask` about. Such a call is written as an
//! `agent.tool_use` marked `awaiting_approval` with a row that parks the run, as a deferrable
//! client call's does (`step.rs`, `park.rs`); `POST tool-confirmations` records a person's
//! decision with its `agent.tool_confirmation`, and the decision that settles the last call
//! the run waited on continues it, in whichever process made it.
//!
//! Invariants (with the `tool_approvals` migration's):
//! * a decision is made once: only a pending row with no decision takes one, under the run's
//!   lock, so a second confirmation (or one for a call that does not wait) is a 409 that
//!   changes nothing;
//! * an allowed sandbox or subagent call is run by the run as it continues (`settle`), after
//!   the restart or in another process if need be, never by the request that allowed it;
//! * an allowed client call becomes a deferrable client call: its `agent.client_tool_call`
//!   is appended with the decision, and the run goes on once the caller answers it;
//! * a denial reaches the model as the tool's error, with the person's message.

use crate::client_tools::answer;
use crate::frame::{Cast, Frame, ParkedFrame};
use crate::stop::Stop;
use crate::subagents::Settled;
use crate::tally::Turn;
use crate::Runs;
use sandbox_agents_domain::agent_version::ChangedBy;
use sandbox_agents_domain::event::{EventType, NewEvent};
use sandbox_agents_domain::permissions::AwaitingConfirmation;
use sandbox_agents_domain::state::{ApprovalFor, ToolDecision};
use sandbox_agents_domain::{ProjectId, RunId, SessionId};
use sandbox_agents_errors::{Result, ServiceError};
use sandbox_agents_model::{Message, ToolCall};
use sandbox_agents_sessions::not_found;
use sandbox_agents_store::tool_calls::{self, ToolCallRecord};
use sandbox_agents_store::{events, sessions};
use serde_json::json;
use tokio_util::sync::CancellationToken;

/// What the model gets for a call a person denied.
pub(crate) fn denial(message: Option<&str>) -> String {
    match message.map(str::trim).filter(|m| !m.is_empty()) {
        Some(m) => format!("error: a person denied this call: {m}"),
        None => "error: a person denied this call.".to_owned(),
    }
}

fn to_wire(c: &ToolCallRecord) -> AwaitingConfirmation {
    AwaitingConfirmation {
        call_id: c.call_id.clone(),
        tool: c.tool.clone(),
        kind: c.approval.unwrap_or(ApprovalFor::Sandbox),
        arguments: c.arguments.clone(),
        run_id: c.run_id.to_string(),
        seq: c.seq,
        subagent: c.subagent.as_ref().map(|s| s.0.clone()),
    }
}

impl Runs {
    /// `GET tool-confirmations`: the calls the session waits on a person for, oldest first.
    pub async fn awaiting_confirmations(
        &self,
        project: ProjectId,
        id: SessionId,
    ) -> Result<Vec<AwaitingConfirmation>> {
        let db = &self.inner.db;
        sessions::get(db, project, id)
            .await
            .map_err(|e| not_found(e, id))?;
        Ok(tool_calls::awaiting_decision(db, id)
            .await?
            .iter()
            .map(to_wire)
            .collect())
    }

    /// `POST tool-confirmations`: records a person's decision on the call `call_id` (a 409
    /// when nothing waits for one on it) with its `agent.tool_confirmation`. The decision
    /// that settles the last call a parked run waited on continues that run here.
    #[tracing::instrument(skip_all, fields(session.id = %id, call_id = %call_id, decision = decision.as_str()))]
    pub async fn confirm_tool_call(
        &self,
        project: ProjectId,
        id: SessionId,
        call_id: &str,
        decision: ToolDecision,
        message: Option<&str>,
        by: Option<&ChangedBy>,
    ) -> Result<()> {
        let db = &self.inner.db;
        sessions::get(db, project, id)
            .await
            .map_err(|e| not_found(e, id))?;
        let driver = self.driver(db, project).await?;
        let mut tx = db.begin().await?;
        let call = tool_calls::lock_pending(&mut tx, id, call_id)
            .await?
            .filter(|c| c.approval.is_some() && c.decision.is_none())
            .ok_or_else(|| {
                ServiceError::Conflict(format!(
                    "no call '{call_id}' waits for a decision in this session: it was decided or cancelled, does not ask for one, or was never made"
                ))
            })?;
        let run = RunId(call.run_id);
        let mark = |mut payload: serde_json::Value| {
            if let Some(s) = &call.subagent {
                payload["subagent"] = s.0.clone();
            }
            payload
        };
        let mut batch = vec![NewEvent::new(
            EventType::AgentToolConfirmation,
            Some(run),
            mark(json!({
                "call_id": call.call_id,
                "tool": call.tool,
                "decision": decision.as_str(),
                "message": message,
                "by": by,
            })),
        )];
        let to_client =
            decision == ToolDecision::Allow && call.approval == Some(ApprovalFor::Client);
        if to_client {
            batch.push(NewEvent::new(
                EventType::AgentClientToolCall,
                Some(run),
                mark(json!({"tool": call.tool, "call_id": call.call_id, "arguments": call.arguments, "deferrable": true})),
            ));
        }
        let written = events::append(&mut tx, id, &batch).await?;
        let (answered, seq) = match decision {
            ToolDecision::Deny => (Some(denial(message)), None),
            // The caller answers it now, as a deferrable call whose event is the new one.
            ToolDecision::Allow if to_client => (None, written.last().map(|e| e.seq)),
            // The run runs it as it continues.
            ToolDecision::Allow => (Some(String::new()), None),
        };
        tool_calls::decide(
            &mut tx,
            call.id,
            decision,
            message,
            by,
            answered.as_deref(),
            seq,
        )
        .await?;
        let resume = self.take_if_ready(&mut tx, id, run, driver).await?;
        tx.commit().await?;
        tracing::info!(run.id = %run, "tool call decided");
        if let Some(wake) = resume {
            self.spawn_drive(project, id, run, wake);
        }
        Ok(())
    }

    /// The answers of the run's parked calls (`rows`) for a turn that ends without running
    /// any (its step limit was reached): what became of each.
    pub(crate) async fn answer_unrun(&self, turn: &mut Turn, rows: &[i64]) -> Result<(), Stop> {
        for row in tool_calls::by_ids(&self.inner.db, rows).await? {
            turn.added.push(answer(&row));
        }
        Ok(())
    }

    /// The answers of a frame's parked calls (`rows`), in order, joined to its messages (and,
    /// for the run's frame, the turn's): a call a person allowed runs now (a sandbox tool, or
    /// a subagent, which may park again: returned), any other gets what became of it.
    pub(crate) async fn settle(
        &self,
        cast: &Cast,
        frame: &mut Frame,
        turn: &mut Turn,
        rows: &[i64],
        token: &CancellationToken,
    ) -> Result<Vec<ParkedFrame>, Stop> {
        let mut parked = Vec::new();
        for row in tool_calls::by_ids(&self.inner.db, rows).await? {
            let m = if row.runs_when_continued() {
                let c = ToolCall {
                    id: row.call_id.clone(),
                    name: row.tool.clone(),
                    arguments: row.arguments.clone(),
                };
                let result = match row.approval {
                    Some(ApprovalFor::Subagent) => {
                        let Some(d) = frame.speaker.delegate(&c.name).cloned() else {
                            let gone = format!("error: there is no subagent '{}' any more", c.name);
                            let m = self.tool_result(cast, frame, &c, gone).await?;
                            push(frame, turn, m);
                            continue;
                        };
                        match self.call_subagent(cast, frame, turn, &d, &c, token).await? {
                            Settled::Answer(text) => text,
                            Settled::Parked(p) => {
                                parked.push(p);
                                continue;
                            }
                        }
                    }
                    _ => self
                        .sandbox_call(cast, frame, &c, token)
                        .await
                        .ok_or(Stop::Outcome(crate::finish::Outcome::Cancelled))?,
                };
                self.tool_result(cast, frame, &c, result).await?
            } else if row.decision == Some(ToolDecision::Deny) {
                // The call's `agent.tool_use` gets its result, as every call does.
                let c = ToolCall {
                    id: row.call_id.clone(),
                    name: row.tool.clone(),
                    arguments: row.arguments.clone(),
                };
                let denied = row
                    .output
                    .clone()
                    .unwrap_or_else(|| denial(row.decision_message.as_deref()));
                self.tool_result(cast, frame, &c, denied).await?
            } else {
                answer(&row)
            };
            push(frame, turn, m);
        }
        Ok(parked)
    }
}

fn push(frame: &mut Frame, turn: &mut Turn, m: Message) {
    frame.messages.push(m.clone());
    if frame.tag.is_none() {
        turn.added.push(m);
    }
}
