//! Test support: a fresh database per test, [`spawn_app`] (a real server on port 0 that the
//! test owns), seeding helpers and an SSE reader.
//!
//! Databases live in one shared cluster: the server named by `SANDBOX_AGENTS_TEST_DATABASE_URL`
//! when set (the test script sets it), otherwise an embedded cluster under
//! `target/test-pg` that the first test process starts and later ones adopt.

pub mod receiver;
pub mod sse;

use sandbox_agents_api::{ApiSettings, AppState, BackendInfo};
use sandbox_agents_domain::agent::{AgentCreate, AgentRecord};
use sandbox_agents_domain::event::NewEvent;
use sandbox_agents_domain::{AgentId, SessionId};
use sandbox_agents_runtime::blobs::LocalBlobStore;
use sandbox_agents_runtime::manifest::ManifestPolicy;
use sandbox_agents_runtime::{Runtime, RuntimeSettings};
use sandbox_agents_sandbox::docker::DockerBackend;
use sandbox_agents_sandbox::unavailable::Unavailable;
use sandbox_agents_sandbox::{Limits, SandboxBackend};
use sandbox_agents_store::embedded::EmbeddedPostgres;
use sandbox_agents_store::projects::DEFAULT_PROJECT;
use sandbox_agents_store::{agents, events, sessions, Db, EventHub};
use sandbox_agents_webhooks::{Dispatcher, RetryPolicy, WebhookSettings, Webhooks};
use sqlx::postgres::PgConnectOptions;
use sqlx::{ConnectOptions, Connection};
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::OnceCell;
use tokio_util::sync::CancellationToken;

pub const DEFAULT_MODEL: &str = "test-default-model";
/// Test servers ping after this much silence, so heartbeats can be observed quickly.
pub const HEARTBEAT: Duration = Duration::from_millis(300);

/// The shared cluster: options for its maintenance database, and a URL for it that
/// [`database_url`] rewrites to name another database.
struct Cluster {
    admin: PgConnectOptions,
    url: String,
}

static CLUSTER: OnceCell<Cluster> = OnceCell::const_new();

async fn cluster() -> &'static Cluster {
    CLUSTER
        .get_or_init(|| async {
            if let Ok(url) = std::env::var("SANDBOX_AGENTS_TEST_DATABASE_URL") {
                let admin = PgConnectOptions::from_str(&url)
                    .expect("SANDBOX_AGENTS_TEST_DATABASE_URL is a valid URL");
                return Cluster { admin, url };
            }
            let pg = start_shared_embedded().await;
            let admin = pg.connect_options_for("postgres");
            let url = pg.database_url().replace("/sandbox_agents?", "/postgres?");
            // The cluster outlives this process on purpose: other test processes adopt it.
            std::mem::forget(pg);
            Cluster { admin, url }
        })
        .await
}

/// A URL for database `name` in the shared cluster, e.g. for a server started as a process.
pub async fn database_url(name: &str) -> String {
    let url = &cluster().await.url;
    let (base, query) = url
        .split_once('?')
        .map_or((url.as_str(), None), |(b, q)| (b, Some(q)));
    let (server, _) = base.rsplit_once('/').expect("a database URL has a path");
    match query {
        Some(q) => format!("{server}/{name}?{q}"),
        None => format!("{server}/{name}"),
    }
}

fn workspace_target() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target")
}

/// Starts (or adopts) the shared test cluster, serialised across processes by a lock
/// directory (mkdir is atomic).
async fn start_shared_embedded() -> EmbeddedPostgres {
    let target = workspace_target();
    std::fs::create_dir_all(&target).expect("creating target/");
    let lock = target.join("test-pg.lock");
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        match std::fs::create_dir(&lock) {
            Ok(()) => break,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                let stale = std::fs::metadata(&lock)
                    .and_then(|m| m.modified())
                    .map(|t| t.elapsed().unwrap_or_default() > Duration::from_secs(120))
                    .unwrap_or(false);
                if stale {
                    let _ = std::fs::remove_dir(&lock);
                }
                assert!(
                    Instant::now() < deadline,
                    "timed out waiting for {}",
                    lock.display()
                );
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => panic!("cannot create {}: {e}", lock.display()),
        }
    }
    let started = EmbeddedPostgres::start(&target.join("test-pg")).await;
    let _ = std::fs::remove_dir(&lock);
    started.expect("starting the shared test PostgreSQL cluster")
}

