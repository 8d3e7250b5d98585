//! The session's budget, checked before every model call of a turn (the run's frame's steps,
//! its subagents' and compaction's): what the session had used when the turn began, plus
//! what the turn has used since (its ledger and steps in `tally::Turn`, and the time it has
//! run).
//!
//! Invariants:
//! * A call starts only while every limit is above what was used, so the session overshoots
//!   a limit by at most the one call that crossed it.
//! * The budget is the one the session had when the turn began (or resumed): a PATCH applies
//!   from the next turn. A turn is one session's, and a session runs one turn at a time, so
//!   what it had used then is not changed by anyone else meanwhile.

use crate::Runs;
use sandbox_agents_domain::budget::{Budget, BudgetHit, BudgetUse};
use sandbox_agents_domain::RunId;
use sandbox_agents_errors::Result;
use sandbox_agents_model::Usage;
use sandbox_agents_store::sessions::SessionRecord;
use sandbox_agents_store::{events, runs};
use std::time::Instant;

/// A turn's budget and what the session had used before it.
#[derive(Clone, Debug)]
pub(crate) struct Guard {
    pub budget: Budget,
    before: BudgetUse,
    since: Instant,
}

impl Guard {
    /// The limit the session has reached, counting what the turn used so far (`t`, over
    /// `steps` steps of its own); None while a model call may start.
    pub(crate) fn reached(&self, t: &Usage, steps: i32) -> Option<BudgetHit> {
        let used = BudgetUse {
            cost_usd: self.before.cost_usd + t.cost_usd,
            total_tokens: self
                .before
                .total_tokens
                .saturating_add(i64::try_from(t.total_tokens).unwrap_or(i64::MAX)),
            turns: self.before.turns + i64::from(steps),
            sandbox_seconds: self.before.sandbox_seconds + self.since.elapsed().as_secs_f64(),
        };
        self.budget.reached(&used)
    }
}

impl Runs {
    /// The guard of `run`, a turn of `session` that begins now; None without a budget. What
    /// the session used before: its usage (the turns that ended), its other runs' steps, and
    /// the seconds its sandbox has been up. A parked turn that resumes brings its own usage
    /// so far in its ledger, not yet in the session's.
    pub(crate) async fn budget_guard(
        &self,
        session: &SessionRecord,
        run: RunId,
    ) -> Result<Option<Guard>> {
        let Some(budget) = session.budget() else {
            return Ok(None);
        };
        let db = &self.inner.db;
        let usage = &session.usage.0;
        let marks = events::boot_marks(db, session.id).await?;
        let before = BudgetUse {
            cost_usd: usage
                .get("cost_usd")
                .and_then(serde_json::Value::as_f64)
                .unwrap_or(0.0),
            total_tokens: usage
                .get("total_tokens")
                .and_then(serde_json::Value::as_i64)
                .unwrap_or(0),
            turns: runs::session_turns(db, session.id, run).await?,
            sandbox_seconds: sandbox_agents_domain::session::sandbox_seconds(
                &marks,
                time::OffsetDateTime::now_utc(),
            ),
        };
        Ok(Some(Guard {
            budget,
            before,
            since: Instant::now(),
        }))
    }
}
