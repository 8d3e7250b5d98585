//! The turn loop: model step after model step, each one's tool calls run, until the model
//! answers without tool calls, the turn limit is reached, the model fails, the run is
//! cancelled or it parks on deferrable client tool calls. What one step writes is
//! `step.rs`, how its calls run is `tool_round.rs`, what the model starts from is
//! `context.rs`. Subagents would be started from a step's tool calls, here.

use crate::client_tools;
use crate::context::Turn;
use crate::finish::Outcome;
use crate::park::{Parked, Progress};
use crate::stop::Stop;
use crate::Runs;
use sandbox_agents_domain::tools::ClientTool;
use sandbox_agents_domain::{ProjectId, RunId, SessionId};
use sandbox_agents_model::{ChatRequest, Message};
use std::time::Instant;
use tokio_util::sync::CancellationToken;

/// How a step's call is handled.
pub(crate) enum Kind<'a> {
    /// A sandbox tool (or an unknown name, which its runner answers with an error).
    Sandbox,
    Client(&'a ClientTool),
}

impl Runs {
    /// The turn from its context to its outcome (the caller writes the end).
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn run_loop(
        &self,
        project: ProjectId,
        id: SessionId,
        run: RunId,
        wake: bool,
        token: &CancellationToken,
        turn: &mut Turn,
        started: Instant,
    ) -> Result<Outcome, Stop> {
        if wake {
            self.wake(project, id).await?;
        }
        let mut ctx = self.context(project, id, run, turn).await?;
        if ctx.resumed && i64::from(turn.steps) >= ctx.max {
            return Ok(Outcome::MaxTurns(ctx.max));
        }
        for step in (i64::from(turn.steps) + 1)..=ctx.max {
            self.check_cancelled(run, token).await?;
            self.compact_if_needed(
                id,
                run,
                &turn.model,
                &ctx.client,
                &ctx.specs,
                &mut ctx.messages,
                &mut ctx.compaction,
                &mut turn.usage,
                token,
            )
            .await?;
            let mut req =
                ChatRequest::new(turn.model.clone(), ctx.messages.clone()).tools(ctx.specs.clone());
            req.reasoning_effort = ctx.reasoning_effort.clone();
            let completion = tokio::select! {
                c = self.model_step(&ctx.client, req, id, run) => c?,
                _ = token.cancelled() => return Err(Stop::Outcome(Outcome::Cancelled)),
            };
            ctx.compaction
                .observe(&completion.usage, ctx.messages.len());
            turn.steps += 1;
            turn.usage += completion.usage;
            let kinds: Vec<Kind> = completion
                .tool_calls
                .iter()
                .map(
                    |c| match ctx.client_tools.iter().find(|t| t.name == c.name) {
                        Some(t) => Kind::Client(t),
                        None => Kind::Sandbox,
                    },
                )
                .collect();
            let call_rows = self.write_step(id, run, &completion, &kinds).await?;
            let assistant = Message::from_completion(&completion);
            if completion.tool_calls.is_empty() {
                turn.added.push(assistant);
                return Ok(Outcome::Completed(completion.text));
            }
            let (answers, deferrable, stopped) = self
                .run_tools(
                    project,
                    id,
                    run,
                    &ctx.specs,
                    &completion,
                    &kinds,
                    &call_rows,
                    token,
                )
                .await;
            // The assistant message and the answers go in together, so the stored
            // conversation never holds a call without its result.
            ctx.messages.push(assistant.clone());
            ctx.messages.extend(answers.iter().cloned());
            turn.added.push(assistant);
            turn.added.extend(answers);
            if let Some(stop) = stopped {
                return Err(stop);
            }
            if !deferrable.is_empty() {
                let progress = Progress {
                    messages: turn.added.clone(),
                    awaiting: deferrable.clone(),
                    usage: turn.usage,
                    active_seconds: turn.earlier_active + started.elapsed().as_secs_f64(),
                    model: turn.model.clone(),
                    agent: turn.agent.clone(),
                };
                match self
                    .park(id, run, &deferrable, progress, turn.steps)
                    .await?
                {
                    Parked::Yes => return Err(Stop::Parked),
                    Parked::Answered(calls) => {
                        let more: Vec<Message> = calls.iter().map(client_tools::answer).collect();
                        ctx.messages.extend(more.iter().cloned());
                        turn.added.extend(more);
                    }
                }
            }
            if step == ctx.max {
                return Ok(Outcome::MaxTurns(ctx.max));
            }
        }
        Ok(Outcome::MaxTurns(ctx.max))
    }
}
