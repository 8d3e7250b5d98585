//! The `runs` table: one row per turn, and the session columns a turn reads and writes
//! (`activity`, `conversation`, `usage`).
//!
//! Lock order, shared by every transaction here: the **run row first, then the session row**
//! (which [`crate::events::append`] locks too). [`begin`] changes the session row before it
//! inserts the run, which is safe because an insert locks no existing run.

use crate::error::{Error, Result};
use sandbox_agents_domain::session::{
    Run, RunStatus, RunStopReason, SessionActivity, SessionStatus, StoppedReason,
};
use sandbox_agents_domain::tools::ClientTool;
use sandbox_agents_domain::{ProjectId, RunId, SessionId};
use serde_json::{Map, Value};
use sqlx::types::Json;
use sqlx::PgExecutor;
use time::OffsetDateTime;

/// A run row.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct RunRecord {
    pub id: RunId,
    pub session_id: SessionId,
    pub prompt: String,
    pub status: RunStatus,
    pub stop_reason: Option<RunStopReason>,
    pub final_output: Option<String>,
    pub error: Option<String>,
    pub turns: i32,
    pub usage: Json<Map<String, Value>>,
    pub created_at: OffsetDateTime,
    pub finished_at: Option<OffsetDateTime>,
    pub max_turns: i32,
    pub cancel_requested: bool,
    /// The client tools this turn offers (the agent's and the turn's).
    pub client_tools: Json<Vec<ClientTool>>,
    /// The turn so far, saved when it parked.
    pub progress: Option<Json<Value>>,
    /// Waiting on deferrable calls, with no worker.
    pub parked: bool,
    /// The liveness key of the server process driving it.
    pub worker: Option<i32>,
}

impl RunRecord {
    pub fn run_id(&self) -> RunId {
        self.id
    }

    pub fn to_wire(&self) -> Run {
        Run {
            id: self.id.to_string(),
            session_id: self.session_id.to_string(),
            prompt: self.prompt.clone(),
            status: self.status,
            stop_reason: self.stop_reason,
            final_output: self.final_output.clone(),
            error: self.error.clone(),
            turns: self.turns,
            usage: self.usage.0.clone(),
            created_at: self.created_at,
            finished_at: self.finished_at,
        }
    }
}

/// `query_as!` into [`RunRecord`] with its columns (and the Rust types of its jsonb columns)
/// spliced in at compile time between `$head` and `$tail` (never `format!`, nor `*`).
macro_rules! run_query {
    ($head:literal, $tail:literal $(, $arg:expr)* $(,)?) => {
        sqlx::query_as!(
            RunRecord,
            $head
                + r#"id as "id: RunId", session_id as "session_id: SessionId", prompt,
                    status as "status: RunStatus", stop_reason as "stop_reason: RunStopReason",
                    final_output, error, turns,
                    usage as "usage: Json<Map<String, Value>>", created_at, finished_at, max_turns,
                    cancel_requested, client_tools as "client_tools: Json<Vec<ClientTool>>",
                    progress as "progress: Json<Value>", parked, worker"#
                + $tail
            $(, $arg)*
        )
    };
}

/// Why a message cannot start a run now: a turn is in flight or parked on client tools, or the
/// session is provisioning, failed, or stopped for another reason than idleness (an asleep
/// session is woken instead).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    Busy,
    /// A run waits on deferrable calls: answer them or interrupt it first.
    Parked,
    Provisioning,
    Error,
    Stopped,
    /// Stopped for good: its `max_lifetime_seconds` passed.
    LifetimeOver,
}

