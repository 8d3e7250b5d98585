//! The `tool_calls` table: client tool calls from the moment their
//! `agent.client_tool_call` event is written until they are answered, time out or are
//! cancelled with their run, and calls that wait for a person's decision (`approval`) from
//! their `agent.tool_use` until it is made. See the migration for the invariants; in short, a call leaves
//! `pending` exactly once, in the transaction that writes what became of it.

use crate::error::Result;
use sandbox_agents_domain::agent_version::ChangedBy;
use sandbox_agents_domain::state::{ApprovalFor, ToolCallStatus, ToolDecision};
use sandbox_agents_domain::{RunId, SessionId};
use serde_json::Value;
use sqlx::types::Json;
use sqlx::PgExecutor;
use time::OffsetDateTime;
use uuid::Uuid;

/// A call row.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct ToolCallRecord {
    pub id: i64,
    pub run_id: Uuid,
    pub session_id: Uuid,
    pub call_id: String,
    pub tool: String,
    pub arguments: String,
    #[sqlx(rename = "parks")]
    pub deferrable: bool,
    pub seq: i64,
    pub deadline: Option<OffsetDateTime>,
    pub status: ToolCallStatus,
    pub output: Option<String>,
    pub is_error: bool,
    pub created_at: OffsetDateTime,
    pub answered_at: Option<OffsetDateTime>,
    /// `{agent, call_id}` of the subagent frame that made the call; `None` for the run's own.
    pub subagent: Option<Json<Value>>,
    /// What kind of call waited for a person's decision; `None`: an ordinary client call.
    pub approval: Option<ApprovalFor>,
    pub decision: Option<ToolDecision>,
    pub decision_message: Option<String>,
}

impl ToolCallRecord {
    pub fn is_pending(&self) -> bool {
        self.status == ToolCallStatus::Pending
    }

    /// A call a person allowed that the run itself runs when it continues (a sandbox tool or
    /// a subagent; an allowed client call is the caller's to answer).
    pub fn runs_when_continued(&self) -> bool {
        self.decision == Some(ToolDecision::Allow)
            && matches!(
                self.approval,
                Some(ApprovalFor::Sandbox | ApprovalFor::Subagent)
            )
    }
}

/// `query_as!` into [`ToolCallRecord`] with its columns spliced in at compile time between
/// `$head` and `$tail` (never `format!`, nor `*`).
macro_rules! tool_call_query {
    ($head:literal, $tail:literal $(, $arg:expr)* $(,)?) => {
        sqlx::query_as!(
            ToolCallRecord,
            $head
                + r#"id, run_id, session_id, call_id, tool, arguments, parks as deferrable, seq, deadline,
                   status as "status: ToolCallStatus", output, is_error, created_at, answered_at,
                   subagent as "subagent: Json<Value>",
                   approval as "approval: ApprovalFor", decision as "decision: ToolDecision",
                   decision_message"#
                + $tail
            $(, $arg)*
        )
    };
}

/// A call to record, in the transaction that appends its event (which gave it `seq`).
#[derive(Clone, Debug)]
pub struct NewToolCall<'a> {
    pub call_id: &'a str,
    pub tool: &'a str,
    pub arguments: &'a str,
    pub deferrable: bool,
    pub seq: i64,
    pub deadline: Option<OffsetDateTime>,
    /// The `subagent` mark of the call's event (`None` in the run's own frame).
    pub subagent: Option<&'a Value>,
    /// Set when the call waits for a person's decision (it parks).
    pub approval: Option<ApprovalFor>,
}

/// Records a step's calls as pending, in order; returns their row ids.
pub async fn insert(
    tx: &mut sqlx::PgConnection,
    run: RunId,
    session: SessionId,
    calls: &[NewToolCall<'_>],
) -> Result<Vec<i64>> {
    let mut ids = Vec::with_capacity(calls.len());
    for c in calls {
        let id = sqlx::query_scalar!(
            "insert into tool_calls (run_id, session_id, call_id, tool, arguments, parks, seq, deadline, subagent, approval)
             values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) returning id",
            run.0,
            session.0,
            c.call_id,
            c.tool,
            c.arguments,
            c.deferrable,
            c.seq,
            c.deadline,
            c.subagent.map(Json) as _,
            c.approval as _,
        )
        .fetch_one(&mut *tx)
        .await?;
        ids.push(id);
    }
    Ok(ids)
}

/// The client calls a session waits on right now (the caller's to answer: not those that
/// wait for a person's decision), oldest first.
pub async fn pending_for_session(
    db: impl PgExecutor<'_>,
    session: SessionId,
) -> Result<Vec<ToolCallRecord>> {
    Ok(tool_call_query!(
        "select ",
        " from tool_calls where session_id = $1 and status = 'pending'
           and (approval is null or (approval = 'client' and decision = 'allow'))
         order by id",
        session.0,
    )
    .fetch_all(db)
    .await?)
}

