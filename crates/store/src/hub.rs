//! Live fan-out of the event log, across server processes.
//!
//! One `LISTEN` connection per process receives every notification [`crate::events`] sends.
//! For each session somebody is streaming there is one *feed*: a task with a cursor that, when
//! told "new events were committed", reads `seq > cursor` from Postgres once and broadcasts
//! the rows to every local subscriber. Because seq order equals commit order within a session,
//! reading past the cursor never skips an event. Ephemeral events arrive inside the
//! notification and are broadcast as they are.
//!
//! While the `LISTEN` connection is down, a poller tells every feed to check the database
//! every [`POLL_INTERVAL`], and once it is back every feed checks once more, so a lost
//! notification delays an event but never loses it.
//!
//! A subscriber that falls behind the broadcast buffer gets `Lagged` and must re-read from
//! Postgres after its own cursor (the SSE endpoint does); nothing stored is ever dropped.

use crate::events::{self, Notice, CHANNEL};
use crate::Db;
use backon::{BackoffBuilder, ExponentialBuilder};
use sandbox_agents_domain::event::SessionEvent;
use sandbox_agents_domain::SessionId;
use sqlx::postgres::PgListener;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;
use tokio::sync::{broadcast, watch, Notify};
use tokio_util::sync::{CancellationToken, DropGuard};
use uuid::Uuid;

/// The channel a trigger announces every change to the projects table on (see the migration
/// `projects_changed`).
pub const PROJECTS_CHANNEL: &str = "sa_projects";

/// How often feeds check the database while the `LISTEN` connection is down.
pub const POLL_INTERVAL: Duration = Duration::from_millis(500);
/// The waits between failed connections of the `LISTEN` connection: 0.1 s doubling to 5 s, for
/// as long as it takes (feeds poll meanwhile); they start over once it connects.
const RECONNECT: ExponentialBuilder = ExponentialBuilder::new()
    .with_min_delay(Duration::from_millis(100))
    .with_max_delay(Duration::from_secs(5))
    .without_max_times();
/// The waits of a feed that cannot read where the log ends: 0.05 s doubling to 2 s, until it
/// can or is stopped.
const FEED_START: ExponentialBuilder = ExponentialBuilder::new()
    .with_min_delay(Duration::from_millis(50))
    .with_max_delay(Duration::from_secs(2))
    .without_max_times();
/// How long a subscriber waits for a new feed to learn where the log ends.
const SUBSCRIBE_TIMEOUT: Duration = Duration::from_secs(10);
/// Events a subscriber may fall behind before it has to catch up from the database.
const BROADCAST_CAPACITY: usize = 1024;
/// Signals a feed may have queued before ephemeral ones are dropped (stored ones coalesce).
const MAX_QUEUED_SIGNALS: usize = 4096;

/// What a subscriber receives.
#[derive(Clone, Debug)]
pub enum LiveEvent {
    /// A committed event, in seq order.
    Stored(Arc<Shared>),
    /// A `seq = 0` event, as it happened.
    Ephemeral(Arc<Shared>),
    /// The session was deleted.
    Deleted,
    /// The feed ended: the process is shutting down. Nothing follows; a stream ends and its
    /// client resumes elsewhere. Streams learn of a shutdown this way, from the one send of
    /// their feed, rather than each watching the shutdown token beside every receive.
    Closed,
}

/// One event as every subscriber of its feed shares it: its wire form (an SSE frame) is made
/// once, by the first stream that sends it, and every other stream sends the same bytes, a
/// reference-counted clone (a thousand streams on a session cost one serialization and one
/// frame per event, not a thousand).
#[derive(Debug)]
pub struct Shared {
    event: SessionEvent,
    encoded: std::sync::OnceLock<bytes::Bytes>,
}

impl Shared {
    pub fn new(event: SessionEvent) -> Self {
        Shared {
            event,
            encoded: std::sync::OnceLock::new(),
        }
    }

    /// The event encoded by `encode`, made on first use and shared after. Every caller must
    /// pass the same encoding (there is one: the SSE frame); the first one's result is kept.
    pub fn encoded(&self, encode: impl FnOnce(&SessionEvent) -> bytes::Bytes) -> bytes::Bytes {
        self.encoded.get_or_init(|| encode(&self.event)).clone()
    }
}

impl std::ops::Deref for Shared {
    type Target = SessionEvent;
    fn deref(&self) -> &SessionEvent {
        &self.event
    }
}

