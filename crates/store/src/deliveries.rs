//! The webhook outbox: `webhook_deliveries` (one row per subscription and event, written by
//! [`crate::events::append`] in the event's own statement) and `webhook_attempts`.
//!
//! Dispatchers on any number of servers share the table as a queue: [`claim`] takes due rows
//! with `for update skip locked` and stamps a lease (an expiry and a token) in the same
//! statement, so no transaction stays open while a request is in flight. [`record`] writes an
//! attempt's outcome only while the token is still the one claimed with; a dispatcher that died
//! mid-send leaves a lease that expires, and the delivery is sent again (at least once).

use crate::error::{Error, Result};
use sandbox_agents_domain::event::SessionEvent;
use sandbox_agents_domain::webhook::{Delivery, DeliveryAttempt, DeliveryStatus};
use sandbox_agents_domain::{DeliveryId, ProjectId, RunId, SessionId, WebhookId};
use serde_json::{Map, Value};
use sqlx::types::Json;
use sqlx::PgExecutor;
use time::OffsetDateTime;
use uuid::Uuid;

#[derive(Clone, Debug, sqlx::FromRow)]
pub struct DeliveryRecord {
    pub id: Uuid,
    pub webhook_id: Uuid,
    pub event_seq: i64,
    pub session_id: Uuid,
    pub event_type: String,
    pub status: DeliveryStatus,
    pub attempt: i32,
    pub status_code: Option<i32>,
    pub error: Option<String>,
    pub next_attempt_at: Option<OffsetDateTime>,
    pub delivered_at: Option<OffsetDateTime>,
    pub created_at: OffsetDateTime,
}

impl DeliveryRecord {
    pub fn to_wire(&self) -> Delivery {
        Delivery {
            id: self.id.to_string(),
            subscription_id: self.webhook_id.to_string(),
            event_seq: self.event_seq,
            session_id: self.session_id.to_string(),
            event_type: self.event_type.clone(),
            status: self.status,
            attempt: self.attempt,
            status_code: self.status_code,
            error: self.error.clone(),
            next_attempt_at: self.next_attempt_at,
            delivered_at: self.delivered_at,
            created_at: self.created_at,
        }
    }
}

/// `query_as!` into [`DeliveryRecord`] with its columns (of `webhook_deliveries d`) spliced in
/// at compile time between `$head` and `$tail` (never `format!`).
macro_rules! delivery_query {
    ($head:literal, $tail:literal $(, $arg:expr)* $(,)?) => {
        sqlx::query_as!(
            DeliveryRecord,
            $head
                + r#"d.id, d.webhook_id, d.event_seq, d.session_id, d.event_type,
                   d.status as "status: DeliveryStatus", d.attempt,
                   d.status_code, d.error, d.next_attempt_at, d.delivered_at, d.created_at"#
                + $tail
            $(, $arg)*
        )
    };
}

/// One page of a subscription's deliveries, newest first, and the number matching `status`.
#[tracing::instrument(skip_all, fields(webhook.id = %webhook))]
pub async fn list(
    db: &mut sqlx::PgConnection,
    project: ProjectId,
    webhook: WebhookId,
    status: Option<DeliveryStatus>,
    limit: i64,
    offset: i64,
) -> Result<(Vec<DeliveryRecord>, i64)> {
    let rows = delivery_query!(
        "select ",
        " from webhook_deliveries d join webhooks w on w.id = d.webhook_id
          where d.webhook_id = $1 and w.project_id = $2 and ($3::text is null or d.status = $3)
          order by d.created_at desc, d.event_seq desc, d.id
          limit $4 offset $5",
        webhook.0,
        project.0,
        status as _,
        limit,
        offset,
    )
    .fetch_all(&mut *db)
    .await?;
    let total = sqlx::query_scalar!(
        r#"select count(*) as "total!" from webhook_deliveries d join webhooks w on w.id = d.webhook_id
         where d.webhook_id = $1 and w.project_id = $2 and ($3::text is null or d.status = $3)"#,
        webhook.0,
        project.0,
        status as _,
    )
    .fetch_one(&mut *db)
    .await?;
    Ok((rows, total))
}

pub async fn get(
    db: impl PgExecutor<'_>,
    project: ProjectId,
    webhook: WebhookId,
    id: DeliveryId,
) -> Result<DeliveryRecord> {
    delivery_query!(
        "select ",
        " from webhook_deliveries d join webhooks w on w.id = d.webhook_id
          where d.id = $1 and d.webhook_id = $2 and w.project_id = $3",
        id.0,
        webhook.0,
        project.0,
    )
    .fetch_optional(db)
    .await?
    .ok_or(Error::NotFound)
}

