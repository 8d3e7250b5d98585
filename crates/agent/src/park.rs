//! Parking a run on deferrable client tool calls (ordinary answers first, then the pause; an
//! answer from any process, however late, continues the same run): the turn so far
//! goes to the database, the session goes idle, and the pause is announced with
//! `session.status_idle {stop_reason: "requires_action", call_ids, run_status: "running"}`.
//! The run keeps no memory in any process; whoever gives the last answer continues it.

use crate::client_tools::answer;
use crate::frame::{Cast, Frame, ParkedFrame};
use crate::stop::Stop;
use crate::tally::Turn;
use crate::usage::{add_into, turn_usage, Ledger};
use crate::Runs;
use sandbox_agents_domain::event::{EventType, NewEvent};
use sandbox_agents_domain::session::RunStatus;
use sandbox_agents_domain::{RunId, SessionId};
use sandbox_agents_model::{Message, Usage};
use sandbox_agents_store::runs::RunRecord;
use sandbox_agents_store::tool_calls::{self, ToolCallRecord};
use sandbox_agents_store::{events, runs};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

/// The turn so far, saved in `runs.progress` when the run parks.
#[derive(Debug, Default, Serialize, Deserialize)]
pub(crate) struct Progress {
    /// What the turn added to the conversation after its prompt.
    pub messages: Vec<Message>,
    /// The call rows the run's frame parked on; their answers follow `messages`.
    pub awaiting: Vec<i64>,
    /// Subagent calls of the run's frame that parked; their answers follow too.
    #[serde(default)]
    pub nested: Vec<ParkedFrame>,
    /// The turn's usage split by model and agent (absent in runs parked by an older
    /// server, whose `usage` was all on `model` and `agent`).
    #[serde(default)]
    pub ledger: Option<Ledger>,
    pub usage: Usage,
    pub active_seconds: f64,
    pub model: String,
    pub agent: String,
}

impl Progress {
    /// The turn's usage ledger, from either shape.
    pub(crate) fn ledger(&self) -> Ledger {
        self.ledger.clone().unwrap_or_else(|| {
            let mut l = Ledger::default();
            l.add(&self.model, &self.agent, self.usage);
            l
        })
    }
}

impl Progress {
    /// The saved progress; an error when it does not parse (a bug, or a downgrade).
    pub(crate) fn of(
        run: &RunRecord,
    ) -> Result<Option<Progress>, Box<dyn std::error::Error + Send + Sync>> {
        run.progress
            .as_ref()
            .map(|p| serde_json::from_value(p.0.clone()))
            .transpose()
            .map_err(|e| format!("the saved turn of run {} does not parse: {e}", run.id).into())
    }
}

/// What became of a step's deferrable calls.
pub(crate) enum Parked {
    /// Every one was answered before the pause was written: go on at once.
    Answered,
    /// The run is parked; this process must write nothing more for it.
    Yes,
}