/// A run's calls, in the order they were made.
pub async fn for_run(db: impl PgExecutor<'_>, run: RunId) -> Result<Vec<ToolCallRecord>> {
    Ok(tool_call_query!(
        "select ",
        " from tool_calls where run_id = $1 order by id",
        run.0
    )
    .fetch_all(db)
    .await?)
}

/// Some of a run's calls by row id, in that order (missing ones are left out).
pub async fn by_ids(db: impl PgExecutor<'_>, ids: &[i64]) -> Result<Vec<ToolCallRecord>> {
    Ok(tool_call_query!(
        "select ",
        " from tool_calls where id = any($1) order by id",
        ids
    )
    .fetch_all(db)
    .await?)
}

/// Locks the pending call `call_id` of the session, taking its run's row first (the lock
/// order every run transaction keeps). `None` when nothing waits on that id. The caller
/// checks what it waits for (a client's answer, or a person's decision).
pub async fn lock_pending(
    tx: &mut sqlx::PgConnection,
    session: SessionId,
    call_id: &str,
) -> Result<Option<ToolCallRecord>> {
    let found = sqlx::query!(
        "select id, run_id from tool_calls where session_id = $1 and call_id = $2 and status = 'pending'",
        session.0,
        call_id,
    )
    .fetch_optional(&mut *tx)
    .await?;
    let Some(found) = found else {
        return Ok(None);
    };
    let id = found.id;
    sqlx::query!("select from runs where id = $1 for update", found.run_id)
        .execute(&mut *tx)
        .await?;
    // Re-read under the lock: the call may have been answered, timed out or cancelled since.
    Ok(tool_call_query!(
        "select ",
        " from tool_calls where id = $1 and status = 'pending' for update",
        id
    )
    .fetch_optional(&mut *tx)
    .await?)
}

/// Moves one pending call to `status` (`answered` or `timed_out`) with what the model gets.
/// `false` when it was no longer pending.
pub async fn resolve(
    tx: &mut sqlx::PgConnection,
    id: i64,
    status: ToolCallStatus,
    output: &str,
    is_error: bool,
) -> Result<bool> {
    let r = sqlx::query!(
        "update tool_calls set status = $2, output = $3, is_error = $4, answered_at = now()
         where id = $1 and status = 'pending'",
        id,
        status as _,
        output,
        is_error,
    )
    .execute(&mut *tx)
    .await?;
    Ok(r.rows_affected() == 1)
}

/// Cancels a run's pending calls, in the transaction that finishes it.
pub async fn cancel_pending(tx: &mut sqlx::PgConnection, run: RunId) -> Result<u64> {
    let r = sqlx::query!(
        "update tool_calls set status = 'cancelled', answered_at = now()
         where run_id = $1 and status = 'pending'",
        run.0,
    )
    .execute(&mut *tx)
    .await?;
    Ok(r.rows_affected())
}

/// How many of a run's calls are still pending.
pub async fn count_pending(db: impl PgExecutor<'_>, run: RunId) -> Result<i64> {
    Ok(sqlx::query_scalar!(
        r#"select count(*) as "n!" from tool_calls where run_id = $1 and status = 'pending'"#,
        run.0
    )
    .fetch_one(db)
    .await?)
}

/// Records a person's decision on a call that waits for one (locked by [`lock_pending`]).
/// `answered`: the call leaves `pending` with `output` (a sandbox or subagent call, or any
/// denial); else it stays pending as a deferrable client call whose event is `seq`.
#[allow(clippy::too_many_arguments)]
pub async fn decide(
    tx: &mut sqlx::PgConnection,
    id: i64,
    decision: ToolDecision,
    message: Option<&str>,
    by: Option<&ChangedBy>,
    answered: Option<&str>,
    seq: Option<i64>,
) -> Result<bool> {
    let r = sqlx::query!(
        "update tool_calls
         set decision = $2, decision_message = $3, decided_by = $4, decided_at = now(),
             status = case when $5::text is null then status else 'answered' end,
             output = coalesce($5, output), is_error = ($2 = 'deny'),
             answered_at = case when $5::text is null then answered_at else now() end,
             seq = coalesce($6, seq)
         where id = $1 and status = 'pending' and approval is not null and decision is null",
        id,
        decision as _,
        message,
        by.map(Json) as _,
        answered,
        seq,
    )
    .execute(&mut *tx)
    .await?;
    Ok(r.rows_affected() == 1)
}

/// The calls a session waits on a person's decision for, oldest first.
pub async fn awaiting_decision(
    db: impl PgExecutor<'_>,
    session: SessionId,
) -> Result<Vec<ToolCallRecord>> {
    Ok(tool_call_query!(
        "select ",
        " from tool_calls where session_id = $1 and status = 'pending'
           and approval is not null and decision is null
         order by id",
        session.0,
    )
    .fetch_all(db)
    .await?)
}
