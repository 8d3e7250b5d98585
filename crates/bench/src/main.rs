//! `sandbox-agents-bench`: the hot paths of the event log, each beside the raw thing underneath.
//!
//! 1. Append throughput at 1, 4 and 16 writers: a raw one-row INSERT per commit, then
//!    `events::append_now` with one event per transaction on the writers' own sessions, on one
//!    shared session, and with batches, as events/s and as a ratio to the raw INSERT.
//! 2. Append-to-delivery latency: `pg_notify` → `PgListener` (raw), `append_now` → `PgListener`,
//!    and `append_now` → SSE with 1, 100 and 1000 streams open on one session of an in-process
//!    server, each beside the raw fan-out to as many sockets (`pg_notify` → `PgListener` → one
//!    frame → `write_all` to each, `raw_fanout`); every receiver checks it got every event once
//!    and in order.
//!
//! Everything runs in one new database, in a cluster of its own: an embedded one under
//! `--pg-dir` (started here and stopped at the end unless it was already running), or the one
//! `--database-url` names. A server (with its `LISTEN` connection) runs in-process throughout,
//! as it would in production. Markdown goes to stdout, progress to stderr.

#![allow(clippy::print_stdout)]

mod append;
mod fanout;
mod machine;
mod raw_fanout;
mod raw_sse;
mod report;
use sandbox_agents_bench::stats;

use anyhow::{bail, Context};
use append::Mode;
use clap::{Parser, ValueEnum};
use sandbox_agents_store::Db;
use sqlx::postgres::PgConnectOptions;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Only {
    All,
    Append,
    Latency,
}

#[derive(Parser, Debug)]
#[command(
    name = "sandbox-agents-bench",
    about = "Benchmarks the event log's append throughput and append-to-SSE latency beside raw Postgres baselines"
)]
struct Args {
    /// Seconds each throughput cell runs.
    #[arg(long, default_value_t = 5.0)]
    seconds: f64,
    /// Concurrent writers for the throughput cells.
    #[arg(long, value_delimiter = ',', default_values_t = [1usize, 4, 16])]
    writers: Vec<usize>,
    /// Events per transaction for the batched cell.
    #[arg(long, default_value_t = 10)]
    batch: usize,
    /// SSE streams open on one session, one latency run each.
    #[arg(long, value_delimiter = ',', default_values_t = [1usize, 100, 1000])]
    streams: Vec<usize>,
    /// Timed events per latency run.
    #[arg(long, default_value_t = 100)]
    events: usize,
    /// Timed events per second in a latency run.
    #[arg(long, default_value_t = 20.0)]
    rate: f64,
    /// A cluster to use instead of the embedded one (a URL to any database in it; the bench
    /// creates and drops a database of its own there).
    #[arg(long, env = "SANDBOX_AGENTS_BENCH_DATABASE_URL")]
    database_url: Option<String>,
    /// The embedded cluster's directory, used when no --database-url is given.
    #[arg(long, default_value = "target/bench-pg")]
    pg_dir: PathBuf,
    /// Also write the results as JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Run only one part.
    #[arg(long, value_enum, default_value_t = Only::All)]
    only: Only,
    /// Keep the bench database instead of dropping it at the end.
    #[arg(long)]
    keep_database: bool,
}

