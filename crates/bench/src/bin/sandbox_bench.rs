//! `sandbox-bench`: what the control plane adds on top of Docker, measured side by side.
//!
//! 1. Create-to-running. Ours: `POST /api/sessions` on an in-process server, until a client
//!    following `GET .../events/stream` receives `session.status_running` (the agent's manifest
//!    is one file and one dir); once without a warm pool and once claiming from a full one. Beside it: `DockerBackend::create` + `put_archive` (the Docker
//!    calls a boot makes, without the database, the event or HTTP), and raw bollard: create +
//!    start + `upload_to_container` of the same tar, with the same hardening and limits.
//! 2. Exec round trip of `true`. Ours: `POST .../exec` over HTTP. Beside it: `Sessions::exec`
//!    (no HTTP), `DockerBackend::exec` (no database; `timeout -k … sh -c true`), and raw
//!    bollard: `create_exec` + attached `start_exec` + `inspect_exec` of `true`.
//!
//! 3. Runs (`--parts runs`): a one-step turn, a turn with one shell call, and time to first
//!    delta, each beside the same model calls (and exec) made directly; see `runs.rs`.
//! 4. File transfers (`--parts files`): 1 KB and 10 MB written and read through the workspace
//!    and absolute-path endpoints, beside the Engine's archive API; see `files.rs`.
//! 5. Bursts (`--parts burst`): twenty sessions at once on a fixed warm pool and on one that
//!    follows demand, beside twenty raw cold boots at once; see `burst.rs`. A hundred at once
//!    (`--parts burst100`) on default settings and on a database pool of 8, with the pool's
//!    wait from `/metrics`, beside a hundred raw cold boots; see `burst100.rs`.
//! 6. Egress (`--parts egress`): an HTTPS request on a new connection and a 256 MiB download
//!    from a sandbox through the egress proxy, beside a sandbox attached to the server's
//!    network directly, and the proxy alone from the host; see `egress.rs`.
//! 7. Kubernetes (`--parts kubernetes`, issue 37): the API server's own request latency, a
//!    cold boot of the Kubernetes backend beside the same pod created and watched with kube's
//!    client, and a warm claim of a pooled pod, on the test cluster; see `kubernetes.rs`.
//!
//! Each iteration runs every variant once, sequentially, in an order that rotates, so drift in
//! the machine's load hits all of them alike; sessions and containers are removed between
//! iterations, outside the timed region. Markdown goes to stdout, progress to stderr.

#![allow(clippy::print_stdout)]

#[path = "sandbox_bench/burst.rs"]
mod burst;
#[path = "sandbox_bench/burst100.rs"]
mod burst100;
#[path = "sandbox_bench/e2b.rs"]
mod e2b;
#[path = "sandbox_bench/egress.rs"]
mod egress;
#[path = "sandbox_bench/egress_host.rs"]
mod egress_host;
#[path = "sandbox_bench/egress_upstream.rs"]
mod egress_upstream;
#[path = "sandbox_bench/files.rs"]
mod files;
#[path = "sandbox_bench/kube_raw.rs"]
mod kube_raw;
#[path = "sandbox_bench/kubernetes.rs"]
mod kubernetes;
#[path = "sandbox_bench/limits.rs"]
mod limits;
#[path = "sandbox_bench/mcp.rs"]
mod mcp;
#[path = "sandbox_bench/ours.rs"]
mod ours;
#[path = "sandbox_bench/raw.rs"]
mod raw;
#[path = "sandbox_bench/report.rs"]
mod report;
#[path = "sandbox_bench/runs.rs"]
mod runs;

use anyhow::Context;
use bytes::Bytes;
use clap::Parser;
use report::{command, cpu_jiffies, loadavg, report, stats, Part, Row};
use sandbox_agents_domain::manifest::ManifestSpec;
use sandbox_agents_domain::SessionId;
use sandbox_agents_sandbox::{ExecRequest, SandboxSpec, WORKDIR};
use sandbox_agents_sessions::MAX_OUTPUT_BYTES;
use sandbox_agents_store::projects::DEFAULT_PROJECT;
use sandbox_agents_testkit::TestApp;
use sandbox_agents_workspace::{build_archive, ManifestPolicy};
use serde_json::json;
use std::cell::RefCell;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

