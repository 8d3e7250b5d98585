//! The `schedules` and `schedule_fires` tables. See the migration for the invariants; in
//! short, a due time fires once: the transaction that claims a due schedule (`claim_due`,
//! `for update skip locked`) records the fire, starts what it starts and moves
//! `next_fire_at` on, or none of it happens.

use crate::error::{Error, Result};
use sandbox_agents_domain::agent_version::ChangedBy;
use sandbox_agents_domain::budget::Budget;
use sandbox_agents_domain::schedule::{
    BusyPolicy, FireStatus, MissedPolicy, Schedule, ScheduleFire,
};
use sandbox_agents_domain::{AgentId, ProjectId, RunId, SessionId};
use sqlx::types::Json;
use sqlx::PgExecutor;
use time::OffsetDateTime;
use uuid::Uuid;

/// A schedule row.
#[derive(Clone, Debug)]
pub struct ScheduleRecord {
    pub id: Uuid,
    pub project_id: Uuid,
    pub agent_id: Uuid,
    pub name: String,
    pub cron: String,
    pub timezone: String,
    pub message: String,
    pub session_id: Option<Uuid>,
    pub budget: Option<Json<Budget>>,
    pub paused: bool,
    pub missed: String,
    pub busy: String,
    pub next_fire_at: Option<OffsetDateTime>,
    pub created_at: OffsetDateTime,
    pub updated_at: OffsetDateTime,
}

impl ScheduleRecord {
    pub fn missed(&self) -> MissedPolicy {
        match self.missed.as_str() {
            "run_once" => MissedPolicy::RunOnce,
            _ => MissedPolicy::Skip,
        }
    }

    pub fn busy(&self) -> BusyPolicy {
        match self.busy.as_str() {
            "wait" => BusyPolicy::Wait,
            _ => BusyPolicy::Skip,
        }
    }

    pub fn to_wire(&self) -> Schedule {
        Schedule {
            id: self.id.to_string(),
            agent_id: self.agent_id.to_string(),
            name: self.name.clone(),
            cron: self.cron.clone(),
            timezone: self.timezone.clone(),
            message: self.message.clone(),
            session: self
                .session_id
                .map_or_else(|| "new".to_owned(), |s| s.to_string()),
            budget: self.budget.as_ref().map(|b| b.0),
            paused: self.paused,
            missed: self.missed(),
            busy: self.busy(),
            next_fire_at: self.next_fire_at,
            created_at: self.created_at,
            updated_at: self.updated_at,
        }
    }
}

fn missed_text(p: MissedPolicy) -> &'static str {
    match p {
        MissedPolicy::Skip => "skip",
        MissedPolicy::RunOnce => "run_once",
    }
}

fn busy_text(p: BusyPolicy) -> &'static str {
    match p {
        BusyPolicy::Skip => "skip",
        BusyPolicy::Wait => "wait",
    }
}

/// `query_as!` into [`ScheduleRecord`] with its columns spliced in at compile time.
macro_rules! schedule_query {
    ($head:literal, $tail:literal $(, $arg:expr)* $(,)?) => {
        sqlx::query_as!(
            ScheduleRecord,
            $head
                + r#"id, project_id, agent_id, name, cron, timezone, message, session_id,
                   budget as "budget: Json<Budget>", paused, missed, busy, next_fire_at,
                   created_at, updated_at"#
                + $tail
            $(, $arg)*
        )
    };
}

/// What a schedule is set to (every field, as the service resolved it).
#[derive(Clone, Debug)]
pub struct ScheduleFields<'a> {
    pub name: &'a str,
    pub cron: &'a str,
    pub timezone: &'a str,
    pub message: &'a str,
    pub budget: Option<&'a Budget>,
    pub paused: bool,
    pub missed: MissedPolicy,
    pub busy: BusyPolicy,
    pub next_fire_at: Option<OffsetDateTime>,
}

