//! [`TestAppBuilder`]: a test server built by the binary's own wiring. It starts from the
//! flags' defaults (`Config::defaults`, no environment read) with what every test server
//! changes (ports 0, a temporary data directory, the test image and model, small sandbox
//! limits, no warm pool, the deployment's test master key), resolves them with
//! `Settings::resolve` as `serve` does, and builds with `app::build`. A test names only what
//! it changes: a flag (`with_config`, resolved like the others) or a resolved setting
//! (`with_settings`, for what no flag sets: the model clients, a webhook poll, an ambient S3
//! role).

use crate::{database, init_tracing, TestApp, DEFAULT_MODEL, HEARTBEAT};
use sandbox_agents_agent::ModelClients;
use sandbox_agents_api::auth::Auth;
use sandbox_agents_server::app::Settings;
use sandbox_agents_server::config::Config;
use sandbox_agents_store::Db;
use sandbox_agents_webhooks::{RetryPolicy, WebhookSettings};
use sqlx::postgres::PgConnectOptions;
use std::path::PathBuf;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

type ConfigChange<'a> = Box<dyn FnOnce(&mut Config) + Send + 'a>;
type SettingsChange<'a> = Box<dyn FnOnce(&mut Settings) + Send + 'a>;

/// How a test server differs from the default one: open mode, no model proxy, the test
/// webhook settings, no warm pool, path previews, a fresh database.
#[must_use = "a builder does nothing until `spawn`"]
pub struct TestAppBuilder<'a> {
    db: Option<(Db, PgConnectOptions)>,
    pool_worker: bool,
    config: Vec<ConfigChange<'a>>,
    settings: Vec<SettingsChange<'a>>,
}

impl TestApp {
    /// A server on a fresh database with the test defaults; `.with_…` changes them.
    pub fn builder<'a>() -> TestAppBuilder<'a> {
        TestAppBuilder::new()
    }
}

impl Default for TestAppBuilder<'_> {
    fn default() -> Self {
        Self::new()
    }
}

impl<'a> TestAppBuilder<'a> {
    pub fn new() -> Self {
        TestAppBuilder {
            db: None,
            pool_worker: false,
            config: Vec::new(),
            settings: Vec::new(),
        }
    }

    /// Another server on an existing database (a restart, a second process): its own pool,
    /// hub and `LISTEN` connection, as a second server process would have.
    pub fn with_db(mut self, db: Db, options: PgConnectOptions) -> Self {
        self.db = Some((db, options));
        self
    }

    /// Changes flags before they are resolved, as the command line or the environment would.
    pub fn with_config(mut self, change: impl FnOnce(&mut Config) + Send + 'a) -> Self {
        self.config.push(Box::new(change));
        self
    }

    /// Changes the resolved settings (after the flags and the test defaults).
    pub fn with_settings(mut self, change: impl FnOnce(&mut Settings) + Send + 'a) -> Self {
        self.settings.push(Box::new(change));
        self
    }

    /// Runs go to the LiteLLM-style proxy at `url` (a fake model's root URL), whose catalogue
    /// `GET /api/models` shows.
    pub fn with_model_proxy(self, url: &str) -> Self {
        let transport = sandbox_agents_model::Transport::Proxy {
            base: url.to_owned(),
            api_key: Some("test-key".into()),
        };
        let client = sandbox_agents_model::ModelClient::new(
            sandbox_agents_model::ModelConfig::new(transport),
        )
        .expect("a model client");
        self.with_settings(move |s| {
            s.services.models = ModelClients {
                proxy: Some(client.clone()),
                openai: None,
            };
            s.model_proxy = Some(sandbox_agents_model::Catalogue::new(client));
        })
    }

    /// Webhooks delivered with `webhooks` (trusting what the flags say to trust).
    pub fn with_webhooks(self, webhooks: WebhookSettings) -> Self {
        self.with_settings(move |s| {
            s.webhooks = WebhookSettings {
                extra_ca: s.webhooks.extra_ca.clone(),
                ..webhooks
            }
        })
    }

    /// A warm pool of `size` sandboxes (`--warm-pool-size`; a fixed pool unless
    /// `--warm-pool-max` is set above it). Its refill worker is not started: call
    /// `sessions.start_pool()` as a server would, or `sessions.fill_pool()` to fill in step.
    pub fn with_pool(self, size: usize) -> Self {
        self.with_config(move |c| c.warm_pool_size = size)
    }

