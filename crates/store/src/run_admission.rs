//! Admission of runs under the deployment's and the projects' limits on turns in flight
//! (`--max-runs`, `--max-runs-per-project`), decided in PostgreSQL so that every server
//! process shares one count and one queue, as sandboxes do (`admission`).
//!
//! A run is in flight while it is `running`, admitted and not parked: a turn parked on client
//! tool results holds no slot ([`crate::runs::park`] gives it back) and asks again when it
//! continues. A run driven by a process without limits is inserted admitted (so it is
//! counted, though it never waits). Any other run asks [`try_admit`] before its first step under one transaction-scoped
//! advisory lock of its own; runs that must wait keep their place by `queued_at`, and the
//! queue is fair between projects in the same way: of the waiting runs whose project is under
//! its limit, the one whose project has the fewest turns in flight goes first, then the oldest
//! (the one order of both queues, `sa_admission_queue` in SQL, read through
//! [`crate::admission::standing`]).

use crate::admission::{standing, Admission, Kind, Limits};
use crate::Result;
use sandbox_agents_domain::{ProjectId, RunId};

/// The key of the advisory lock every run admission takes (`'sa:runadm'` hashed once).
const LOCK: i64 = 0x5341_5255_4e41_444d;

/// Admits a run or queues it, in the caller's transaction (commit it). `None`: the run no
/// longer waits to be driven (it ended, parked, was deleted, or another process asked for it
/// to be cancelled).
pub async fn try_admit(
    tx: &mut sqlx::PgConnection,
    project: ProjectId,
    run: RunId,
    limits: Limits,
) -> Result<Option<Admission>> {
    sqlx::query!("select pg_advisory_xact_lock($1)", LOCK)
        .execute(&mut *tx)
        .await?;
    // Queued from now on (unless it already was); a run admitted before keeps its slot.
    let Some(queued) = sqlx::query!(
        r#"update runs r
              set queued_at = case when r.admitted then null else coalesce(r.queued_at, now()) end
           from runs old
           where r.id = $1 and old.id = r.id
             and r.status = 'running' and not r.parked and not r.cancel_requested
           returning r.admitted as "admitted!", (old.queued_at is null and not r.admitted) as "newly!""#,
        run.0,
    )
    .fetch_optional(&mut *tx)
    .await?
    else {
        return Ok(None);
    };
    if queued.admitted {
        return Ok(Some(Admission::Admitted));
    }
    let (limit, position) = standing(tx, Kind::Run, run.0, project, limits).await?;
    match limit {
        None => {
            sqlx::query!(
                "update runs set admitted = true, queued_at = null where id = $1",
                run.0
            )
            .execute(&mut *tx)
            .await?;
            Ok(Some(Admission::Admitted))
        }
        Some(limit) => Ok(Some(Admission::Queued {
            newly: queued.newly,
            limit,
            position,
        })),
    }
}