/// Claims the session for a new turn: `activity` goes `idle` → `busy` only when the session is
/// running, or asleep (`stopped` with reason `idle`). Inside the caller's transaction, which
/// then inserts the run and appends `user.message`. Returns the session's status as it was
/// (`running` or `stopped`), or why it was refused.
pub async fn claim_session(
    tx: &mut sqlx::PgConnection,
    project: ProjectId,
    session: SessionId,
) -> Result<std::result::Result<SessionStatus, Refusal>> {
    let claimed = sqlx::query_scalar!(
        r#"update sessions set activity = 'busy', last_used_at = now(), updated_at = now()
         where project_id = $1 and id = $2 and activity = 'idle'
           and (status = 'running' or (status = 'stopped' and stopped_reason = 'idle'))
           and not exists (select 1 from runs r where r.session_id = $2 and r.status = 'running')
         returning status as "status: SessionStatus""#,
        project.0,
        session.0,
    )
    .fetch_optional(&mut *tx)
    .await?;
    if let Some(status) = claimed {
        return Ok(Ok(status));
    }
    let row = sqlx::query!(
        r#"select status as "status: SessionStatus", activity as "activity: SessionActivity",
                  stopped_reason as "stopped_reason: StoppedReason"
           from sessions where project_id = $1 and id = $2"#,
        project.0,
        session.0,
    )
    .fetch_optional(&mut *tx)
    .await?;
    let row = row.ok_or(Error::NotFound)?;
    let (status, activity) = (row.status, row.activity);
    let parked = sqlx::query_scalar!(
        "select parked from runs where session_id = $1 and status = 'running' limit 1",
        session.0,
    )
    .fetch_optional(&mut *tx)
    .await?;
    Ok(Err(match (status, activity) {
        (_, SessionActivity::Busy) => Refusal::Busy,
        _ if parked.is_some() => Refusal::Parked,
        (SessionStatus::Provisioning, _) => Refusal::Provisioning,
        (SessionStatus::Error, _) => Refusal::Error,
        _ if row.stopped_reason == Some(StoppedReason::Lifetime) => Refusal::LifetimeOver,
        _ => Refusal::Stopped,
    }))
}

/// A run to insert.
#[derive(Clone, Debug)]
pub struct NewRun<'a> {
    pub id: RunId,
    pub session: SessionId,
    pub prompt: &'a str,
    pub max_turns: i32,
    pub client_tools: &'a [ClientTool],
    /// The liveness key of the process that will drive it.
    pub worker: i32,
    /// Counted among the turns in flight from the start (`run_admission`): true when the
    /// process driving it has no limits on turns, so that processes with limits count it.
    pub admitted: bool,
}

/// Inserts a `running` run.
pub async fn insert(db: impl PgExecutor<'_>, r: &NewRun<'_>) -> Result<RunRecord> {
    Ok(run_query!(
        "insert into runs (id, session_id, prompt, max_turns, client_tools, worker, admitted)
         values ($1, $2, $3, $4, $5, $6, $7) returning ",
        "",
        r.id.0,
        r.session.0,
        r.prompt,
        r.max_turns,
        Json(r.client_tools) as _,
        r.worker,
        r.admitted,
    )
    .fetch_one(db)
    .await?)
}

/// Locks a run's row (the first lock of every run transaction) and returns it.
pub async fn lock(tx: &mut sqlx::PgConnection, id: RunId) -> Result<Option<RunRecord>> {
    Ok(
        run_query!("select ", " from runs where id = $1 for update", id.0)
            .fetch_optional(&mut *tx)
            .await?,
    )
}

/// Parks a running run on deferrable calls: no worker, no slot among the runs in flight
/// (`run_admission`), its turn so far saved, its steps and usage so far visible on the run.
/// `false` when it was not running (or already parked).
pub async fn park(
    tx: &mut sqlx::PgConnection,
    id: RunId,
    progress: &Value,
    turns: i32,
    usage: &Map<String, Value>,
) -> Result<bool> {
    let r = sqlx::query!(
        "update runs set parked = true, worker = null, progress = $2, turns = $3, usage = $4,
                         admitted = false, queued_at = null
         where id = $1 and status = 'running' and not parked",
        id.0,
        Json(progress) as _,
        turns,
        Json(usage) as _,
    )
    .execute(&mut *tx)
    .await?;
    Ok(r.rows_affected() == 1)
}

