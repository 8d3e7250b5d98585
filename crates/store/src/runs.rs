//! The `runs` table: one row per turn, and the session columns a turn reads and writes
//! (`activity`, `conversation`, `usage`).
//!
//! Lock order, shared by every transaction here: the **run row first, then the session row**
//! (which [`crate::events::append`] locks too). [`begin`] changes the session row before it
//! inserts the run, which is safe because an insert locks no existing run.

use crate::error::{Error, Result};
use sandbox_agents_domain::session::Run;
use sandbox_agents_domain::{ProjectId, RunId, SessionId};
use serde_json::{Map, Value};
use sqlx::types::Json;
use sqlx::PgExecutor;
use time::OffsetDateTime;
use uuid::Uuid;

/// A run row.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct RunRecord {
    pub id: Uuid,
    pub session_id: Uuid,
    pub prompt: String,
    pub status: String,
    pub stop_reason: Option<String>,
    pub final_output: Option<String>,
    pub error: Option<String>,
    pub turns: i32,
    pub usage: Json<Map<String, Value>>,
    pub created_at: OffsetDateTime,
    pub finished_at: Option<OffsetDateTime>,
    pub max_turns: i32,
    pub cancel_requested: bool,
}

impl RunRecord {
    pub fn run_id(&self) -> RunId {
        RunId(self.id)
    }

    pub fn to_wire(&self) -> Run {
        Run {
            id: self.id.to_string(),
            session_id: self.session_id.to_string(),
            prompt: self.prompt.clone(),
            status: self.status.clone(),
            stop_reason: self.stop_reason.clone(),
            final_output: self.final_output.clone(),
            error: self.error.clone(),
            turns: self.turns,
            usage: self.usage.0.clone(),
            created_at: self.created_at,
            finished_at: self.finished_at,
        }
    }
}

/// Why a message cannot start a run now (API.md §9.10).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    Busy,
    Provisioning,
    Error,
    Stopped,
}

/// Claims the session for a new turn: `activity` goes `idle` → `busy` only when the session is
/// running, or asleep (`stopped` with reason `idle`). Inside the caller's transaction, which
/// then inserts the run and appends `user.message`. Returns the session's status as it was
/// (`running` or `stopped`), or why it was refused.
pub async fn claim_session(
    tx: &mut sqlx::PgConnection,
    project: ProjectId,
    session: SessionId,
) -> Result<std::result::Result<String, Refusal>> {
    let claimed: Option<(String,)> = sqlx::query_as(
        "update sessions set activity = 'busy', last_used_at = now(), updated_at = now()
         where project_id = $1 and id = $2 and activity = 'idle'
           and (status = 'running' or (status = 'stopped' and stopped_reason = 'idle'))
         returning status",
    )
    .bind(project.0)
    .bind(session.0)
    .fetch_optional(&mut *tx)
    .await?;
    if let Some((status,)) = claimed {
        return Ok(Ok(status));
    }
    let row: Option<(String, String)> =
        sqlx::query_as("select status, activity from sessions where project_id = $1 and id = $2")
            .bind(project.0)
            .bind(session.0)
            .fetch_optional(&mut *tx)
            .await?;
    let (status, activity) = row.ok_or(Error::NotFound)?;
    Ok(Err(match (status.as_str(), activity.as_str()) {
        (_, "busy") => Refusal::Busy,
        ("provisioning", _) => Refusal::Provisioning,
        ("error", _) => Refusal::Error,
        _ => Refusal::Stopped,
    }))
}

/// Inserts a `running` run.
pub async fn insert(
    db: impl PgExecutor<'_>,
    id: RunId,
    session: SessionId,
    prompt: &str,
    max_turns: i32,
) -> Result<RunRecord> {
    Ok(sqlx::query_as(
        "insert into runs (id, session_id, prompt, max_turns) values ($1, $2, $3, $4) returning *",
    )
    .bind(id.0)
    .bind(session.0)
    .bind(prompt)
    .bind(max_turns)
    .fetch_one(db)
    .await?)
}

/// A run by id, whatever its project (workers got the id from the database).
pub async fn get(db: impl PgExecutor<'_>, id: RunId) -> Result<Option<RunRecord>> {
    Ok(sqlx::query_as("select * from runs where id = $1")
        .bind(id.0)
        .fetch_optional(db)
        .await?)
}

