//! A session's egress log as the proxy observes it: closed connections (bytes each way) and
//! refusals summed per (session, host, port) in memory, and added to `session_egress` every
//! [`SUMMARY_EVERY`] in one statement (`store::session_egress::add`), never on the proxy's
//! path. A crash loses at most the last interval's sums; the refusals' events are written on
//! their own and are durable once written.

use sandbox_agents_domain::SessionId;
use sandbox_agents_egress::Host;
use sandbox_agents_store::session_egress::EgressRecord;
use sandbox_agents_store::Db;
use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use time::OffsetDateTime;
use tokio_util::sync::CancellationToken;

/// How often the sums are written: what a crash can lose of them, and how far
/// `GET /api/sessions/{id}/egress` trails the traffic.
pub const SUMMARY_EVERY: Duration = Duration::from_secs(5);
/// (session, host, port) keys summed between two writes at most, so a sandbox that walks
/// through names cannot grow the map without bound; a new key past it is counted
/// (`sandbox_agents_egress_summary_dropped_total`) and dropped, while the keys already there
/// still add up.
const SUMMARY_KEYS: usize = 10_000;
/// New (host, port) keys one session may add between two writes; past it, its connections
/// and refusals are summed under [`OTHER_HOSTS`], so one sandbox walking through names
/// neither crowds out the others' keys nor adds more than this many rows per write.
const SESSION_KEYS: usize = 64;
/// Where a session's sums go once it has [`SESSION_KEYS`] new keys in one interval (port 0).
pub const OTHER_HOSTS: &str = "(other hosts)";

type Key = (SessionId, String, u16);

/// What the proxy observed since the last write. Only a mutex and a map on the proxy's path.
#[derive(Default)]
pub struct Summary {
    pending: Mutex<Pending>,
}

