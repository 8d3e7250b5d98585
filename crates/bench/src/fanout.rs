//! Append-to-delivery latency: SSE streams on one session of an in-process server, beside a raw
//! `pg_notify` → `PgListener` round trip and the raw fan-out to as many sockets
//! (`raw_fanout`).
//!
//! Every timed event carries `t_ns`, the nanoseconds since a process-wide monotonic base taken
//! just before it was sent; a receiver subtracts it from the same base's reading when the bytes
//! that complete the event arrive. Receivers also check that they got every event exactly once
//! and in order.

use crate::raw_fanout;
use crate::raw_sse::RawSse;
use crate::stats::Summary;
use anyhow::{bail, Context};
use sandbox_agents_domain::event::{EventType, NewEvent};
use sandbox_agents_domain::{AgentId, SessionId};
use sandbox_agents_store::events::{self, Notice};
use sandbox_agents_store::Db;
use sandbox_agents_testkit::TestApp;
use serde_json::{json, Value};
use sqlx::postgres::PgListener;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, watch, Semaphore};

/// The raw baseline's channel; the server listens on [`events::CHANNEL`] only.
const RAW_CHANNEL: &str = "sa_bench_latency";
/// How long receivers may take to deliver the last event once the end marker was sent.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(30);
/// Streams being opened at once (the server's accept backlog and pool need not see 1000 at once).
const OPENING_AT_ONCE: usize = 64;

/// What one latency row reports.
#[derive(Debug)]
pub struct LatencyRow {
    pub key: String,
    pub label: String,
    pub receivers: usize,
    /// Timed events sent (each receiver should get all of them).
    pub events: usize,
    /// Timed events received, summed over receivers.
    pub delivered: u64,
    /// Every (receiver, event) delivery, send → receive.
    pub latency: Option<Summary>,
    /// Per event, send → the last receiver got it (only events every receiver got).
    pub all_receivers: Option<Summary>,
    /// The sender's own statement time (append_now, or the pg_notify statement).
    pub send: Option<Summary>,
    /// Time until every stream was open and had seen the ready marker.
    pub setup: Option<Duration>,
    /// CPU time this process (the server and the receivers, not PostgreSQL) spent from the
    /// first timed event to the end marker's arrival, per delivery.
    pub cpu_per_delivery: Option<Duration>,
    /// Anything wrong: loss, duplicates, order, errors. Empty when the run was clean.
    pub problems: Vec<String>,
}

impl LatencyRow {
    fn new(key: &str, label: &str, receivers: usize, events: usize) -> Self {
        LatencyRow {
            key: key.into(),
            label: label.into(),
            receivers,
            events,
            delivered: 0,
            latency: None,
            all_receivers: None,
            send: None,
            setup: None,
            cpu_per_delivery: None,
            problems: Vec::new(),
        }
    }
}

pub struct Pace {
    pub events: usize,
    pub rate: f64,
}

impl Pace {
    fn interval(&self) -> tokio::time::Interval {
        let mut i = tokio::time::interval(Duration::from_secs_f64(1.0 / self.rate));
        i.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        i
    }
}

fn now_ns(base: Instant) -> u64 {
    base.elapsed().as_nanos() as u64
}

/// What a receiver saw of the timed events `0..n`.
struct Received {
    latency_ns: Vec<Option<u64>>,
    duplicates: u64,
    out_of_order: u64,
    unknown: u64,
    highest: Option<u64>,
}

impl Received {
    fn new(n: usize) -> Self {
        Received {
            latency_ns: vec![None; n],
            duplicates: 0,
            out_of_order: 0,
            unknown: 0,
            highest: None,
        }
    }

    fn record(&mut self, i: u64, latency_ns: u64) {
        let Some(slot) = self.latency_ns.get_mut(i as usize) else {
            self.unknown += 1;
            return;
        };
        if slot.is_some() {
            self.duplicates += 1;
            return;
        }
        if self.highest.is_some_and(|h| i < h) {
            self.out_of_order += 1;
        }
        *slot = Some(latency_ns);
        self.highest = Some(self.highest.map_or(i, |h| h.max(i)));
    }

