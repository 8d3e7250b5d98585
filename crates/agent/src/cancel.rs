//! Cancelling a run: an interrupt, or a stop, returns only after the cancelled terminal event
//! is committed, by the worker when it answers in time and here otherwise. A parked run has
//! no worker and is cancelled here at once.

use crate::finish::Outcome;
use crate::Runs;
use sandbox_agents_domain::session::RunStatus;
use sandbox_agents_domain::{ProjectId, SessionId};
use sandbox_agents_errors::Result;
use sandbox_agents_sessions::not_found;
use sandbox_agents_store::runs;
use sandbox_agents_store::sessions::{self, SessionRecord};
use serde_json::Map;
use std::time::{Duration, Instant};

/// How long an interrupt waits for the worker to write the cancelled terminal event before
/// writing it itself (the worker then finds its run finished and stops).
const CANCEL_GRACE: Duration = Duration::from_secs(5);

impl Runs {
    /// Cancels the session's run in flight and returns the session once the cancelled
    /// terminal event is committed. Without a run in flight the session is returned as is.
    #[tracing::instrument(skip_all, fields(session.id = %id))]
    pub async fn interrupt(&self, project: ProjectId, id: SessionId) -> Result<SessionRecord> {
        sessions::get(&self.inner.db, project, id)
            .await
            .map_err(|e| not_found(e, id))?;
        self.cancel_run_of(id).await?;
        sessions::get(&self.inner.db, project, id)
            .await
            .map_err(|e| not_found(e, id))
    }

    /// Cancels the session's run in flight, if any, and waits until its terminal event is
    /// committed: by the worker when it answers within [`CANCEL_GRACE`], else here.
    /// Ends the session's run in flight as failed with `reason`: written here, whoever
    /// drives it. Its worker then stops: here at once (its token), elsewhere at its next
    /// look at the run, which is no longer running (its own end would change nothing). A
    /// parked run is left waiting on people.
    pub(crate) async fn fail_run_of(&self, id: SessionId, reason: &str) -> Result<()> {
        let Some(run) = runs::running_for_session(&self.inner.db, id).await? else {
            return Ok(());
        };
        if run.parked {
            return Ok(());
        }
        let run_id = run.run_id();
        self.finish_run(
            id,
            run_id,
            &Outcome::Failed(reason.to_owned()),
            run.turns,
            &run.usage.0,
            None,
        )
        .await?;
        self.inner.runs.cancel(run_id);
        Ok(())
    }

    pub(crate) async fn cancel_run_of(&self, id: SessionId) -> Result<()> {
        let db = &self.inner.db;
        let Some(run) = runs::running_for_session(db, id).await? else {
            return Ok(());
        };
        let run_id = run.run_id();
        if run.parked {
            // Nobody drives a parked run: cancel it here. Its calls stop being pending in the
            // same transaction.
            let conversation = self.parked_conversation(id, &run).await?;
            self.finish_run(
                id,
                run_id,
                &Outcome::Cancelled,
                run.turns,
                &run.usage.0,
                Some(&conversation),
            )
            .await?;
            return Ok(());
        }
        runs::request_cancel(db, run_id).await?;
        self.inner.runs.cancel(run_id);
        let deadline = Instant::now() + CANCEL_GRACE;
        while Instant::now() < deadline {
            match runs::get(db, run_id).await? {
                Some(r) if r.status == RunStatus::Running => {}
                _ => return Ok(()),
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        tracing::warn!(run.id = %run_id, "the run's worker did not stop in time; cancelling it here");
        self.finish_run(
            id,
            run_id,
            &Outcome::Cancelled,
            run.turns,
            &Map::new(),
            None,
        )
        .await?;
        Ok(())
    }
}