#[derive(Parser, Debug, Clone)]
#[command(
    name = "sandbox-bench",
    about = "Benchmarks create-to-running and exec round trips beside raw bollard baselines"
)]
struct Args {
    /// Timed iterations of each variant.
    #[arg(long, default_value_t = 30)]
    iterations: usize,
    /// Untimed iterations first.
    #[arg(long, default_value_t = 2)]
    warmup: usize,
    /// A cluster to use instead of the embedded one (a URL to any database in it; the bench
    /// creates and drops a database of its own there).
    #[arg(long, env = "SANDBOX_AGENTS_BENCH_DATABASE_URL")]
    database_url: Option<String>,
    /// The embedded cluster's directory, used when no --database-url is given.
    #[arg(long, default_value = "target/bench-sandbox-pg")]
    pg_dir: PathBuf,
    /// Which parts to run, comma-separated: `create`, `exec`, `runs`, `limits`, `mcp`, `e2b`,
    /// `files`, `burst`, `burst100`, `egress`, `kubernetes`.
    #[arg(long, value_delimiter = ',', default_value = "create,exec,runs")]
    parts: Vec<String>,
}

/// The warm pool of the pooled server: the server's default.
const POOL_SIZE: usize = 2;

/// The agent's manifest: one file and one directory.
fn manifest() -> serde_json::Value {
    json!({"entries": {
        "README.md": {"kind": "file", "content": "# bench\nA small file from the manifest.\n"},
        "data": {"kind": "dir"},
    }})
}

fn log(msg: impl std::fmt::Display) {
    eprintln!("sandbox-bench: {msg}");
}

/// Runs `iterations` (after `warmup` untimed ones) of `variants` variants, in an order that
/// rotates each iteration; `run(i)` runs variant `i` and returns its timed duration.
async fn interleaved<F, Fut>(args: &Args, rows: &mut [Row], mut run: F) -> anyhow::Result<()>
where
    F: FnMut(usize) -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<Duration>>,
{
    let n = rows.len();
    for it in 0..args.warmup + args.iterations {
        for k in 0..n {
            let v = (it + k) % n;
            let d = run(v).await.with_context(|| rows[v].label)?;
            if it >= args.warmup {
                rows[v].samples.push(d);
            }
        }
        if (it + 1) % 10 == 0 {
            log(format!(
                "  {} / {} iterations",
                it + 1,
                args.warmup + args.iterations
            ));
        }
    }
    Ok(())
}