#[derive(Clone, Debug)]
struct AttemptRow {
    attempt: i32,
    started_at: OffsetDateTime,
    duration_ms: i32,
    status_code: Option<i32>,
    error: Option<String>,
    next_attempt_at: Option<OffsetDateTime>,
}

/// A delivery's attempts, oldest first.
pub async fn attempts(
    db: impl PgExecutor<'_>,
    project: ProjectId,
    webhook: WebhookId,
    id: DeliveryId,
) -> Result<Vec<DeliveryAttempt>> {
    let rows = sqlx::query_as!(
        AttemptRow,
        "select a.attempt, a.started_at, a.duration_ms, a.status_code, a.error, a.next_attempt_at
         from webhook_attempts a
         join webhook_deliveries d on d.id = a.delivery_id
         join webhooks w on w.id = d.webhook_id
         where a.delivery_id = $1 and d.webhook_id = $2 and w.project_id = $3
         order by a.attempt",
        id.0,
        webhook.0,
        project.0,
    )
    .fetch_all(db)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| DeliveryAttempt {
            attempt: r.attempt,
            started_at: r.started_at,
            duration_ms: r.duration_ms,
            status_code: r.status_code,
            error: r.error,
            next_attempt_at: r.next_attempt_at,
        })
        .collect())
}

/// Queues a delivery again, now, whatever its status, with a fresh retry budget. A lease in
/// flight is voided: that attempt's outcome will not be recorded, and the delivery goes again.
#[tracing::instrument(skip_all, fields(delivery.id = %id))]
pub async fn redeliver(
    db: impl PgExecutor<'_>,
    project: ProjectId,
    webhook: WebhookId,
    id: DeliveryId,
) -> Result<DeliveryRecord> {
    delivery_query!(
        "update webhook_deliveries d
            set status = 'pending', next_attempt_at = now(), retry_from = d.attempt,
                lease_until = null, lease_token = null
           from webhooks w
          where w.id = d.webhook_id and d.id = $1 and d.webhook_id = $2 and w.project_id = $3
          returning ",
        "",
        id.0,
        webhook.0,
        project.0,
    )
    .fetch_optional(db)
    .await?
    .ok_or(Error::NotFound)
}

/// A delivery a dispatcher owns until `lease_token` is recorded or the lease expires.
#[derive(Clone, Debug)]
pub struct Claimed {
    pub id: DeliveryId,
    pub webhook_id: WebhookId,
    pub url: String,
    pub secret_sealed: Vec<u8>,
    /// Attempts made before this one, and how many of them precede the current retry budget.
    pub attempt: i32,
    pub retry_from: i32,
    pub lease_token: Uuid,
    pub event: SessionEvent,
}

struct ClaimRow {
    id: Uuid,
    webhook_id: Uuid,
    url: String,
    secret_sealed: Vec<u8>,
    attempt: i32,
    retry_from: i32,
    lease_token: Uuid,
    seq: i64,
    session_id: Uuid,
    run_id: Option<Uuid>,
    kind: String,
    payload: Json<Map<String, Value>>,
    event_created_at: OffsetDateTime,
}

/// Claims up to `limit` due deliveries of active subscriptions, skipping rows other
/// dispatchers hold and subscriptions in `busy` (this dispatcher's full ones), oldest due
/// first. Each is leased for `lease`; the secret is read now, so a rotation applies to every
/// attempt claimed after it. `due_by` (default: now) excludes deliveries due later.
#[tracing::instrument(skip_all, fields(limit))]
pub async fn claim(
    db: &crate::Db,
    limit: i64,
    lease: std::time::Duration,
    busy: &[Uuid],
    due_by: Option<OffsetDateTime>,
) -> Result<Vec<Claimed>> {
    let mut tx = unflushed(db).await?;
    let rows = sqlx::query_as!(
        ClaimRow,
        r#"with c as (
             update webhook_deliveries d
                set lease_until = now() + $2 * interval '1 millisecond',
                    lease_token = gen_random_uuid()
              where d.id in (
                    select d2.id from webhook_deliveries d2
                      join webhooks w2 on w2.id = d2.webhook_id and w2.active
                     where d2.status = 'pending' and d2.next_attempt_at <= coalesce($4, now())
                       and (d2.lease_until is null or d2.lease_until < now())
                       and d2.webhook_id <> all($3)
                     order by d2.next_attempt_at
                     limit $1
                     for update of d2 skip locked)
             returning d.id, d.webhook_id, d.event_seq, d.attempt, d.retry_from, d.lease_token
         )
         select c.id as "id!", c.webhook_id as "webhook_id!", w.url, w.secret_sealed,
                c.attempt as "attempt!", c.retry_from as "retry_from!",
                c.lease_token as "lease_token!",
                e.seq, e.session_id, e.run_id, e.type as kind,
                e.payload as "payload: Json<Map<String, Value>>", e.created_at as event_created_at
           from c join webhooks w on w.id = c.webhook_id join events e on e.seq = c.event_seq"#,
        limit,
        lease.as_millis() as f64,
        busy,
        due_by,
    )
    .fetch_all(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(rows
        .into_iter()
        .map(|r| Claimed {
            id: DeliveryId(r.id),
            webhook_id: WebhookId(r.webhook_id),
            url: r.url,
            secret_sealed: r.secret_sealed,
            attempt: r.attempt,
            retry_from: r.retry_from,
            lease_token: r.lease_token,
            event: SessionEvent {
                seq: r.seq,
                session_id: SessionId(r.session_id),
                run_id: r.run_id.map(RunId),
                kind: r.kind,
                payload: r.payload.0,
                created_at: r.event_created_at,
            },
        })
        .collect())
}

