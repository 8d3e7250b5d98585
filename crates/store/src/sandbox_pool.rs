//! The `sandbox_pool` table: the warm pool's pre-started sandboxes. A row exists from
//! before its sandbox is created until the transaction that hands the sandbox to a
//! session, which records it as the session's `sandbox_id` in the same commit; so every
//! pool sandbox is owned by a row here or by a session, and the orphan sweep removes any
//! owned by neither.

use crate::error::Result;
use sandbox_agents_domain::SessionId;
use sqlx::PgExecutor;
use time::OffsetDateTime;

/// Serialises [`reserve`] across server processes (a transaction-scoped advisory lock).
const RESERVE_LOCK: i64 = 0x5341_504f_4f4c; // "SAPOOL"

/// One pool sandbox (or one being created, `sandbox_id` still null).
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct PoolRow {
    pub name: String,
    pub image: String,
    pub sandbox_id: Option<String>,
    pub created_at: OffsetDateTime,
}

/// Reserves names for the sandboxes `image`'s pool lacks to hold `target`: the rows are
/// written before any sandbox exists, counted with the ones being created, under a lock,
/// so two processes refilling at once never overshoot. Returns the names to create.
#[tracing::instrument(skip_all, fields(image = %image, target))]
pub async fn reserve(
    db: &crate::Db,
    image: &str,
    target: usize,
    mut new_name: impl FnMut() -> String,
) -> Result<Vec<String>> {
    let mut tx = db.begin().await?;
    sqlx::query!("select from pg_advisory_xact_lock($1)", RESERVE_LOCK)
        .execute(&mut *tx)
        .await?;
    let have = sqlx::query_scalar!(
        r#"select count(*) as "have!" from sandbox_pool where image = $1"#,
        image
    )
    .fetch_one(&mut *tx)
    .await?;
    let missing = (target as i64 - have).max(0) as usize;
    let names: Vec<String> = (0..missing).map(|_| new_name()).collect();
    if !names.is_empty() {
        sqlx::query!(
            "insert into sandbox_pool (name, image) select unnest($1::text[]), $2",
            &names,
            image,
        )
        .execute(&mut *tx)
        .await?;
    }
    tx.commit().await?;
    Ok(names)
}

/// The sandbox reserved as `name` runs: it can be claimed. `false` when the reservation is
/// gone (the sweep dropped it as stale, or the pool was shrunk): the caller removes the
/// sandbox.
pub async fn mark_ready(db: impl PgExecutor<'_>, name: &str, sandbox_id: &str) -> Result<bool> {
    let done = sqlx::query!(
        "update sandbox_pool set sandbox_id = $2 where name = $1 and sandbox_id is null",
        name,
        sandbox_id,
    )
    .execute(db)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Drops rows; returns those it deleted (name, sandbox id), whose sandboxes the caller
/// then removes. A row a claim took meanwhile is not among them: it belongs to a session.
pub async fn forget(
    db: impl PgExecutor<'_>,
    names: &[String],
) -> Result<Vec<(String, Option<String>)>> {
    let rows = sqlx::query!(
        "delete from sandbox_pool where name = any($1) returning name, sandbox_id",
        names,
    )
    .fetch_all(db)
    .await?;
    Ok(rows.into_iter().map(|r| (r.name, r.sandbox_id)).collect())
}

/// Every row, oldest first.
pub async fn list(db: impl PgExecutor<'_>) -> Result<Vec<PoolRow>> {
    Ok(sqlx::query_as!(
        PoolRow,
        "select name, image, sandbox_id, created_at from sandbox_pool order by created_at, name"
    )
    .fetch_all(db)
    .await?)
}

/// Hands the oldest ready sandbox of `image` to `session`, which must be provisioning:
/// the row is deleted and the session's `sandbox_id` set in the caller's transaction, so
/// the sandbox always has exactly one owner. `skip locked` lets concurrent claims (from
/// any process) each take a different row without waiting. `None` when the pool is empty or
/// the session is no longer provisioning (the caller rolls back then).
#[tracing::instrument(skip_all, fields(session.id = %session, image = %image))]
pub async fn claim(
    tx: &mut sqlx::PgConnection,
    image: &str,
    session: SessionId,
) -> Result<Option<String>> {
    // The boot is demand whether it finds a sandbox or not (see `target`).
    let taken = sqlx::query_scalar!(
        r#"with demand as (insert into pool_demand default values)
         delete from sandbox_pool
         where name = (select name from sandbox_pool
                       where image = $1 and sandbox_id is not null
                       order by created_at
                       for update skip locked
                       limit 1)
         returning sandbox_id as "sandbox_id!""#,
        image,
    )
    .fetch_optional(&mut *tx)
    .await?;
    let Some(sandbox) = taken else {
        return Ok(None);
    };
    let owned = sqlx::query!(
        "update sessions set sandbox_id = $2, updated_at = now()
         where id = $1 and status = 'provisioning'",
        session.0,
        &sandbox,
    )
    .execute(&mut *tx)
    .await?;
    Ok((owned.rows_affected() == 1).then_some(sandbox))
}

/// How far back demand is remembered: a burst raises the pool for this long after it.
pub const DEMAND_HORIZON_SECS: i64 = 600;
/// The window demand is counted in: the pool aims to hold what the busiest such window took.
pub const DEMAND_WINDOW_SECS: i64 = 60;

/// The pool's size now: the most pool-eligible boots in any minute of the last ten
/// (`claim` records each), between `min` and `max`. The same in every process.
pub async fn target(db: impl PgExecutor<'_>, min: usize, max: usize) -> Result<usize> {
    let peak = sqlx::query_scalar!(
        r#"select coalesce(max(n), 0)::int8 as "peak!" from (
             select count(*) over (order by at range between make_interval(secs => $1) preceding and current row) as n
               from pool_demand where at > now() - make_interval(secs => $2)
           ) d"#,
        DEMAND_WINDOW_SECS as f64,
        DEMAND_HORIZON_SECS as f64,
    )
    .fetch_one(db)
    .await?;
    Ok((peak.max(0) as usize).clamp(min, max.max(min)))
}

/// Forgets demand older than the horizon (the sweep's).
pub async fn prune_demand(db: impl PgExecutor<'_>) -> Result<u64> {
    Ok(sqlx::query!(
        "delete from pool_demand where at < now() - make_interval(secs => $1)",
        DEMAND_HORIZON_SECS as f64,
    )
    .execute(db)
    .await?
    .rows_affected())
}
