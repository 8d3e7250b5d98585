//! The dispatcher: drains the outbox. Any number may run, one per server process; they share
//! the table through `for update skip locked` claims with a lease (see
//! `store::deliveries`), and no transaction is open while a request is in flight.
//!
//! It wakes when an append queues deliveries (the event log's notification says so), when a
//! send finishes, and on a timer for retries that have come due. At most `concurrency`
//! requests are in flight per process and at most `per_subscription` of them for one
//! subscription, each bounded by the request timeout, so a slow or hanging receiver delays
//! only its own deliveries.
//!
//! Claims run ahead of sends: up to [`PREFETCH`] times those limits are claimed, and a claimed
//! delivery waits in this process for its subscription's share and a slot. A claim is a
//! commit, so claiming only for slots already free made every send wait for one; now a send
//! finds its next delivery claimed already. The wait is bounded by one request's duration
//! (a subscription's queue is no deeper than its share), well inside the lease. A subscription
//! is claimed for again only once half its share is free, so claims come in batches rather
//! than a row per finished send.
//!
//! Successful attempts are recorded in batches by one recorder task (`record_batches`): a
//! send's slot is freed as soon as its response is in, and every success that finished while
//! the previous batch was being written goes in the next one statement and commit. The
//! delivery stays leased until it is recorded, so no other dispatcher sends it meanwhile; a
//! crash before the record lets the lease expire and the delivery go again (at least once).
//! Failures are recorded one by one, as they change the subscription's failure count.