async fn create_to_running(
    args: &Args,
    app: &TestApp,
    pooled: &TestApp,
    pool_size: usize,
    docker: &bollard::Docker,
    tar: &Bytes,
) -> anyhow::Result<Part> {
    let agent = ours::create_agent(
        app,
        json!({"slug": "bench", "name": "bench", "manifest": manifest()}),
    )
    .await
    .context("creating the agent")?;
    let settings = app.sessions.settings();
    let (image, limits) = (settings.default_image.clone(), settings.limits.clone());
    let backend = app.sessions.backend().clone();
    let pooled_agent = ours::create_agent(
        pooled,
        json!({"slug": "bench-pooled", "name": "bench-pooled", "manifest": manifest()}),
    )
    .await
    .context("creating the pooled server's agent")?;
    let mut rows = vec![
        Row::new("ours: POST /api/sessions → SSE session.status_running", "HTTP, row + event, boot task (inspect image, create, start, inspect), manifest tar, running row + event + NOTIFY, SSE"),
        Row::new("ours, warm pool: the same, claiming a pooled sandbox", "HTTP, row + event, boot task (claim row, inspect), manifest tar upload, running row + event + NOTIFY, SSE; the pool is full when the clock starts"),
        Row::new("DockerBackend::create + put_archive", "the Docker calls of a boot, without database, event or HTTP"),
        Row::new("bollard, DockerBackend's calls one by one", "the same calls timed step by step (breakdown below)"),
        Row::new("raw bollard: create + start + upload", "same image, hardening, limits, labels and tar"),
    ];
    // Per-iteration extras, warm-up included (each variant runs once per iteration).
    let accepted = RefCell::new(Vec::new());
    let steps = RefCell::new(Vec::new());
    interleaved(args, &mut rows, |v| {
        let (image, limits, backend, agent) = (&image, &limits, &backend, &agent);
        let pooled_agent = &pooled_agent;
        let (accepted, steps) = (&accepted, &steps);
        async move {
            match v {
                0 => {
                    let (id, d, a) = ours::create_until_running(app, agent).await?;
                    accepted.borrow_mut().push(a);
                    ours::delete_session(app, &id).await?;
                    Ok(d)
                }
                1 => {
                    // The previous claim's replacement is started outside the timed region.
                    ours::pool_full(pooled, pool_size).await?;
                    let (id, d, _) = ours::create_until_running(pooled, pooled_agent).await?;
                    ours::delete_session(pooled, &id).await?;
                    // And before the next variant runs, so it does not compete with it.
                    ours::pool_full(pooled, pool_size).await?;
                    Ok(d)
                }
                3 => {
                    let (id, s) = raw::sequence(docker, image, limits, tar).await?;
                    raw::remove(docker, &id).await?;
                    steps.borrow_mut().push(s);
                    Ok(s.iter().sum())
                }
                2 => {
                    let spec = SandboxSpec {
                        session: uuid::Uuid::new_v4().to_string(),
                        image: image.clone(),
                        env: Default::default(),
                        exposed_ports: Vec::new(),
                        limits: limits.clone(),
                        runtime_class: None,
                    };
                    let t0 = Instant::now();
                    let sandbox = backend.create(&spec).await?;
                    let put = backend.put_archive(&sandbox.id, WORKDIR, tar.clone()).await;
                    let d = t0.elapsed();
                    backend.remove(&sandbox.id).await?;
                    put?;
                    Ok(d)
                }
                _ => {
                    let t0 = Instant::now();
                    let id = raw::create_start_upload(docker, image, limits, tar).await?;
                    let d = t0.elapsed();
                    raw::remove(docker, &id).await?;
                    Ok(d)
                }
            }
        }
    })
    .await?;
    let accepted = stats(&accepted.into_inner()[args.warmup..]);
    let mut notes = format!(
        "Of ours, `POST /api/sessions` until its 202 (session row + `session.created` in one \
         transaction): p50 {:.1} ms, mean {:.1} ms.\n\n\
         Where the Docker part of a boot goes (the step-by-step row):\n\n\
         | Step | p50 ms | mean ms |\n|---|---:|---:|\n",
        accepted.p50, accepted.mean
    );
    let steps = &steps.into_inner()[args.warmup..];
    for (i, name) in raw::STEPS.iter().enumerate() {
        let st = stats(&steps.iter().map(|s| s[i]).collect::<Vec<_>>());
        notes += &format!("| {name} | {:.1} | {:.1} |\n", st.p50, st.mean);
    }
    Ok(Part {
        title: "Create-to-running",
        rows,
        notes,
    })
}

async fn exec_round_trip(
    args: &Args,
    app: &TestApp,
    docker: &bollard::Docker,
    tar: &Bytes,
) -> anyhow::Result<Part> {
    let agent =
        ours::create_agent(app, json!({"slug": "bench-exec", "name": "bench-exec"})).await?;
    let (id, _, _) = ours::create_until_running(app, &agent).await?;
    let sid = SessionId::parse(&id).context("a session id")?;
    let container = sandbox_agents_store::sessions::get(&app.db, DEFAULT_PROJECT, sid)
        .await?
        .sandbox_id
        .context("the running session has no sandbox")?;
    let settings = app.sessions.settings();
    let raw_id = raw::create_start_upload(docker, &settings.default_image, &settings.limits, tar)
        .await
        .context("starting the raw container")?;
    let backend = app.sessions.backend().clone();
    let req = ExecRequest {
        argv: vec!["sh".into(), "-c".into(), "true".into()],
        workdir: None,
        env: Vec::new(),
        timeout: Duration::from_secs(60),
        max_output: MAX_OUTPUT_BYTES,
        stdin: None,
    };
    let mut rows = vec![
        Row::new(
            "ours: POST /api/sessions/{id}/exec",
            "HTTP + Sessions::exec",
        ),
        Row::new(
            "Sessions::exec (no HTTP)",
            "session lookup, then the touch UPDATE concurrently with DockerBackend::exec",
        ),
        Row::new(
            "DockerBackend::exec (no database)",
            "one HTTP/2 stream to the sandbox's daemon on its open bridge (a Docker exec of `timeout -k 5s -- 60.000s sh -c true` without one)",
        ),
        Row::new(
            "raw bollard: `true`",
            "create_exec + attached start_exec + inspect_exec",
        ),
    ];
    let result = interleaved(args, &mut rows, |v| {
        let (id, container, raw_id, backend, req) = (&id, &container, &raw_id, &backend, &req);
        async move {
            let t0 = Instant::now();
            match v {
                0 => ours::exec_true(app, id).await?,
                1 => {
                    let out = app
                        .sessions
                        .exec(DEFAULT_PROJECT, sid, "true".into(), None)
                        .await?;
                    anyhow::ensure!(out.exit_code == 0, "exec true: {out:?}");
                }
                2 => {
                    let out = backend.exec(container, req).await?;
                    anyhow::ensure!(out.exit_code == 0, "exec true: {out:?}");
                }
                _ => raw::exec(docker, raw_id, &["true"]).await?,
            }
            Ok(t0.elapsed())
        }
    })
    .await;
    let deleted = ours::delete_session(app, &id).await;
    raw::remove(docker, &raw_id).await?;
    result?;
    deleted?;
    Ok(Part {
        title: "Exec round trip (`true`)",
        rows,
        notes: String::new(),
    })
}