/// A new, migrated database of its own for one test.
pub async fn fresh_database() -> (Db, PgConnectOptions) {
    let (db, options, _) = fresh_named_database().await;
    (db, options)
}

/// The same, with the database's name (for [`database_url`]).
pub async fn fresh_named_database() -> (Db, PgConnectOptions, String) {
    let admin = &cluster().await.admin;
    let name = format!("test_{}", uuid::Uuid::new_v4().simple());
    let mut conn = admin
        .connect()
        .await
        .expect("connecting to the test cluster");
    // Identifiers cannot be bound as parameters; the name is generated above.
    sqlx::query(&format!("create database {name}"))
        .execute(&mut conn)
        .await
        .expect("creating a test database");
    conn.close().await.ok();
    let options = admin.clone().database(&name);
    let db = sandbox_agents_store::connect(options.clone(), 20)
        .await
        .expect("connecting to the test database");
    sandbox_agents_store::migrate(&db)
        .await
        .expect("migrating the test database");
    (db, options, name)
}

/// A running server owned by a test.
pub struct TestApp {
    pub base: String,
    pub http: reqwest::Client,
    pub db: Db,
    pub db_options: PgConnectOptions,
    pub shutdown: CancellationToken,
    pub server: tokio::task::JoinHandle<std::io::Result<()>>,
    /// The session runtime, for tests that drive its workers step by step.
    pub runtime: Runtime,
    /// This server's blob store directory.
    pub blobs_dir: PathBuf,
    /// The webhook dispatcher, not running: drive it with `run_once`, or start its loop with
    /// [`TestApp::start_dispatcher`].
    pub dispatcher: Dispatcher,
}

/// The image tests boot (the one `scripts/test` builds).
pub fn test_image() -> String {
    std::env::var("SANDBOX_AGENTS_IMAGE").unwrap_or_else(|_| "sandbox-agents-sandbox:1".into())
}

/// The runtime a test server uses: real Docker (or, when it is unreachable, a backend that
/// says so on every call), blobs in a directory of its own, no periodic workers.
pub async fn test_runtime(db: &Db, shutdown: CancellationToken) -> (Runtime, PathBuf) {
    test_runtime_with_models(db, shutdown, Default::default()).await
}

/// [`test_runtime`] whose runs use `models`.
pub async fn test_runtime_with_models(
    db: &Db,
    shutdown: CancellationToken,
    models: sandbox_agents_runtime::runs::ModelClients,
) -> (Runtime, PathBuf) {
    test_runtime_full(db, shutdown, models, 0).await
}

/// [`test_runtime_with_models`] with a warm pool of `warm_pool` sandboxes (0: none, which
/// keeps boots deterministic; pool tests ask for one).
pub async fn test_runtime_full(
    db: &Db,
    shutdown: CancellationToken,
    models: sandbox_agents_runtime::runs::ModelClients,
    warm_pool: usize,
) -> (Runtime, PathBuf) {
    let deployment = sandbox_agents_store::deployment::id(db)
        .await
        .expect("reading the deployment id");
    let backend: Arc<dyn SandboxBackend> = match DockerBackend::connect(&deployment).await {
        Ok(b) => Arc::new(b),
        Err(e) => Arc::new(Unavailable {
            name: "docker",
            reason: e.to_string(),
        }),
    };
    let blobs_dir =
        std::env::temp_dir().join(format!("sa-test-blobs-{}", uuid::Uuid::new_v4().simple()));
    let blobs = LocalBlobStore::new(&blobs_dir).expect("creating a blob store");
    let settings = RuntimeSettings {
        default_image: test_image(),
        default_model: DEFAULT_MODEL.into(),
        limits: Limits {
            cpus: 1.0,
            memory_bytes: 512 * 1024 * 1024,
            pids: 256,
        },
        idle_ttl: Duration::from_secs(1800),
        sweep_interval: Duration::from_secs(3600),
        manifest: ManifestPolicy::default(),
        git_known_hosts: blobs_dir.with_extension("known_hosts"),
        warm_pool,
        master_key: test_master_key(&deployment),
    };
    (
        Runtime::new(
            db.clone(),
            backend,
            Arc::new(blobs),
            settings,
            models,
            shutdown,
        ),
        blobs_dir,
    )
}

