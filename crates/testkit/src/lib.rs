//! Test support: a fresh database per test, [`TestApp::builder`] (a real server on port 0 that
//! the test owns, built from the binary's settings by its own wiring,
//! `sandbox_agents_server::app`), seeding helpers, real peers (git, S3, webhook receivers,
//! server processes) and an SSE reader.
//!
//! Databases live in one shared cluster: the server named by `SANDBOX_AGENTS_TEST_DATABASE_URL`
//! when set (the test script sets it), otherwise an embedded cluster under
//! `target/test-pg` that the first test process starts and later ones adopt.

mod app;
pub mod auth;
mod builder;
mod database;
pub mod exec_stream;
pub mod files;
pub mod git_server;
pub mod kube;
pub mod mcp;
pub mod metrics;
pub mod process;
pub mod projects;
pub mod receiver;
pub mod runs;
pub mod s3;
pub mod skill_bundles;
pub mod sse;
pub mod tls;
pub mod webhooks;

pub use builder::{test_webhook_settings, TestAppBuilder};
pub use database::{database_url, empty_database, fresh_database, fresh_named_database};

use sandbox_agents_agent::Runs;
use sandbox_agents_sandbox::docker::DockerBackend;
use sandbox_agents_sandbox::SandboxBackend;
use sandbox_agents_sessions::Sessions;
use sandbox_agents_store::Db;
use sandbox_agents_webhooks::Dispatcher;
use sqlx::postgres::PgConnectOptions;
use std::path::PathBuf;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

pub const DEFAULT_MODEL: &str = "test-default-model";
/// How long a test waits for a sandbox to boot.
pub const BOOT: Duration = Duration::from_secs(60);

/// What one look of [`eventually`] found: `Some`/`Ok` is the value waited for; `None` is "not
/// yet", and `Err(last)` is "not yet" with what was seen instead, which the failure reports.
pub trait Outcome<T> {
    fn into_outcome(self) -> Result<T, Option<String>>;
}

impl<T> Outcome<T> for Option<T> {
    fn into_outcome(self) -> Result<T, Option<String>> {
        self.ok_or(None)
    }
}

impl<T> Outcome<T> for Result<T, String> {
    fn into_outcome(self) -> Result<T, Option<String>> {
        self.map_err(Some)
    }
}

/// Polls `check` until it gives a value, and returns it; fails the test naming `what` (and
/// the last thing `check` saw, when it says) when `within` passes first. The one way tests
/// wait for a condition they cannot be told of: first after 10 ms, then backing off to every
/// 100 ms.
pub async fn eventually<T, O: Outcome<T>>(
    what: &str,
    within: Duration,
    mut check: impl AsyncFnMut() -> O,
) -> T {
    let deadline = std::time::Instant::now() + within;
    let mut pause = Duration::from_millis(10);
    loop {
        let last = match check().await.into_outcome() {
            Ok(v) => return v,
            Err(last) => last,
        };
        if std::time::Instant::now() >= deadline {
            match last {
                Some(last) => panic!("timed out after {within:?} waiting for {what}; last: {last}"),
                None => panic!("timed out after {within:?} waiting for {what}"),
            }
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_millis(100));
    }
}

/// Test servers ping after this much silence, so heartbeats can be observed quickly.
pub const HEARTBEAT: Duration = Duration::from_millis(300);

/// A running server owned by a test.
pub struct TestApp {
    pub base: String,
    /// The preview listener's origin (`http://127.0.0.1:<port>`).
    pub preview_base: String,
    pub http: reqwest::Client,
    pub db: Db,
    pub db_options: PgConnectOptions,
    pub shutdown: CancellationToken,
    pub server: tokio::task::JoinHandle<std::io::Result<()>>,
    /// The sandbox lifecycle, for tests that drive its workers step by step.
    pub sessions: Sessions,
    /// The run loop (registered with `sessions`; held here so it lives as long as the app).
    pub runs: Runs,
    /// Agents' schedules; no worker fires them unless a test starts one
    /// (`schedules.spawn_worker`).
    pub schedules: sandbox_agents_schedules::Schedules,
    /// Environments, for tests that drive build recovery and collection themselves.
    pub environments: sandbox_agents_environments::Environments,
    /// This server's `--data-dir` (a temporary directory, removed when the app is dropped).
    pub data_dir: PathBuf,
    /// This server's blob store directory (`<data_dir>/blobs`).
    pub blobs_dir: PathBuf,
    /// The webhook dispatcher, not running: drive it with `run_once`, or start its loop with
    /// [`TestApp::start_dispatcher`].
    pub dispatcher: Dispatcher,
    /// Whether dropping it leaves the deployment's sandboxes (see [`TestApp::restart`]).
    pub(crate) keep_sandboxes: bool,
}

