//! `webhook-bench`: webhook delivery, measured beside the raw thing underneath.
//!
//! 1. Throughput: `--events` events are appended with the dispatcher stopped (the outbox fills
//!    up), then a dispatcher with `--concurrency` slots drains it to a local receiver (an axum
//!    server on 127.0.0.1 answering 204). Beside it: the same number of signed POSTs of the
//!    same bodies straight from reqwest at the same concurrency, with no database.
//! 2. Event-to-delivery latency: with the dispatcher running, events are appended one per
//!    transaction at `--rate` per second; the latency of each is from just before its append
//!    to its arrival at the receiver.
//!
//! Everything runs in a new database of a cluster of its own (see `cluster`). Every receiver
//! checks that each event arrived, and counts duplicates. Markdown goes to stdout, progress
//! to stderr.

#![allow(clippy::print_stdout)]

use anyhow::Context;
use clap::Parser;
use sandbox_agents_bench::cluster::Cluster;
use sandbox_agents_bench::stats::{ms, rate, Summary};
use sandbox_agents_domain::event::{EventType, NewEvent};
use sandbox_agents_domain::{DeliveryId, SessionId, WebhookId};
use sandbox_agents_store::projects::DEFAULT_PROJECT;
use sandbox_agents_store::{events, webhooks, Db};
use sandbox_agents_testkit::receiver::{Answer, Receiver};
use sandbox_agents_testkit::TestApp;
use sandbox_agents_webhooks::{Dispatcher, WebhookSettings, Webhooks};
use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

#[derive(Parser, Debug)]
#[command(
    name = "webhook-bench",
    about = "Benchmarks webhook deliveries per second and event-to-delivery latency to a local receiver"
)]
struct Args {
    /// Events in the outbox for each throughput run.
    #[arg(long, default_value_t = 5000)]
    events: usize,
    /// Dispatcher slots (requests in flight), one throughput run each, with the default
    /// per-subscription cap (8) and with the cap equal to the slots.
    #[arg(long, value_delimiter = ',', default_values_t = [8usize, 32])]
    concurrency: Vec<usize>,
    /// Timed events in the latency run.
    #[arg(long, default_value_t = 300)]
    latency_events: usize,
    /// Events per second in the latency run.
    #[arg(long, default_value_t = 50.0)]
    rate: f64,
    /// A cluster to use instead of the embedded one.
    #[arg(long, env = "SANDBOX_AGENTS_BENCH_DATABASE_URL")]
    database_url: Option<String>,
    /// The embedded cluster's directory, used when no --database-url is given.
    #[arg(long, default_value = "target/bench-pg")]
    pg_dir: PathBuf,
}

fn log(msg: impl std::fmt::Display) {
    eprintln!("webhook-bench: {msg}");
}

