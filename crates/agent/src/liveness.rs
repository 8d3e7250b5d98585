//! Which process drives which run, and what happens to runs whose process died.
//!
//! Each server process holds a liveness lock (see `sandbox_agents_sessions`' `liveness.rs`) on
//! a connection of its own, and stamps its key on the runs it drives. A run that is `running`,
//! not parked, and whose key nobody holds lost its worker (the process was killed or its
//! database connection dropped): the recovery sweep fails it with a clear error, so it never
//! stays `running`, and the session takes messages again. A parked run has no worker and is
//! left alone: its answer may come after any number of restarts.

use crate::finish::Outcome;
use crate::Runs;
use sandbox_agents_domain::ProjectId;
use sandbox_agents_errors::Result;
use sandbox_agents_store::runs;
use serde_json::Map;

/// How this process stamps a run it takes to drive.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Driver {
    /// This process's liveness key.
    pub worker: i32,
    /// Whether its runs count among the turns in flight from the start: yes when no limit on
    /// turns applies to them (no flag of this process, no `limits.max_runs` of their
    /// project), so that processes with limits count them (`admission.rs`).
    pub admitted: bool,
}

impl Runs {
    /// How this process stamps the runs of `project` it starts or continues (`db`: the
    /// caller's transaction when it holds one, so no second connection is taken).
    pub(crate) async fn driver(
        &self,
        db: impl sqlx::PgExecutor<'_>,
        project: ProjectId,
    ) -> Result<Driver> {
        let worker = self.worker_key().await?;
        Ok(Driver {
            worker,
            admitted: !self.run_limits_apply(db, project).await?,
        })
    }

    /// This process's liveness key (the lifecycle's, which takes it on first use).
    pub(crate) async fn worker_key(&self) -> Result<i32> {
        self.inner.sessions.worker_key().await
    }

    /// Fails every run whose worker process is gone, or that this process stamped but no
    /// longer drives (`LocalRuns::abandoned`), and continues parked runs whose calls were all
    /// answered while they could not be continued at once.
    #[tracing::instrument(skip_all)]
    pub(crate) async fn recover_runs(&self) -> Result<()> {
        let mine = self.worker_key().await?;
        let db = &self.inner.db;
        let (own, others): (Vec<_>, Vec<_>) = runs::driven(db)
            .await?
            .into_iter()
            .partition(|r| r.worker == Some(mine));
        let abandoned = self.inner.runs.abandoned(own.iter().map(|r| r.run_id()));
        // No connection is held across the loop: failing a run takes connections of its own.
        let mut alive = self.inner.sessions.alive_processes();
        for run in others {
            if alive.check(run.worker).await? {
                continue;
            }
            tracing::warn!(run.id = %run.id, worker = ?run.worker, "failing a run whose server process is gone");
            self.fail_lost(&run, "the server process running this turn stopped (it was restarted or crashed); send the message again").await?;
        }
        for run in own.iter().filter(|r| abandoned.contains(&r.run_id())) {
            tracing::error!(run.id = %run.id, "failing a run this process stamped but no longer drives");
            self.fail_lost(run, "this turn's worker ended without recording its end (see the server's log); send the message again").await?;
        }
        for run in runs::parked_and_answered(db).await? {
            self.resume_parked(run.session_id, run.run_id()).await?;
        }
        Ok(())
    }

    /// Fails a run nobody drives any more, with `error` as its reason.
    async fn fail_lost(&self, run: &runs::RunRecord, error: &str) -> Result<()> {
        self.finish_run(
            run.session_id,
            run.run_id(),
            &Outcome::Failed(error.into()),
            run.turns,
            &Map::new(),
            None,
        )
        .await?;
        Ok(())
    }
}