    fn count(&self) -> u64 {
        self.latency_ns.iter().filter(|l| l.is_some()).count() as u64
    }

    fn missing(&self) -> Vec<usize> {
        (0..self.latency_ns.len())
            .filter(|&i| self.latency_ns[i].is_none())
            .collect()
    }
}

/// Fills in a row from its receivers' records and says what went wrong, precisely.
fn conclude(row: &mut LatencyRow, receivers: &[Received]) {
    let mut all = Vec::with_capacity(receivers.len() * row.events);
    for r in receivers {
        all.extend(r.latency_ns.iter().flatten().map(|ns| ns / 1000));
    }
    row.delivered = all.len() as u64;
    row.latency = Summary::of(all);
    let per_event: Vec<u64> = (0..row.events)
        .filter_map(|i| {
            receivers
                .iter()
                .map(|r| r.latency_ns[i])
                .collect::<Option<Vec<u64>>>()
                .and_then(|v| v.into_iter().max())
                .map(|ns| ns / 1000)
        })
        .collect();
    row.all_receivers = Summary::of(per_event);
    let lossy: Vec<(usize, &Received)> = receivers
        .iter()
        .enumerate()
        .filter(|(_, r)| r.count() < row.events as u64)
        .collect();
    if !lossy.is_empty() {
        let lost: usize = lossy.iter().map(|(_, r)| r.missing().len()).sum();
        let (k, first) = lossy[0];
        let missing = first.missing();
        let shown: Vec<String> = missing.iter().take(10).map(|i| i.to_string()).collect();
        row.problems.push(format!(
            "LOST: {lost} deliveries missing on {} of {} receivers; e.g. receiver #{k} lacks {} event(s): i = {}{}",
            lossy.len(),
            row.receivers,
            missing.len(),
            shown.join(", "),
            if missing.len() > 10 { ", ..." } else { "" }
        ));
    }
    let dup: u64 = receivers.iter().map(|r| r.duplicates).sum();
    if dup > 0 {
        row.problems
            .push(format!("DUPLICATED: {dup} deliveries seen twice"));
    }
    let ooo: u64 = receivers.iter().map(|r| r.out_of_order).sum();
    if ooo > 0 {
        let n = receivers.iter().filter(|r| r.out_of_order > 0).count();
        row.problems.push(format!(
            "OUT OF ORDER: {ooo} deliveries arrived after a later event, on {n} receivers"
        ));
    }
    let unknown: u64 = receivers.iter().map(|r| r.unknown).sum();
    if unknown > 0 {
        row.problems
            .push(format!("{unknown} deliveries carried an unknown index"));
    }
}

/// Raw baseline: autocommit `select pg_notify(...)` at the pace, one `PgListener`.
pub async fn raw_notify(db: &Db, pace: &Pace, base: Instant) -> anyhow::Result<LatencyRow> {
    let mut row = LatencyRow::new(
        "raw_pg_notify",
        "raw pg_notify → PgListener",
        1,
        pace.events,
    );
    let mut listener = PgListener::connect_with(db)
        .await
        .context("connecting a listener")?;
    // LISTEN has completed when this returns: every later notification reaches it.
    listener.listen(RAW_CHANNEL).await?;
    let n = pace.events;
    let receiver = tokio::spawn(async move {
        let mut got = Received::new(n);
        let mut error = None;
        loop {
            match listener.recv().await {
                Ok(note) => {
                    let at = now_ns(base);
                    let v: Value = serde_json::from_str(note.payload()).unwrap_or(Value::Null);
                    if v["end"].as_bool() == Some(true) {
                        break;
                    }
                    match (v["i"].as_u64(), v["t_ns"].as_u64()) {
                        (Some(i), Some(t)) => got.record(i, at.saturating_sub(t)),
                        _ => got.unknown += 1,
                    }
                }
                Err(e) => {
                    error = Some(e.to_string());
                    break;
                }
            }
        }
        (got, error)
    });
    let mut tick = pace.interval();
    let mut sends = Vec::with_capacity(n);
    for i in 0..n {
        tick.tick().await;
        let t = now_ns(base);
        let t0 = Instant::now();
        sqlx::query("select pg_notify($1, $2)")
            .bind(RAW_CHANNEL)
            .bind(json!({ "i": i, "t_ns": t }).to_string())
            .execute(db)
            .await?;
        sends.push(t0.elapsed().as_micros() as u64);
    }
    sqlx::query("select pg_notify($1, $2)")
        .bind(RAW_CHANNEL)
        .bind(json!({ "end": true }).to_string())
        .execute(db)
        .await?;
    row.send = Summary::of(sends);
    match tokio::time::timeout(DRAIN_TIMEOUT, receiver).await {
        Ok(Ok((got, error))) => {
            conclude(&mut row, std::slice::from_ref(&got));
            if let Some(e) = error {
                row.problems.push(format!("listener failed: {e}"));
            }
        }
        Ok(Err(e)) => row.problems.push(format!("listener task failed: {e}")),
        Err(_) => row
            .problems
            .push("the listener did not see the end marker within 30 s".into()),
    }
    Ok(row)
}

