//! The `e2b_sandboxes` table: which sessions are E2B sandboxes (issue 40), and the queries
//! the E2B API reads them with. A sandbox's state is its session's: `running` while the
//! session is booting or up, `paused` while it is stopped (or its boot failed), gone once its
//! lifetime (E2B's timeout) has passed.

use crate::error::{Error, Result};
use sandbox_agents_domain::session::{SandboxResources, SessionStatus};
use sandbox_agents_domain::{ProjectId, SessionId};
use serde_json::{Map, Value};
use sqlx::types::Json;
use sqlx::PgExecutor;
use time::OffsetDateTime;
use uuid::Uuid;

/// An E2B sandbox: its session's columns the E2B API shows.
#[derive(Clone, Debug)]
pub struct E2bSandboxRecord {
    pub id: SessionId,
    pub template: String,
    pub status: SessionStatus,
    pub metadata: Json<Map<String, Value>>,
    pub created_at: OffsetDateTime,
    pub max_lifetime_seconds: Option<i64>,
    pub resources: Option<Json<SandboxResources>>,
    /// Its lifetime has passed (killed, or timed out): gone for the E2B API.
    pub ended: bool,
    /// Where the list's paging goes on after it.
    pub listed_at: OffsetDateTime,
}

/// Where a list goes on: after this row of `e2b_sandboxes`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cursor {
    pub created_at: OffsetDateTime,
    pub session: Uuid,
}

/// Records that `session` is an E2B sandbox of `template` (in the transaction that inserts
/// the session).
pub async fn insert(
    db: impl PgExecutor<'_>,
    project: ProjectId,
    session: SessionId,
    template: &str,
) -> Result<()> {
    sqlx::query!(
        "insert into e2b_sandboxes (session_id, project_id, template) values ($1, $2, $3)",
        session.0,
        project.0,
        template,
    )
    .execute(db)
    .await?;
    Ok(())
}

/// The project's E2B sandbox `id`, ended or not; `NotFound` when it has none of that id.
pub async fn get(
    db: impl PgExecutor<'_>,
    project: ProjectId,
    id: SessionId,
) -> Result<E2bSandboxRecord> {
    sqlx::query_as!(
        E2bSandboxRecord,
        r#"select s.id as "id: SessionId", e.template, s.status as "status: SessionStatus",
                  s.metadata as "metadata: Json<Map<String, Value>>", s.created_at,
                  s.max_lifetime_seconds, s.resources as "resources: Json<SandboxResources>",
                  (e.ended_at is not null
                   or coalesce(s.created_at + make_interval(secs => s.max_lifetime_seconds) <= now(), false)) as "ended!",
                  e.created_at as listed_at
             from e2b_sandboxes e join sessions s on s.id = e.session_id
            where e.project_id = $1 and e.session_id = $2"#,
        project.0,
        id.0,
    )
    .fetch_optional(db)
    .await?
    .ok_or(Error::NotFound)
}

/// One page of the project's E2B sandboxes that have not ended, oldest first, after
/// `after`: those whose metadata holds every pair of `metadata`, in one of `states`
/// (`running`, `paused`).
pub async fn list(
    db: impl PgExecutor<'_>,
    project: ProjectId,
    metadata: &Map<String, Value>,
    states: &[&str],
    after: Option<Cursor>,
    limit: i64,
) -> Result<Vec<E2bSandboxRecord>> {
    let states: Vec<String> = states.iter().map(|s| (*s).to_owned()).collect();
    Ok(sqlx::query_as!(
        E2bSandboxRecord,
        r#"select s.id as "id: SessionId", e.template, s.status as "status: SessionStatus",
                  s.metadata as "metadata: Json<Map<String, Value>>", s.created_at,
                  s.max_lifetime_seconds, s.resources as "resources: Json<SandboxResources>",
                  false as "ended!", e.created_at as listed_at
             from e2b_sandboxes e join sessions s on s.id = e.session_id
            where e.project_id = $1
              and e.ended_at is null
              and (s.max_lifetime_seconds is null
                   or s.created_at + make_interval(secs => s.max_lifetime_seconds) > now())
              and s.metadata @> $2
              and (case when s.status in ('provisioning', 'running') then 'running' else 'paused' end)
                  = any($3)
              and ($4::timestamptz is null or (e.created_at, e.session_id) > ($4, $5))
            order by e.created_at, e.session_id
            limit $6"#,
        project.0,
        Json(metadata) as _,
        &states,
        after.map(|c| c.created_at),
        after.map(|c| c.session),
        limit,
    )
    .fetch_all(db)
    .await?)
}

/// Sets the session's lifetime to end `seconds` from now (at least a second after its
/// creation: the column counts whole seconds).
pub async fn end_in(
    db: impl PgExecutor<'_>,
    project: ProjectId,
    id: SessionId,
    seconds: i64,
) -> Result<()> {
    let done = sqlx::query!(
        "update sessions
            set max_lifetime_seconds = greatest(1, floor(extract(epoch from now() - created_at))::bigint + $3),
                updated_at = now()
          where project_id = $1 and id = $2",
        project.0,
        id.0,
        seconds,
    )
    .execute(db)
    .await?;
    if done.rows_affected() == 0 {
        return Err(Error::NotFound);
    }
    Ok(())
}

/// Ends the sandbox now (a kill, or a create whose sandbox could not start): gone for the
/// E2B API at once, and its session's lifetime over (so it is not started again).
pub async fn end(db: &crate::Db, project: ProjectId, id: SessionId) -> Result<()> {
    let mut tx = db.begin().await?;
    sqlx::query!(
        "update e2b_sandboxes set ended_at = coalesce(ended_at, now())
          where project_id = $1 and session_id = $2",
        project.0,
        id.0,
    )
    .execute(&mut *tx)
    .await?;
    end_in(&mut *tx, project, id, 0).await?;
    tx.commit().await?;
    Ok(())
}

/// The project of E2B sandbox `id` while it has not ended (killed, or its lifetime passed,
/// whether or not the sweep has stopped it yet); `NotFound` otherwise. Its data plane
/// authenticates by the sandbox's own token, so the project comes from here.
pub async fn project_of(db: impl PgExecutor<'_>, id: SessionId) -> Result<ProjectId> {
    sqlx::query_scalar!(
        r#"select e.project_id as "project: ProjectId"
             from e2b_sandboxes e join sessions s on s.id = e.session_id
            where e.session_id = $1 and e.ended_at is null
              and (s.max_lifetime_seconds is null
                   or s.created_at + make_interval(secs => s.max_lifetime_seconds) > now())"#,
        id.0,
    )
    .fetch_optional(db)
    .await?
    .ok_or(Error::NotFound)
}
