//! The turn loop: the run's frame (`frame.rs`) steps until the model answers without tool
//! calls, the turn limit is reached, the model fails, the run is cancelled or it parks on
//! deferrable client tool calls. What one step writes is `step.rs`, how its calls run is
//! `tool_round.rs` (subagents called as tools among them, `subagents.rs`), what the model
//! starts from is `context.rs`.

use crate::context::Context;
use crate::finish::Outcome;
use crate::frame::FrameEnd;
use crate::stop::Stop;
use crate::tally::Turn;
use crate::Runs;
use sandbox_agents_domain::{ProjectId, RunId, SessionId};
use std::time::Instant;
use tokio_util::sync::CancellationToken;

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
            // An interrupt ends the wait for a sandbox (queued under the limits, or booting).
            tokio::select! {
                woke = self.wake(project, id) => woke?,
                _ = token.cancelled() => return Err(Stop::Outcome(Outcome::Cancelled)),
            }
        }
        // A slot among the turns in flight, once the sandbox is up: a turn never holds one
        // while it waits for a sandbox (with both limits set, such a turn would keep the
        // slot the turn of a running session needs to finish, and so to free its sandbox).
        // The wait is not active time.
        turn.queued = self.admit_run(project, id, run, token).await?;
        let started = started + turn.queued;
        let Context {
            cast,
            mut frame,
            resumed,
            nested,
            awaiting,
        } = self.context(project, id, run, turn, started).await?;
        if resumed && frame.steps >= frame.max {
            // The conversation keeps an answer for every call it parked on, run or not.
            self.answer_unrun(turn, &awaiting).await?;
            return Ok(Outcome::MaxTurns(frame.max));
        }
        turn.budget = self.budget_guard(&cast.session, run).await?;
        turn.month = self.month_at_start(project).await?;
        // The calls the run parked on answer first (those a person allowed run now), then its
        // subagent calls that parked with it (either may park it again).
        let parked = self
            .settle(&cast, &mut frame, turn, &awaiting, token)
            .await?;
        let mut still = self
            .resume_nested(&cast, &mut frame, turn, nested, token)
            .await?;
        still.extend(parked);
        if !still.is_empty() {
            self.park_frame(&cast, &mut frame, turn, Vec::new(), still, token)
                .await?;
        }
        match self.frame_loop(&cast, &mut frame, turn, token).await? {
            FrameEnd::Answer(text) => Ok(Outcome::Completed(text)),
            FrameEnd::MaxTurns(n) => Ok(Outcome::MaxTurns(n)),
            // The run's frame parks through `park_frame`, which never ends it this way.
            FrameEnd::Parked { .. } => Err(Stop::Parked),
        }
    }
}