enum Signal {
    /// Events may have been committed: read past the cursor.
    Check,
    Ephemeral(SessionEvent),
    Deleted,
}

struct FeedCore {
    session: SessionId,
    tx: broadcast::Sender<LiveEvent>,
    signals: Mutex<VecDeque<Signal>>,
    wake: Notify,
    /// Becomes true once the feed's cursor is set; subscribers wait for it before they read
    /// their backlog, so that every event is either in the backlog or broadcast later.
    ready: watch::Sender<bool>,
}

impl FeedCore {
    fn push(&self, signal: Signal) {
        {
            let mut q = self.signals.lock().expect("feed queue poisoned");
            match signal {
                Signal::Check if matches!(q.back(), Some(Signal::Check)) => {}
                Signal::Ephemeral(_) if q.len() >= MAX_QUEUED_SIGNALS => {
                    tracing::debug!(session.id = %self.session, "an ephemeral event was dropped: the feed is behind");
                }
                s => q.push_back(s),
            }
        }
        self.wake.notify_one();
    }

    fn drain(&self) -> Vec<Signal> {
        self.signals
            .lock()
            .expect("feed queue poisoned")
            .drain(..)
            .collect()
    }
}

/// A session's feed; the last subscriber to drop it stops its task.
struct Feed {
    core: Arc<FeedCore>,
    _stop: DropGuard,
}

struct Inner {
    db: Db,
    feeds: Mutex<HashMap<Uuid, Weak<Feed>>>,
    listening: AtomicBool,
    /// Moves on every change to the projects table heard of (see
    /// [`EventHub::projects_epoch`]), and whenever the listener connects or loses its
    /// connection, as changes made meanwhile went unheard.
    projects_epoch: AtomicU64,
    shutdown: CancellationToken,
}

/// The process's live fan-out; cheap to clone.
#[derive(Clone)]
pub struct EventHub {
    inner: Arc<Inner>,
}

/// A live subscription to one session's events. Subscribe **before** reading the backlog.
pub struct Subscription {
    _feed: Arc<Feed>,
    pub rx: broadcast::Receiver<LiveEvent>,
}

impl EventHub {
    /// Starts the listener and the fallback poller; both stop with `shutdown`.
    pub fn start(db: Db, shutdown: CancellationToken) -> Self {
        let hub = EventHub {
            inner: Arc::new(Inner {
                db,
                feeds: Mutex::new(HashMap::new()),
                listening: AtomicBool::new(false),
                projects_epoch: AtomicU64::new(0),
                shutdown,
            }),
        };
        tokio::spawn(hub.clone().listen());
        tokio::spawn(hub.clone().poll_while_deaf());
        hub
    }

    /// Whether the `LISTEN` connection is up (for health reporting).
    pub fn is_listening(&self) -> bool {
        self.inner.listening.load(Ordering::Acquire)
    }

    /// Where the projects table stands as far as this process has heard: a number that moves
    /// on every change committed to it (announced on [`PROJECTS_CHANNEL`] by a trigger), and
    /// whenever the listener connects or loses its connection. None while nobody listens,
    /// when nothing may be cached. A value read before a query and again after it, unchanged,
    /// means no change was heard in between (a change is heard within the notification's
    /// delivery, about a millisecond after its commit).
    pub fn projects_epoch(&self) -> Option<u64> {
        let epoch = self.inner.projects_epoch.load(Ordering::Acquire);
        self.is_listening().then_some(epoch)
    }

    fn projects_changed(&self) {
        self.inner.projects_epoch.fetch_add(1, Ordering::AcqRel);
    }

    /// Subscribes to a session's live events. The caller must already have checked that it
    /// may read the session. Returns once the session's feed knows where the log ends.
    pub async fn subscribe(&self, session: SessionId) -> crate::Result<Subscription> {
        let feed = {
            let mut feeds = self.inner.feeds.lock().expect("hub map poisoned");
            match feeds.get(&session.0).and_then(Weak::upgrade) {
                Some(f) => f,
                None => {
                    let f = self.new_feed(session);
                    feeds.insert(session.0, Arc::downgrade(&f));
                    f
                }
            }
        };
        let rx = feed.core.tx.subscribe();
        let mut ready = feed.core.ready.subscribe();
        let unavailable = || {
            crate::Error::Conflict(
                "live events are unavailable: the database does not answer".into(),
            )
        };
        let shutting_down = || crate::Error::Conflict("the server is shutting down".into());
        tokio::select! {
            r = tokio::time::timeout(SUBSCRIBE_TIMEOUT, ready.wait_for(|r| *r)) => {
                r.map_err(|_| unavailable())?.map_err(|_| unavailable())?;
            }
            _ = self.inner.shutdown.cancelled() => return Err(shutting_down()),
        }
        // `rx` exists already: a shutdown after this check reaches it as `Closed` (the feed
        // sends that when it stops); one before it is refused here.
        if self.inner.shutdown.is_cancelled() {
            return Err(shutting_down());
        }
        Ok(Subscription { _feed: feed, rx })
    }

