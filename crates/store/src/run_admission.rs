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
//! its limit, the one whose project has the fewest turns in flight goes first, then the oldest.

use crate::admission::{holding_limit, Admission, Limits};
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
    let project_max = limits.project.unwrap_or(i64::MAX);
    let row = sqlx::query!(
        r#"with holding as (
             select s.project_id, count(*) as n
               from runs r join sessions s on s.id = r.session_id
              where r.status = 'running' and r.admitted and not r.parked
              group by s.project_id
           ),
           waiting as (
             select r.id, s.project_id, r.queued_at, coalesce(h.n, 0) as held
               from runs r join sessions s on s.id = r.session_id
               left join holding h on h.project_id = s.project_id
              where r.status = 'running' and not r.admitted and not r.parked
                and not r.cancel_requested and r.queued_at is not null
           )
           select
             (select coalesce(sum(n), 0) from holding)::int8 as "total!",
             (select coalesce(n, 0) from holding where project_id = $2)::int8 as "in_project",
             (select id from waiting where held < $3 order by held, queued_at, id limit 1) as "head",
             (select count(*) from waiting w, waiting me
               where me.id = $1 and (w.held, w.queued_at, w.id) < (me.held, me.queued_at, me.id)) as "ahead!""#,
        run.0,
        project.0,
        project_max,
    )
    .fetch_one(&mut *tx)
    .await?;
    let limit = holding_limit(
        limits,
        row.in_project.unwrap_or(0),
        row.total,
        row.head.is_some_and(|h| h != run.0),
    );
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
            position: row.ahead + 1,
        })),
    }
}