impl Runs {
    /// Parks the run on `deferrable` (call row ids) unless they are all answered already.
    pub(crate) async fn park(
        &self,
        id: SessionId,
        run: RunId,
        deferrable: &[i64],
        progress: Progress,
        turns: i32,
    ) -> Result<Parked, Stop> {
        let mut tx = self.inner.db.begin().await?;
        match runs::lock(&mut tx, run).await? {
            Some(r) if r.status == RunStatus::Running => {}
            _ => return Err(Stop::Gone),
        }
        let calls = tool_calls::by_ids(&mut *tx, deferrable).await?;
        let open: Vec<&ToolCallRecord> = calls.iter().filter(|c| c.is_pending()).collect();
        if open.is_empty() {
            return Ok(Parked::Answered);
        }
        let call_ids: Vec<&str> = open.iter().map(|c| c.call_id.as_str()).collect();
        let usage = turn_usage(&progress.ledger(), progress.active_seconds);
        let mut session_usage = runs::session_usage(&mut *tx, id).await?;
        add_into(&mut session_usage, &usage);
        let saved = serde_json::to_value(&progress).expect("progress serialises");
        if !runs::park(&mut tx, run, &saved, turns, &usage).await? {
            return Err(Stop::Gone);
        }
        runs::set_session_idle(&mut tx, id).await?;
        let marks = events::boot_marks(&mut *tx, id).await?;
        let sandbox_seconds = sandbox_agents_domain::session::sandbox_seconds(
            &marks,
            time::OffsetDateTime::now_utc(),
        );
        let payload = json!({
            "final_output": Value::Null,
            "stop_reason": "requires_action",
            "run_status": "running",
            "call_ids": call_ids,
            "turns": turns,
            "usage": usage,
            "session_usage": session_usage,
            "sandbox_seconds": sandbox_seconds,
        });
        events::append(
            &mut tx,
            id,
            &[NewEvent::new(
                EventType::SessionStatusIdle,
                Some(run),
                payload,
            )],
        )
        .await?;
        tx.commit().await?;
        tracing::info!(run.id = %run, calls = call_ids.len(), "run parked on calls that wait (a caller's answer or a person's decision)");
        Ok(Parked::Yes)
    }

    /// Parks the run's frame on `deferrable` (its own call rows) and `nested` (its subagent
    /// calls that parked), saving the turn so far; when everything is answered already, puts
    /// the answers in and continues the subagents instead, until nothing waits (`Ok`) or the
    /// run is parked (`Stop::Parked`).
    pub(crate) async fn park_frame(
        &self,
        cast: &Cast,
        frame: &mut Frame,
        turn: &mut Turn,
        mut deferrable: Vec<i64>,
        mut nested: Vec<ParkedFrame>,
        token: &tokio_util::sync::CancellationToken,
    ) -> Result<(), Stop> {
        loop {
            let mut all = deferrable.clone();
            all.extend(ParkedFrame::rows(&nested));
            if all.is_empty() && nested.is_empty() {
                return Ok(());
            }
            let progress = Progress {
                messages: turn.added.clone(),
                awaiting: deferrable.clone(),
                nested: nested.clone(),
                ledger: Some(turn.ledger.clone()),
                usage: turn.ledger.total,
                active_seconds: turn.earlier_active + cast.started.elapsed().as_secs_f64(),
                model: frame.speaker.model.clone(),
                agent: frame.speaker.slug.clone(),
            };
            match self
                .park(cast.id, cast.run, &all, progress, turn.steps)
                .await?
            {
                Parked::Yes => return Err(Stop::Parked),
                Parked::Answered => {
                    let parked = self.settle(cast, frame, turn, &deferrable, token).await?;
                    deferrable.clear();
                    nested = self
                        .resume_nested(cast, frame, turn, std::mem::take(&mut nested), token)
                        .await?;
                    nested.extend(parked);
                }
            }
        }
    }

    /// The conversation to keep when a parked run is cancelled: its turn so far, with a note
    /// for every call that was never answered, so the next turn sees a well-formed history.
    pub(crate) async fn parked_conversation(
        &self,
        id: SessionId,
        run: &RunRecord,
    ) -> sandbox_agents_errors::Result<Vec<Value>> {
        let db = &self.inner.db;
        let mut c = runs::conversation(db, id).await?;
        c.push(to_value(&Message::user(run.prompt.clone())));
        if let Ok(Some(p)) = Progress::of(run) {
            c.extend(p.messages.iter().map(to_value));
            for call in tool_calls::by_ids(db, &p.awaiting).await? {
                c.push(to_value(&answer(&call)));
            }
            for n in &p.nested {
                c.push(to_value(&Message::tool(
                    n.tag.call_id.clone(),
                    format!(
                        "The turn was interrupted before the agent '{}' answered.",
                        n.agent
                    ),
                )));
            }
        }
        Ok(c)
    }
}

fn to_value(m: &Message) -> Value {
    serde_json::to_value(m).expect("a message serialises")
}