#[tracing::instrument(skip_all, fields(project.id = %project, agent.id = %agent))]
pub async fn insert(
    db: impl PgExecutor<'_>,
    project: ProjectId,
    agent: AgentId,
    session: Option<SessionId>,
    f: &ScheduleFields<'_>,
    by: Option<&ChangedBy>,
) -> Result<ScheduleRecord> {
    Ok(schedule_query!(
        "insert into schedules (id, project_id, agent_id, session_id, name, cron, timezone, message,
                                budget, paused, missed, busy, next_fire_at, created_by)
         values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)
         returning ",
        "",
        Uuid::now_v7(),
        project.0,
        agent.0,
        session.map(|s| s.0),
        f.name,
        f.cron,
        f.timezone,
        f.message,
        f.budget.map(Json) as _,
        f.paused,
        missed_text(f.missed),
        busy_text(f.busy),
        f.next_fire_at,
        by.map(Json) as _,
    )
    .fetch_one(db)
    .await?)
}

/// One schedule of the agent. `NotFound` when the agent has no such schedule.
pub async fn get(
    db: impl PgExecutor<'_>,
    project: ProjectId,
    agent: AgentId,
    id: Uuid,
) -> Result<ScheduleRecord> {
    schedule_query!(
        "select ",
        " from schedules where project_id = $1 and agent_id = $2 and id = $3",
        project.0,
        agent.0,
        id,
    )
    .fetch_optional(db)
    .await?
    .ok_or(Error::NotFound)
}

/// How many schedules the agent has, with the agent's row locked until the transaction ends:
/// creates of one agent's schedules take turns, so a count checked here holds at the insert.
pub async fn count_locking_agent(tx: &mut sqlx::PgConnection, agent: AgentId) -> Result<i64> {
    sqlx::query!("select id from agents where id = $1 for update", agent.0)
        .fetch_optional(&mut *tx)
        .await?
        .ok_or(Error::NotFound)?;
    Ok(sqlx::query_scalar!(
        r#"select count(*) as "n!" from schedules where agent_id = $1"#,
        agent.0
    )
    .fetch_one(&mut *tx)
    .await?)
}

/// The agent's schedules, oldest first.
pub async fn list(
    db: impl PgExecutor<'_>,
    project: ProjectId,
    agent: AgentId,
) -> Result<Vec<ScheduleRecord>> {
    Ok(schedule_query!(
        "select ",
        " from schedules where project_id = $1 and agent_id = $2 order by created_at, id",
        project.0,
        agent.0,
    )
    .fetch_all(db)
    .await?)
}

/// Sets every field. `NotFound` when the agent has no such schedule.
#[tracing::instrument(skip_all, fields(schedule.id = %id))]
pub async fn update(
    db: impl PgExecutor<'_>,
    project: ProjectId,
    agent: AgentId,
    id: Uuid,
    f: &ScheduleFields<'_>,
) -> Result<ScheduleRecord> {
    schedule_query!(
        "update schedules
         set name = $4, cron = $5, timezone = $6, message = $7, budget = $8, paused = $9,
             missed = $10, busy = $11, next_fire_at = $12, updated_at = now()
         where project_id = $1 and agent_id = $2 and id = $3
         returning ",
        "",
        project.0,
        agent.0,
        id,
        f.name,
        f.cron,
        f.timezone,
        f.message,
        f.budget.map(Json) as _,
        f.paused,
        missed_text(f.missed),
        busy_text(f.busy),
        f.next_fire_at,
    )
    .fetch_optional(db)
    .await?
    .ok_or(Error::NotFound)
}

/// Locks a schedule for an edit, so that no fire is claimed meanwhile.
pub async fn lock(
    tx: &mut sqlx::PgConnection,
    project: ProjectId,
    agent: AgentId,
    id: Uuid,
) -> Result<ScheduleRecord> {
    schedule_query!(
        "select ",
        " from schedules where project_id = $1 and agent_id = $2 and id = $3 for update",
        project.0,
        agent.0,
        id,
    )
    .fetch_optional(&mut *tx)
    .await?
    .ok_or(Error::NotFound)
}