/// The master key of a test deployment: derived from its id, so that every server a test
/// starts on the same database (a restart, a second process) opens what another sealed, as the
/// processes of a real deployment share `SANDBOX_AGENTS_MASTER_KEY`.
pub fn test_master_key(deployment: &str) -> sandbox_agents_vault::MasterKey {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(format!("test master key {deployment}").as_bytes());
    sandbox_agents_vault::MasterKey::from_bytes(&digest).expect("32 bytes")
}

/// Logs to the test's output when `TEST_LOG` is set (e.g. `TEST_LOG=debug`).
fn init_tracing() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        if let Ok(filter) = std::env::var("TEST_LOG") {
            let _ = tracing_subscriber::fmt()
                .with_env_filter(filter)
                .with_test_writer()
                .try_init();
        }
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
    let models = sandbox_agents_runtime::runs::ModelClients {
        proxy: Some(client.clone()),
        openai: None,
    };
    spawn_app_full(
        db,
        options,
        Some(sandbox_agents_api::routes::models::Catalogue::new(client)),
        models,
    )
    .await
}

async fn spawn_app_with(
    db: Db,
    db_options: PgConnectOptions,
    model_proxy: Option<sandbox_agents_api::routes::models::Catalogue>,
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
    }
}

/// A server on a fresh database whose webhooks use `settings`.
pub async fn spawn_app_with_webhooks(settings: WebhookSettings) -> TestApp {
    init_tracing();
    let (db, options) = fresh_database().await;
    let open = sandbox_agents_api::auth::Auth::new(None);
    spawn_app_inner(db, options, None, Default::default(), open, settings, 0).await
}

/// A server with a warm pool of `size` sandboxes, on a fresh database; its refill worker is
/// started (the first fill runs in the background: poll, or call `runtime.fill_pool()`).
pub async fn spawn_app_pooled(size: usize) -> TestApp {
    init_tracing();
    let (db, options) = fresh_database().await;
    let app = spawn_app_on_pooled(db, options, size).await;
    app.runtime.start_pool();
    app
}

/// A server with a warm pool of `size` on an existing database (a second process, or a
/// restart). Its refill worker is not started: call `runtime.reconcile_on_start()` and
/// `runtime.start_pool()` as a server would, or `runtime.fill_pool()` to fill in step.
pub async fn spawn_app_on_pooled(db: Db, db_options: PgConnectOptions, size: usize) -> TestApp {
    init_tracing();
    let open = sandbox_agents_api::auth::Auth::new(None);
    spawn_app_inner(
        db,
        db_options,
        None,
        Default::default(),
        open,
        test_webhook_settings(),
        size,
    )
    .await
}

/// A server whose `GET /api/models` and runs use the given clients.
pub async fn spawn_app_full(
    db: Db,
    db_options: PgConnectOptions,
    model_proxy: Option<sandbox_agents_api::routes::models::Catalogue>,
    models: sandbox_agents_runtime::runs::ModelClients,
) -> TestApp {
    let open = sandbox_agents_api::auth::Auth::new(None);
    spawn_app_inner(
        db,
        db_options,
        model_proxy,
        models,
        open,
        test_webhook_settings(),
        0,
    )
    .await
}

/// A server on a fresh database whose shared token is `token` (not open mode).
pub async fn spawn_app_with_token(token: &str) -> TestApp {
    spawn_app_with_auth(sandbox_agents_api::auth::Auth::new(Some(token))).await
}

/// A server on a fresh database that checks credentials with `auth`.
pub async fn spawn_app_with_auth(auth: sandbox_agents_api::auth::Auth) -> TestApp {
    init_tracing();
    let (db, options) = fresh_database().await;
    spawn_app_inner(
        db,
        options,
        None,
        Default::default(),
        auth,
        test_webhook_settings(),
        0,
    )
    .await
}

