//! `memory_consolidations`: the durable queue of memory consolidations (see the migration).
//! A stop enqueues in the transaction that records it; a worker claims one job at a time with
//! `for update skip locked` and a lease (never a long transaction around a model call), and
//! marks it done, or failed for a retry after a pause, up to a bound of attempts.

use crate::error::Result;
use sandbox_agents_domain::{AgentId, ProjectId, SessionId};
use serde_json::{Map, Value};
use sqlx::types::Json;
use sqlx::PgExecutor;
use time::OffsetDateTime;

/// What a stop hands to consolidation: copies of everything the model call reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewConsolidation {
    pub agent_id: AgentId,
    pub project_id: ProjectId,
    pub session_id: SessionId,
    /// The MEMORY.md the session's boot staged.
    pub baseline: String,
    /// Its `memories/MEMORY.md` as it ended; `None` when there was none to read.
    pub ended: Option<String>,
    /// The tail of what the session said and did since that boot.
    pub transcript: String,
}

/// A claimed job.
#[derive(Clone, Debug)]
pub struct Consolidation {
    pub id: i64,
    pub agent_id: AgentId,
    pub project_id: ProjectId,
    pub session_id: SessionId,
    pub baseline: String,
    pub ended: Option<String>,
    pub transcript: String,
    /// This claim included.
    pub attempts: i32,
    /// What the earlier attempts' model calls spent (`{}` before any).
    pub usage: Json<Map<String, Value>>,
}

/// A job as a test or an operator sees it.
#[derive(Clone, Debug)]
pub struct ConsolidationState {
    pub id: i64,
    pub session_id: SessionId,
    pub status: String,
    pub attempts: i32,
    pub last_error: Option<String>,
    pub finished_at: Option<OffsetDateTime>,
    /// What its model calls spent, every attempt summed.
    pub usage: Json<Map<String, Value>>,
    /// The session's `MEMORY.md` as the job holds it (`None`: none could be read).
    pub ended: Option<String>,
}

/// Queues a consolidation.
#[tracing::instrument(skip_all, fields(session.id = %j.session_id, agent.id = %j.agent_id))]
pub async fn enqueue(db: impl PgExecutor<'_>, j: &NewConsolidation) -> Result<i64> {
    Ok(sqlx::query_scalar!(
        "insert into memory_consolidations
                (agent_id, project_id, session_id, baseline, ended, transcript)
         values ($1, $2, $3, $4, $5, $6) returning id",
        j.agent_id.0,
        j.project_id.0,
        j.session_id.0,
        j.baseline,
        j.ended,
        j.transcript,
    )
    .fetch_one(db)
    .await?)
}

/// Claims the oldest pending job whose lease (if any) has run out, for `lease_secs`, counting
/// the attempt; `None` when there is none. A claim that ends (done or failed) clears the
/// lease; one whose worker died is claimed again once the lease passes.
#[tracing::instrument(skip_all)]
pub async fn claim(db: impl PgExecutor<'_>, lease_secs: f64) -> Result<Option<Consolidation>> {
    Ok(sqlx::query_as!(
        Consolidation,
        r#"update memory_consolidations
              set leased_until = now() + make_interval(secs => $1), attempts = attempts + 1
            where id = (select id from memory_consolidations
                         where status = 'pending' and (leased_until is null or leased_until < now())
                         order by id
                         for update skip locked
                         limit 1)
           returning id, agent_id as "agent_id: AgentId", project_id as "project_id: ProjectId",
                     session_id as "session_id: SessionId", baseline, ended, transcript, attempts,
                     usage as "usage: Json<Map<String, Value>>""#,
        lease_secs,
    )
    .fetch_optional(db)
    .await?)
}

/// Marks a claimed job done; `usage`: what all its attempts spent.
#[tracing::instrument(skip_all, fields(job = id))]
pub async fn finish(db: impl PgExecutor<'_>, id: i64, usage: &Map<String, Value>) -> Result<()> {
    sqlx::query!(
        "update memory_consolidations
            set status = 'done', leased_until = null, last_error = null, finished_at = now(),
                usage = $2
          where id = $1",
        id,
        Json(usage) as _,
    )
    .execute(db)
    .await?;
    Ok(())
}

/// Records a claimed job's failure: with `retry_in_secs`, it stays pending and is not claimed
/// again before that pause; without, it is failed for good. `usage`: what all its attempts
/// spent so far (a failed attempt's calls were paid for too).
#[tracing::instrument(skip_all, fields(job = id))]
pub async fn fail(
    db: impl PgExecutor<'_>,
    id: i64,
    error: &str,
    retry_in_secs: Option<f64>,
    usage: &Map<String, Value>,
) -> Result<()> {
    sqlx::query!(
        "update memory_consolidations
            set status = case when $3::float8 is null then 'failed' else 'pending' end,
                leased_until = now() + make_interval(secs => coalesce($3, 0)),
                last_error = $2,
                finished_at = case when $3::float8 is null then now() end,
                usage = $4
          where id = $1",
        id,
        error,
        retry_in_secs,
        Json(usage) as _,
    )
    .execute(db)
    .await?;
    Ok(())
}

/// The agent's jobs, oldest first.
#[tracing::instrument(skip_all, fields(agent.id = %agent))]
pub async fn list_for_agent(
    db: impl PgExecutor<'_>,
    agent: AgentId,
) -> Result<Vec<ConsolidationState>> {
    Ok(sqlx::query_as!(
        ConsolidationState,
        r#"select id, session_id as "session_id: SessionId", status, attempts, last_error, finished_at,
                  usage as "usage: Json<Map<String, Value>>", ended
             from memory_consolidations where agent_id = $1 order by id"#,
        agent.0,
    )
    .fetch_all(db)
    .await?)
}

/// Adds `spent` to the whole-conversation usage of `session` (the one whose stop queued a
/// consolidation), under the row's lock; nothing when the session is gone (a job outlives
/// its session). `add` sums two usages as the run loop does.
#[tracing::instrument(skip_all, fields(session.id = %session))]
pub async fn charge_session(
    tx: &mut sqlx::PgConnection,
    session: SessionId,
    spent: &Map<String, Value>,
    add: impl FnOnce(&mut Map<String, Value>, &Map<String, Value>),
) -> Result<()> {
    let Some(mut usage) = sqlx::query_scalar!(
        r#"select usage as "usage: Json<Map<String, Value>>" from sessions where id = $1 for update"#,
        session.0,
    )
    .fetch_optional(&mut *tx)
    .await?
    else {
        return Ok(());
    };
    add(&mut usage.0, spent);
    sqlx::query!(
        "update sessions set usage = $2 where id = $1",
        session.0,
        Json(&usage.0) as _,
    )
    .execute(&mut *tx)
    .await?;
    Ok(())
}