#[tokio::main]
async fn main() -> ExitCode {
    match run(Args::parse()).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("sandbox-bench: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run(args: Args) -> anyhow::Result<()> {
    anyhow::ensure!(args.iterations > 0, "--iterations must be positive");
    let docker = raw::connect().await?;
    let version = docker.version().await.context("GET /version")?;
    let load_start = loadavg();
    let cpu_start = cpu_jiffies();
    let cluster = sandbox_agents_bench::cluster::Cluster::open(
        args.database_url.as_deref(),
        &args.pg_dir,
        log,
    )
    .await?;
    let (name, options) = cluster.create_database("bench_sandbox").await?;
    let result = async {
        let db = sandbox_agents_store::connect(options.clone(), 20).await?;
        sandbox_agents_store::migrate(&db).await?;
        let fake = sandbox_agents_fake_model::FakeModel::start(runs::script());
        let app = sandbox_agents_testkit::TestApp::builder()
            .with_db(db.clone(), options.clone())
            .with_model_proxy(&fake.root_url())
            .spawn()
            .await;
        // A second server on the same database with the server's default warm pool: the
        // first one (no pool) measures the path every boot took before the pool, and the
        // path a session with exposed ports or another image still takes.
        let pooled = sandbox_agents_testkit::TestApp::builder()
            .with_db(db, options)
            .with_pool(POOL_SIZE)
            .spawn()
            .await;
        pooled.sessions.start_pool();
        let parts = tokio::select! {
            r = parts(&args, &app, &pooled, &fake, &docker, &cluster) => r,
            _ = tokio::signal::ctrl_c() => Err(anyhow::anyhow!("interrupted")),
        };
        // Whatever happened: no sandbox of this server, and no raw container, is left.
        let mut left = 0;
        if let Ok(listed) = app.sessions.backend().list().await {
            left += listed.len();
            for c in listed {
                let _ = app.sessions.backend().remove(&c.id).await;
            }
        }
        left += raw::remove_all(&docker).await.unwrap_or(0);
        log(format!("removed {left} leftover container(s)"));
        let blobs = app.blobs_dir.clone();
        let pooled_blobs = pooled.blobs_dir.clone();
        pooled.stop().await;
        // Whatever the pool's worker started last.
        if let Ok(listed) = app.sessions.backend().list().await {
            for c in listed {
                let _ = app.sessions.backend().remove(&c.id).await;
            }
        }
        let _ = std::fs::remove_dir_all(pooled_blobs);
        app.stop().await;
        let _ = std::fs::remove_dir_all(blobs);
        parts
    }
    .await;
    cluster.drop_database(&name, log).await;
    cluster.close(log).await;
    let cpu_end = cpu_jiffies();
    let parts = result?;
    let commit = match (
        command("git", &["rev-parse", "--short", "HEAD"]),
        command("git", &["status", "--porcelain", "--untracked-files=no"]),
    ) {
        (Some(head), Some(_)) => format!("{head} (with uncommitted changes)"),
        (Some(head), None) => head,
        (None, _) => "unknown".into(),
    };
    let cpu = std::fs::read_to_string("/proc/cpuinfo").ok().and_then(|c| {
        c.lines()
            .find(|l| l.starts_with("model name"))
            .and_then(|l| l.split_once(':'))
            .map(|(_, v)| v.trim().to_owned())
    });
    let facts = [
        (
            "nproc",
            std::thread::available_parallelism()
                .map_or(0, |n| n.get())
                .to_string(),
        ),
        ("CPU", cpu.unwrap_or_else(|| "unknown".into())),
        (
            "Docker Engine",
            format!(
                "{} (API {})",
                version.version.unwrap_or_default(),
                version.api_version.unwrap_or_default()
            ),
        ),
        ("Commit", commit),
        (
            "Iterations",
            format!(
                "{} per variant after {} warm-up, sequential, order rotating",
                args.iterations, args.warmup
            ),
        ),
        (
            "Load average (start → end)",
            format!("{load_start} → {}", loadavg()),
        ),
        (
            "CPU busy during the run (all processes, this one, dockerd and containers included)",
            format!(
                "{:.0}% of {} CPUs",
                100.0 * (cpu_end.0 - cpu_start.0) as f64 / (cpu_end.1 - cpu_start.1).max(1) as f64,
                std::thread::available_parallelism().map_or(0, |n| n.get())
            ),
        ),
    ];
    print!("{}", report(&facts, &parts));
    Ok(())
}

async fn parts(
    args: &Args,
    app: &TestApp,
    pooled: &TestApp,
    fake: &sandbox_agents_fake_model::FakeModel,
    docker: &bollard::Docker,
    cluster: &sandbox_agents_bench::cluster::Cluster,
) -> anyhow::Result<Vec<Part>> {
    let wants = |p: &str| args.parts.iter().any(|x| x == p);
    // The manifest's tar, as a boot builds it (owned by uid 1000): what the baselines upload.
    let spec: ManifestSpec = serde_json::from_value(manifest())?;
    let tar = Bytes::from(build_archive(&spec, &ManifestPolicy::default())?);
    let mut out = Vec::new();
    if wants("create") {
        log(format!(
            "create-to-running: {} + {} iterations × 5 variants",
            args.warmup, args.iterations
        ));
        out.push(create_to_running(args, app, pooled, POOL_SIZE, docker, &tar).await?);
    }
    if wants("exec") {
        log(format!(
            "exec round trip: {} + {} iterations × 4 variants",
            args.warmup, args.iterations
        ));
        out.push(exec_round_trip(args, app, docker, &tar).await?);
    }
    if wants("runs") {
        out.extend(runs::parts(args, app, fake, docker, &tar).await?);
    }
    if wants("limits") {
        out.push(limits::part(args, app).await?);
    }
    if wants("mcp") {
        out.push(mcp::part(args).await?);
    }
    if wants("e2b") {
        out.extend(e2b::parts(args, pooled, POOL_SIZE).await?);
    }
    if wants("files") {
        log(format!(
            "file transfers: {} + {} iterations × 6 variants × 2 sizes",
            args.warmup, args.iterations
        ));
        out.extend(files::parts(args, app, docker, &tar).await?);
    }
    if wants("burst") {
        // A burst is twenty samples: a tenth of the iterations' bursts, at least three.
        let bursts = (args.iterations / 10).max(3);
        log(format!(
            "bursts: 1 + {bursts} bursts of {} × 2 servers, and raw",
            burst::BURST
        ));
        out.push(burst::part(bursts, cluster, docker, &tar).await?);
    }
    if wants("burst100") {
        // A hundred samples a burst: two timed bursts per server, after an untimed one.
        let bursts = (args.iterations / 15).max(2);
        log(format!(
            "bursts of {}: 1 + {bursts} bursts × 2 servers, and raw",
            burst100::BURST
        ));
        out.push(burst100::part(bursts, cluster, docker, &tar).await?);
    }
    if wants("egress") {
        out.extend(egress::parts(args, app, docker).await?);
    }
    if wants("kubernetes") {
        let settings = app.sessions.settings();
        let template = SandboxSpec {
            session: String::new(),
            image: settings.default_image.clone(),
            env: Default::default(),
            exposed_ports: Vec::new(),
            limits: settings.limits.clone(),
            runtime_class: None,
        };
        out.extend(kubernetes::parts(args, &template, docker).await?);
    }
    Ok(out)
}