/// Takes a parked run for the process whose liveness key is `worker` (`admitted` as for
/// [`NewRun`]). `false` when it was not parked (someone else took it, or it was cancelled).
pub async fn unpark(
    tx: &mut sqlx::PgConnection,
    id: RunId,
    worker: i32,
    admitted: bool,
) -> Result<bool> {
    let r = sqlx::query!(
        "update runs set parked = false, worker = $2, admitted = $3
         where id = $1 and status = 'running' and parked",
        id.0,
        worker,
        admitted,
    )
    .execute(&mut *tx)
    .await?;
    Ok(r.rows_affected() == 1)
}

/// Claims a session to continue its parked run: `activity` goes `idle` → `busy` when the
/// session is running, asleep, or lost its sandbox to a server restart (the answer wakes it,
/// as a start would). Returns the status it had, or `None` when it cannot run now (it is
/// provisioning or failed; the recovery sweep continues the run once it is running).
pub async fn claim_for_resume(
    tx: &mut sqlx::PgConnection,
    session: SessionId,
) -> Result<Option<SessionStatus>> {
    Ok(sqlx::query_scalar!(
        r#"update sessions set activity = 'busy', last_used_at = now(), updated_at = now()
         where id = $1 and activity = 'idle'
           and (status = 'running'
                or (status = 'stopped' and stopped_reason in ('idle', 'restart')))
         returning status as "status: SessionStatus""#,
        session.0,
    )
    .fetch_optional(&mut *tx)
    .await?)
}

/// Parked runs with every call answered: ready to continue (normally the last answer does
/// that; these are the ones it could not, e.g. because the session was provisioning).
pub async fn parked_and_answered(db: impl PgExecutor<'_>) -> Result<Vec<RunRecord>> {
    Ok(run_query!(
        "select ",
        " from runs r where status = 'running' and parked
           and not exists (select 1 from tool_calls c where c.run_id = r.id and c.status = 'pending')
         order by created_at",
    )
    .fetch_all(db)
    .await?)
}

/// `create(prompt=...)`: records the first prompt, in the creating transaction.
pub async fn set_first_prompt(
    tx: &mut sqlx::PgConnection,
    session: SessionId,
    prompt: &str,
) -> Result<()> {
    sqlx::query!(
        "update sessions set first_prompt = $2 where id = $1",
        session.0,
        prompt
    )
    .execute(&mut *tx)
    .await?;
    Ok(())
}

/// `create(prompt=...)`: takes the session's first prompt, once, in the boot's transaction.
pub async fn take_first_prompt(
    tx: &mut sqlx::PgConnection,
    session: SessionId,
) -> Result<Option<String>> {
    Ok(sqlx::query_scalar!(
        r#"with old as (select first_prompt from sessions where id = $1 for update)
         update sessions s set first_prompt = null from old
         where s.id = $1 and old.first_prompt is not null
         returning old.first_prompt as "first_prompt!""#,
        session.0,
    )
    .fetch_optional(&mut *tx)
    .await?)
}

/// A run by id, whatever its project (workers got the id from the database).
pub async fn get(db: impl PgExecutor<'_>, id: RunId) -> Result<Option<RunRecord>> {
    Ok(run_query!("select ", " from runs where id = $1", id.0)
        .fetch_optional(db)
        .await?)
}

/// A session's runs, oldest first.
pub async fn list_for_session(
    db: impl PgExecutor<'_>,
    session: SessionId,
) -> Result<Vec<RunRecord>> {
    Ok(run_query!(
        "select ",
        " from runs where session_id = $1 order by created_at, id",
        session.0
    )
    .fetch_all(db)
    .await?)
}

/// The session's run in flight, if any.
pub async fn running_for_session(
    db: impl PgExecutor<'_>,
    session: SessionId,
) -> Result<Option<RunRecord>> {
    Ok(run_query!(
        "select ",
        " from runs where session_id = $1 and status = 'running' order by created_at desc limit 1",
        session.0,
    )
    .fetch_optional(db)
    .await?)
}