async fn spawn_app_inner(
    db: Db,
    db_options: PgConnectOptions,
    model_proxy: Option<sandbox_agents_api::routes::models::Catalogue>,
    models: sandbox_agents_runtime::runs::ModelClients,
    auth: sandbox_agents_api::auth::Auth,
    webhook_settings: WebhookSettings,
    warm_pool: usize,
) -> TestApp {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("binding port 0");
    let base = format!("http://{}", listener.local_addr().expect("local addr"));
    let shutdown = CancellationToken::new();
    let (runtime, blobs_dir) = test_runtime_full(&db, shutdown.clone(), models, warm_pool).await;
    let hub = EventHub::start(db.clone(), shutdown.clone());
    runtime.attach_hub(hub.clone());
    let webhooks = Webhooks::new(webhook_settings, runtime.settings().master_key.clone())
        .expect("webhook settings");
    let dispatcher = Dispatcher::new(db.clone(), webhooks.clone());
    let state = AppState {
        webhooks,
        runtime: runtime.clone(),
        db: db.clone(),
        hub,
        settings: Arc::new(ApiSettings {
            default_model: DEFAULT_MODEL.into(),
            backends: vec![BackendInfo {
                name: "docker".into(),
                default: true,
            }],
            heartbeat: HEARTBEAT,
            model_proxy,
            public_url: base.clone(),
            preview_key: sandbox_agents_api::preview::PreviewKey::random(),
            auth: Arc::new(auth),
        }),
        shutdown: shutdown.clone(),
    };
    let server = tokio::spawn(sandbox_agents_api::serve(listener, state));
    TestApp {
        base,
        http: reqwest::Client::new(),
        db,
        db_options,
        shutdown,
        server,
        runtime,
        blobs_dir,
        dispatcher,
    }
}

/// A test that fails halfway must not leave sandboxes behind: when its server is dropped,
/// every container of its deployment (each test database is a deployment of its own) is
/// removed, from a thread with a runtime of its own since `Drop` cannot await.
impl Drop for TestApp {
    fn drop(&mut self) {
        // Pooled sandboxes carry the deployment label too, so the sweep below takes them; the
        // refill worker is told to stop first (`stop` also waits for it).
        self.shutdown.cancel();
        let db = self.db.clone();
        let options = self.db_options.clone();
        let _ = std::thread::spawn(move || {
            let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            rt.block_on(async move {
                // The test's own pool belongs to its runtime; use a fresh connection here.
                drop(db);
                let Ok(pool) = sandbox_agents_store::connect(options, 1).await else {
                    return;
                };
                let Ok(deployment) = sandbox_agents_store::deployment::id(&pool).await else {
                    return;
                };
                let Ok(docker) = DockerBackend::connect(&deployment).await else {
                    return;
                };
                for c in docker.list().await.unwrap_or_default() {
                    let _ = docker.remove(&c.id).await;
                }
                // Snapshot images keep the deployment's label; nothing else uses them.
                for image in docker.deployment_images().await.unwrap_or_default() {
                    let _ = docker.remove_image(&image).await;
                }
                pool.close().await;
            });
        })
        .join();
    }
}

impl TestApp {
    /// Runs the webhook dispatcher's loop until the server stops, as the binary does.
    pub fn start_dispatcher(&self) {
        self.dispatcher.spawn(self.shutdown.clone());
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.base, path)
    }

    /// Stops the server and waits for it, failing if graceful shutdown hangs. The warm
    /// pool's refill worker is waited for too, so no sandbox it is creating appears after
    /// the drop has removed this deployment's containers.
    pub async fn stop(mut self) {
        self.shutdown.cancel();
        tokio::time::timeout(Duration::from_secs(60), self.runtime.stop_pool())
            .await
            .expect("the warm pool's worker stopped in time");
        let server = std::mem::replace(&mut self.server, tokio::spawn(async { Ok(()) }));
        tokio::time::timeout(Duration::from_secs(10), server)
            .await
            .expect("the server shut down in time")
            .expect("the server task did not panic")
            .expect("the server returned cleanly");
    }

    /// An agent in the default project, straight into the store.
    pub async fn seed_agent(&self, slug: &str) -> AgentRecord {
        let body: AgentCreate =
            serde_json::from_value(serde_json::json!({ "slug": slug, "name": slug }))
                .expect("agent body");
        let (slug, spec) = body.into_spec().expect("a valid agent");
        agents::insert(&self.db, DEFAULT_PROJECT, &slug, &spec)
            .await
            .expect("seeding an agent")
    }

    /// A session row (no container: these tests are about the log).
    pub async fn seed_session(&self, agent: AgentId) -> SessionId {
        let id = SessionId::new();
        sessions::insert(
            &self.db,
            &sessions::NewSession {
                id,
                project: DEFAULT_PROJECT,
                agent,
                title: String::new(),
                backend: "docker".into(),
                exposed_ports: Vec::new(),
                model: None,
                instructions: None,
                manifest: None,
                metadata: Default::default(),
                image: None,
                secret_bindings: Vec::new(),
                boot_snapshot_id: None,
            },
        )
        .await
        .expect("seeding a session");
        id
    }

    /// Appends `n` `agent.message` events numbered from `from`, in one transaction.
    pub async fn append_messages(&self, session: SessionId, from: usize, n: usize) -> Vec<i64> {
        let batch: Vec<NewEvent> = (from..from + n)
            .map(|i| {
                NewEvent::new(
                    sandbox_agents_domain::event::EventType::AgentMessage,
                    None,
                    serde_json::json!({ "text": format!("message {i}") }),
                )
            })
            .collect();
        events::append_now(&self.db, session, &batch)
            .await
            .expect("appending")
            .into_iter()
            .map(|e| e.seq)
            .collect()
    }
}