/// What one attempt came to.
#[derive(Clone, Debug)]
pub struct AttemptOutcome {
    pub started_at: OffsetDateTime,
    pub duration_ms: i32,
    pub status_code: Option<i32>,
    pub error: Option<String>,
    /// `Delivered`, `Pending` (with `next_attempt_at`) or `Failed` (retries exhausted).
    pub status: DeliveryStatus,
    pub next_attempt_at: Option<OffsetDateTime>,
}

/// What recording an attempt did to the subscription.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Recorded {
    /// The lease had been lost (expired and re-claimed, or voided by a redeliver request):
    /// nothing was written; whoever holds the delivery now reports on it.
    LeaseLost,
    Written,
    /// This failure reached the limit and the subscription was deactivated.
    Deactivated,
}

/// Records an attempt: the delivery's latest outcome, a row in the attempt log, and the
/// subscription's failure count (reset on success). A subscription whose count reaches
/// `deactivate_after` (0 = never) is deactivated with a reason. One statement, so one round
/// trip and one commit; a success touches the subscription's row only when it had failures,
/// so concurrent successes to one receiver do not queue on that row's lock.
#[tracing::instrument(skip_all, fields(delivery.id = %claimed.id, status = outcome.status.as_str()))]
pub async fn record(
    db: impl PgExecutor<'_>,
    claimed: &Claimed,
    outcome: &AttemptOutcome,
    deactivate_after: i32,
) -> Result<Recorded> {
    let reason = format!(
        "deactivated after {deactivate_after} failed delivery attempts in a row (the last: {}); \
         fix the endpoint, then PATCH active=true to resume",
        outcome.error.as_deref().unwrap_or("no response")
    );
    // In `bad`, the right-hand sides read the row as `old` locked it: `w.active` is the state
    // before this failure.
    let row = sqlx::query!(
        r#"with d as (
             update webhook_deliveries
                set attempt = attempt + 1, status = $3::text, status_code = $4, error = $5,
                    next_attempt_at = $6,
                    delivered_at = case when $3::text = 'delivered' then now() else delivered_at end,
                    lease_until = null, lease_token = null
              where id = $1 and lease_token = $2
              returning id, webhook_id, attempt
         ), a as (
             insert into webhook_attempts
                 (delivery_id, attempt, started_at, duration_ms, status_code, error, next_attempt_at)
             select id, attempt, $7, $8, $4, $5, $6 from d
         ), ok as (
             update webhooks w set consecutive_failures = 0
               from d
              where $3::text = 'delivered' and w.id = d.webhook_id and w.consecutive_failures <> 0
         ), old as (
             select w.id, w.active from webhooks w join d on w.id = d.webhook_id
              where $3::text <> 'delivered'
              for update of w
         ), bad as (
             update webhooks w
                set consecutive_failures = w.consecutive_failures + 1,
                    active = w.active and not ($9 > 0 and w.consecutive_failures + 1 >= $9),
                    deactivated_reason = case
                        when w.active and $9 > 0 and w.consecutive_failures + 1 >= $9 then $10
                        else w.deactivated_reason end,
                    updated_at = case
                        when w.active and $9 > 0 and w.consecutive_failures + 1 >= $9 then now()
                        else w.updated_at end
               from old
              where w.id = old.id
              returning old.active and not w.active as deactivated
         )
         select (select count(*) from d) as "written!",
                coalesce((select bool_or(deactivated) from bad), false) as "deactivated!""#,
        claimed.id.0,
        claimed.lease_token,
        outcome.status as _,
        outcome.status_code,
        outcome.error.as_deref(),
        outcome.next_attempt_at,
        outcome.started_at,
        outcome.duration_ms,
        deactivate_after,
        reason,
    )
    .fetch_one(db)
    .await?;
    let (written, deactivated) = (row.written, row.deactivated);
    Ok(match (written, deactivated) {
        (0, _) => Recorded::LeaseLost,
        (_, true) => Recorded::Deactivated,
        _ => Recorded::Written,
    })
}

