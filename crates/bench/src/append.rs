//! Append throughput: `events::append_now` beside a raw one-row INSERT, at several concurrencies.

use crate::stats::Summary;
use sandbox_agents_domain::event::{EventType, NewEvent};
use sandbox_agents_domain::SessionId;
use sandbox_agents_store::{events, Db};
use serde_json::{json, Map, Value};
use sqlx::types::Json;
use std::time::{Duration, Instant};

/// The raw baseline's table: the columns, defaults, checks, identity and indexes of `events`,
/// plus the same foreign key to `sessions`, so the INSERT costs what the one in `append` does.
pub const RAW_TABLE_DDL: [&str; 2] = [
    "create table bench_raw_events (like events including all)",
    "alter table bench_raw_events add foreign key (session_id) references sessions (id) on delete cascade",
];

const RAW_INSERT: &str =
    "insert into bench_raw_events (session_id, run_id, type, payload) values ($1, $2, $3, $4)";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// One row per autocommit INSERT into `bench_raw_events`, each writer on its own session.
    Raw,
    /// `append_now` with one event, each writer on its own session.
    Own,
    /// `append_now` with one event, every writer on the same session.
    Same,
    /// `append_now` with a batch of this many events, each writer on its own session.
    Batch(usize),
}

impl Mode {
    pub fn key(self) -> String {
        match self {
            Mode::Raw => "raw_insert".into(),
            Mode::Own => "append_own_session".into(),
            Mode::Same => "append_same_session".into(),
            Mode::Batch(n) => format!("append_batch{n}_own_session"),
        }
    }

    pub fn label(self) -> String {
        match self {
            Mode::Raw => "raw INSERT, 1 row/commit".into(),
            Mode::Own => "append_now, 1 event/txn, own session".into(),
            Mode::Same => "append_now, 1 event/txn, same session".into(),
            Mode::Batch(n) => format!("append_now, {n} events/txn, own session"),
        }
    }

    fn events_per_txn(self) -> usize {
        match self {
            Mode::Batch(n) => n,
            _ => 1,
        }
    }
}

/// One cell of the throughput table.
#[derive(Debug)]
pub struct Outcome {
    pub mode: Mode,
    pub writers: usize,
    pub txns: u64,
    pub events: u64,
    pub elapsed: Duration,
    /// Per transaction (or per INSERT), as the writer saw it, including the pool acquire.
    pub txn_latency: Option<Summary>,
    pub errors: u64,
    pub first_error: Option<String>,
}

impl Outcome {
    pub fn events_per_s(&self) -> f64 {
        self.events as f64 / self.elapsed.as_secs_f64()
    }
}

/// A payload the size of a short message, the same for every case.
pub fn payload() -> Map<String, Value> {
    let v = json!({ "text": "a benchmark event, about as long as a short agent message" });
    v.as_object().cloned().unwrap_or_default()
}

struct WriterOut {
    txns: u64,
    latencies_us: Vec<u64>,
    errors: u64,
    first_error: Option<String>,
}

async fn writer(db: Db, mode: Mode, session: SessionId, deadline: Instant) -> WriterOut {
    let payload = payload();
    let batch: Vec<NewEvent> = (0..mode.events_per_txn())
        .map(|_| {
            NewEvent::new(
                EventType::AgentMessage,
                None,
                Value::Object(payload.clone()),
            )
        })
        .collect();
    let mut out = WriterOut {
        txns: 0,
        latencies_us: Vec::with_capacity(32 * 1024),
        errors: 0,
        first_error: None,
    };
    loop {
        let t0 = Instant::now();
        if t0 >= deadline {
            break;
        }
        let result = match mode {
            Mode::Raw => sqlx::query(RAW_INSERT)
                .bind(session.0)
                .bind(None::<uuid::Uuid>)
                .bind(EventType::AgentMessage.as_str())
                .bind(Json(&payload))
                .execute(&db)
                .await
                .map(|_| ())
                .map_err(|e| e.to_string()),
            _ => events::append_now(&db, session, &batch)
                .await
                .map(|_| ())
                .map_err(|e| e.to_string()),
        };
        out.latencies_us.push(t0.elapsed().as_micros() as u64);
        match result {
            Ok(()) => out.txns += 1,
            Err(e) => {
                out.errors += 1;
                out.first_error.get_or_insert(e);
            }
        }
    }
    out
}

/// Runs one cell: `writers` tasks, each looping until `duration` is over.
pub async fn measure(
    db: &Db,
    mode: Mode,
    writers: usize,
    own_sessions: &[SessionId],
    shared: SessionId,
    duration: Duration,
) -> Outcome {
    let start = Instant::now();
    let deadline = start + duration;
    let handles: Vec<_> = (0..writers)
        .map(|w| {
            let session = if mode == Mode::Same {
                shared
            } else {
                own_sessions[w]
            };
            tokio::spawn(writer(db.clone(), mode, session, deadline))
        })
        .collect();
    let mut txns = 0;
    let mut errors = 0;
    let mut first_error = None;
    let mut latencies = Vec::new();
    for h in handles {
        match h.await {
            Ok(w) => {
                txns += w.txns;
                errors += w.errors;
                if first_error.is_none() {
                    first_error = w.first_error;
                }
                latencies.extend(w.latencies_us);
            }
            Err(e) => {
                errors += 1;
                first_error.get_or_insert(format!("a writer task failed: {e}"));
            }
        }
    }
    // Until the last writer finished its last transaction, which may end after the deadline.
    let elapsed = start.elapsed();
    Outcome {
        mode,
        writers,
        txns,
        events: txns * mode.events_per_txn() as u64,
        elapsed,
        txn_latency: Summary::of(latencies),
        errors,
        first_error,
    }
}
