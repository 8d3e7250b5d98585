//! Test support: a fresh database per test, [`spawn_app`] (a real server on port 0 that the
//! test owns, built by the binary's own wiring, `sandbox_agents_server::app`), seeding
//! helpers and an SSE reader.
//!
//! Databases live in one shared cluster: the server named by `SANDBOX_AGENTS_TEST_DATABASE_URL`
//! when set (the test script sets it), otherwise an embedded cluster under
//! `target/test-pg` that the first test process starts and later ones adopt.

mod app;
mod database;
pub mod git_server;
pub mod receiver;
pub mod s3;
pub mod sse;
pub mod tls;

pub use database::{database_url, fresh_database, fresh_named_database};

use sandbox_agents_agent::{ModelClients, Runs};
use sandbox_agents_sandbox::docker::DockerBackend;
use sandbox_agents_sandbox::SandboxBackend;
use sandbox_agents_server::app::Settings;
use sandbox_agents_server::config::{Config, LogFormat, S3AddressingStyle};
use sandbox_agents_sessions::Sessions;
use sandbox_agents_store::Db;
use sandbox_agents_webhooks::{Dispatcher, RetryPolicy, WebhookSettings};
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
    keep_sandboxes: bool,
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

/// The configuration of a test server, as flags would give it: listeners on port 0 of
/// loopback, state under `data_dir`, the test image and model, small sandbox limits, no warm
/// pool unless asked (0 keeps boots deterministic; pool tests ask for one), path previews,
/// open mode and the deployment's test master key. No environment variable but
/// `SANDBOX_AGENTS_IMAGE` (the image to boot) plays a part, so a developer's other
/// `SANDBOX_AGENTS_*` settings never change a test.
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

pub fn test_config(data_dir: PathBuf, deployment: &str) -> Config {
    Config {
        bind: "127.0.0.1:0".parse().expect("an address"),
        data_dir,
        database_url: None,
        default_model: DEFAULT_MODEL.into(),
        default_max_input_tokens: 128_000,
        db_max_connections: 32,
        backend: "docker".into(),
        image: test_image(),
        docker_network: None,
        sandbox_cpus: 1.0,
        sandbox_memory_mb: 512,
        sandbox_max_cpus: None,
        sandbox_max_memory_mb: 4096,
        sandbox_pids: 256,
        sandbox_disk_mb: 10240,
        sandbox_disk_check_seconds: 60,
        warm_pool_size: 0,
        warm_pool_max: 0,
        keep_warm_pool: false,
        max_concurrent_builds: 2,
        max_concurrent_boots: None,
        max_sandboxes: None,
        max_sandboxes_per_project: None,
        max_runs: None,
        max_runs_per_project: None,
        idle_ttl_seconds: 1800,
        local_dir_roots: Vec::new(),
        git_known_hosts: None,
        s3_endpoint: None,
        blob_url: None,
        s3_region: Some("us-east-1".into()),
        s3_addressing_style: S3AddressingStyle::Path,
        s3_proxy: None,
        s3_access_key_id: None,
        s3_secret_access_key: None,
        s3_session_token: None,
        s3_instance_credentials: false,
        s3_stage_max_bytes: 1 << 30,
        extra_ca_certs: None,
        sandboxd_bin: Some(test_sandboxd()),
        public_url: None,
        preview_bind: Some("127.0.0.1:0".parse().expect("an address")),
        metrics_bind: None,
        preview_public_url: None,
        preview_domain: None,
        allowed_hosts: Vec::new(),
        preview_key: None,
        token: None,
        rate_limit_per_minute: 0,
        rate_limit_burst: 0,
        master_key: Some(test_master_key_text(deployment)),
        previous_master_keys: Vec::new(),
        // The webhook flags; a test server's delivery settings are `AppOptions::webhooks`.
        webhook_allow_private: true,
        webhook_max_attempts: 4,
        webhook_retry_base_seconds: 0.1,
        webhook_retry_max_seconds: 3.0,
        webhook_deactivate_after: 0,
        webhook_concurrency: 8,
        webhook_per_subscription_concurrency: 2,
        webhook_timeout_seconds: 2.0,
        webhook_retention_days: 30,
        log_format: LogFormat::Text,
    }
}

