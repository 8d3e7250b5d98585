//! The wiring: the services and the API's state built from resolved settings. The binary
//! (`serve`, `teardown`) and the test harness (`testkit::spawn_app*`) both build their server
//! here, so a test runs the wiring that ships; what differs is only the settings they pass
//! and which background workers they start (the binary starts them all, a test drives them).

use crate::config::Config;
use anyhow::Context;
use sandbox_agents_agent::{ModelClients, Runs};
use sandbox_agents_api::auth::{Auth, RateLimit};
use sandbox_agents_api::preview::PreviewKey;
use sandbox_agents_api::ui::UiAssets;
use sandbox_agents_api::web::{WebOptions, WebSettings};
use sandbox_agents_api::{ApiSettings, AppState, BackendInfo};
use sandbox_agents_credentials::Credentials;
use sandbox_agents_domain::ca::ExtraCaCerts;
use sandbox_agents_environments::{EnvironmentSettings, Environments};
use sandbox_agents_model::Catalogue;
use sandbox_agents_sandbox::{BackendSettings, Limits};
use sandbox_agents_sessions::{SessionSettings, Sessions};
use sandbox_agents_skills::Bundles;
use sandbox_agents_store::{Db, EventHub};
use sandbox_agents_vault::MasterKey;
use sandbox_agents_webhooks::{Dispatcher, WebhookSettings, Webhooks};
use sandbox_agents_workspace::{BlobLocation, BlobStore, ManifestPolicy};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// How often the periodic workers (idle reaper, reconciler, garbage) sweep in a server.
const SWEEP_INTERVAL: Duration = Duration::from_secs(30);

/// What the services are built from: the flags resolved into values (the master key read or
/// created, paths made absolute) and the model clients from the environment.
pub struct ServiceSettings {
    pub master_key: MasterKey,
    pub sessions: SessionSettings,
    /// Where blobs are kept: `--blob-url`, else `<data-dir>/blobs`.
    pub blobs: BlobLocation,
    /// The known_hosts file git uses with deploy keys.
    pub git_known_hosts: PathBuf,
    /// The CA bundle git run by the control plane trusts (`GIT_SSL_CAINFO`), when there are
    /// extra CA certificates.
    pub git_ca_bundle: Option<PathBuf>,
    /// The clients runs call models with.
    pub models: ModelClients,
    /// `--max-runs`, `--max-runs-per-project`: the limits on turns in flight.
    pub run_limits: sandbox_agents_store::admission::Limits,
    /// Environment image builds.
    pub environments: EnvironmentSettings,
    /// The backend sandboxes run on, and its settings (`--backend` and its flags).
    pub backend: BackendSettings,
    /// The egress proxy (`--egress-proxy`); `None`: sandboxes have the backend's network.
    pub egress: Option<crate::egress::EgressSettings>,
    /// `--mcp-allow-private`: agents' remote MCP servers may be on private addresses.
    pub mcp_allow_private: bool,
    /// `--e2b-domain`: E2B sandboxes are also reached by host name under it.
    pub e2b_domain: Option<String>,
}