/// A session's runs, oldest first.
pub async fn list_for_session(
    db: impl PgExecutor<'_>,
    session: SessionId,
) -> Result<Vec<RunRecord>> {
    Ok(
        sqlx::query_as("select * from runs where session_id = $1 order by created_at, id")
            .bind(session.0)
            .fetch_all(db)
            .await?,
    )
}

/// The session's run in flight, if any.
pub async fn running_for_session(
    db: impl PgExecutor<'_>,
    session: SessionId,
) -> Result<Option<RunRecord>> {
    Ok(sqlx::query_as(
        "select * from runs where session_id = $1 and status = 'running' order by created_at desc limit 1",
    )
    .bind(session.0)
    .fetch_optional(db)
    .await?)
}

/// Every run in flight, in every project: what a restart has to clean up.
pub async fn all_running(db: impl PgExecutor<'_>) -> Result<Vec<RunRecord>> {
    Ok(
        sqlx::query_as("select * from runs where status = 'running' order by created_at")
            .fetch_all(db)
            .await?,
    )
}

/// Asks whoever drives the run to cancel it (read by the worker between steps).
pub async fn request_cancel(db: impl PgExecutor<'_>, id: RunId) -> Result<()> {
    sqlx::query("update runs set cancel_requested = true where id = $1 and status = 'running'")
        .bind(id.0)
        .execute(db)
        .await?;
    Ok(())
}

/// The session's model-visible history (an array of messages).
pub async fn conversation(db: impl PgExecutor<'_>, session: SessionId) -> Result<Vec<Value>> {
    let row: Option<(Json<Vec<Value>>,)> =
        sqlx::query_as("select conversation from sessions where id = $1")
            .bind(session.0)
            .fetch_optional(db)
            .await?;
    Ok(row.ok_or(Error::NotFound)?.0 .0)
}

/// How a run ended.
#[derive(Clone, Debug)]
pub struct Finish<'a> {
    pub status: &'a str,
    pub stop_reason: &'a str,
    pub final_output: Option<&'a str>,
    pub error: Option<&'a str>,
    pub turns: i32,
    pub usage: &'a Map<String, Value>,
}

/// Finishes a run still `running`, inside the caller's transaction (which then appends the
/// terminal event). `None` when it was already finished: someone else wrote its terminal
/// event, and the caller must write nothing.
pub async fn finish(
    tx: &mut sqlx::PgConnection,
    id: RunId,
    f: &Finish<'_>,
) -> Result<Option<RunRecord>> {
    Ok(sqlx::query_as(
        "update runs set status = $2, stop_reason = $3, final_output = $4, error = $5, turns = $6,
                         usage = $7, finished_at = now()
         where id = $1 and status = 'running'
         returning *",
    )
    .bind(id.0)
    .bind(f.status)
    .bind(f.stop_reason)
    .bind(f.final_output)
    .bind(f.error)
    .bind(f.turns)
    .bind(Json(f.usage))
    .fetch_optional(&mut *tx)
    .await?)
}

/// The session's side of a finished run: `activity` back to `idle`, the new whole-conversation
/// `usage` (computed from what [`lock_session_usage`] read in the same transaction), and, when
/// given, the new `conversation`.
pub async fn release_session(
    tx: &mut sqlx::PgConnection,
    session: SessionId,
    usage: &Map<String, Value>,
    conversation: Option<&[Value]>,
) -> Result<()> {
    sqlx::query(
        "update sessions set activity = 'idle', usage = $2, conversation = coalesce($3, conversation),
                             last_used_at = now(), updated_at = now()
         where id = $1",
    )
    .bind(session.0)
    .bind(Json(usage))
    .bind(conversation.map(Json))
    .execute(&mut *tx)
    .await?;
    Ok(())
}

/// Locks the session row and returns its whole-conversation usage.
pub async fn lock_session_usage(
    tx: &mut sqlx::PgConnection,
    session: SessionId,
) -> Result<Map<String, Value>> {
    let row: Option<(Json<Map<String, Value>>,)> =
        sqlx::query_as("select usage from sessions where id = $1 for update")
            .bind(session.0)
            .fetch_optional(&mut *tx)
            .await?;
    Ok(row.ok_or(Error::NotFound)?.0 .0)
}