fn log(msg: impl std::fmt::Display) {
    eprintln!("bench: {msg}");
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    match run(args).await {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => {
            log("finished WITH ERRORS (see the report)");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("bench: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run(args: Args) -> anyhow::Result<bool> {
    if args.seconds <= 0.0 || args.rate <= 0.0 || args.events == 0 || args.batch == 0 {
        bail!("--seconds, --rate, --events and --batch must be positive");
    }
    if args.writers.contains(&0) || args.streams.contains(&0) {
        bail!("--writers and --streams must be positive");
    }
    let run_latency = args.only != Only::Append;
    let run_append = args.only != Only::Latency;
    if run_latency {
        fanout::check_fd_limit(args.streams.iter().copied().max().unwrap_or(0))?;
    }
    let base = Instant::now();

    // The cluster.
    let cluster = sandbox_agents_bench::cluster::Cluster::open(
        args.database_url.as_deref(),
        &args.pg_dir,
        log,
    )
    .await?;

    let result = bench(&args, &cluster, base, run_append, run_latency).await;
    cluster.close(log).await;
    let mut results = result?;
    results.machine.load_end = machine::loadavg();
    print!("{}", report::markdown(&results));
    if let Some(path) = &args.json {
        let body = serde_json::to_string_pretty(&report::json(&results))?;
        std::fs::write(path, body + "\n").with_context(|| format!("writing {}", path.display()))?;
        log(format!("wrote {}", path.display()));
    }
    let clean = results.append.iter().all(|o| o.errors == 0)
        && results.latency.iter().all(|l| l.problems.is_empty());
    Ok(clean)
}

/// Creates the bench database, runs the parts, and drops it (unless asked to keep it).
async fn bench(
    args: &Args,
    cluster: &sandbox_agents_bench::cluster::Cluster,
    base: Instant,
    run_append: bool,
    run_latency: bool,
) -> anyhow::Result<report::Results> {
    let (name, options) = cluster.create_database("bench").await?;
    log(format!("database {name}"));
    let result = bench_in(args, &options, base, run_append, run_latency).await;
    if args.keep_database {
        log(format!("kept database {name}"));
    } else {
        cluster.drop_database(&name, log).await;
    }
    result
}

async fn bench_in(
    args: &Args,
    options: &PgConnectOptions,
    base: Instant,
    run_append: bool,
    run_latency: bool,
) -> anyhow::Result<report::Results> {
    let max_writers = args.writers.iter().copied().max().unwrap_or(1);
    // The writers' pool: one connection per writer, plus a few for the senders.
    let writer_db: Db = sandbox_agents_store::connect(options.clone(), max_writers as u32 + 4)
        .await
        .context("connecting to the bench database")?;
    sandbox_agents_store::migrate(&writer_db)
        .await
        .context("migrating the bench database")?;
    // The server's pool, sized as the testkit sizes it.
    let app_db: Db = sandbox_agents_store::connect(options.clone(), 20).await?;
    let app = sandbox_agents_testkit::TestApp::builder()
        .with_db(app_db, options.clone())
        .spawn()
        .await;
    let agent = app.seed_agent("bench").await;
    let machine = machine::collect(&writer_db).await;
    log(format!("PostgreSQL: {}", machine.postgres));

    let mut append_results = Vec::new();
    if run_append {
        for ddl in append::RAW_TABLE_DDL {
            sqlx::query(ddl).execute(&writer_db).await?;
        }
        let mut own = Vec::with_capacity(max_writers);
        for _ in 0..max_writers {
            own.push(app.seed_session(agent.id).await);
        }
        let shared = app.seed_session(agent.id).await;
        // Open every writer's connection before anything is timed.
        let mut warm = Vec::new();
        for _ in 0..max_writers {
            warm.push(writer_db.acquire().await?);
        }
        drop(warm);
        let duration = Duration::from_secs_f64(args.seconds);
        for &w in &args.writers {
            for mode in [Mode::Raw, Mode::Own, Mode::Same, Mode::Batch(args.batch)] {
                let o = append::measure(&writer_db, mode, w, &own, shared, duration).await;
                log(format!(
                    "{:>40} × {w:>2}: {:>8.0} events/s{}",
                    mode.label(),
                    o.events_per_s(),
                    if o.errors > 0 {
                        format!(", {} ERRORS", o.errors)
                    } else {
                        String::new()
                    }
                ));
                append_results.push(o);
            }
        }
    }

    let mut latency_results = Vec::new();
    if run_latency {
        let pace = fanout::Pace {
            events: args.events,
            rate: args.rate,
        };
        let row = fanout::raw_notify(&writer_db, &pace, base).await?;
        log_row(&row);
        latency_results.push(row);
        let session = app.seed_session(agent.id).await;
        let row = fanout::append_notify(&writer_db, session, &pace, base).await?;
        log_row(&row);
        latency_results.push(row);
        for &n in &args.streams {
            let row = fanout::raw_sse(&writer_db, session, n, &pace, base).await?;
            log_row(&row);
            latency_results.push(row);
            let row = fanout::sse(&app, &writer_db, agent.id, n, &pace, base).await?;
            log_row(&row);
            latency_results.push(row);
        }
    }

    // The test server's blob store is a temporary directory: leave nothing behind.
    let blobs_dir = app.blobs_dir.clone();
    app.stop().await;
    let _ = std::fs::remove_dir_all(blobs_dir);
    writer_db.close().await;
    Ok(report::Results {
        machine,
        seconds: args.seconds,
        pace_events: args.events,
        pace_rate: args.rate,
        append: append_results,
        latency: latency_results,
    })
}

fn log_row(row: &fanout::LatencyRow) {
    let l = row.latency.as_ref();
    log(format!(
        "{:>40}: {} / {} delivered, p50 {} ms, p99 {} ms, max {} ms{}",
        row.label,
        row.delivered,
        row.receivers as u64 * row.events as u64,
        l.map_or_else(|| "–".into(), |s| stats::ms(s.p50)),
        l.map_or_else(|| "–".into(), |s| stats::ms(s.p99)),
        l.map_or_else(|| "–".into(), |s| stats::ms(s.max)),
        if row.problems.is_empty() {
            String::new()
        } else {
            format!(" — ERRORS: {}", row.problems.join("; "))
        }
    ));
}