impl ServiceSettings {
    /// The flags' values, with the model clients that `LITELLM_PROXY_*` and `OPENAI_*` name.
    pub fn resolve(config: &Config) -> anyhow::Result<Self> {
        let extra_ca = config.extra_ca_certs()?;
        let s3 = sandbox_agents_workspace::s3::S3Settings {
            extra_ca: extra_ca.clone(),
            ..config.s3_settings()
        };
        sandbox_agents_workspace::s3::check(&s3).map_err(anyhow::Error::msg)?;
        let master_key = config.master_key()?;
        Ok(ServiceSettings {
            backend: config.backend_settings(&master_key)?,
            master_key,
            sessions: SessionSettings {
                default_image: config.image.clone(),
                runtime_classes: config.runtime_classes()?,
                default_model: config.default_model.clone(),
                default_max_input_tokens: config.default_max_input_tokens,
                limits: Limits {
                    cpus: config.sandbox_cpus,
                    memory_bytes: config.sandbox_memory_mb * 1024 * 1024,
                    pids: config.sandbox_pids,
                },
                max_cpus: config.sandbox_max_cpus.unwrap_or_else(|| {
                    std::thread::available_parallelism().map_or(1.0, |n| n.get() as f64)
                }),
                max_memory_mb: config.sandbox_max_memory_mb,
                idle_ttl: Duration::from_secs(config.idle_ttl_seconds),
                sweep_interval: SWEEP_INTERVAL,
                disk_limit: (config.sandbox_disk_mb > 0)
                    .then(|| config.sandbox_disk_mb.saturating_mul(1024 * 1024)),
                disk_check_interval: Duration::from_secs(config.sandbox_disk_check_seconds),
                manifest: ManifestPolicy {
                    local_dir_roots: config.local_dir_roots.clone(),
                },
                warm_pool: config.warm_pool_size,
                warm_pool_max: config.warm_pool_max.max(config.warm_pool_size),
                keep_warm_pool: config.keep_warm_pool,
                extra_ca: extra_ca.clone(),
                // Set where the proxy is started (`services`): only a Docker backend runs it.
                egress_proxy: false,
                s3,
                admission: sandbox_agents_store::admission::Limits {
                    deployment: config.max_sandboxes.map(i64::from),
                    project: config.max_sandboxes_per_project.map(i64::from),
                },
                max_concurrent_boots: config.max_concurrent_boots(),
            },
            blobs: config.blob_location()?,
            git_known_hosts: config.git_known_hosts()?,
            git_ca_bundle: config.git_ca_bundle(extra_ca.as_ref())?,
            models: model_clients(extra_ca.as_ref()),
            run_limits: sandbox_agents_store::admission::Limits {
                deployment: config.max_runs.map(i64::from),
                project: config.max_runs_per_project.map(i64::from),
            },
            environments: EnvironmentSettings {
                max_concurrent_builds: config.max_concurrent_builds,
                sweep_interval: SWEEP_INTERVAL,
            },
            egress: config.egress_settings()?,
            mcp_allow_private: config.mcp_allow_private,
            e2b_domain: config.e2b_domain.clone(),
        })
    }
}

/// Everything a serving process is built from: the services' settings and the API's (what
/// browsers see of it, credentials, webhooks, the model catalogue).
pub struct Settings {
    pub services: ServiceSettings,
    /// Public URLs, the hosts each listener answers for, preview URLs.
    pub web: WebSettings,
    pub webhooks: WebhookSettings,
    /// The LiteLLM proxy whose catalogue `GET /api/models` shows.
    pub model_proxy: Option<Catalogue>,
    /// The shared token and the per-credential rate limit.
    pub auth: Auth,
    /// Silence after which an event stream writes `: ping`.
    pub heartbeat: Duration,
    /// The web UI's files: the ones embedded in the binary (tests may give others).
    pub ui: UiAssets,
}

impl Settings {
    /// The flags resolved for listeners bound to `api` and `preview` (the real ports when the
    /// flags asked for port 0).
    pub fn resolve(config: &Config, api: SocketAddr, preview: SocketAddr) -> anyhow::Result<Self> {
        let services = ServiceSettings::resolve(config)?;
        let extra_ca = services.sessions.extra_ca.clone();
        Ok(Settings {
            web: web_settings(config, api, preview)?,
            webhooks: sandbox_agents_webhooks::WebhookSettings {
                extra_ca: extra_ca.clone(),
                ..config.webhook_settings()?
            },
            model_proxy: model_proxy(extra_ca.as_ref()),
            services,
            auth: Auth::new(config.token.as_deref()).with_rate_limit(Some(RateLimit {
                per_minute: config.rate_limit_per_minute,
                burst: config.rate_limit_burst,
            })),
            heartbeat: sandbox_agents_api::routes::events::HEARTBEAT,
            ui: UiAssets::Embedded,
        })
    }
}

/// The services every command that touches sessions needs.
pub struct Services {
    pub sessions: Sessions,
    /// The run loop, registered with `sessions`.
    pub runs: Runs,
    pub credentials: Credentials,
    /// Skill bundles, over the same blob store.
    pub bundles: Bundles,
    /// Environments and their image builds (over the lifecycle's backend).
    pub environments: Environments,
    /// What writes the egress proxy's observations (with `--egress-proxy`): finished after
    /// the sessions drain, before the database closes (dropped, it stops).
    pub egress_writer: Option<crate::egress::Writer>,
}