#[tracing::instrument(skip_all, fields(schedule.id = %id))]
pub async fn delete(
    db: impl PgExecutor<'_>,
    project: ProjectId,
    agent: AgentId,
    id: Uuid,
) -> Result<()> {
    let r = sqlx::query!(
        "delete from schedules where project_id = $1 and agent_id = $2 and id = $3",
        project.0,
        agent.0,
        id,
    )
    .execute(db)
    .await?;
    if r.rows_affected() == 0 {
        return Err(Error::NotFound);
    }
    Ok(())
}

/// Up to `limit` schedules due by now but those in `done`, each locked for this
/// transaction; those another process holds are skipped (it fires them). An archived agent's
/// schedules are not due: they wait (and what falls due meanwhile is missed, by their
/// policy) until it is unarchived.
pub async fn claim_due(
    tx: &mut sqlx::PgConnection,
    limit: i64,
    done: &[Uuid],
) -> Result<Vec<ScheduleRecord>> {
    Ok(schedule_query!(
        "select ",
        " from schedules where not paused and next_fire_at <= now() and id <> all($2)
           and not exists (select 1 from agents a
                           where a.id = schedules.agent_id and a.archived_at is not null)
         order by next_fire_at limit $1 for update of schedules skip locked",
        limit,
        done,
    )
    .fetch_all(&mut *tx)
    .await?)
}

/// Moves a claimed schedule's next due time.
pub async fn set_next(
    tx: &mut sqlx::PgConnection,
    id: Uuid,
    next: Option<OffsetDateTime>,
) -> Result<()> {
    sqlx::query!(
        "update schedules set next_fire_at = $2 where id = $1",
        id,
        next
    )
    .execute(&mut *tx)
    .await?;
    Ok(())
}

/// Records what became of a due time. `false` when it was recorded already (the unique key:
/// a due time fires once).
#[allow(clippy::too_many_arguments)]
pub async fn record_fire(
    tx: &mut sqlx::PgConnection,
    schedule: Uuid,
    due_at: OffsetDateTime,
    session: Option<SessionId>,
    run: Option<RunId>,
    status: FireStatus,
    detail: Option<&str>,
) -> Result<bool> {
    let status = match status {
        FireStatus::Started => "started",
        FireStatus::Skipped => "skipped",
        FireStatus::Failed => "failed",
    };
    let r = sqlx::query!(
        "insert into schedule_fires (schedule_id, due_at, session_id, run_id, status, detail)
         values ($1, $2, $3, $4, $5, $6)
         on conflict (schedule_id, due_at) do nothing",
        schedule,
        due_at,
        session.map(|s| s.0),
        run.map(|r| r.0),
        status,
        detail,
    )
    .execute(&mut *tx)
    .await?;
    Ok(r.rows_affected() == 1)
}

/// A page of the schedule's fires, newest due time first, and how many it has. A new
/// session's run is its first one.
pub async fn fires(
    db: &mut sqlx::PgConnection,
    schedule: Uuid,
    limit: i64,
    offset: i64,
) -> Result<(Vec<ScheduleFire>, i64)> {
    let rows = sqlx::query!(
        r#"select f.due_at, f.fired_at, f.session_id, f.status, f.detail,
                  coalesce(f.run_id, (select r.id from runs r where r.session_id = f.session_id
                                      order by r.created_at, r.id limit 1)) as run_id
           from schedule_fires f where f.schedule_id = $1
           order by f.due_at desc limit $2 offset $3"#,
        schedule,
        limit,
        offset,
    )
    .fetch_all(&mut *db)
    .await?;
    let total = sqlx::query_scalar!(
        r#"select count(*) as "n!" from schedule_fires where schedule_id = $1"#,
        schedule
    )
    .fetch_one(&mut *db)
    .await?;
    let fires = rows
        .into_iter()
        .map(|r| ScheduleFire {
            due_at: r.due_at,
            fired_at: r.fired_at,
            session_id: r.session_id.map(|s| s.to_string()),
            run_id: r.run_id.map(|s| s.to_string()),
            status: match r.status.as_str() {
                "started" => FireStatus::Started,
                "failed" => FireStatus::Failed,
                _ => FireStatus::Skipped,
            },
            detail: r.detail,
        })
        .collect();
    Ok((fires, total))
}
