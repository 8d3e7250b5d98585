//! Admission of boots under the deployment's and the projects' sandbox limits, decided in
//! PostgreSQL so that every server process shares one count and one queue.
//!
//! A sandbox counts while its session is `running`, or `provisioning` and admitted. A boot
//! asks [`try_admit`] under one transaction-scoped advisory lock (so two processes cannot
//! both take the last slot); sessions that must wait keep their place by `queued_at`.
//! The queue is fair between projects: of the queued sessions whose project is under its
//! limit, the one whose project holds the fewest sandboxes goes first, then the oldest. A
//! project that floods the queue therefore waits behind its own sessions, not others'.

use crate::Result;
use sandbox_agents_domain::{ProjectId, SessionId};

/// The key of the advisory lock every admission takes (`'sa:admission'` hashed once).
const LOCK: i64 = 0x5341_4144_4d49_5431;

/// The limits; `None` is unlimited.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Limits {
    pub deployment: Option<i64>,
    pub project: Option<i64>,
}

impl Limits {
    pub fn any(&self) -> bool {
        self.deployment.is_some() || self.project.is_some()
    }
}

/// What [`try_admit`] decided.
#[derive(Debug, PartialEq, Eq)]
pub enum Admission {
    Admitted,
    /// The session waits; `newly` when it was not queued before (its event is due), with
    /// the limit that holds it and its place among the sessions waiting.
    Queued {
        newly: bool,
        limit: &'static str,
        position: i64,
    },
}

/// Admits a `provisioning` session or queues it, in the caller's transaction (commit it).
pub async fn try_admit(
    tx: &mut sqlx::PgConnection,
    project: ProjectId,
    session: SessionId,
    limits: Limits,
) -> Result<Admission> {
    sqlx::query!("select pg_advisory_xact_lock($1)", LOCK)
        .execute(&mut *tx)
        .await?;
    // Queued from now on (unless it already was): the ordering below then places it. A
    // session admitted before (a boot taken over after a restart, a restore) keeps its room.
    let queued = sqlx::query!(
        r#"update sessions s
              set queued_at = case when s.admitted then null else coalesce(s.queued_at, now()) end
           from sessions old
           where s.id = $1 and old.id = s.id
           returning s.admitted as "admitted!", (old.queued_at is null and not s.admitted) as "newly!""#,
        session.0,
    )
    .fetch_one(&mut *tx)
    .await?;
    if queued.admitted {
        return Ok(Admission::Admitted);
    }
    let project_max = limits.project.unwrap_or(i64::MAX);
    let row = sqlx::query!(
        r#"with holding as (
             select project_id, count(*) as n from sessions
              where status = 'running' or (status = 'provisioning' and admitted)
              group by project_id
           ),
           waiting as (
             select s.id, s.project_id, s.queued_at, coalesce(h.n, 0) as held
               from sessions s left join holding h on h.project_id = s.project_id
              where s.status = 'provisioning' and not s.admitted and s.queued_at is not null
           )
           select
             (select coalesce(sum(n), 0) from holding)::int8 as "total!",
             (select coalesce(n, 0) from holding where project_id = $2)::int8 as "in_project",
             (select id from waiting where held < $3 order by held, queued_at, id limit 1) as "head",
             (select count(*) from waiting w, waiting me
               where me.id = $1 and (w.held, w.queued_at, w.id) < (me.held, me.queued_at, me.id)) as "ahead!""#,
        session.0,
        project.0,
        project_max,
    )
    .fetch_one(&mut *tx)
    .await?;
    let limit = holding_limit(
        limits,
        row.in_project.unwrap_or(0),
        row.total,
        row.head.is_some_and(|h| h != session.0),
    );
    match limit {
        None => {
            sqlx::query!(
                "update sessions set admitted = true, queued_at = null where id = $1",
                session.0
            )
            .execute(&mut *tx)
            .await?;
            Ok(Admission::Admitted)
        }
        Some(limit) => Ok(Admission::Queued {
            newly: queued.newly,
            limit,
            position: row.ahead + 1,
        }),
    }
}

/// What holds a candidate back, if anything: its project's limit (`in_project` held), the
/// deployment's (`total` held), or another candidate due first (`behind`: there is room, but
/// that one takes it, being admitted or about to be). Shared by sandboxes and runs
/// (`run_admission`).
pub(crate) fn holding_limit(
    limits: Limits,
    in_project: i64,
    total: i64,
    behind: bool,
) -> Option<&'static str> {
    if limits.project.is_some_and(|m| in_project >= m) {
        Some("project")
    } else if limits.deployment.is_some_and(|m| total >= m) {
        Some("deployment")
    } else if behind {
        Some("queue")
    } else {
        None
    }
}

/// Up to `n` queued sessions that could be admitted now, in queue order (each boot asks
/// [`try_admit`] again, so naming one too many costs a lookup, not a sandbox).
pub async fn due(db: &crate::Db, limits: Limits, n: i64) -> Result<Vec<SessionId>> {
    let project_max = limits.project.unwrap_or(i64::MAX);
    let deployment_max = limits.deployment.unwrap_or(i64::MAX);
    let rows = sqlx::query!(
        r#"with holding as (
             select project_id, count(*) as n from sessions
              where status = 'running' or (status = 'provisioning' and admitted)
              group by project_id
           )
           select s.id from sessions s left join holding h on h.project_id = s.project_id
            where s.status = 'provisioning' and not s.admitted and s.queued_at is not null
              and coalesce(h.n, 0) < $1
              and (select coalesce(sum(n), 0) from holding)::int8 < $3
            order by coalesce(h.n, 0), s.queued_at, s.id
            limit $2"#,
        project_max,
        n,
        deployment_max,
    )
    .fetch_all(db)
    .await?;
    Ok(rows.into_iter().map(|r| SessionId(r.id)).collect())
}

/// Whether the session waits in the queue (not yet admitted).
pub async fn is_queued(db: &crate::Db, session: SessionId) -> Result<bool> {
    Ok(sqlx::query_scalar!(
        r#"select (status = 'provisioning' and not admitted and queued_at is not null) as "queued!"
             from sessions where id = $1"#,
        session.0
    )
    .fetch_optional(db)
    .await?
    .unwrap_or(false))
}