    fn new_feed(&self, session: SessionId) -> Arc<Feed> {
        let stop = self.inner.shutdown.child_token();
        let core = Arc::new(FeedCore {
            session,
            tx: broadcast::channel(BROADCAST_CAPACITY).0,
            signals: Mutex::new(VecDeque::new()),
            wake: Notify::new(),
            ready: watch::channel(false).0,
        });
        tokio::spawn(run_feed(
            self.inner.db.clone(),
            core.clone(),
            stop.clone(),
            Arc::downgrade(&self.inner),
        ));
        Arc::new(Feed {
            core,
            _stop: stop.drop_guard(),
        })
    }

    fn feed(&self, session: Uuid) -> Option<Arc<FeedCore>> {
        let feeds = self.inner.feeds.lock().expect("hub map poisoned");
        feeds
            .get(&session)
            .and_then(Weak::upgrade)
            .map(|f| f.core.clone())
    }

    fn check_all(&self) {
        let cores: Vec<Arc<FeedCore>> = {
            let mut feeds = self.inner.feeds.lock().expect("hub map poisoned");
            feeds.retain(|_, w| w.strong_count() > 0);
            feeds
                .values()
                .filter_map(Weak::upgrade)
                .map(|f| f.core.clone())
                .collect()
        };
        for core in cores {
            core.push(Signal::Check);
        }
    }

    fn dispatch(&self, payload: &str) {
        let notice: Notice = match serde_json::from_str(payload) {
            Ok(n) => n,
            Err(e) => {
                tracing::warn!(error = %e, "ignoring a malformed event notification");
                return;
            }
        };
        let Some(core) = self.feed(notice.s) else {
            return;
        };
        if notice.d {
            core.push(Signal::Deleted);
        } else if let Some(e) = notice.e {
            core.push(Signal::Ephemeral(e));
        } else {
            core.push(Signal::Check);
        }
    }

    /// Keeps one `LISTEN` connection up, reconnecting after [`RECONNECT`]'s waits.
    async fn listen(self) {
        let shutdown = self.inner.shutdown.clone();
        let mut waits = RECONNECT.build();
        let mut connected_before = false;
        let own = crate::database::listener_pool(&self.inner.db);
        while !shutdown.is_cancelled() {
            let mut listener = match connect_listener(&own).await {
                Ok(l) => l,
                Err(e) => {
                    tracing::warn!(error = %e, "the event listener cannot connect; polling until it can");
                    let wait = waits.next().expect("the reconnect waits never run out");
                    tokio::select! { _ = tokio::time::sleep(wait) => {}, _ = shutdown.cancelled() => return }
                    continue;
                }
            };
            waits = RECONNECT.build();
            if std::mem::replace(&mut connected_before, true) {
                metrics::counter!("sandbox_agents_event_listener_reconnects_total").increment(1);
            }
            // Changes to projects made while nobody listened went unheard.
            self.projects_changed();
            self.inner.listening.store(true, Ordering::Release);
            tracing::info!("event listener connected");
            // Anything committed while nobody listened is read now.
            self.check_all();
            loop {
                let next = tokio::select! {
                    n = listener.try_recv() => n,
                    _ = shutdown.cancelled() => return,
                };
                match next {
                    Ok(Some(n)) if n.channel() == PROJECTS_CHANNEL => self.projects_changed(),
                    Ok(Some(n)) => self.dispatch(n.payload()),
                    Ok(None) => {
                        tracing::warn!("event listener lost its connection");
                        break;
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "event listener failed");
                        break;
                    }
                }
            }
            self.inner.listening.store(false, Ordering::Release);
            self.projects_changed();
            self.check_all();
        }
    }

    /// The fallback: while nobody listens, every feed checks the database periodically.
    async fn poll_while_deaf(self) {
        let mut tick = tokio::time::interval(POLL_INTERVAL);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! { _ = tick.tick() => {}, _ = self.inner.shutdown.cancelled() => return }
            if !self.is_listening() {
                self.check_all();
            }
        }
    }
}