#[tokio::main]
async fn main() -> ExitCode {
    match run(Args::parse()).await {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => {
            log("finished WITH ERRORS (see the report)");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("webhook-bench: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run(args: Args) -> anyhow::Result<bool> {
    anyhow::ensure!(
        args.events > 0 && args.latency_events > 0 && args.rate > 0.0,
        "--events, --latency-events and --rate must be positive"
    );
    anyhow::ensure!(
        !args.concurrency.contains(&0),
        "--concurrency must be positive"
    );
    let cluster = Cluster::open(args.database_url.as_deref(), &args.pg_dir, log).await?;
    let (name, options) = cluster.create_database("bench_webhooks").await?;
    log(format!("database {name}"));
    let result = async {
        let db = sandbox_agents_store::connect(options.clone(), 40).await?;
        sandbox_agents_store::migrate(&db).await?;
        let app = sandbox_agents_testkit::TestApp::builder()
            .with_db(db.clone(), options)
            .spawn()
            .await;
        let out = bench(&args, &app, &db).await;
        let blobs = app.blobs_dir.clone();
        app.stop().await;
        let _ = std::fs::remove_dir_all(blobs);
        db.close().await;
        out
    }
    .await;
    cluster.drop_database(&name, log).await;
    cluster.close(log).await;
    let (report, clean) = result?;
    print!("{report}");
    Ok(clean)
}

fn settings(concurrency: usize, per_subscription: usize) -> WebhookSettings {
    WebhookSettings {
        allow_private: true,
        concurrency,
        per_subscription,
        poll: Duration::from_millis(200),
        ..WebhookSettings::default()
    }
}

/// A subscription to every type, sealed with `hooks`' key, pointing at `url`; every other
/// subscription is deactivated so that runs do not overlap.
async fn subscribe(db: &Db, hooks: &Webhooks, url: &str) -> anyhow::Result<WebhookId> {
    sqlx::query("update webhooks set active = false")
        .execute(db)
        .await?;
    let id = WebhookId::new();
    let (_, sealed) = hooks.new_secret(id)?;
    webhooks::insert(
        db,
        &webhooks::NewWebhook {
            id,
            project: DEFAULT_PROJECT,
            name: "bench",
            url,
            event_types: &[],
            agent_id: None,
            active: true,
            secret_sealed: &sealed,
        },
    )
    .await?;
    Ok(id)
}

fn message(i: usize) -> NewEvent {
    NewEvent::new(
        EventType::AgentMessage,
        None,
        serde_json::json!({ "text": format!("benchmark message {i}: the quick brown fox jumps over the lazy dog") }),
    )
}

/// Seqs received, and how many arrived more than once.
fn tally(receiver: &Receiver) -> (HashMap<i64, Instant>, usize) {
    let mut first = HashMap::new();
    let mut dup = 0;
    for r in receiver.received() {
        let seq = r.json()["event"]["seq"].as_i64().unwrap_or(0);
        if first.insert(seq, r.at).is_some() {
            dup += 1;
        }
    }
    (first, dup)
}

struct Row {
    label: String,
    n: usize,
    seconds: f64,
    problems: Vec<String>,
}

async fn bench(args: &Args, app: &TestApp, db: &Db) -> anyhow::Result<(String, bool)> {
    let agent = app.seed_agent("webhook-bench").await;
    let session = app.seed_session(agent.id).await;
    let mut rows = Vec::new();
    let wait = Duration::from_secs(600);
    for &c in &args.concurrency {
        // Ours: drain a full outbox, with the default per-subscription cap and without one.
        let mut caps = vec![WebhookSettings::default().per_subscription.min(c)];
        if c > caps[0] {
            caps.push(c);
        }
        for cap in caps {
            let hooks = Webhooks::new(settings(c, cap), sandbox_agents_vault::MasterKey::random())?;
            let receiver = Receiver::start(Answer::Ok).await;
            subscribe(db, &hooks, &receiver.url).await?;
            let mut seqs = Vec::with_capacity(args.events);
            for start in (0..args.events).step_by(100) {
                let batch: Vec<NewEvent> = (start..(start + 100).min(args.events))
                    .map(message)
                    .collect();
                seqs.extend(
                    events::append_now(db, session, &batch)
                        .await?
                        .into_iter()
                        .map(|e| e.seq),
                );
            }
            let stop = CancellationToken::new();
            let started = Instant::now();
            let task = Dispatcher::new(db.clone(), hooks).spawn(stop.clone());
            receiver
                .wait_for(wait, "every delivery", |r| r.len() >= args.events)
                .await;
            let seconds = started.elapsed().as_secs_f64();
            stop.cancel();
            let _ = task.await;
            let (got, dup) = tally(&receiver);
            let mut problems = Vec::new();
            let missing = seqs.iter().filter(|s| !got.contains_key(s)).count();
            if missing > 0 {
                problems.push(format!("{missing} events not delivered"));
            }
            if dup > 0 {
                problems.push(format!("{dup} duplicates"));
            }
            receiver.stop();
            log(format!(
                "dispatcher, {c} slots, {cap} per subscription: {:.0} deliveries/s",
                args.events as f64 / seconds
            ));
            rows.push(Row {
                label: format!("dispatcher drains the outbox, {c} slots, {cap} per subscription"),
                n: args.events,
                seconds,
                problems,
            });
        }

        // Raw: the same POSTs, signed, from reqwest at the same concurrency; no database.
        let receiver = Receiver::start(Answer::Ok).await;
        let client = reqwest::Client::new();
        let event = events::page(db, DEFAULT_PROJECT, session, 0, 1)
            .await?
            .remove(0);
        let started = Instant::now();
        let sem = std::sync::Arc::new(tokio::sync::Semaphore::new(c));
        let mut tasks = tokio::task::JoinSet::new();
        for _ in 0..args.events {
            let permit = sem.clone().acquire_owned().await?;
            let (client, url, event) = (client.clone(), receiver.url.clone(), event.clone());
            tasks.spawn(async move {
                let id = DeliveryId::new();
                let body = sandbox_agents_webhooks::payload::event_body(id, &event);
                let t = time::OffsetDateTime::now_utc().unix_timestamp();
                let r = client
                    .post(url)
                    .header("content-type", "application/json")
                    .header(
                        "x-anecdote-signature",
                        sandbox_agents_webhooks::signing::signature("whsec_bench", t, &body),
                    )
                    .header("x-anecdote-event", &event.kind)
                    .header("x-anecdote-delivery", id.to_string())
                    .body(body)
                    .send()
                    .await;
                drop(permit);
                r.map(|r| r.status().is_success()).unwrap_or(false)
            });
        }
        let mut failed = 0;
        while let Some(ok) = tasks.join_next().await {
            if !matches!(ok, Ok(true)) {
                failed += 1;
            }
        }
        let seconds = started.elapsed().as_secs_f64();
        receiver.stop();
        log(format!(
            "raw reqwest, {c} in flight: {:.0} requests/s",
            args.events as f64 / seconds
        ));
        rows.push(Row {
            label: format!("raw: reqwest POSTs, {c} in flight (no database)"),
            n: args.events,
            seconds,
            problems: if failed > 0 {
                vec![format!("{failed} failed")]
            } else {
                Vec::new()
            },
        });
    }

    // Latency: one event per transaction, paced, with the dispatcher running.
    let hooks = Webhooks::new(settings(32, 8), sandbox_agents_vault::MasterKey::random())?;
    let receiver = Receiver::start(Answer::Ok).await;
    subscribe(db, &hooks, &receiver.url).await?;
    let stop = CancellationToken::new();
    let task = Dispatcher::new(db.clone(), hooks).spawn(stop.clone());
    let latency_session: SessionId = app.seed_session(agent.id).await;
    // One untimed delivery first: connections are open before anything is timed.
    events::append_now(db, latency_session, &[message(0)]).await?;
    receiver
        .wait_for(Duration::from_secs(30), "the warm-up delivery", |r| {
            !r.is_empty()
        })
        .await;
    let before = receiver.received().len();
    let mut sent: HashMap<i64, Instant> = HashMap::new();
    let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / args.rate));
    for i in 0..args.latency_events {
        tick.tick().await;
        let t0 = Instant::now();
        let e = events::append_now(db, latency_session, &[message(i)]).await?;
        sent.insert(e[0].seq, t0);
    }
    receiver
        .wait_for(wait, "every timed delivery", |r| {
            r.len() >= before + args.latency_events
        })
        .await;
    stop.cancel();
    let _ = task.await;
    let (got, dup) = tally(&receiver);
    receiver.stop();
    let samples: Vec<u64> = sent
        .iter()
        .filter_map(|(seq, t0)| {
            got.get(seq)
                .map(|at| at.saturating_duration_since(*t0).as_micros() as u64)
        })
        .collect();
    let missing: HashSet<&i64> = sent.keys().filter(|s| !got.contains_key(s)).collect();
    let latency = Summary::of(samples).context("no latency samples")?;
    log(format!(
        "latency p50 {} ms, p99 {} ms",
        ms(latency.p50),
        ms(latency.p99)
    ));

    let mut out = String::new();
    let mut clean = true;
    out.push_str("| Throughput (to a 204 receiver on 127.0.0.1) | Requests | Seconds | Per second | Problems |\n|---|---:|---:|---:|---|\n");
    for r in &rows {
        clean &= r.problems.is_empty();
        out.push_str(&format!(
            "| {} | {} | {:.2} | {} | {} |\n",
            r.label,
            r.n,
            r.seconds,
            rate(r.n as f64 / r.seconds),
            if r.problems.is_empty() {
                "none".into()
            } else {
                r.problems.join("; ")
            }
        ));
    }
    let problems = match (missing.len(), dup) {
        (0, 0) => "none".to_owned(),
        (m, d) => {
            clean = false;
            format!("{m} missing, {d} duplicates")
        }
    };
    out.push_str(&format!(
        "\n| Event-to-delivery latency ({} events at {}/s, one per transaction) | p50 | p99 | max | Problems |\n|---|---:|---:|---:|---|\n| append start → receiver, dispatcher with the default 32 slots, 8 per subscription | {} ms | {} ms | {} ms | {} |\n",
        args.latency_events,
        args.rate,
        ms(latency.p50),
        ms(latency.p99),
        ms(latency.max),
        problems
    ));
    Ok((out, clean))
}