/// The services: the sandbox lifecycle (the Docker backend of this deployment, the blob
/// store, its settings), the run loop and environments built around it, and the credentials
/// both use. A backend that cannot be reached is logged and replaced by one that refuses every
/// operation with the reason, so the API still answers.
pub async fn services(
    settings: ServiceSettings,
    db: &Db,
    shutdown: CancellationToken,
) -> anyhow::Result<Services> {
    // Before anything records: what the services count from here on is in `/metrics`.
    sandbox_agents_api::metrics::install();
    let deployment = sandbox_agents_store::deployment::id(db)
        .await
        .context("reading the deployment id")?;
    let mut settings = settings;
    // Before the egress proxy, which opens the credentials each boot sealed for it.
    let credentials = Credentials::new(
        db.clone(),
        settings.master_key.clone(),
        settings.git_known_hosts,
    )
    .with_git_ca_bundle(settings.git_ca_bundle);
    let mut backend_settings = settings.backend;
    let mut egress_writer = None;
    if let Some(egress) = &settings.egress {
        match &mut backend_settings {
            BackendSettings::Docker(docker) => {
                let authority = crate::egress::authority(
                    db,
                    &settings.master_key,
                    settings.sessions.extra_ca.as_ref(),
                )
                .await
                .context("loading the egress CA")?;
                // Sandboxes trust it like the operator's extra CA (installed at every boot).
                settings.sessions.extra_ca = Some(crate::egress::trusted_by_sandboxes(
                    settings.sessions.extra_ca.as_ref(),
                    &authority,
                )?);
                settings.sessions.egress_proxy = true;
                let started = crate::egress::start(egress, db, &credentials, Some(authority))?;
                docker.egress = Some(crate::egress::unix_gateway(&started.proxy, egress)?);
                egress_writer = Some(started.writer);
            }
            // Its sandboxes are records: they have no network to confine.
            BackendSettings::Memory(_) => {}
            // Pods reach the proxy on TCP, only it (their NetworkPolicy). No CA: a pod has no
            // root to install it with, so a host with a bound credential is refused rather
            // than intercepted with a certificate the sandbox would not trust.
            BackendSettings::Kubernetes(k) => {
                settings.sessions.egress_proxy = true;
                let started = crate::egress::start(egress, db, &credentials, None)?;
                crate::egress::serve_pods(&started.proxy, egress, k.daemon_key, &k.namespace)
                    .await?;
                egress_writer = Some(started.writer);
            }
        }
    }
    let backend = backend_settings
        .connect(&deployment)
        .await
        .context("starting the sandbox backend")?;
    if settings.sessions.extra_ca.is_some() && !backend.capabilities().system_files {
        tracing::warn!(
            backend = backend.name(),
            "--extra-ca-certs: this backend cannot install certificates in a sandbox (it has no \
             root there), so sandboxes do not trust them; the control plane does"
        );
    }
    // A backend without a warm pool (Kubernetes, for now) gets none: the refill would fail on
    // every boot, saying so in the log, and pool nothing.
    if !backend.capabilities().warm_pool {
        settings.sessions.warm_pool = 0;
    }
    let blobs: Arc<dyn BlobStore> =
        sandbox_agents_workspace::blobs::open(&settings.blobs, &settings.sessions.s3)
            .await
            .context("opening the blob store")?;
    let bundles = Bundles::new(db.clone(), blobs.clone());
    // The lifecycle, the run loop and environments call each other, so they are made together:
    // each of the two services gives the lifecycle its hooks as it is built around it.
    let lifecycle_blobs = blobs.clone();
    let (runs, environments) = Runs::new(
        |runs| {
            let environments = Environments::new(
                |environments| {
                    let hooks = sandbox_agents_sessions::SessionHooks { runs, environments };
                    Sessions::new(
                        db.clone(),
                        backend,
                        lifecycle_blobs,
                        settings.sessions,
                        credentials.clone(),
                        shutdown,
                        hooks,
                    )
                },
                blobs,
                deployment,
                settings.environments,
            );
            (environments.sessions().clone(), environments)
        },
        settings.models,
        settings.run_limits,
    );
    let sessions = runs.sessions().clone();
    runs.attach_mcp(
        sandbox_agents_agent::mcp_hub(sessions.clone(), settings.mcp_allow_private)
            .map_err(anyhow::Error::msg)?,
    );
    Ok(Services {
        sessions,
        runs,
        credentials,
        bundles,
        environments,
        egress_writer,
    })
}