fn timed_event(i: usize, base: Instant) -> NewEvent {
    NewEvent::new(
        EventType::AgentMessage,
        None,
        json!({ "i": i, "t_ns": now_ns(base) }),
    )
}

fn marker(what: &str) -> NewEvent {
    NewEvent::new(EventType::AgentMessage, None, json!({ "bench": what }))
}

/// Our append, seen by a bare `PgListener` on the server's channel: commit + NOTIFY without the
/// hub, the read-back and HTTP.
pub async fn append_notify(
    db: &Db,
    session: SessionId,
    pace: &Pace,
    base: Instant,
) -> anyhow::Result<LatencyRow> {
    let mut row = LatencyRow::new(
        "append_pg_listener",
        "append_now → PgListener on sa_events",
        1,
        pace.events,
    );
    let mut listener = PgListener::connect_with(db).await?;
    listener.listen(events::CHANNEL).await?;
    let (end_tx, mut end_rx) = watch::channel(i64::MAX);
    // (seq, receive time) for this session's notices; each names the batch's last seq.
    let receiver = tokio::spawn(async move {
        let mut got: Vec<(i64, u64)> = Vec::new();
        let mut error = None;
        loop {
            tokio::select! {
                note = listener.recv() => match note {
                    Ok(note) => {
                        let at = now_ns(base);
                        let Ok(notice) = serde_json::from_str::<Notice>(note.payload()) else { continue };
                        if notice.s != session.0 { continue }
                        let Some(q) = notice.q else { continue };
                        got.push((q, at));
                        if q >= *end_rx.borrow() { break }
                    }
                    Err(e) => { error = Some(e.to_string()); break }
                },
                changed = end_rx.changed() => {
                    if changed.is_err() { break }
                    let end = *end_rx.borrow();
                    if got.last().is_some_and(|&(q, _)| q >= end) { break }
                }
            }
        }
        (got, error)
    });
    let mut tick = pace.interval();
    let mut sent: Vec<(i64, u64)> = Vec::with_capacity(pace.events);
    let mut sends = Vec::with_capacity(pace.events);
    for i in 0..pace.events {
        tick.tick().await;
        let event = timed_event(i, base);
        let t = event.payload["t_ns"].as_u64().unwrap_or(0);
        let t0 = Instant::now();
        let stored = events::append_now(db, session, &[event]).await?;
        sends.push(t0.elapsed().as_micros() as u64);
        sent.push((stored[0].seq, t));
    }
    let end = events::append_now(db, session, &[marker("end")]).await?;
    let _ = end_tx.send(end[0].seq);
    row.send = Summary::of(sends);
    match tokio::time::timeout(DRAIN_TIMEOUT, receiver).await {
        Ok(Ok((notices, error))) => {
            let mut got = Received::new(pace.events);
            let index: std::collections::HashMap<i64, (usize, u64)> = sent
                .iter()
                .enumerate()
                .map(|(i, &(seq, t))| (seq, (i, t)))
                .collect();
            for (q, at) in notices {
                if let Some(&(i, t)) = index.get(&q) {
                    got.record(i as u64, at.saturating_sub(t));
                }
            }
            conclude(&mut row, std::slice::from_ref(&got));
            if let Some(e) = error {
                row.problems.push(format!("listener failed: {e}"));
            }
        }
        Ok(Err(e)) => row.problems.push(format!("listener task failed: {e}")),
        Err(_) => row
            .problems
            .push("the listener did not see the end marker within 30 s".into()),
    }
    Ok(row)
}

