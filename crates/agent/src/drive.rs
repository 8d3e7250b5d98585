//! The task that drives one run: the turn loop (`turn.rs`) under the server's shutdown,
//! then the run's end written (`finish.rs`) with the turn's usage and conversation; and
//! waking an asleep session for it first.

use crate::finish::Outcome;
use crate::stop::Stop;
use crate::tally::Turn;
use crate::usage::turn_usage;
use crate::Runs;
use backon::Retryable;
use sandbox_agents_backoff::DATABASE_WRITE;
use sandbox_agents_domain::session::SessionStatus;
use sandbox_agents_domain::{ProjectId, RunId, SessionId};
use sandbox_agents_model::Message;
use sandbox_agents_store::{runs, sessions};
use serde_json::Value;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

impl Runs {
    /// Drives the run to its terminal event, or until it parks. Never fails: whatever goes
    /// wrong ends the run with `session.status_error`.
    pub(crate) async fn drive(
        &self,
        project: ProjectId,
        id: SessionId,
        run: RunId,
        wake: bool,
        token: CancellationToken,
    ) {
        let started = Instant::now();
        let mut turn = Turn::default();
        let shutdown = self.inner.shutdown.clone();
        let outcome = tokio::select! {
            r = self.run_loop(project, id, run, wake, &token, &mut turn, started) => r,
            _ = shutdown.cancelled() => Err(Stop::Outcome(Outcome::Failed("the server shut down during this turn".into()))),
        };
        // What the run wrote in its memory is kept before its end is told (and once it has
        // parked), so a sandbox lost afterwards still has it consolidated (sessions'
        // `memory.rs`).
        if !matches!(outcome, Err(Stop::Gone)) {
            self.inner.sessions.read_back_memory(id).await;
        }
        let outcome = match outcome {
            Ok(o) | Err(Stop::Outcome(o)) => o,
            Err(Stop::Gone) | Err(Stop::Parked) => return,
        };
        let outcome = if token.is_cancelled() && !matches!(outcome, Outcome::Completed(_)) {
            Outcome::Cancelled
        } else {
            outcome
        };
        let usage = turn_usage(
            &turn.ledger,
            turn.earlier_active + started.elapsed().saturating_sub(turn.queued).as_secs_f64(),
        );
        let conversation = match self.saved_conversation(id, run, &turn.added).await {
            Ok(c) => Some(c),
            Err(e) => {
                tracing::warn!(run.id = %run, error = %e, "could not read the conversation; it is kept as it was");
                None
            }
        };
        // A failed write is tried again a few times (a database restart or fail-over takes
        // seconds), so that the turn's real end is kept; a write that did commit although
        // its answer was lost is not written twice (`finish_run` changes only a running run).
        // The waits are [`DATABASE_WRITE`]'s (0.5 s, 2 s, 8 s); after the last, or once the
        // server shuts down, the run is left to the recovery sweep. A shutdown cuts a wait
        // short but the attempt after it is still made.
        let interrupted = shutdown.clone();
        let mut attempt = 0;
        let written = (|| {
            self.finish_run(
                id,
                run,
                &outcome,
                turn.steps,
                &usage,
                conversation.as_deref(),
            )
        })
        .retry(DATABASE_WRITE)
        .sleep(move |wait| {
            let interrupted = interrupted.clone();
            async move {
                tokio::select! {
                    _ = tokio::time::sleep(wait) => {}
                    _ = interrupted.cancelled() => {}
                }
            }
        })
        .when(|_| !shutdown.is_cancelled())
        .notify(|e, _| {
            attempt += 1;
            tracing::warn!(run.id = %run, error = %e, attempt, "could not record the end of a run; trying again");
        })
        .await;
        if let Err(e) = written {
            tracing::error!(run.id = %run, error = %e, "could not record the end of a run; the recovery sweep fails it");
        }
    }