/// A server, built and not yet serving: its state, and the webhook dispatcher, not running.
/// No background worker runs yet either; [`App::start_workers`] starts what a serving process
/// runs, a test starts what it needs.
pub struct App {
    pub state: AppState,
    pub dispatcher: Dispatcher,
    /// See [`Services::egress_writer`].
    pub egress_writer: Option<crate::egress::Writer>,
}

/// Builds the server on `db`: the services, the event hub (its `LISTEN` connection starts
/// here), webhook delivery and the API's state. Everything stops when `shutdown` is cancelled.
/// How often a process recounts the processes it shares rate limits with.
const RATE_SHARE_EVERY: Duration = Duration::from_secs(5);

pub async fn build(settings: Settings, db: Db, shutdown: CancellationToken) -> anyhow::Result<App> {
    let Settings {
        services: service_settings,
        web,
        webhooks,
        model_proxy,
        auth,
        heartbeat,
        ui,
    } = settings;
    let default_model = service_settings.sessions.default_model.clone();
    let e2b_domain = service_settings.e2b_domain.clone();
    // As `services` starts it: the memory backend's sandboxes have no network to confine.
    let egress = service_settings.egress.is_some()
        && matches!(service_settings.backend, BackendSettings::Docker(_));
    let Services {
        sessions,
        runs,
        credentials,
        bundles,
        environments,
        egress_writer,
    } = services(service_settings, &db, shutdown.clone()).await?;
    let hub = EventHub::start(db.clone(), shutdown.clone());
    runs.attach_hub(hub.clone());
    let webhooks = Webhooks::new(webhooks, credentials.master_key().clone())
        .context("setting up webhook delivery")?;
    let dispatcher = Dispatcher::new(db.clone(), webhooks.clone());
    // What is configured, as the backend itself declares it (not a constant).
    let backends = vec![BackendInfo::configured(
        sessions.backend().as_ref(),
        &sessions.settings().runtime_classes,
    )];
    let schedules =
        sandbox_agents_schedules::Schedules::new(db.clone(), sessions.clone(), runs.clone());
    let e2b =
        sandbox_agents_e2b::E2b::new(db.clone(), sessions.clone(), Some(hub.clone()), e2b_domain);
    let state = AppState {
        project_ids: sandbox_agents_store::ProjectIds::new(db.clone(), hub.clone()),
        schedules,
        e2b,
        db,
        hub,
        sessions,
        runs,
        credentials,
        bundles,
        environments,
        settings: Arc::new(ApiSettings {
            default_model,
            backends,
            heartbeat,
            model_proxy,
            public_url: web.public_url,
            hosts: Arc::new(web.hosts),
            preview: web.preview,
            preview_hosts: web.preview_hosts,
            auth: Arc::new(auth),
            ui,
            egress,
        }),
        webhooks,
        shutdown,
    };
    Ok(App {
        state,
        dispatcher,
        egress_writer,
    })
}

impl App {
    /// What a serving process runs beside its listeners: adopts the sandboxes that exist
    /// (reconcile), starts the periodic workers, the webhook dispatcher and the warm pool's
    /// refill. Returns the dispatcher's task, which ends after shutdown.
    pub async fn start_workers(&self) -> tokio::task::JoinHandle<()> {
        let sessions = &self.state.sessions;
        if let Err(e) = sessions.reconcile_on_start().await {
            tracing::error!(error = %e, "could not reconcile sessions with the sandboxes that exist; the periodic sweep will retry");
        }
        sessions.spawn_workers();
        // Builds a previous process left `building` are taken over here, then by every sweep.
        self.state.environments.spawn_workers();
        // Consolidations queued by stops of this or any process (and left by one that died).
        self.state.runs.spawn_memory_worker();
        // Due schedules, claimed by whichever process gets each first.
        self.state
            .schedules
            .spawn_worker(self.state.shutdown.clone());
        let dispatcher = self.dispatcher.spawn(self.state.shutdown.clone());
        sessions.start_pool();
        self.spawn_rate_share();
        sandbox_agents_api::metrics::spawn_pool_probe(
            self.state.db.clone(),
            self.state.shutdown.clone(),
        );
        dispatcher
    }