/// The master key of a test deployment as `--master-key` takes it (64 hex digits): derived
/// from its id, so that every server a test starts on the same database (a restart, a second
/// process) opens what another sealed, as the processes of a real deployment share
/// `SANDBOX_AGENTS_MASTER_KEY`.
fn test_master_key_text(deployment: &str) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(format!("test master key {deployment}").as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// Logs warnings and errors to the test's output, which the runner shows only for a test that
/// failed (an internal error's reference in a failure then has its cause beside it); more with
/// `TEST_LOG` (e.g. `TEST_LOG=debug`).
fn init_tracing() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let filter = std::env::var("TEST_LOG").unwrap_or_else(|_| "warn".to_owned());
        let _ = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_test_writer()
            .try_init();
    });
}

/// A server on a fresh database, listening on an ephemeral port.
pub async fn spawn_app() -> TestApp {
    init_tracing();
    let (db, options) = fresh_database().await;
    spawn_app_on(db, options).await
}

/// Another server on an existing database: its own pool, hub and `LISTEN` connection, as a
/// second server process would have.
pub async fn spawn_app_on(db: Db, db_options: PgConnectOptions) -> TestApp {
    spawn_app_with(db, db_options, None).await
}

/// A server whose `GET /api/models` reads the LiteLLM-style proxy at `model_proxy`.
pub async fn spawn_app_with_model_proxy(model_proxy: &str) -> TestApp {
    let (db, options) = fresh_database().await;
    spawn_app_with_model_proxy_on(db, options, model_proxy).await
}

/// Another server on an existing database, with its runs going to `model_proxy`.
pub async fn spawn_app_with_model_proxy_on(
    db: Db,
    options: PgConnectOptions,
    model_proxy: &str,
) -> TestApp {
    init_tracing();
    let transport = sandbox_agents_model::Transport::Proxy {
        base: model_proxy.to_owned(),
        api_key: Some("test-key".into()),
    };
    let client =
        sandbox_agents_model::ModelClient::new(sandbox_agents_model::ModelConfig::new(transport))
            .expect("a model client");
    let models = ModelClients {
        proxy: Some(client.clone()),
        openai: None,
    };
    spawn_app_full(
        db,
        options,
        Some(sandbox_agents_model::Catalogue::new(client)),
        models,
    )
    .await
}

async fn spawn_app_with(
    db: Db,
    db_options: PgConnectOptions,
    model_proxy: Option<sandbox_agents_model::Catalogue>,
) -> TestApp {
    spawn_app_full(db, db_options, model_proxy, Default::default()).await
}

/// Webhook settings for tests: internal receivers allowed (they listen on 127.0.0.1),
/// retries after 100 ms (then 500 ms, 2.5 s), 4 attempts, short timeouts, no deactivation,
/// 8 requests in flight and 2 per subscription.
pub fn test_webhook_settings() -> WebhookSettings {
    WebhookSettings {
        allow_private: true,
        retry: RetryPolicy {
            max_attempts: 4,
            base: Duration::from_millis(100),
            max: Duration::from_secs(3),
        },
        deactivate_after: 0,
        concurrency: 8,
        per_subscription: 2,
        timeout: Duration::from_secs(2),
        poll: Duration::from_millis(50),
        retention_days: 30,
        extra_ca: None,
    }
}

/// A server on a fresh database whose webhooks use `settings`.
pub async fn spawn_app_with_webhooks(settings: WebhookSettings) -> TestApp {
    spawn_app_with_options(AppOptions {
        webhooks: settings,
        ..Default::default()
    })
    .await
}

