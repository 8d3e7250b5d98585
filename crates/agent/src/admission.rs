//! The limits on turns in flight (`--max-runs`, `--max-runs-per-project`, and a project's own
//! `limits.max_runs` in place of the latter): before its first step, once its sandbox is up
//! (and again when it continues after parking), a run asks the store to admit it (one count
//! and one fair queue in PostgreSQL for every process, `store::run_admission`). A run that
//! must wait says so once with `session.run_queued` and waits, with its session busy, until a
//! turn in flight ends or parks: at once when that happens in this process, within a second
//! when another process frees the room (or an operator raises the project's limit). An
//! interrupt ends the wait, like any other. A run no limit applies to is stamped admitted as
//! it starts (`liveness::Driver`): it never waits, but it counts for the processes and
//! projects that have limits.

use crate::finish::Outcome;
use crate::stop::Stop;
use crate::Runs;
use sandbox_agents_domain::event::{EventType, NewEvent};
use sandbox_agents_domain::{ProjectId, RunId, SessionId};
use sandbox_agents_store::admission::Admission;
use sandbox_agents_store::{events, projects, run_admission};
use serde_json::json;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// How often a waiting run asks again when nothing in this process freed room: the bound on
/// how late it notices room another process freed.
const POLL: Duration = Duration::from_secs(1);

/// Admission asks of this process at once (see [`Runs::admit_run`]).
pub(crate) const ASKS_AT_ONCE: usize = 2;

impl Runs {
    /// Returns once the run may drive its loop (at once without limits), with how long it
    /// waited.
    pub(crate) async fn admit_run(
        &self,
        project: ProjectId,
        id: SessionId,
        run: RunId,
        token: &CancellationToken,
    ) -> Result<Duration, Stop> {
        let limits = self.inner.run_limits;
        if !self.run_limits_apply(&self.inner.db, project).await? {
            return Ok(Duration::ZERO);
        }
        let asked = Instant::now();
        loop {
            // Registered before asking, so room freed meanwhile is not missed.
            let room = self.inner.run_room.notified();
            tokio::pin!(room);
            room.as_mut().enable();
            // A few asks at a time: each waits inside its transaction for the one admission
            // lock of the deployment, holding a pooled connection meanwhile, and every
            // waiting run asks when room is freed.
            let asking = tokio::select! {
                p = self.inner.admission_asks.acquire() => p.expect("never closed"),
                _ = token.cancelled() => return Err(Stop::Outcome(Outcome::Cancelled)),
            };
            let mut tx = self.inner.db.begin().await?;
            let decided = run_admission::try_admit(&mut tx, project, run, limits).await?;
            if let Some(Admission::Queued {
                newly: true,
                limit,
                position,
            }) = decided
            {
                let reason = match limit {
                    "project" => {
                        "the project has as many turns in flight as it may (its limits.max_runs, \
                         else --max-runs-per-project)"
                    }
                    "deployment" => {
                        "the deployment has as many turns in flight as it may (--max-runs)"
                    }
                    _ => "other turns wait for a slot before this one",
                };
                events::append(
                    &mut tx,
                    id,
                    &[NewEvent::new(
                        EventType::SessionRunQueued,
                        Some(run),
                        json!({"limit": limit, "position": position, "reason": reason}),
                    )],
                )
                .await?;
                metrics::counter!("sandbox_agents_runs_queued_total").increment(1);
                tracing::info!(limit, position, "the turn waits under the run limits");
            }
            tx.commit().await?;
            drop(asking);
            match decided {
                Some(Admission::Admitted) => {
                    // The next in line may fit too (several slots freed at once).
                    self.inner.run_room.notify_waiters();
                    return Ok(asked.elapsed());
                }
                Some(Admission::Queued { .. }) => {}
                None => {
                    // Cancelled by another process, or no longer this process's to drive.
                    self.check_cancelled(run, token).await?;
                    return Err(Stop::Gone);
                }
            }
            tokio::select! {
                _ = room => {}
                _ = tokio::time::sleep(POLL) => {}
                _ = token.cancelled() => return Err(Stop::Outcome(Outcome::Cancelled)),
            }
        }
    }

    /// A turn of this process ended or parked: the runs waiting here ask again (none wait
    /// when no limit applies, and waking nobody costs nothing).
    pub(crate) fn room_for_runs(&self) {
        self.inner.run_room.notify_waiters();
    }

    /// Whether turns of `project` are admitted under limits: this process's flags, or the
    /// project's own `limits.max_runs` (set by an operator, seen by every process).
    pub(crate) async fn run_limits_apply(
        &self,
        db: impl sqlx::PgExecutor<'_>,
        project: ProjectId,
    ) -> sandbox_agents_errors::Result<bool> {
        if self.inner.run_limits.any() {
            return Ok(true);
        }
        Ok(projects::limits(db, project).await?.max_runs.is_some())
    }
}