use crate::payload;
use crate::policy::unit_random;
use crate::sender::SendOutcome;
use crate::Webhooks;
use sandbox_agents_domain::webhook::DeliveryStatus;
use sandbox_agents_store::deliveries::{self, AttemptOutcome, Claimed, Delivered, Recorded};
use sandbox_agents_store::events::{Notice, CHANNEL};
use sandbox_agents_store::Db;
use sqlx::postgres::PgListener;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use time::OffsetDateTime;
use tokio::sync::{mpsc, oneshot, Notify, OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;
use uuid::Uuid;

/// How often finished deliveries past their retention are deleted.
const PRUNE_EVERY: Duration = Duration::from_secs(3600);
/// The most successes one statement records.
const MAX_BATCH: usize = 256;
/// Successes waiting for the recorder before sends wait for it (back-pressure on a slow
/// database, which also bounds what a crash sends twice).
const RECORD_QUEUE: usize = 1024;

/// A success to record, and whom to tell whether it was written (`None`: the statement failed).
type ToRecord = (Delivered, oneshot::Sender<Option<bool>>);
/// How far claims run ahead of the send limits (see the module's comment).
pub const PREFETCH: usize = 2;

/// One subscription's deliveries in this process.
struct Share {
    /// Claimed and not yet sent, or being sent.
    claimed: usize,
    /// One permit per request in flight to it (`per_subscription`).
    sending: Arc<Semaphore>,
}

#[derive(Clone)]
pub struct Dispatcher {
    inner: Arc<Inner>,
}

struct Inner {
    db: Db,
    hooks: Webhooks,
    /// One permit per request in flight.
    slots: Arc<Semaphore>,
    concurrency: usize,
    /// Deliveries claimed per subscription, in this process.
    shares: Mutex<HashMap<Uuid, Share>>,
    per_webhook: usize,
    /// How long a claim is ours: longer than any request can take, so that a live
    /// dispatcher never loses a lease mid-send; short enough that a dead one's deliveries go
    /// again soon.
    lease: Duration,
    wake: Notify,
    /// Successes on their way to `record_batches`.
    recorder: mpsc::Sender<ToRecord>,
}

impl Dispatcher {
    pub fn new(db: Db, hooks: Webhooks) -> Self {
        let concurrency = hooks.settings.concurrency.max(1);
        let lease = hooks.settings.timeout * 2 + Duration::from_secs(5);
        let (recorder, queue) = mpsc::channel(RECORD_QUEUE);
        // Ends when the last clone of this dispatcher is dropped (its sender with it).
        tokio::spawn(
            record_batches(db.clone(), queue).instrument(tracing::info_span!("webhook.recorder")),
        );
        Self {
            inner: Arc::new(Inner {
                db,
                slots: Arc::new(Semaphore::new(concurrency)),
                concurrency,
                shares: Mutex::new(HashMap::new()),
                per_webhook: hooks.settings.per_subscription.clamp(1, concurrency),
                lease,
                wake: Notify::new(),
                recorder,
                hooks,
            }),
        }
    }

    /// Makes the running loop look for due deliveries now.
    pub fn wake(&self) {
        self.inner.wake.notify_one();
    }

    /// Sends every delivery that is due now, waiting for each send it started, and returns
    /// how many attempts were made. Retries scheduled meanwhile are left for a later call, so
    /// a test that drives the dispatcher with this knows exactly what one step does.
    pub async fn run_once(&self) -> anyhow::Result<usize> {
        let due_by = OffsetDateTime::now_utc();
        let mut tasks = JoinSet::new();
        let mut made = 0;
        loop {
            let batch = self.claim_batch(Some(due_by)).await?;
            if batch.is_empty() {
                // Full subscriptions or slots: wait for a send to finish, then look again.
                if tasks.join_next().await.is_none() {
                    break;
                }
                continue;
            }
            made += batch.len();
            for (c, share) in batch {
                tasks.spawn(self.clone().deliver(c, share));
            }
        }
        Ok(made)
    }

    /// The settings and keys this dispatcher sends with.
    pub fn webhooks(&self) -> &Webhooks {
        &self.inner.hooks
    }

    /// Claims up to what the limits leave ([`PREFETCH`] times the slots, and as many of one
    /// subscription's), counting each against its subscription; returns each with its
    /// subscription's send permits.
    async fn claim_batch(
        &self,
        due_by: Option<OffsetDateTime>,
    ) -> anyhow::Result<Vec<(Claimed, Arc<Semaphore>)>> {
        let st = &self.inner;
        let ahead = st.per_webhook * PREFETCH;
        // A subscription with less room than this is left out of the claim until its sends
        // make room: a claim is a commit, and one claim per freed slot (a row at a time) is
        // what held one subscription's deliveries to a few hundred a second. Half its share
        // still leaves sends queued while the next claim runs.
        let least = (st.per_webhook / 2).max(1);
        let (busy, outstanding, fullest): (Vec<Uuid>, usize, usize) = {
            let map = st.shares.lock().expect("shares");
            let busy = map
                .iter()
                .filter(|(_, s)| s.claimed + least > ahead)
                .map(|(id, _)| *id)
                .collect();
            let fullest = map
                .values()
                .map(|s| s.claimed)
                .filter(|n| n + least <= ahead)
                .max()
                .unwrap_or(0);
            (busy, map.values().map(|s| s.claimed).sum(), fullest)
        };
        // No subscription may go past `ahead`, whichever the rows turn out to be: that keeps
        // its queue no deeper than its share, so a queued delivery waits at most one request
        // (the bound the lease is sized for).
        let want = (st.concurrency * PREFETCH)
            .saturating_sub(outstanding)
            .min(ahead - fullest);
        if want == 0 {
            return Ok(Vec::new());
        }
        let claimed = deliveries::claim(&st.db, want as i64, st.lease, &busy, due_by).await?;
        let mut map = st.shares.lock().expect("shares");
        Ok(claimed
            .into_iter()
            .map(|c| {
                let share = map.entry(c.webhook_id.0).or_insert_with(|| Share {
                    claimed: 0,
                    sending: Arc::new(Semaphore::new(st.per_webhook)),
                });
                share.claimed += 1;
                let sending = share.sending.clone();
                (c, sending)
            })
            .collect())
    }

    /// Frees a send's slot and its subscription's permit, counts the delivery off its
    /// subscription, and looks for more work.
    fn release(&self, webhook: Uuid, permits: (OwnedSemaphorePermit, OwnedSemaphorePermit)) {
        let st = &self.inner;
        drop(permits);
        {
            let mut map = st.shares.lock().expect("shares");
            if let Some(s) = map.get_mut(&webhook) {
                s.claimed -= 1;
                if s.claimed == 0 {
                    map.remove(&webhook);
                }
            }
        }
        st.wake.notify_one();
    }

    /// Records a success through the recorder: `Some(written)`, or None when it could not.
    async fn record_success(&self, c: &Claimed, outcome: &AttemptOutcome) -> Option<bool> {
        let (tx, rx) = oneshot::channel();
        let d = Delivered {
            id: c.id,
            lease_token: c.lease_token,
            started_at: outcome.started_at,
            duration_ms: outcome.duration_ms,
            status_code: outcome.status_code.unwrap_or(200),
        };
        self.inner.recorder.send((d, tx)).await.ok()?;
        rx.await.ok().flatten()
    }

    /// One attempt, once its subscription's share and a slot are free: sign, send, record, and
    /// schedule the next try or give up.
    async fn deliver(self, c: Claimed, share: Arc<Semaphore>) {
        // Neither semaphore is ever closed.
        let Ok(turn) = share.acquire_owned().await else {
            return;
        };
        let Ok(slot) = self.inner.slots.clone().acquire_owned().await else {
            return;
        };
        let mut permit = Some((turn, slot));
        let span = tracing::info_span!("webhook.deliver", delivery.id = %c.id, webhook.id = %c.webhook_id,
            event.seq = c.event.seq, r#type = %c.event.kind, attempt = c.attempt + 1);
        async {
            let st = &self.inner;
            let started_at = OffsetDateTime::now_utc();
            let out = match st.hooks.open_secret(c.webhook_id, &c.secret_sealed) {
                Ok(secret) => {
                    let body = payload::event_body(c.id, &c.event);
                    st.hooks
                        .sender()
                        .send(&c.url, &secret, c.id, &c.event.kind, body)
                        .await
                }
                Err(e) => SendOutcome {
                    status_code: None,
                    error: Some(e.to_string()),
                    duration: Duration::ZERO,
                },
            };
            let failed = (c.attempt + 1 - c.retry_from).max(1) as u32;
            let (status, next_attempt_at) = if out.delivered() {
                (DeliveryStatus::Delivered, None)
            } else {
                match st.hooks.settings.retry.next_wait(failed, unit_random()) {
                    Some(wait) => (
                        DeliveryStatus::Pending,
                        Some(OffsetDateTime::now_utc() + wait),
                    ),
                    None => (DeliveryStatus::Failed, None),
                }
            };
            let outcome = AttemptOutcome {
                started_at,
                duration_ms: out.duration.as_millis().min(i32::MAX as u128) as i32,
                status_code: out.status_code.map(i32::from),
                error: out.error.clone(),
                status,
                next_attempt_at,
            };
            // `delivered`, `retrying` (this attempt failed, another is due) or `failed` (the
            // last one did).
            let label = match status {
                DeliveryStatus::Delivered => "delivered",
                DeliveryStatus::Pending => "retrying",
                DeliveryStatus::Failed => "failed",
            };
            metrics::counter!("sandbox_agents_webhook_attempts_total", "outcome" => label).increment(1);
            metrics::histogram!("sandbox_agents_webhook_attempt_duration_seconds", "outcome" => label)
                .record(out.duration);
            if status == DeliveryStatus::Delivered {
                // The receiver has answered: the slot is free before the record is written.
                if let Some(p) = permit.take() {
                    self.release(c.webhook_id.0, p);
                }
                match self.record_success(&c, &outcome).await {
                    Some(true) => tracing::debug!(ms = outcome.duration_ms, "delivered"),
                    Some(false) => tracing::info!("the delivery was re-queued or re-claimed meanwhile; this attempt is not recorded"),
                    None => tracing::warn!("could not record a delivery attempt; it will be sent again"),
                }
                return;
            }
            let deactivate_after = st.hooks.settings.deactivate_after.min(i32::MAX as u32) as i32;
            match deliveries::record(&st.db, &c, &outcome, deactivate_after).await {
                Ok(Recorded::Written) => match status {
                    DeliveryStatus::Delivered => tracing::debug!(ms = outcome.duration_ms, "delivered"),
                    DeliveryStatus::Pending => tracing::info!(error = ?out.error, status_code = ?out.status_code, next = ?next_attempt_at, "delivery failed; will retry"),
                    DeliveryStatus::Failed => tracing::warn!(error = ?out.error, status_code = ?out.status_code, "delivery failed for good: retries exhausted"),
                },
                Ok(Recorded::Deactivated) => tracing::warn!(
                    error = ?out.error,
                    "the webhook was deactivated after {deactivate_after} failed attempts in a row"
                ),
                Ok(Recorded::LeaseLost) => tracing::info!("the delivery was re-queued or re-claimed meanwhile; this attempt is not recorded"),
                // The lease will expire and the delivery go again: at least once.
                Err(e) => tracing::warn!(error = %e, "could not record a delivery attempt; it will be sent again"),
            }
        }
        .instrument(span)
        .await;
        if let Some(p) = permit {
            self.release(c.webhook_id.0, p);
        }
    }

    /// The dispatcher's loop, until `shutdown`; then in-flight sends get the request timeout
    /// to finish (an aborted one's lease expires and it goes again).
    pub fn spawn(&self, shutdown: CancellationToken) -> tokio::task::JoinHandle<()> {
        tokio::spawn(self.clone().listen(shutdown.clone()));
        let this = self.clone();
        tokio::spawn(
            async move {
                let st = &this.inner;
                let mut tasks = JoinSet::new();
                let mut last_prune: Option<tokio::time::Instant> = None;
                tracing::info!(concurrency = st.concurrency, "webhook dispatcher started");
                loop {
                    while tasks.try_join_next().is_some() {}
                    let mut full = false;
                    match this.claim_batch(None).await {
                        Ok(batch) => {
                            full = !batch.is_empty() && batch.len() == st.per_webhook * PREFETCH;
                            for (c, share) in batch {
                                tasks.spawn(this.clone().deliver(c, share));
                            }
                        }
                        Err(e) => tracing::warn!(error = %e, "could not claim webhook deliveries; retrying"),
                    }
                    if last_prune.is_none_or(|t| t.elapsed() >= PRUNE_EVERY) {
                        last_prune = Some(tokio::time::Instant::now());
                        this.prune().await;
                    }
                    if full {
                        continue;
                    }
                    tokio::select! {
                        _ = st.wake.notified() => {}
                        _ = tokio::time::sleep(st.hooks.settings.poll) => {}
                        _ = shutdown.cancelled() => break,
                    }
                }
                let grace = st.hooks.settings.timeout + Duration::from_secs(1);
                let _ = tokio::time::timeout(grace, async {
                    while tasks.join_next().await.is_some() {}
                })
                .await;
                tasks.abort_all();
                tracing::info!("webhook dispatcher stopped");
            }
            .instrument(tracing::info_span!("webhook.dispatcher")),
        )
    }

    async fn prune(&self) {
        let days = self.inner.hooks.settings.retention_days;
        if days == 0 {
            return;
        }
        match deliveries::prune(&self.inner.db, days.min(i32::MAX as u32) as i32).await {
            Ok(0) => {}
            Ok(n) => tracing::info!(
                deleted = n,
                "pruned finished webhook deliveries past retention"
            ),
            Err(e) => tracing::warn!(error = %e, "could not prune old webhook deliveries"),
        }
    }

    /// Wakes the loop when an append queued deliveries. The timer covers a lost connection.
    async fn listen(self, shutdown: CancellationToken) {
        // A connection of its own: not one of the pool's, which requests and deliveries need.
        let own = sandbox_agents_store::database::listener_pool(&self.inner.db);
        loop {
            let mut listener = match PgListener::connect_with(&own).await {
                Ok(mut l) => match l.listen(CHANNEL).await {
                    Ok(()) => l,
                    Err(e) => {
                        tracing::warn!(error = %e, "the webhook dispatcher cannot LISTEN; polling meanwhile");
                        tokio::select! { _ = tokio::time::sleep(Duration::from_secs(1)) => continue, _ = shutdown.cancelled() => return }
                    }
                },
                Err(e) => {
                    tracing::warn!(error = %e, "the webhook dispatcher cannot connect to LISTEN; polling meanwhile");
                    tokio::select! { _ = tokio::time::sleep(Duration::from_secs(1)) => continue, _ = shutdown.cancelled() => return }
                }
            };
            loop {
                tokio::select! {
                    n = listener.recv() => match n {
                        Ok(n) => {
                            if serde_json::from_str::<Notice>(n.payload()).is_ok_and(|n| n.w) {
                                self.wake();
                            }
                        }
                        Err(e) => {
                            tracing::warn!(error = %e, "the webhook dispatcher's LISTEN connection failed; reconnecting");
                            // Anything queued meanwhile is found by the next claim.
                            self.wake();
                            break;
                        }
                    },
                    _ = shutdown.cancelled() => return,
                }
            }
        }
    }
}

/// The recorder: writes every success queued while the previous batch was being written in one
/// statement, and tells each sender whether its delivery was written.
async fn record_batches(db: Db, mut queue: mpsc::Receiver<ToRecord>) {
    let mut buf = Vec::with_capacity(MAX_BATCH);
    while queue.recv_many(&mut buf, MAX_BATCH).await > 0 {
        let batch: Vec<Delivered> = buf.iter().map(|(d, _)| d.clone()).collect();
        match deliveries::record_delivered(&db, &batch).await {
            Ok(written) => {
                for (d, tx) in buf.drain(..) {
                    let _ = tx.send(Some(written.contains(&d.id)));
                }
            }
            Err(e) => {
                // The leases expire and the deliveries go again: at least once.
                tracing::warn!(error = %e, n = batch.len(), "could not record delivered attempts");
                for (_, tx) in buf.drain(..) {
                    let _ = tx.send(None);
                }
            }
        }
    }
}