struct StreamOut {
    got: Received,
    /// Frames whose seq did not increase, or whose `id:` differed from the data's seq.
    seq_errors: u64,
    finished: bool,
    error: Option<String>,
}

/// The fields of a `SessionEvent` a stream client reads: its seq, and the bench's payload.
#[derive(serde::Deserialize)]
struct Timed<'a> {
    seq: i64,
    #[serde(borrow)]
    payload: TimedPayload<'a>,
}

#[derive(serde::Deserialize)]
struct TimedPayload<'a> {
    #[serde(borrow, default)]
    bench: Option<&'a str>,
    #[serde(default)]
    i: Option<u64>,
    #[serde(default)]
    t_ns: Option<u64>,
}

/// A frame's `id:` and `data:` fields (the data of a frame of ours is one line of JSON), or
/// None for a comment (`: ping`).
fn fields(frame: &[u8]) -> Option<(Option<&[u8]>, &[u8])> {
    let mut id = None;
    let mut data = None;
    for line in frame.split(|&b| b == b'\n') {
        if let Some(v) = line.strip_prefix(b"id:") {
            id = Some(v.trim_ascii());
        } else if let Some(v) = line.strip_prefix(b"data:") {
            data = Some(v.strip_prefix(b" ").unwrap_or(v));
        }
    }
    data.map(|d| (id, d))
}

/// One SSE client: opens the stream, reports ready once the marker (backlog) arrived, then
/// records every timed event until the end marker.
async fn stream_client(
    url: String,
    n: usize,
    base: Instant,
    ready: mpsc::UnboundedSender<Result<(), String>>,
    mut stop: watch::Receiver<bool>,
    opening: Arc<Semaphore>,
) -> StreamOut {
    let mut out = StreamOut {
        got: Received::new(n),
        seq_errors: 0,
        finished: false,
        error: None,
    };
    let mut permit = opening.acquire_owned().await.ok();
    let mut sse = match RawSse::open(&url).await {
        Ok(s) => s,
        Err(e) => {
            let msg = format!("{e:#}");
            let _ = ready.send(Err(msg.clone()));
            out.error = Some(msg);
            return out;
        }
    };
    let mut is_ready = false;
    let mut last_seq = 0i64;
    loop {
        let frame = tokio::select! {
            f = sse.next_frame() => f,
            _ = stop.changed() => {
                out.error = Some("stopped: the end marker did not arrive in time".into());
                break;
            }
        };
        let at = now_ns(base);
        let frame = match frame {
            Ok(Some(f)) => f,
            Ok(None) => {
                out.error = Some("the stream ended".into());
                break;
            }
            Err(e) => {
                out.error = Some(format!("reading the stream: {e:#}"));
                break;
            }
        };
        let Some((id, data)) = fields(&frame) else {
            continue;
        };
        let ev: Timed = match serde_json::from_slice(data) {
            Ok(v) => v,
            Err(e) => {
                out.error = Some(format!("a frame's data is not a SessionEvent: {e}"));
                break;
            }
        };
        let id_matches = id
            .and_then(|id| std::str::from_utf8(id).ok())
            .and_then(|id| id.parse::<i64>().ok())
            == Some(ev.seq);
        if ev.seq <= last_seq || !id_matches {
            out.seq_errors += 1;
        }
        last_seq = last_seq.max(ev.seq);
        match ev.payload.bench {
            Some("ready") => {
                if !is_ready {
                    is_ready = true;
                    permit.take();
                    let _ = ready.send(Ok(()));
                }
                continue;
            }
            Some("end") => {
                out.finished = true;
                break;
            }
            _ => {}
        }
        match (ev.payload.i, ev.payload.t_ns) {
            (Some(i), Some(t)) => out.got.record(i, at.saturating_sub(t)),
            _ => out.got.unknown += 1,
        }
    }
    if !is_ready {
        let _ = ready
            .send(Err(out.error.clone().unwrap_or_else(|| {
                "the stream ended before the ready marker".into()
            })));
    }
    out
}