    /// Keeps the rate limiter told how many server processes share the deployment's budget
    /// (the liveness locks held on the database), so that limits hold across processes.
    fn spawn_rate_share(&self) {
        let (db, auth, shutdown) = (
            self.state.db.clone(),
            self.state.settings.auth.clone(),
            self.state.shutdown.clone(),
        );
        tokio::spawn(async move {
            loop {
                match sandbox_agents_store::liveness::count_alive(&db).await {
                    Ok(n) => auth.set_processes(n.clamp(1, i64::from(u32::MAX)) as u32),
                    Err(e) => {
                        tracing::warn!(error = %e, "could not count the server processes for the rate limits")
                    }
                }
                tokio::select! {
                    _ = tokio::time::sleep(RATE_SHARE_EVERY) => {}
                    _ = shutdown.cancelled() => break,
                }
            }
        });
    }

    /// Serves the API and the previews on `listeners` until shutdown
    /// (`sandbox_agents_api::serve`).
    pub async fn serve(self, listeners: sandbox_agents_api::Listeners) -> std::io::Result<()> {
        sandbox_agents_api::serve(listeners, self.state).await
    }
}

/// What browsers see of the server, from the flags (`sandbox_agents_api::web`), with the
/// preview key from `--preview-key` or its file.
fn web_settings(
    config: &Config,
    api: SocketAddr,
    preview: SocketAddr,
) -> anyhow::Result<WebSettings> {
    let preview_key = match &config.preview_key {
        Some(k) => PreviewKey::new(k.as_bytes()).map_err(anyhow::Error::msg)?,
        None => PreviewKey::load_or_create(&config.data_dir.join("preview.key")).context(
            "reading or creating the preview key (set SANDBOX_AGENTS_PREVIEW_KEY instead)",
        )?,
    };
    let options = WebOptions {
        preview_key,
        public_url: config.public_url_at(api),
        preview_public_url: config.preview_public_url_at(preview),
        preview_domain: config.preview_domain.as_deref(),
        e2b_domain: config.e2b_domain.as_deref(),
        allowed_hosts: &config.allowed_hosts,
    };
    sandbox_agents_api::web::web_settings(options, api, preview).map_err(anyhow::Error::msg)
}

/// The model clients runs use: the LiteLLM proxy (`LITELLM_PROXY_API_BASE`,
/// `LITELLM_PROXY_API_KEY`) for the `proxy`/`litellm` transports, OpenAI (`OPENAI_API_KEY`,
/// `OPENAI_BASE_URL`) for `openai`. A transport left unconfigured fails its runs with a
/// clear error. Both trust `extra_ca` besides the built-in roots.
fn model_clients(extra_ca: Option<&ExtraCaCerts>) -> ModelClients {
    use sandbox_agents_model::{ModelClient, Transport};
    let build = |name: &str, t: Result<Transport, sandbox_agents_model::ModelError>| {
        let client = t
            .and_then(|t| model_config(t, extra_ca))
            .and_then(ModelClient::new);
        match client {
            Ok(c) => Some(c),
            Err(e) => {
                tracing::info!(transport = name, reason = %e, "model transport not configured");
                None
            }
        }
    };
    ModelClients {
        proxy: build("proxy", Transport::proxy_from_env()),
        openai: build("openai", Transport::openai_from_env()),
    }
}

/// A model client's settings: the defaults, trusting `extra_ca` too.
fn model_config(
    transport: sandbox_agents_model::Transport,
    extra_ca: Option<&ExtraCaCerts>,
) -> Result<sandbox_agents_model::ModelConfig, sandbox_agents_model::ModelError> {
    let config = sandbox_agents_model::ModelConfig::new(transport);
    match extra_ca {
        Some(extra) => config.with_extra_roots_pem(extra.pem()),
        None => Ok(config),
    }
}

/// The LiteLLM proxy named by `LITELLM_PROXY_API_BASE`, when there is one; it trusts
/// `extra_ca` besides the built-in roots.
fn model_proxy(extra_ca: Option<&ExtraCaCerts>) -> Option<Catalogue> {
    use sandbox_agents_model::{ModelClient, Transport};
    let transport = Transport::proxy_from_env().ok()?;
    match model_config(transport, extra_ca).and_then(ModelClient::new) {
        Ok(client) => Some(Catalogue::new(client)),
        Err(e) => {
            tracing::error!(error = %e, "the LiteLLM proxy settings are not usable");
            None
        }
    }
}