/// A server with a warm pool of `size` sandboxes, on a fresh database; its refill worker is
/// started (the first fill runs in the background: poll, or call `sessions.fill_pool()`).
pub async fn spawn_app_pooled(size: usize) -> TestApp {
    init_tracing();
    let (db, options) = fresh_database().await;
    let app = spawn_app_on_pooled(db, options, size).await;
    app.sessions.start_pool();
    app
}

/// A server with a warm pool of `size` on an existing database (a second process, or a
/// restart). Its refill worker is not started: call `sessions.reconcile_on_start()` and
/// `sessions.start_pool()` as a server would, or `sessions.fill_pool()` to fill in step.
pub async fn spawn_app_on_pooled(db: Db, db_options: PgConnectOptions, size: usize) -> TestApp {
    init_tracing();
    let opts = AppOptions {
        warm_pool: size,
        ..Default::default()
    };
    spawn_app_inner(db, db_options, opts).await
}

/// A server whose `GET /api/models` and runs use the given clients.
pub async fn spawn_app_full(
    db: Db,
    db_options: PgConnectOptions,
    model_proxy: Option<sandbox_agents_model::Catalogue>,
    models: ModelClients,
) -> TestApp {
    let opts = AppOptions {
        model_proxy,
        models,
        ..Default::default()
    };
    spawn_app_inner(db, db_options, opts).await
}

/// A server on a fresh database whose shared token is `token` (not open mode).
pub async fn spawn_app_with_token(token: &str) -> TestApp {
    spawn_app_with_auth(sandbox_agents_api::auth::Auth::new(Some(token))).await
}

/// A server on a fresh database that checks credentials with `auth`.
pub async fn spawn_app_with_auth(auth: sandbox_agents_api::auth::Auth) -> TestApp {
    spawn_app_with_options(AppOptions {
        auth,
        ..Default::default()
    })
    .await
}

/// How a test server differs from the default one (open mode, no model proxy, the test
/// webhook settings, no warm pool, path previews).
pub struct AppOptions {
    pub model_proxy: Option<sandbox_agents_model::Catalogue>,
    pub models: ModelClients,
    pub auth: sandbox_agents_api::auth::Auth,
    pub webhooks: WebhookSettings,
    pub warm_pool: usize,
    /// `--warm-pool-max` (0 by default: a fixed pool of `warm_pool`).
    pub warm_pool_max: usize,
    /// `--keep-warm-pool`: the pool outlives the last process (see `Sessions::stop_pool`).
    pub keep_warm_pool: bool,
    /// `--preview-domain`: previews under a wildcard domain instead of `/preview/{token}/`.
    pub preview_domain: Option<String>,
    /// `--allowed-hosts`.
    pub allowed_hosts: Vec<String>,
    /// The web UI's files (the binary's embedded ones by default).
    pub ui: sandbox_agents_api::ui::UiAssets,
    /// `--local-dir-roots`: host directories `local_dir` entries and skills sources may copy.
    pub local_dir_roots: Vec<PathBuf>,
    /// `--extra-ca-certs`: a PEM file of CA certificates the server and its sandboxes trust
    /// (e.g. [`git_server::GitServer::ca_bundle`]).
    pub extra_ca_certs: Option<PathBuf>,
    /// `--max-concurrent-builds`.
    pub max_concurrent_builds: usize,
    /// `--s3-endpoint` and the S3 keys (e.g. [`s3::MotoServer::access`]); none by default.
    pub s3: Option<s3::S3Access>,
    /// `--s3-stage-max-bytes` (1 GiB by default).
    pub s3_stage_max_bytes: Option<u64>,
    /// The role the server takes S3 credentials from without keys, as the flags and the
    /// environment would resolve it (`--s3-instance-credentials`, `AWS_CONTAINER_*`), set
    /// here rather than through the process's environment, which tests share.
    pub s3_ambient: Option<sandbox_agents_workspace::s3::AmbientCredentials>,
    /// `--sandboxd-bin off`: sandboxes get no daemon (every command is a Docker exec).
    pub no_daemon: bool,
    /// `--blob-url` (e.g. `s3://bucket/prefix` with `s3`); `<data-dir>/blobs` by default.
    pub blob_url: Option<String>,
    /// `--sandbox-disk-mb` (10 GiB by default). Test servers run no periodic workers: a test
    /// calls `sessions.enforce_disk_limit()` itself.
    pub sandbox_disk_mb: Option<u64>,
    /// `--max-sandboxes` and `--max-sandboxes-per-project` (no limit by default).
    pub max_sandboxes: Option<u32>,
    pub max_sandboxes_per_project: Option<u32>,
    /// `--max-runs`, `--max-runs-per-project`.
    pub max_runs: Option<u32>,
    pub max_runs_per_project: Option<u32>,
}