/// `docker inspect -f <format> <what>` (a container or an image), trimmed; panics when it
/// fails.
pub fn docker_inspect(what: &str, format: &str) -> String {
    let out = std::process::Command::new("docker")
        .args(["inspect", "-f", format, what])
        .output()
        .expect("docker inspect");
    assert!(
        out.status.success(),
        "docker inspect {what}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// The image tests boot (the one `scripts/test` builds).
pub fn test_image() -> String {
    std::env::var("SANDBOX_AGENTS_IMAGE").unwrap_or_else(|_| "sandbox-agents-sandbox:1".into())
}

/// The daemon tests give their sandboxes: `SANDBOX_AGENTS_SANDBOXD_BIN` (`scripts/test` sets
/// it to the static build), else the static build of this tree, else `off`.
pub fn test_sandboxd() -> PathBuf {
    if let Some(p) = std::env::var_os("SANDBOX_AGENTS_SANDBOXD_BIN") {
        return PathBuf::from(p);
    }
    let target = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../target/x86_64-unknown-linux-gnu");
    ["debug", "release"]
        .iter()
        .map(|profile| target.join(profile).join("sandboxd"))
        .find(|p| p.is_file())
        .unwrap_or_else(|| PathBuf::from("off"))
}

/// Logs warnings and errors to the test's output, which the runner shows only for a test that
/// failed (an internal error's reference in a failure then has its cause beside it); more with
/// `TEST_LOG` (e.g. `TEST_LOG=debug`).
pub(crate) fn init_tracing() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let filter = std::env::var("TEST_LOG").unwrap_or_else(|_| "warn".to_owned());
        let _ = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_test_writer()
            .try_init();
    });
}

/// A test that fails halfway must not leave sandboxes behind: when its server is dropped,
/// every container of its deployment (each test database is a deployment of its own) is
/// removed, from a thread with a runtime of its own since `Drop` cannot await; then its data
/// directory.
impl Drop for TestApp {
    fn drop(&mut self) {
        // Pooled sandboxes carry the deployment label too, so the sweep below takes them; the
        // refill worker is told to stop first (`stop` also waits for it).
        self.shutdown.cancel();
        if self.keep_sandboxes {
            return;
        }
        let db = self.db.clone();
        let options = self.db_options.clone();
        on_own_runtime(async move {
            // The test's own pool belongs to its runtime; use a fresh connection here.
            drop(db);
            let Ok(pool) = sandbox_agents_store::connect(options, 1).await else {
                return;
            };
            if let Ok(deployment) = sandbox_agents_store::deployment::id(&pool).await {
                remove_deployment_sandboxes(&deployment).await;
            }
            pool.close().await;
        });
        let _ = std::fs::remove_dir_all(&self.data_dir);
    }
}

/// Runs `work` to its end on a thread and runtime of its own: what a `Drop` that must await
/// does (it cannot await, and may run inside a runtime that must not be blocked).
pub fn on_own_runtime(work: impl std::future::Future<Output = ()> + Send + 'static) {
    let _ = std::thread::spawn(move || {
        if let Ok(rt) = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        {
            rt.block_on(work);
        }
    })
    .join();
}

/// Removes every sandbox of `deployment` (its pooled ones too) and its snapshot images, which
/// keep the deployment's label and nothing else uses; best effort, for a test's cleanup.
pub async fn remove_deployment_sandboxes(deployment: &str) {
    let Ok(docker) = DockerBackend::connect(deployment).await else {
        return;
    };
    for c in docker.list().await.unwrap_or_default() {
        let _ = docker.remove(&c.id).await;
    }
    for image in docker.deployment_images().await.unwrap_or_default() {
        let _ = docker.remove_image(&image).await;
    }
}
