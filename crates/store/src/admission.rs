//! Admission of boots under the deployment's and the projects' sandbox limits, decided in
//! PostgreSQL so that every server process shares one count and one queue.
//!
//! A sandbox counts while its session is `running`, or `provisioning` and admitted. A boot
//! asks [`try_admit`] under one transaction-scoped advisory lock (so two processes cannot
//! both take the last slot); sessions that must wait keep their place by `queued_at`.
//! The queue is fair between projects: of the queued sessions whose project is under its
//! limit, the one whose project holds the fewest sandboxes goes first, then the oldest. A
//! project that floods the queue therefore waits behind its own sessions, not others'. That
//! order is written once, in SQL (`sa_admission_queue`, migration `admission_queue`), for
//! this queue and the runs' (`run_admission`) alike: [`standing`] and [`due`] read it.

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
    let (limit, position) = standing(tx, Kind::Sandbox, session.0, project, limits).await?;
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
            position,
        }),
    }
}

/// The kinds of admission, each with a queue of its own: which of its rows hold room and which
/// wait is the one thing they differ in (`sa_admission_entries` in SQL); the fair order is
/// written once (`sa_admission_queue`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Sessions' sandboxes (this module).
    Sandbox,
    /// Turns in flight (`run_admission`).
    Run,
}

impl Kind {
    /// The name `sa_admission_entries` knows it by.
    fn as_str(self) -> &'static str {
        match self {
            Kind::Sandbox => "sandbox",
            Kind::Run => "run",
        }
    }
}

/// Where `entry` (a session or a run of `project`, queued in the caller's transaction) stands:
/// what holds it back under `limits` (`None`: admit it now) and its place in its kind's queue
/// (1 when it is not in the queue). A project's own limit (`limits.max_sandboxes`,
/// `.max_runs`: `sa_project_cap`) takes the place of `limits.project` for it, for the entry
/// and for every entry that may be due before it. Call it under the kind's advisory lock, so
/// the counts cannot change before the caller admits it.
pub(crate) async fn standing(
    tx: &mut sqlx::PgConnection,
    kind: Kind,
    entry: uuid::Uuid,
    project: ProjectId,
    limits: Limits,
) -> Result<(Option<&'static str>, i64)> {
    let row = sqlx::query!(
        r#"with queue as (select * from sa_admission_queue($1))
           select
             (select count(*) from sa_admission_entries($1) where holds) as "total!",
             (select count(*) from sa_admission_entries($1) where holds and project_id = $3)
               as "in_project!",
             sa_project_cap($3, $1) as "cap",
             (select id from queue where held < coalesce(queue.cap, $4) order by place limit 1)
               as "head",
             coalesce((select place from queue where id = $2), 1) as "position!""#,
        kind.as_str(),
        entry,
        project.0,
        limits.project.unwrap_or(i64::MAX),
    )
    .fetch_one(&mut *tx)
    .await?;
    let limits = Limits {
        project: row.cap.or(limits.project),
        ..limits
    };
    let limit = holding_limit(
        limits,
        row.in_project,
        row.total,
        row.head.is_some_and(|h| h != entry),
    );
    Ok((limit, row.position))
}

/// What holds a candidate back, if anything: its project's limit (`in_project` held), the
/// deployment's (`total` held), or another candidate due first (`behind`: there is room, but
/// that one takes it, being admitted or about to be).
fn holding_limit(
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
/// [`try_admit`] again, so naming one too many costs a lookup, not a sandbox). Each
/// project's own limit takes the place of `limits.project` for its sessions.
pub async fn due(db: &crate::Db, limits: Limits, n: i64) -> Result<Vec<SessionId>> {
    let rows = sqlx::query_scalar!(
        r#"select id as "id!" from sa_admission_queue('sandbox')
            where held < coalesce(cap, $1) and total < $2
            order by place
            limit $3"#,
        limits.project.unwrap_or(i64::MAX),
        limits.deployment.unwrap_or(i64::MAX),
        n,
    )
    .fetch_all(db)
    .await?;
    Ok(rows.into_iter().map(SessionId).collect())
}

/// What a project holds and has waiting now, every process together, as the admissions
/// count it: (sandboxes, sessions queued, turns in flight, turns queued).
pub async fn project_counts(db: &crate::Db, project: ProjectId) -> Result<(i64, i64, i64, i64)> {
    let r = sqlx::query!(
        r#"select
             (select count(*) from sa_admission_entries('sandbox') where project_id = $1 and holds)
               as "sandboxes!",
             (select count(*) from sa_admission_entries('sandbox') where project_id = $1 and not holds)
               as "sandboxes_queued!",
             (select count(*) from sa_admission_entries('run') where project_id = $1 and holds)
               as "runs!",
             (select count(*) from sa_admission_entries('run') where project_id = $1 and not holds)
               as "runs_queued!""#,
        project.0
    )
    .fetch_one(db)
    .await?;
    Ok((r.sandboxes, r.sandboxes_queued, r.runs, r.runs_queued))
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