    /// The stored history plus this turn's prompt and messages.
    async fn saved_conversation(
        &self,
        id: SessionId,
        run: RunId,
        added: &[Message],
    ) -> sandbox_agents_errors::Result<Vec<Value>> {
        let db = &self.inner.db;
        let mut c = runs::conversation(db, id).await?;
        let prompt = runs::get(db, run)
            .await?
            .map(|r| r.prompt)
            .unwrap_or_default();
        c.push(serde_json::to_value(Message::user(prompt)).expect("a message serialises"));
        c.extend(
            answer_dangling(added)
                .iter()
                .map(|m| serde_json::to_value(m).expect("a message serialises")),
        );
        Ok(c)
    }

    /// Wakes an asleep session for this run: boot (written as `session.status_running`), then
    /// wait until it is running. A failed boot fails the run. The boot has 300 s from when it
    /// gets a sandbox: time queued under the sandbox limits does not count (the run waits as
    /// long as the queue does; an interrupt ends the wait).
    pub(crate) async fn wake(&self, project: ProjectId, id: SessionId) -> Result<(), Stop> {
        let db = &self.inner.db;
        self.inner.sessions.wake(project, id).await?;
        const BOOT: Duration = Duration::from_secs(300);
        let mut deadline = Instant::now() + BOOT;
        loop {
            let s = sessions::get(db, project, id).await?;
            match s.status {
                SessionStatus::Running => return Ok(()),
                SessionStatus::Provisioning if Instant::now() < deadline => {
                    if sandbox_agents_store::admission::is_queued(db, id).await? {
                        deadline = Instant::now() + BOOT;
                    }
                    tokio::time::sleep(Duration::from_millis(100)).await
                }
                _ => {
                    return Err(Stop::Outcome(Outcome::Failed(s.error.unwrap_or_else(
                        || format!("the sandbox did not start (it is {})", s.status),
                    ))))
                }
            }
        }
    }
}

/// `added` with a note answering every tool call it holds no answer for (a turn stopped
/// between a call and its answer: an interrupt, a budget, a step limit), each right after the
/// answers its step did get. Invariant: a stored conversation answers every tool call it
/// holds, or the next turn's request is refused by the provider.
fn answer_dangling(added: &[Message]) -> Vec<Message> {
    fn close(out: &mut Vec<Message>, open: &mut Vec<String>) {
        for id in open.drain(..) {
            out.push(Message::tool(
                id,
                "The turn was interrupted before this call was answered.",
            ));
        }
    }
    let mut out = Vec::with_capacity(added.len());
    let mut open: Vec<String> = Vec::new();
    for m in added {
        match m {
            Message::Tool { tool_call_id, .. } => open.retain(|id| id != tool_call_id),
            _ => close(&mut out, &mut open),
        }
        out.push(m.clone());
        if let Message::Assistant { tool_calls, .. } = m {
            open = tool_calls.iter().map(|c| c.id.clone()).collect();
        }
    }
    close(&mut out, &mut open);
    out
}

#[cfg(test)]
mod tests {
    use super::answer_dangling;
    use sandbox_agents_model::{Message, ToolCall};

    fn call(id: &str) -> ToolCall {
        ToolCall {
            id: id.into(),
            name: "shell".into(),
            arguments: "{}".into(),
        }
    }

    fn assistant(ids: &[&str]) -> Message {
        Message::Assistant {
            content: None,
            tool_calls: ids.iter().map(|i| call(i)).collect(),
        }
    }

    fn ids_answered(ms: &[Message]) -> Vec<String> {
        ms.iter()
            .filter_map(|m| match m {
                Message::Tool { tool_call_id, .. } => Some(tool_call_id.clone()),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn every_call_gets_an_answer_right_after_its_steps_own() {
        let added = vec![
            assistant(&["a", "b"]),
            Message::tool("a", "done"),
            assistant(&["c"]),
        ];
        let out = answer_dangling(&added);
        assert_eq!(ids_answered(&out), ["a", "b", "c"]);
        // b's note comes before the next step, not at the end.
        assert!(matches!(&out[2], Message::Tool { tool_call_id, .. } if tool_call_id == "b"));
        assert!(matches!(&out[3], Message::Assistant { .. }));
        let whole = vec![
            assistant(&["x"]),
            Message::tool("x", "ok"),
            Message::user("next"),
        ];
        assert_eq!(
            answer_dangling(&whole),
            whole,
            "a well-formed turn is kept as it is"
        );
    }
}