impl Default for AppOptions {
    fn default() -> Self {
        AppOptions {
            model_proxy: None,
            models: Default::default(),
            auth: sandbox_agents_api::auth::Auth::new(None),
            webhooks: test_webhook_settings(),
            warm_pool: 0,
            warm_pool_max: 0,
            keep_warm_pool: false,
            preview_domain: None,
            allowed_hosts: Vec::new(),
            ui: Default::default(),
            local_dir_roots: Vec::new(),
            extra_ca_certs: None,
            max_concurrent_builds: 2,
            s3: None,
            s3_stage_max_bytes: None,
            s3_ambient: None,
            sandbox_disk_mb: None,
            no_daemon: false,
            blob_url: None,
            max_sandboxes: None,
            max_sandboxes_per_project: None,
            max_runs: None,
            max_runs_per_project: None,
        }
    }
}

impl AppOptions {
    /// Runs go to `model_proxy` (a fake model's root URL), whose catalogue `GET /api/models`
    /// shows, as [`spawn_app_with_model_proxy`] sets it up.
    pub fn with_model_proxy(mut self, model_proxy: &str) -> Self {
        let transport = sandbox_agents_model::Transport::Proxy {
            base: model_proxy.to_owned(),
            api_key: Some("test-key".into()),
        };
        let client = sandbox_agents_model::ModelClient::new(
            sandbox_agents_model::ModelConfig::new(transport),
        )
        .expect("a model client");
        self.models = ModelClients {
            proxy: Some(client.clone()),
            openai: None,
        };
        self.model_proxy = Some(sandbox_agents_model::Catalogue::new(client));
        self
    }
}

/// A server on a fresh database, set up by `opts`.
pub async fn spawn_app_with_options(opts: AppOptions) -> TestApp {
    init_tracing();
    let (db, options) = fresh_database().await;
    spawn_app_inner(db, options, opts).await
}

/// Another server on an existing database (a restart, a second process), set up by `opts`.
pub async fn spawn_app_on_with_options(
    db: Db,
    db_options: PgConnectOptions,
    opts: AppOptions,
) -> TestApp {
    init_tracing();
    spawn_app_inner(db, db_options, opts).await
}