impl TestApp {
    /// Creates an agent through the API (`body` is merged over a minimal one).
    pub async fn create_agent(&self, slug: &str, extra: serde_json::Value) -> serde_json::Value {
        let mut body = serde_json::json!({"slug": slug, "name": slug});
        for (k, v) in extra.as_object().expect("an object") {
            body[k] = v.clone();
        }
        let r = self
            .http
            .post(self.url("/api/agents"))
            .json(&body)
            .send()
            .await
            .expect("POST /api/agents");
        assert_eq!(r.status(), 201, "{}", r.text().await.unwrap_or_default());
        r.json().await.expect("an Agent")
    }

    /// `POST /api/sessions`, asserting the 202.
    pub async fn create_session(&self, body: serde_json::Value) -> serde_json::Value {
        let r = self
            .http
            .post(self.url("/api/sessions"))
            .json(&body)
            .send()
            .await
            .expect("POST /api/sessions");
        assert_eq!(r.status(), 202, "{}", r.text().await.unwrap_or_default());
        r.json().await.expect("a Session")
    }

    /// `GET /api/sessions/{id}` as JSON.
    pub async fn session(&self, id: &str) -> serde_json::Value {
        self.http
            .get(self.url(&format!("/api/sessions/{id}")))
            .send()
            .await
            .expect("GET session")
            .json()
            .await
            .expect("JSON")
    }

    /// Polls the session until its status is `status` (or `error`, which fails the test
    /// unless asked for), within `within`.
    pub async fn wait_for_status(
        &self,
        id: &str,
        status: &str,
        within: Duration,
    ) -> serde_json::Value {
        let deadline = Instant::now() + within;
        loop {
            let s = self.session(id).await;
            if s["status"] == status {
                return s;
            }
            assert!(
                s["status"] != "error" || status == "error",
                "the session failed: {}",
                s["error"]
            );
            assert!(
                Instant::now() < deadline,
                "session {id} did not reach {status} in {within:?}: {s}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// `POST .../exec`, returning (exit_code, stdout, stderr).
    pub async fn exec(&self, id: &str, command: &str) -> (i64, String, String) {
        let r = self
            .http
            .post(self.url(&format!("/api/sessions/{id}/exec")))
            .json(&serde_json::json!({"command": command, "timeout": 30}))
            .send()
            .await
            .expect("POST exec");
        assert_eq!(r.status(), 200, "{}", r.text().await.unwrap_or_default());
        let v: serde_json::Value = r.json().await.expect("ExecResult");
        (
            v["exit_code"].as_i64().expect("exit_code"),
            v["stdout"].as_str().unwrap_or_default().to_owned(),
            v["stderr"].as_str().unwrap_or_default().to_owned(),
        )
    }

    /// The event types of a session's log, in order.
    pub async fn event_types(&self, id: &str) -> Vec<String> {
        let page: Vec<serde_json::Value> = self
            .http
            .get(self.url(&format!("/api/sessions/{id}/events?limit=1000")))
            .send()
            .await
            .expect("GET events")
            .json()
            .await
            .expect("events");
        page.iter()
            .map(|e| e["type"].as_str().unwrap_or_default().to_owned())
            .collect()
    }
}