    /// Starts the warm pool's refill worker, as a server does (the first fill runs in the
    /// background: poll, or call `sessions.fill_pool()`).
    pub fn with_pool_worker(mut self) -> Self {
        self.pool_worker = true;
        self
    }

    /// Sandboxes on `plane`, the in-memory backend (`BackendSettings::Memory`), instead of
    /// Docker: no container, no image, a command interpreter for what the tests run. Every
    /// server of a test given the same plane shares it, as processes share a Docker Engine.
    /// The server's default image is one of the plane's.
    pub fn with_memory_backend(
        self,
        plane: &sandbox_agents_sandbox::memory::MemoryBackend,
    ) -> Self {
        let plane = plane.clone();
        self.with_settings(move |s| {
            let plane = plane.with_image(&s.services.sessions.default_image);
            s.services.backend =
                sandbox_agents_sandbox::BackendSettings::Memory(std::sync::Arc::new(plane));
        })
    }

    /// Sandboxes on Kubernetes (`--backend kubernetes`): the test cluster's namespace `ns`,
    /// under its service account (the Role of `deploy/kubernetes/` only), with the test
    /// daemon image, reaching daemons over the pod network (the test cluster's host routes to
    /// its pods; [`Self::with_kubernetes_route`] for another route).
    pub fn with_kubernetes(self, ns: &crate::kube::TestNamespace) -> Self {
        self.with_kubernetes_route(ns, "pod-network")
    }

    /// As [`Self::with_kubernetes`], reaching daemons by `route`
    /// (`--kubernetes-daemon-route`: `pod-network`, `port-forward` or `auto`).
    pub fn with_kubernetes_route(self, ns: &crate::kube::TestNamespace, route: &str) -> Self {
        let (namespace, kubeconfig) = (ns.name.clone(), ns.kubeconfig.clone());
        let sandboxd_image = crate::kube::sandboxd_image();
        let route = route.to_owned();
        self.with_config(move |c| {
            c.backend = "kubernetes".to_owned();
            c.kubernetes_namespace = namespace;
            c.kubernetes_kubeconfig = Some(kubeconfig);
            c.kubernetes_sandboxd_image = Some(sandboxd_image);
            c.kubernetes_daemon_route = route;
        })
    }

    /// The deployment's shared token is `token` (not open mode).
    pub fn with_token(self, token: &str) -> Self {
        self.with_auth(Auth::new(Some(token)))
    }

    /// Credentials are checked with `auth`.
    pub fn with_auth(self, auth: Auth) -> Self {
        self.with_settings(move |s| s.auth = auth)
    }

    /// Builds the server and serves it on ephemeral ports; panics when it cannot start.
    pub async fn spawn(self) -> TestApp {
        self.try_spawn().await.expect("building the test server")
    }

