//! The narrow interface between the lifecycle and the run loop. The lifecycle never imports
//! the loop: what it needs from runs goes through [`RunHooks`], which the run loop
//! (`sandbox-agents-agent`) implements; [`crate::Sessions::new`] requires it
//! ([`crate::SessionHooks`]).
//!
//! What the lifecycle needs, and why each is here:
//! * a stop must not cut a run short silently: the run in flight is cancelled first and its
//!   terminal event comes before `session.status_stopped` ([`RunHooks::before_stop`]);
//! * `create(prompt=...)` starts the first turn in the transaction that records the first
//!   boot, so its events follow the boot's ([`RunHooks::start_first_prompt`]), and the loop
//!   drives it once that commits ([`RunHooks::drive`]);
//! * the reconciler and the periodic sweep fail runs whose process died before they look at
//!   sandboxes ([`RunHooks::recover`]).

use async_trait::async_trait;
use sandbox_agents_domain::session::StoppedReason;
use sandbox_agents_domain::{ProjectId, RunId, SessionId};
use sandbox_agents_errors::Result;
use sandbox_agents_store::sessions::SessionRecord;

/// What the lifecycle asks of the run loop.
#[async_trait]
pub trait RunHooks: Send + Sync + 'static {
    /// Before a stop takes the session's lock. For any stop but an idle release, cancels the
    /// run in flight (or parked) and returns once its terminal event is committed: `true`.
    /// For an idle release: `false` when a run is in flight (the session is not idle after
    /// all), `true` otherwise (a parked run waits on people, not on the sandbox).
    async fn before_stop(&self, session: SessionId, reason: StoppedReason) -> Result<bool>;

    /// Inside the transaction that records a boot's `session.status_running`: starts the
    /// session's first prompt, if it has one. The caller drives the returned run after commit.
    async fn start_first_prompt(
        &self,
        tx: &mut sqlx::PgConnection,
        session: &SessionRecord,
    ) -> Result<Option<RunId>>;

    /// Drives a run [`RunHooks::start_first_prompt`] started, in the background.
    fn drive(&self, project: ProjectId, session: SessionId, run: RunId);

    /// Fails the runs whose server process is gone, and continues parked runs whose calls
    /// were all answered meanwhile.
    async fn recover(&self) -> Result<()>;

    /// The session's sandbox is gone (it ended on its own): its run in flight ends `failed`
    /// with `reason`, whichever process drives it. A parked run is left: it waits on people,
    /// and their answer boots the session again.
    async fn sandbox_lost(&self, session: SessionId, reason: &str) -> Result<()>;
}

/// What the lifecycle asks of environments (`sandbox-agents-environments` implements it;
/// [`crate::Sessions::new`] requires it): the lifecycle reads environment rows itself, but
/// creating one starts an image build, which is theirs.
#[async_trait]
pub trait EnvironmentHooks: Send + Sync + 'static {
    /// The project's environment for agents with the `python` capability and no environment
    /// of their own: the one named `analysis`, created with the kernel's packages (its build
    /// starting) when the project has none.
    async fn analysis_environment(
        &self,
        project: ProjectId,
    ) -> Result<sandbox_agents_store::environments::EnvironmentRecord>;
}