/// Every run in flight that some process should be driving (not parked), in every project:
/// what the recovery sweep checks (a dead worker, or a live one no longer driving it).
pub async fn driven(db: impl PgExecutor<'_>) -> Result<Vec<RunRecord>> {
    Ok(run_query!(
        "select ",
        " from runs where status = 'running' and not parked order by created_at",
    )
    .fetch_all(db)
    .await?)
}

/// Asks whoever drives the run to cancel it (read by the worker between steps).
pub async fn request_cancel(db: impl PgExecutor<'_>, id: RunId) -> Result<()> {
    sqlx::query!(
        "update runs set cancel_requested = true where id = $1 and status = 'running'",
        id.0
    )
    .execute(db)
    .await?;
    Ok(())
}

/// The session's model-visible history (an array of messages).
pub async fn conversation(db: impl PgExecutor<'_>, session: SessionId) -> Result<Vec<Value>> {
    let row = sqlx::query_scalar!(
        r#"select conversation as "conversation: Json<Vec<Value>>" from sessions where id = $1"#,
        session.0
    )
    .fetch_optional(db)
    .await?;
    Ok(row.ok_or(Error::NotFound)?.0)
}

/// How a run ended.
#[derive(Clone, Debug)]
pub struct Finish<'a> {
    pub status: RunStatus,
    pub stop_reason: RunStopReason,
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
    Ok(run_query!(
        "update runs set status = $2, stop_reason = $3, final_output = $4, error = $5, turns = $6,
                         usage = $7, finished_at = now(), parked = false, worker = null
         where id = $1 and status = 'running'
         returning ",
        "",
        id.0,
        f.status as _,
        f.stop_reason as _,
        f.final_output,
        f.error,
        f.turns,
        Json(f.usage) as _,
    )
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
    sqlx::query!(
        "update sessions set activity = 'idle', usage = $2, conversation = coalesce($3, conversation),
                             last_used_at = now(), updated_at = now()
         where id = $1",
        session.0,
        Json(usage) as _,
        conversation.map(Json) as _,
    )
    .execute(&mut *tx)
    .await?;
    Ok(())
}

/// A parked run's session: `activity` back to `idle` (usage and conversation change only when
/// the run finishes).
pub async fn set_session_idle(tx: &mut sqlx::PgConnection, session: SessionId) -> Result<()> {
    sqlx::query!(
        "update sessions set activity = 'idle', last_used_at = now(), updated_at = now() where id = $1",
        session.0,
    )
    .execute(&mut *tx)
    .await?;
    Ok(())
}

/// The session's whole-conversation usage, without a lock.
pub async fn session_usage(
    db: impl PgExecutor<'_>,
    session: SessionId,
) -> Result<Map<String, Value>> {
    let row = sqlx::query_scalar!(
        r#"select usage as "usage: Json<Map<String, Value>>" from sessions where id = $1"#,
        session.0
    )
    .fetch_optional(db)
    .await?;
    Ok(row.ok_or(Error::NotFound)?.0)
}

/// The model steps of a session's runs other than `except` (a budget's `max_turns` counts
/// them with the running turn's own).
pub async fn session_turns(
    db: impl PgExecutor<'_>,
    session: SessionId,
    except: RunId,
) -> Result<i64> {
    Ok(sqlx::query_scalar!(
        r#"select coalesce(sum(turns), 0)::bigint as "turns!" from runs where session_id = $1 and id <> $2"#,
        session.0,
        except.0
    )
    .fetch_one(db)
    .await?)
}

/// Locks the session row and returns its whole-conversation usage.
pub async fn lock_session_usage(
    tx: &mut sqlx::PgConnection,
    session: SessionId,
) -> Result<Map<String, Value>> {
    let row = sqlx::query_scalar!(
        r#"select usage as "usage: Json<Map<String, Value>>" from sessions where id = $1 for update"#,
        session.0
    )
    .fetch_optional(&mut *tx)
    .await?;
    Ok(row.ok_or(Error::NotFound)?.0)
}
