//! What `GET /metrics` reads from the database at each scrape: numbers of the whole
//! deployment (every process reports the same), unlike the counters each process keeps.

use crate::Db;
use crate::Result;
use sandbox_agents_domain::session::SessionStatus;

/// The deployment's state at one scrape.
#[derive(Debug, Default)]
pub struct Snapshot {
    /// Sessions in each status (statuses without a session are left out).
    pub sessions: Vec<(SessionStatus, i64)>,
    pub runs_in_flight: i64,
    /// Runs waiting for a slot under `--max-runs` / `--max-runs-per-project`.
    pub runs_queued: i64,
    /// Started sandboxes of the warm pool, and those being started.
    pub pool_ready: i64,
    pub pool_starting: i64,
    /// Webhook deliveries not yet delivered or given up on.
    pub webhook_pending: i64,
    /// Seconds the oldest of them has waited since its event (0 without one).
    pub webhook_oldest_pending_seconds: f64,
}

/// One round trip: each count is an index scan but the sessions' (a group by over the table,
/// which at a scrape every 15 s stays cheap into the millions of rows).
pub async fn snapshot(db: &Db) -> Result<Snapshot> {
    let row = sqlx::query!(
        r#"select
             (select count(*) from runs where status = 'running') as "runs!",
             (select count(*) from runs where status = 'running' and not admitted and not parked
                and queued_at is not null) as "runs_queued!",
             (select count(*) from sandbox_pool where sandbox_id is not null) as "pool_ready!",
             (select count(*) from sandbox_pool where sandbox_id is null) as "pool_starting!",
             (select count(*) from webhook_deliveries where status = 'pending') as "pending!",
             (select coalesce(extract(epoch from now() - min(created_at)), 0)::float8
                from webhook_deliveries where status = 'pending') as "oldest!""#
    )
    .fetch_one(db)
    .await?;
    let sessions = sqlx::query!(
        r#"select status as "status: SessionStatus", count(*) as "n!" from sessions group by status"#
    )
    .fetch_all(db)
    .await?
    .into_iter()
    .map(|r| (r.status, r.n))
    .collect();
    Ok(Snapshot {
        sessions,
        runs_in_flight: row.runs,
        runs_queued: row.runs_queued,
        pool_ready: row.pool_ready,
        pool_starting: row.pool_starting,
        webhook_pending: row.pending,
        webhook_oldest_pending_seconds: row.oldest,
    })
}