/// A successful attempt to record with others ([`record_delivered`]).
#[derive(Clone, Debug)]
pub struct Delivered {
    pub id: DeliveryId,
    pub lease_token: Uuid,
    pub started_at: OffsetDateTime,
    pub duration_ms: i32,
    pub status_code: i32,
}

/// Records many successful attempts in one statement (one round trip, one commit): each
/// delivery whose lease is still `lease_token` becomes `delivered`, gets its row in the attempt
/// log, and its subscription's failure count is reset. Returns the ids written; the others'
/// leases were lost (whoever holds the delivery now reports on it).
///
/// Only successes are batched: a failure changes the subscription's failure count and may
/// deactivate it, which [`record`] does under the subscription's row lock, one at a time.
#[tracing::instrument(skip_all, fields(n = batch.len()))]
pub async fn record_delivered(
    db: &crate::Db,
    batch: &[Delivered],
) -> Result<std::collections::HashSet<DeliveryId>> {
    let mut tx = unflushed(db).await?;
    let ids: Vec<Uuid> = batch.iter().map(|d| d.id.0).collect();
    let tokens: Vec<Uuid> = batch.iter().map(|d| d.lease_token).collect();
    let started: Vec<OffsetDateTime> = batch.iter().map(|d| d.started_at).collect();
    let durations: Vec<i32> = batch.iter().map(|d| d.duration_ms).collect();
    let codes: Vec<i32> = batch.iter().map(|d| d.status_code).collect();
    let written = sqlx::query_scalar!(
        r#"with i as (
             select * from unnest($1::uuid[], $2::uuid[], $3::timestamptz[], $4::int4[], $5::int4[])
                 as t(id, token, started_at, duration_ms, status_code)
         ), d as (
             update webhook_deliveries wd
                set attempt = wd.attempt + 1, status = 'delivered', status_code = i.status_code,
                    error = null, next_attempt_at = null, delivered_at = now(),
                    lease_until = null, lease_token = null
               from i
              where wd.id = i.id and wd.lease_token = i.token
              returning wd.id, wd.webhook_id, wd.attempt, i.started_at, i.duration_ms, i.status_code
         ), a as (
             insert into webhook_attempts (delivery_id, attempt, started_at, duration_ms, status_code)
             select id, attempt, started_at, duration_ms, status_code from d
         ), ok as (
             update webhooks w set consecutive_failures = 0
              where w.id in (select webhook_id from d) and w.consecutive_failures <> 0
         )
         select id as "id!" from d"#,
        &ids,
        &tokens,
        &started,
        &durations,
        &codes,
    )
    .fetch_all(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(written.into_iter().map(DeliveryId).collect())
}

/// A transaction whose commit does not wait for its WAL flush (`synchronous_commit = off`),
/// for the dispatcher's claims and recorded successes: a database crash can lose only the
/// last few of them, and a lost lease or a lost success sends that delivery again, which the
/// at-least-once promise allows. Waiting for the flush (milliseconds on a VM's disk) bounded
/// how many claims a second one dispatcher could make. Events are never written this way.
async fn unflushed(db: &crate::Db) -> Result<sqlx::Transaction<'static, sqlx::Postgres>> {
    let mut tx = db.begin().await?;
    sqlx::query!("select set_config('synchronous_commit', 'off', true)")
        .fetch_one(&mut *tx)
        .await?;
    Ok(tx)
}

/// Deletes finished deliveries (and their attempts) older than `days`.
pub async fn prune(db: impl PgExecutor<'_>, days: i32) -> Result<u64> {
    Ok(sqlx::query!(
        "delete from webhook_deliveries
          where status <> 'pending' and created_at < now() - $1 * interval '1 day'",
        f64::from(days),
    )
    .execute(db)
    .await?
    .rows_affected())
}
