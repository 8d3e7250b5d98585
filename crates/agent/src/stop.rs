//! How the loop stops early from inside a step, and the check between steps.

use crate::finish::Outcome;
use crate::Runs;
use sandbox_agents_domain::session::RunStatus;
use sandbox_agents_domain::RunId;
use sandbox_agents_store::runs;
use tokio_util::sync::CancellationToken;

/// Why the loop stopped early, from inside a step.
pub(crate) enum Stop {
    Outcome(Outcome),
    /// The run was finished by someone else: write nothing more.
    Gone,
    /// The run parked on deferrable calls: write nothing more; an answer continues it.
    Parked,
}

/// A failure inside the loop fails the run; what the run's `error` and its terminal event
/// say is the detail the API would answer with
/// ([`sandbox_agents_errors::ServiceError::for_user`]): never a database or backend message.
impl From<sandbox_agents_errors::ServiceError> for Stop {
    fn from(e: sandbox_agents_errors::ServiceError) -> Self {
        Stop::Outcome(Outcome::Failed(e.for_user().detail.to_string()))
    }
}

impl From<sqlx::Error> for Stop {
    fn from(e: sqlx::Error) -> Self {
        sandbox_agents_errors::ServiceError::from(e).into()
    }
}

impl From<sandbox_agents_store::Error> for Stop {
    fn from(e: sandbox_agents_store::Error) -> Self {
        sandbox_agents_errors::ServiceError::from(e).into()
    }
}

/// Between model steps: a cancel in this process. One another process recorded refuses the
/// step's write instead ([`Runs::write_step`]), which saves a read per step.
pub(crate) fn cancelled_here(token: &CancellationToken) -> Result<(), Stop> {
    if token.is_cancelled() {
        return Err(Stop::Outcome(Outcome::Cancelled));
    }
    Ok(())
}

impl Runs {
    /// While waiting on clients: a local cancel, or one another process recorded.
    pub(crate) async fn check_cancelled(
        &self,
        run: RunId,
        token: &CancellationToken,
    ) -> Result<(), Stop> {
        cancelled_here(token)?;
        match runs::get(&self.inner.db, run).await? {
            Some(r) if r.status != RunStatus::Running => Err(Stop::Gone),
            Some(r) if r.cancel_requested => Err(Stop::Outcome(Outcome::Cancelled)),
            None => Err(Stop::Gone),
            Some(_) => Ok(()),
        }
    }
}