/// Builds the server with the binary's wiring (`sandbox_agents_server::app::build`) from
/// [`test_config`] with `opts` applied, and serves it on ephemeral ports. What no flag sets
/// (the model clients, the webhook settings' short poll, the heartbeat, a rate limit of the
/// test's choosing, no periodic sweeps) replaces the resolved value. No background worker is
/// started: tests drive the dispatcher, the pool and the reaper themselves.
async fn spawn_app_inner(db: Db, db_options: PgConnectOptions, opts: AppOptions) -> TestApp {
    let AppOptions {
        model_proxy,
        models,
        auth,
        webhooks,
        warm_pool,
        warm_pool_max,
        keep_warm_pool,
        preview_domain,
        allowed_hosts,
        ui,
        local_dir_roots,
        extra_ca_certs,
        max_concurrent_builds,
        s3,
        s3_stage_max_bytes,
        s3_ambient,
        sandbox_disk_mb,
        no_daemon,
        blob_url,
        max_sandboxes,
        max_sandboxes_per_project,
        max_runs,
        max_runs_per_project,
    } = opts;
    let deployment = sandbox_agents_store::deployment::id(&db)
        .await
        .expect("reading the deployment id");
    let data_dir =
        std::env::temp_dir().join(format!("sa-test-data-{}", uuid::Uuid::new_v4().simple()));
    let mut config = test_config(data_dir.clone(), &deployment);
    // The pool the caller gave, as the flag would have made it (what sizes the boots at once).
    config.db_max_connections = db.options().get_max_connections();
    config.warm_pool_size = warm_pool;
    config.warm_pool_max = warm_pool_max;
    config.keep_warm_pool = keep_warm_pool;
    config.preview_domain = preview_domain;
    config.allowed_hosts = allowed_hosts;
    config.local_dir_roots = local_dir_roots;
    config.extra_ca_certs = extra_ca_certs;
    config.max_concurrent_builds = max_concurrent_builds;
    if no_daemon {
        config.sandboxd_bin = Some("off".into());
    }
    config.blob_url = blob_url;
    config.max_sandboxes = max_sandboxes;
    config.max_sandboxes_per_project = max_sandboxes_per_project;
    config.max_runs = max_runs;
    config.max_runs_per_project = max_runs_per_project;
    if let Some(s3) = s3 {
        s3.configure(&mut config);
    }
    if let Some(mb) = sandbox_disk_mb {
        config.sandbox_disk_mb = mb;
    }
    if let Some(max) = s3_stage_max_bytes {
        config.s3_stage_max_bytes = max;
    }
    let listener = tokio::net::TcpListener::bind(config.bind)
        .await
        .expect("binding port 0");
    let preview_listener = tokio::net::TcpListener::bind(
        config
            .preview_bind()
            .expect("the preview listener's address"),
    )
    .await
    .expect("binding port 0");
    let api_addr = listener.local_addr().expect("local addr");
    let preview_addr = preview_listener.local_addr().expect("local addr");
    let mut settings =
        Settings::resolve(&config, api_addr, preview_addr).expect("the test server's settings");
    settings.services.models = models;
    settings.services.sessions.sweep_interval = Duration::from_secs(3600);
    if s3_ambient.is_some() {
        settings.services.sessions.s3.ambient = s3_ambient;
    }
    settings.model_proxy = model_proxy;
    // The test's delivery settings, trusting what the flags said to trust.
    settings.webhooks = WebhookSettings {
        extra_ca: settings.webhooks.extra_ca.clone(),
        ..webhooks
    };
    settings.auth = auth;
    settings.heartbeat = HEARTBEAT;
    settings.ui = ui;
    // Where a local store keeps its files (nothing is there when the blobs are in a bucket).
    let blobs_dir = match &settings.services.blobs {
        sandbox_agents_workspace::BlobLocation::Local(dir) => dir.clone(),
        sandbox_agents_workspace::BlobLocation::S3 { .. } => data_dir.join("blobs"),
    };
    let shutdown = CancellationToken::new();
    let app = sandbox_agents_server::app::build(settings, db.clone(), shutdown.clone())
        .await
        .expect("building the test server");
    let sessions = app.state.sessions.clone();
    let runs = app.state.runs.clone();
    let environments = app.state.environments.clone();
    let dispatcher = app.dispatcher.clone();
    let listeners = sandbox_agents_api::Listeners {
        api: listener,
        preview: Some(preview_listener),
        metrics: None,
    };
    let server = tokio::spawn(app.serve(listeners));
    TestApp {
        base: format!("http://{api_addr}"),
        preview_base: format!("http://{preview_addr}"),
        http: reqwest::Client::new(),
        db,
        db_options,
        shutdown,
        server,
        sessions,
        runs,
        environments,
        data_dir,
        blobs_dir,
        dispatcher,
        keep_sandboxes: false,
    }
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