    /// Builds the server as [`Self::spawn`] does, or says why it cannot start (flags that do
    /// not resolve, a blob store that is not usable, ...). No background worker is started:
    /// tests drive the dispatcher, the pool and the reaper themselves.
    pub async fn try_spawn(self) -> anyhow::Result<TestApp> {
        init_tracing();
        let (db, db_options) = match self.db {
            Some(db) => db,
            None => database::fresh_database().await,
        };
        let deployment = sandbox_agents_store::deployment::id(&db)
            .await
            .expect("reading the deployment id");
        let data_dir =
            std::env::temp_dir().join(format!("sa-test-data-{}", uuid::Uuid::new_v4().simple()));
        // Whatever a start that fails left under it goes with it.
        let dir_guard = RemoveOnDrop(Some(data_dir.clone()));
        let mut config = test_config(data_dir.clone(), &deployment);
        // The pool the caller gave, as the flag would have made it (what sizes the boots at once).
        config.db_max_connections = db.options().get_max_connections();
        for change in self.config {
            change(&mut config);
        }
        let listener = tokio::net::TcpListener::bind(config.bind).await?;
        let preview_listener = tokio::net::TcpListener::bind(config.preview_bind()?).await?;
        let api_addr = listener.local_addr()?;
        let preview_addr = preview_listener.local_addr()?;
        let mut settings = Settings::resolve(&config, api_addr, preview_addr)?;
        test_settings(&mut settings);
        for change in self.settings {
            change(&mut settings);
        }
        // Where a local store keeps its files (nothing is there when the blobs are in a bucket).
        let blobs_dir = match &settings.services.blobs {
            sandbox_agents_workspace::BlobLocation::Local(dir) => dir.clone(),
            sandbox_agents_workspace::BlobLocation::S3 { .. } => data_dir.join("blobs"),
        };
        let shutdown = CancellationToken::new();
        let app = sandbox_agents_server::app::build(settings, db.clone(), shutdown.clone())
            .await
            .inspect_err(|_| shutdown.cancel())?;
        // From here the `TestApp` removes it when dropped.
        let mut dir_guard = dir_guard;
        dir_guard.0 = None;
        let sessions = app.state.sessions.clone();
        let runs = app.state.runs.clone();
        let schedules = app.state.schedules.clone();
        let environments = app.state.environments.clone();
        let dispatcher = app.dispatcher.clone();
        let listeners = sandbox_agents_api::Listeners {
            api: listener,
            preview: Some(preview_listener),
            metrics: None,
        };
        if self.pool_worker {
            sessions.start_pool();
        }
        let server = tokio::spawn(app.serve(listeners));
        Ok(TestApp {
            base: format!("http://{api_addr}"),
            preview_base: format!("http://{preview_addr}"),
            http: reqwest::Client::new(),
            db,
            db_options,
            shutdown,
            server,
            sessions,
            runs,
            schedules,
            environments,
            data_dir,
            blobs_dir,
            dispatcher,
            keep_sandboxes: false,
        })
    }
}

/// Removes a directory when dropped.
struct RemoveOnDrop(Option<PathBuf>);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        if let Some(dir) = self.0.take() {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// The flags of a test server: the defaults, with listeners on port 0 of loopback, state
/// under `data_dir`, the test image and model, small sandbox limits, no warm pool (0 keeps
/// boots deterministic; pool tests ask for one), no rate limit, the S3 region named (so
/// `AWS_REGION` plays no part) and the deployment's test master key. No environment variable
/// but `SANDBOX_AGENTS_IMAGE` and `SANDBOX_AGENTS_SANDBOXD_BIN` plays a part, so a developer's
/// other `SANDBOX_AGENTS_*` settings never change a test.
fn test_config(data_dir: PathBuf, deployment: &str) -> Config {
    let loopback_any_port = "127.0.0.1:0".parse().expect("an address");
    Config {
        bind: loopback_any_port,
        preview_bind: Some(loopback_any_port),
        data_dir,
        default_model: DEFAULT_MODEL.into(),
        image: crate::test_image(),
        sandboxd_bin: Some(crate::test_sandboxd()),
        sandbox_memory_mb: 512,
        sandbox_max_memory_mb: 4096,
        sandbox_pids: 256,
        warm_pool_size: 0,
        warm_pool_max: 0,
        s3_region: Some("us-east-1".into()),
        rate_limit_per_minute: 0,
        rate_limit_burst: 0,
        master_key: Some(test_master_key_text(deployment)),
        ..Config::defaults()
    }
}

/// What no flag sets, as every test server has it: no model client (a test names its fake
/// model), no periodic sweep (a test drives the workers), quick webhook deliveries, open mode
/// and quick heartbeats.
fn test_settings(s: &mut Settings) {
    s.services.models = ModelClients::default();
    s.model_proxy = None;
    s.services.sessions.sweep_interval = Duration::from_secs(3600);
    s.webhooks = WebhookSettings {
        extra_ca: s.webhooks.extra_ca.clone(),
        ..test_webhook_settings()
    };
    s.auth = Auth::new(None);
    s.heartbeat = HEARTBEAT;
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

/// The master key of a test deployment as `--master-key` takes it (64 hex digits): derived
/// from its id, so that every server a test starts on the same database (a restart, a second
/// process) opens what another sealed, as the processes of a real deployment share
/// `SANDBOX_AGENTS_MASTER_KEY`.
fn test_master_key_text(deployment: &str) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(format!("test master key {deployment}").as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}