/// `db` is the listener's own pool ([`crate::database::listener_pool`]), never the server's.
async fn connect_listener(db: &Db) -> Result<PgListener, sqlx::Error> {
    let mut l = PgListener::connect_with(db).await?;
    l.listen_all([CHANNEL, PROJECTS_CHANNEL]).await?;
    Ok(l)
}

/// A feed's task: owns the cursor; reads and broadcasts in seq order.
async fn run_feed(db: Db, core: Arc<FeedCore>, stop: CancellationToken, hub: Weak<Inner>) {
    // However the task ends (stopped, or a panic), its subscribers hear `Closed`: streams
    // wait on nothing else, so a feed that ended silently would keep them (and a shutdown
    // waiting for them) open.
    let _closed = CloseOnDrop(core.clone());
    let session = core.session;
    let mut waits = FEED_START.build();
    let mut cursor = loop {
        match events::last_seq(&db, session).await {
            Ok(seq) => break seq,
            Err(e) => {
                tracing::warn!(session.id = %session, error = %e, "a feed cannot read where the log ends; retrying");
                let wait = waits.next().expect("a feed's start waits never run out");
                tokio::select! { _ = tokio::time::sleep(wait) => {}, _ = stop.cancelled() => return }
            }
        }
    };
    core.ready.send_replace(true);
    'feed: loop {
        tokio::select! { _ = core.wake.notified() => {}, _ = stop.cancelled() => break }
        for signal in core.drain() {
            match signal {
                Signal::Check => {
                    let read = tokio::select! {
                        r = catch_up(&db, &core, &mut cursor) => r,
                        _ = stop.cancelled() => break 'feed,
                    };
                    if let Err(e) = read {
                        tracing::warn!(session.id = %session, error = %e, "a feed failed to read new events; retrying");
                        let core = core.clone();
                        let stop = stop.clone();
                        tokio::spawn(async move {
                            tokio::select! { _ = tokio::time::sleep(Duration::from_millis(200)) => core.push(Signal::Check), _ = stop.cancelled() => {} }
                        });
                    }
                }
                Signal::Ephemeral(e) => {
                    let _ = core.tx.send(LiveEvent::Ephemeral(Arc::new(Shared::new(e))));
                }
                Signal::Deleted => {
                    let _ = core.tx.send(LiveEvent::Deleted);
                }
            }
        }
    }

    if let Some(inner) = hub.upgrade() {
        let mut feeds = inner.feeds.lock().expect("hub map poisoned");
        if feeds.get(&session.0).is_some_and(|w| w.strong_count() == 0) {
            feeds.remove(&session.0);
        }
    }
}

/// Sends `Closed` to a feed's subscribers when dropped: stopped by the shutdown (with
/// subscribers still there) or by the last one leaving (to nobody), nothing more comes.
struct CloseOnDrop(Arc<FeedCore>);

impl Drop for CloseOnDrop {
    fn drop(&mut self) {
        let _ = self.0.tx.send(LiveEvent::Closed);
    }
}

async fn catch_up(db: &Db, core: &FeedCore, cursor: &mut i64) -> crate::Result<()> {
    loop {
        let page = events::page_unscoped(db, core.session, *cursor).await?;
        let full = page.len() as i64 == events::MAX_PAGE;
        for e in page {
            *cursor = e.seq;
            let _ = core.tx.send(LiveEvent::Stored(Arc::new(Shared::new(e))));
        }
        if !full {
            return Ok(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reconnects_wait_a_tenth_of_a_second_doubling_to_five_seconds_without_end() {
        let waits: Vec<u128> = RECONNECT.build().take(9).map(|w| w.as_millis()).collect();
        assert_eq!(waits, [100, 200, 400, 800, 1600, 3200, 5000, 5000, 5000]);
    }

    #[test]
    fn a_feed_that_cannot_start_waits_from_50_ms_doubling_to_2_s_without_end() {
        let waits: Vec<u128> = FEED_START.build().take(8).map(|w| w.as_millis()).collect();
        assert_eq!(waits, [50, 100, 200, 400, 800, 1600, 2000, 2000]);
    }
}