/// The sums since the last write, and how many keys each session has among them.
#[derive(Default)]
struct Pending {
    sums: HashMap<Key, Sums>,
    keys: HashMap<SessionId, usize>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Sums {
    connections: i64,
    bytes_sent: i64,
    bytes_received: i64,
    denied: i64,
    first_at: OffsetDateTime,
    last_at: OffsetDateTime,
}

impl Sums {
    fn merge(&mut self, other: &Sums) {
        self.connections = self.connections.saturating_add(other.connections);
        self.bytes_sent = self.bytes_sent.saturating_add(other.bytes_sent);
        self.bytes_received = self.bytes_received.saturating_add(other.bytes_received);
        self.denied = self.denied.saturating_add(other.denied);
        self.first_at = self.first_at.min(other.first_at);
        self.last_at = self.last_at.max(other.last_at);
    }
}

fn saturate(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

impl Summary {
    /// An allowed connection ended after `sent` bytes up and `received` down.
    pub fn closed(&self, session: SessionId, host: &Host, port: u16, sent: u64, received: u64) {
        let now = OffsetDateTime::now_utc();
        let sums = Sums {
            connections: 1,
            bytes_sent: saturate(sent),
            bytes_received: saturate(received),
            denied: 0,
            first_at: now,
            last_at: now,
        };
        self.merge((session, host.to_string(), port), &sums);
    }

    /// A connection was refused.
    pub fn denied(&self, session: SessionId, host: &Host, port: u16) {
        let now = OffsetDateTime::now_utc();
        let sums = Sums {
            connections: 0,
            bytes_sent: 0,
            bytes_received: 0,
            denied: 1,
            first_at: now,
            last_at: now,
        };
        self.merge((session, host.to_string(), port), &sums);
    }

    /// Adds `sums` to its key's; a new key past its session's share goes to the session's
    /// [`OTHER_HOSTS`], and one past the map's bound is dropped.
    fn merge(&self, key: Key, sums: &Sums) {
        let mut guard = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        let Pending {
            sums: pending,
            keys,
        } = &mut *guard;
        let session = key.0;
        let owned = keys.get(&session).copied().unwrap_or(0);
        let key = if owned >= SESSION_KEYS && !pending.contains_key(&key) {
            (session, OTHER_HOSTS.to_owned(), 0)
        } else {
            key
        };
        let full = pending.len() >= SUMMARY_KEYS;
        match pending.entry(key) {
            Entry::Occupied(mut e) => e.get_mut().merge(sums),
            Entry::Vacant(_) if full => {
                metrics::counter!("sandbox_agents_egress_summary_dropped_total").increment(1);
            }
            Entry::Vacant(e) => {
                e.insert(*sums);
                *keys.entry(session).or_default() += 1;
            }
        }
    }

    /// Everything summed so far, leaving the map empty.
    fn take(&self) -> Vec<EgressRecord> {
        let pending = std::mem::take(&mut *self.pending.lock().unwrap_or_else(|e| e.into_inner()));
        pending
            .sums
            .into_iter()
            .map(|((session_id, host, port), s)| EgressRecord {
                session_id,
                host,
                port: i32::from(port),
                connections: s.connections,
                bytes_sent: s.bytes_sent,
                bytes_received: s.bytes_received,
                denied: s.denied,
                first_at: s.first_at,
                last_at: s.last_at,
            })
            .collect()
    }

    /// Puts back a batch that could not be written, to go with the next one (still bounded).
    fn restore(&self, batch: Vec<EgressRecord>) {
        for r in batch {
            let sums = Sums {
                connections: r.connections,
                bytes_sent: r.bytes_sent,
                bytes_received: r.bytes_received,
                denied: r.denied,
                first_at: r.first_at,
                last_at: r.last_at,
            };
            let port = u16::try_from(r.port).unwrap_or_default();
            self.merge((r.session_id, r.host, port), &sums);
        }
    }

    /// Writes what was summed in one statement; a batch that fails waits for the next write.
    async fn flush(&self, db: &Db) {
        let batch = self.take();
        if batch.is_empty() {
            return;
        }
        if let Err(e) = sandbox_agents_store::session_egress::add(db, &batch).await {
            tracing::warn!(error = %e, rows = batch.len(), "the egress log could not be written; it is kept for the next try");
            self.restore(batch);
        }
    }
}

/// Writes `summary` every [`SUMMARY_EVERY`], and once more at shutdown.
pub async fn write(db: Db, summary: Arc<Summary>, shutdown: CancellationToken) {
    let mut every = tokio::time::interval(SUMMARY_EVERY);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = every.tick() => summary.flush(&db).await,
            _ = shutdown.cancelled() => {
                summary.flush(&db).await;
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session(n: u128) -> SessionId {
        SessionId(uuid::Uuid::from_u128(n))
    }

    fn host(name: &str) -> Host {
        Host::parse(name).expect("a host")
    }

    #[test]
    fn connections_and_refusals_of_one_host_and_port_add_up_in_one_row() {
        let s = Summary::default();
        s.closed(session(1), &host("pypi.org"), 443, 10, 2000);
        s.closed(session(1), &host("pypi.org"), 443, 5, u64::MAX);
        s.denied(session(1), &host("pypi.org"), 443);
        s.denied(session(1), &host("pypi.org"), 80);
        let mut rows = s.take();
        rows.sort_by_key(|r| r.port);
        assert_eq!(rows.len(), 2);
        let (http, https) = (&rows[0], &rows[1]);
        assert_eq!((http.port, http.connections, http.denied), (80, 0, 1));
        assert_eq!(https.connections, 2);
        assert_eq!(https.bytes_sent, 15);
        assert_eq!(
            https.bytes_received,
            i64::MAX,
            "saturates rather than wraps"
        );
        assert_eq!(https.denied, 1);
        assert!(https.first_at <= https.last_at);
        assert!(s.take().is_empty(), "a write empties the map");
    }

    #[test]
    fn past_the_bound_new_keys_are_dropped_and_known_ones_still_add_up() {
        let s = Summary::default();
        for n in 0..SUMMARY_KEYS {
            s.denied(session(n as u128), &host("a.test"), 80);
        }
        s.denied(session(u128::MAX), &host("a.test"), 80);
        s.closed(session(0), &host("a.test"), 80, 1, 1);
        let rows = s.take();
        assert_eq!(rows.len(), SUMMARY_KEYS);
        assert!(!rows.iter().any(|r| r.session_id == session(u128::MAX)));
        let first = rows.iter().find(|r| r.session_id == session(0)).unwrap();
        assert_eq!((first.connections, first.denied), (1, 1));
    }

    #[test]
    fn a_session_past_its_share_of_new_keys_sums_into_other_hosts_and_crowds_out_no_one() {
        let s = Summary::default();
        for n in 0..SESSION_KEYS + 10 {
            s.closed(session(1), &host(&format!("h{n}.test")), 443, 1, 2);
        }
        s.denied(session(2), &host("b.test"), 80);
        let rows = s.take();
        let mine: Vec<_> = rows.iter().filter(|r| r.session_id == session(1)).collect();
        assert_eq!(mine.len(), SESSION_KEYS + 1);
        let other = mine.iter().find(|r| r.host == OTHER_HOSTS).unwrap();
        assert_eq!(
            (other.port, other.connections, other.bytes_received),
            (0, 10, 20)
        );
        assert!(rows
            .iter()
            .any(|r| r.session_id == session(2) && r.denied == 1));
        // The share is per write: the next interval starts afresh.
        s.closed(session(1), &host("h0.test"), 443, 1, 2);
        assert_eq!(s.take()[0].host, "h0.test");
    }

    #[test]
    fn a_batch_that_could_not_be_written_goes_with_the_next() {
        let s = Summary::default();
        s.closed(session(1), &host("a.test"), 80, 3, 4);
        let failed = s.take();
        s.closed(session(1), &host("a.test"), 80, 1, 1);
        s.restore(failed);
        let rows = s.take();
        assert_eq!(rows.len(), 1);
        assert_eq!(
            (
                rows[0].connections,
                rows[0].bytes_sent,
                rows[0].bytes_received
            ),
            (2, 4, 5)
        );
    }
}
