//! What a turn accumulates while its frames step: the messages its run's frame adds to the
//! conversation, its steps and its usage. Its own module because every part of the loop
//! (the context, the frames, parking, subagents, the tool round) writes to it.

use crate::usage::Ledger;
use sandbox_agents_model::Message;

/// What a turn accumulates: the messages its run's frame added to the conversation, its
/// steps (the run's frame's; subagents' steps are their own) and usage.
#[derive(Default)]
pub(crate) struct Turn {
    pub added: Vec<Message>,
    pub steps: i32,
    pub ledger: Ledger,
    /// Active seconds before this process took the run (it was parked).
    pub earlier_active: f64,
    /// Time spent waiting for a slot under the run limits, which is not active time.
    pub queued: std::time::Duration,
    /// The session's budget, checked before every model call; None without one.
    pub budget: Option<crate::budget::Guard>,
    /// The project's month and its spend limit, as last read; None without a limit.
    pub month: Option<crate::spend::Month>,
}

impl Turn {
    /// Before a model call: the budget's limit the session has reached, as the run's end.
    pub fn check_budget(&self) -> Result<(), crate::stop::Stop> {
        let reached = |hit, scope| {
            Err(crate::stop::Stop::Outcome(
                crate::finish::Outcome::BudgetReached { hit, scope },
            ))
        };
        if let Some(hit) = self.month.and_then(|m| m.reached()) {
            return reached(hit, crate::finish::BudgetScope::Project);
        }
        match &self.budget {
            Some(guard) => match guard.reached(&self.ledger.total, self.steps) {
                Some(hit) => reached(hit, crate::finish::BudgetScope::Session(guard.budget)),
                None => Ok(()),
            },
            None => Ok(()),
        }
    }
}