/// `streams` SSE clients on one new session of `app`; events appended through `writer_db`.
pub async fn sse(
    app: &TestApp,
    writer_db: &Db,
    agent: AgentId,
    streams: usize,
    pace: &Pace,
    base: Instant,
) -> anyhow::Result<LatencyRow> {
    let row = LatencyRow::new(
        &format!("sse_{streams}"),
        &format!("append_now → SSE, {streams} stream{}", plural(streams)),
        streams,
        pace.events,
    );
    let session = app.seed_session(agent).await;
    // The marker is the backlog every stream must see first: a stream subscribes to the live
    // feed before it reads its backlog, so a stream that has the marker is live.
    events::append_now(writer_db, session, &[marker("ready")]).await?;
    let url = app.url(&format!("/api/sessions/{session}/events/stream?after=0"));
    fan_out(row, url, streams, pace, base, |i| {
        let db = writer_db.clone();
        async move {
            let event = match i {
                Some(i) => timed_event(i, base),
                None => marker("end"),
            };
            events::append_now(&db, session, &[event]).await?;
            Ok(())
        }
    })
    .await
}

/// The same clients on the raw fan-out (`raw_fanout`): `pg_notify` → `PgListener` → one frame
/// per event → `write_all` to every socket.
pub async fn raw_sse(
    writer_db: &Db,
    session: SessionId,
    streams: usize,
    pace: &Pace,
    base: Instant,
) -> anyhow::Result<LatencyRow> {
    let row = LatencyRow::new(
        &format!("raw_sse_{streams}"),
        &format!(
            "raw pg_notify → broadcast → write_all, {streams} socket{}",
            plural(streams)
        ),
        streams,
        pace.events,
    );
    let server = raw_fanout::start(writer_db, session).await?;
    fan_out(row, server.url.clone(), streams, pace, base, |i| {
        let db = writer_db.clone();
        async move {
            let payload = match i {
                Some(i) => json!({ "i": i, "t_ns": now_ns(base) }),
                None => json!({ "bench": "end" }),
            };
            raw_fanout::notify(&db, &payload).await
        }
    })
    .await
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// Opens `streams` clients on `url`, waits until every one has its ready frame, then sends the
/// timed events at the pace (`send(Some(i))`) and the end marker (`send(None)`), and fills in
/// `row` from what the clients received.
async fn fan_out<F, Fut>(
    mut row: LatencyRow,
    url: String,
    streams: usize,
    pace: &Pace,
    base: Instant,
    mut send: F,
) -> anyhow::Result<LatencyRow>
where
    F: FnMut(Option<usize>) -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<()>>,
{
    let (ready_tx, mut ready_rx) = mpsc::unbounded_channel();
    let (stop_tx, stop_rx) = watch::channel(false);
    let opening = Arc::new(Semaphore::new(OPENING_AT_ONCE));
    let t_open = Instant::now();
    let mut cpu_before = None;
    let handles: Vec<_> = (0..streams)
        .map(|_| {
            tokio::spawn(stream_client(
                url.clone(),
                pace.events,
                base,
                ready_tx.clone(),
                stop_rx.clone(),
                opening.clone(),
            ))
        })
        .collect();
    drop(ready_tx);
    let open_deadline = tokio::time::Instant::now() + Duration::from_secs(60 + streams as u64 / 10);
    let (mut ready, mut failed) = (0usize, Vec::new());
    while ready + failed.len() < streams {
        match tokio::time::timeout_at(open_deadline, ready_rx.recv()).await {
            Ok(Some(Ok(()))) => ready += 1,
            Ok(Some(Err(e))) => failed.push(e),
            Ok(None) | Err(_) => break,
        }
    }
    let all_open = ready == streams;
    if all_open {
        row.setup = Some(t_open.elapsed());
        cpu_before = Some(process_cpu());
        let mut tick = pace.interval();
        let mut sends = Vec::with_capacity(pace.events);
        for i in 0..pace.events {
            tick.tick().await;
            let t0 = Instant::now();
            send(Some(i)).await?;
            sends.push(t0.elapsed().as_micros() as u64);
        }
        send(None).await?;
        row.send = Summary::of(sends);
    } else {
        let first = failed
            .first()
            .cloned()
            .unwrap_or_else(|| "timed out".into());
        row.problems.push(format!(
            "only {ready} of {streams} streams opened ({} failed; first error: {first})",
            failed.len()
        ));
    }
    // Bounded wait for the end marker; after it, stragglers return what they have.
    let stopper = tokio::spawn(async move {
        tokio::time::sleep(if all_open {
            DRAIN_TIMEOUT
        } else {
            Duration::ZERO
        })
        .await;
        let _ = stop_tx.send(true);
        // Keep the sender until the receivers are dropped, so `changed()` never errs early.
        stop_tx.closed().await;
    });
    let mut outs = Vec::with_capacity(streams);
    for h in handles {
        match h.await {
            Ok(o) => outs.push(o),
            Err(e) => row.problems.push(format!("a stream task failed: {e}")),
        }
    }
    drop(stop_rx);
    stopper.abort();
    let cpu = cpu_before.map(|before| process_cpu().saturating_sub(before));
    if !all_open {
        return Ok(row);
    }
    let seq_errors: u64 = outs.iter().map(|o| o.seq_errors).sum();
    let unfinished = outs.iter().filter(|o| !o.finished).count();
    let first_unfinished = outs
        .iter()
        .find(|o| !o.finished)
        .and_then(|o| o.error.clone());
    let received: Vec<Received> = outs.into_iter().map(|o| o.got).collect();
    conclude(&mut row, &received);
    if row.delivered > 0 {
        row.cpu_per_delivery = cpu.map(|c| c / row.delivered as u32);
    }
    if seq_errors > 0 {
        row.problems.push(format!(
            "SEQ ORDER: {seq_errors} frames whose seq did not increase or whose id: differed"
        ));
    }
    if unfinished > 0 {
        row.problems.push(format!(
            "{unfinished} streams did not reach the end marker (first: {})",
            first_unfinished.as_deref().unwrap_or("?")
        ));
    }
    Ok(row)
}

/// CPU time every thread of this process has used so far: the sum of
/// `/proc/self/task/*/schedstat`'s first field (ns on a CPU). Threads that exited are not
/// counted; the runtime's workers live as long as the process.
fn process_cpu() -> Duration {
    let ns: u64 = std::fs::read_dir("/proc/self/task")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("schedstat")).ok())
        .filter_map(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        .sum();
    Duration::from_nanos(ns)
}

/// Fails early, with a clear message, when the process cannot hold `streams` SSE connections:
/// each is two descriptors here (the client's socket and the in-process server's).
pub fn check_fd_limit(streams: usize) -> anyhow::Result<()> {
    let need = 2 * streams as u64 + 256;
    let limits = std::fs::read_to_string("/proc/self/limits").unwrap_or_default();
    let Some(soft) = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .and_then(|l| l.split_whitespace().nth(3))
    else {
        return Ok(());
    };
    if soft == "unlimited" {
        return Ok(());
    }
    let soft: u64 = soft.parse().unwrap_or(0);
    if soft < need {
        bail!(
            "{streams} SSE streams need about {need} open files in this process, but the soft limit \
             is {soft}: raise it first (`ulimit -n 65536`, as scripts/bench does) or pass fewer --streams"
        );
    }
    Ok(())
}
