//! A run's end. Exactly one terminal event per run, appended in the transaction that moves
//! the run out of `running` ([`Runs::finish_run`] updates only a `running` row, so whoever
//! finishes first writes it and everybody else writes nothing). That transaction also sets
//! the session `idle`, adds the turn's usage to the session's and saves the conversation.

use crate::usage;
use crate::Runs;
use sandbox_agents_domain::budget::{Budget, BudgetHit};
use sandbox_agents_domain::event::{EventType, NewEvent};
use sandbox_agents_domain::session::{RunStatus, RunStopReason};
use sandbox_agents_domain::{RunId, SessionId};
use sandbox_agents_errors::Result;
use sandbox_agents_store::runs::{self, Finish};
use sandbox_agents_store::{events, tool_calls};
use serde_json::{json, Map, Value};

/// Whose limit a turn reached.
#[derive(Clone, Debug)]
pub(crate) enum BudgetScope {
    /// The session's budget (the whole of it, for the event).
    Session(Budget),
    /// The project's monthly spend limit.
    Project,
}

/// How a run ended, before it is written down.
#[derive(Clone, Debug)]
pub(crate) enum Outcome {
    Completed(String),
    Cancelled,
    MaxTurns(i64),
    /// A limit of the session's budget, or the project's monthly spend limit, was reached
    /// before a model call: not a failure.
    BudgetReached {
        hit: BudgetHit,
        scope: BudgetScope,
    },
    Failed(String),
}

impl Runs {
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
                RunStatus::Completed,
                RunStopReason::EndTurn,
                Some(text.clone()),
                None,
                EventType::SessionStatusIdle,
            ),
            Outcome::Cancelled => (
                RunStatus::Cancelled,
                RunStopReason::Cancelled,
                None,
                None,
                EventType::SessionStatusIdle,
            ),
            Outcome::MaxTurns(n) => (
                RunStatus::Failed,
                RunStopReason::MaxTurns,
                None,
                Some(format!(
                    "the turn reached its limit of {n} model steps before the model finished"
                )),
                EventType::SessionStatusError,
            ),
            Outcome::BudgetReached { .. } => (
                RunStatus::Completed,
                RunStopReason::BudgetReached,
                None,
                None,
                EventType::SessionStatusIdle,
            ),
            Outcome::Failed(e) => (
                RunStatus::Failed,
                RunStopReason::Error,
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
        let Some(finished) = finished else {
            return Ok(false);
        };
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
        let mut written = Vec::with_capacity(2);
        if let Outcome::BudgetReached { hit, scope } = outcome {
            // Which limit, in the terminal event and in an event (and webhook) of its own.
            let mut reached = json!({
                "limit": hit.limit,
                "max": hit.max,
                "used": hit.used,
            });
            match scope {
                BudgetScope::Session(budget) => reached["budget"] = json!(budget),
                BudgetScope::Project => reached["scope"] = json!("project"),
            }
            payload["budget"] = reached.clone();
            written.push(NewEvent::new(
                EventType::SessionBudgetReached,
                Some(run),
                reached,
            ));
            tracing::info!(run.id = %run, limit = hit.limit, max = hit.max, used = hit.used, "a turn stopped at its session's budget");
        }
        written.push(NewEvent::new(kind, Some(run), payload));
        events::append(&mut tx, session, &written).await?;
        tx.commit().await?;
        tracing::info!(run.id = %run, %status, %stop_reason, turns, "run finished");
        let took = finished
            .finished_at
            .unwrap_or_else(time::OffsetDateTime::now_utc)
            - finished.created_at;
        metrics::counter!("sandbox_agents_runs_finished_total", "status" => status.as_str(), "stop_reason" => stop_reason.as_str())
            .increment(1);
        metrics::histogram!("sandbox_agents_run_duration_seconds", "status" => status.as_str())
            .record(took.as_seconds_f64().max(0.0));
        Ok(true)
    }
}
