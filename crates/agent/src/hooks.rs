//! The run loop's side of `sandbox_agents_sessions::RunHooks`: what the lifecycle asks of
//! runs, answered here so that the lifecycle never imports the loop.

use crate::service::Inner;
use crate::Runs;
use async_trait::async_trait;
use sandbox_agents_domain::session::StoppedReason;
use sandbox_agents_domain::{ProjectId, RunId, SessionId};
use sandbox_agents_errors::Result;
use sandbox_agents_sessions::RunHooks;
use sandbox_agents_store::runs;
use sandbox_agents_store::sessions::SessionRecord;
use std::sync::{Arc, Weak};

/// What the lifecycle is to call for runs, given to it by [`Runs::new`]. It holds the runs
/// weakly, so that the lifecycle does not keep the loop alive (the loop holds the lifecycle):
/// it upgrades from the moment `Runs::new` returns until the runs are dropped at teardown;
/// after that, no session has a run.
pub(crate) fn for_lifecycle(runs: Weak<Inner>) -> Arc<dyn RunHooks> {
    Arc::new(Hooks(runs))
}

struct Hooks(Weak<Inner>);

impl Hooks {
    fn runs(&self) -> Option<Runs> {
        self.0.upgrade().map(|inner| Runs { inner })
    }
}

#[async_trait]
impl RunHooks for Hooks {
    /// A run in flight is cancelled (its terminal event comes before the stop's); an idle
    /// release finds a run that started meanwhile and gives up.
    async fn before_stop(&self, id: SessionId, reason: StoppedReason) -> Result<bool> {
        let Some(rt) = self.runs() else {
            return Ok(true);
        };
        if reason != StoppedReason::Idle {
            rt.cancel_run_of(id).await?;
            return Ok(true);
        }
        // A parked run waits on people, not on the sandbox: the sandbox may sleep meanwhile,
        // and the answer wakes it.
        match runs::running_for_session(&rt.inner.db, id).await? {
            None => Ok(true),
            Some(r) if r.parked => Ok(true),
            Some(_) => Ok(false),
        }
    }

    async fn start_first_prompt(
        &self,
        tx: &mut sqlx::PgConnection,
        session: &SessionRecord,
    ) -> Result<Option<RunId>> {
        match self.runs() {
            Some(rt) => rt.start_first_prompt(tx, session).await,
            None => Ok(None),
        }
    }

    fn drive(&self, project: ProjectId, session: SessionId, run: RunId) {
        if let Some(rt) = self.runs() {
            rt.spawn_drive(project, session, run, false);
        }
    }

    async fn recover(&self) -> Result<()> {
        match self.runs() {
            Some(rt) => rt.recover_runs().await,
            None => Ok(()),
        }
    }

    async fn sandbox_lost(&self, id: SessionId, reason: &str) -> Result<()> {
        match self.runs() {
            Some(rt) => rt.fail_run_of(id, reason).await,
            None => Ok(()),
        }
    }
}
