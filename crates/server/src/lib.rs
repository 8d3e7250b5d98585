//! The `sandbox-agents` binary's wiring: configuration, the database (embedded or external),
//! the event hub, the HTTP server, and one shutdown signal that every part listens to.

pub mod config;
mod teardown;
pub mod telemetry;

pub use teardown::teardown;

use anyhow::Context;
use config::Config;
use sandbox_agents_agent::{ModelClients, Runs};
use sandbox_agents_api::preview::PreviewKey;
use sandbox_agents_api::web::{WebOptions, WebSettings};
use sandbox_agents_api::{ApiSettings, AppState, BackendInfo};
use sandbox_agents_credentials::Credentials;
use sandbox_agents_sandbox::docker::DockerBackend;
use sandbox_agents_sandbox::unavailable::Unavailable;
use sandbox_agents_sandbox::{Limits, SandboxBackend};
use sandbox_agents_sessions::{SessionSettings, Sessions};
use sandbox_agents_store::embedded::EmbeddedPostgres;
use sandbox_agents_store::{Db, EventHub};
use sandbox_agents_workspace::{LocalBlobStore, ManifestPolicy};
use sqlx::postgres::PgConnectOptions;
use std::str::FromStr;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// The database the server uses, and the embedded cluster when it runs one.
pub struct Database {
    pub db: Db,
    pub embedded: Option<EmbeddedPostgres>,
}

/// What a serving process calls itself on its database connections: others (teardown) can
/// tell that a server is running.
pub const APPLICATION_NAME: &str = "sandbox-agents";

/// Connects to `DATABASE_URL`, or starts the embedded cluster; then applies migrations.
/// `application_name` names this process's connections.
pub async fn open_database(config: &Config, application_name: &str) -> anyhow::Result<Database> {
    let (options, embedded) = match &config.database_url {
        Some(url) => (
            PgConnectOptions::from_str(url)
                .context("DATABASE_URL is not a valid PostgreSQL URL")?,
            None,
        ),
        None => {
            let dir = std::path::absolute(config.data_dir.join("postgres"))
                .context("resolving the data directory")?;
            let pg = EmbeddedPostgres::start(&dir).await?;
            (pg.connect_options(), Some(pg))
        }
    };
    let options = options.application_name(application_name);
    let db = match sandbox_agents_store::connect(options, config.db_max_connections).await {
        Ok(db) => db,
        Err(e) => {
            if let Some(pg) = embedded {
                let _ = pg.stop().await;
            }
            return Err(e).context("connecting to PostgreSQL");
        }
    };
    sandbox_agents_store::migrate(&db)
        .await
        .context("applying database migrations")?;
    Ok(Database { db, embedded })
}

/// Runs the server until `shutdown` is cancelled (SIGTERM/SIGINT in the binary).
pub async fn serve(config: Config, shutdown: CancellationToken) -> anyhow::Result<()> {
    // Bind first: a port that is taken should fail before anything else starts.
    let listener = tokio::net::TcpListener::bind(config.bind)
        .await
        .with_context(|| format!("cannot listen on {}", config.bind))?;
    let preview_bind = config.preview_bind()?;
    let preview_listener = tokio::net::TcpListener::bind(preview_bind)
        .await
        .with_context(|| {
            format!(
                "cannot listen for previews on {preview_bind} (choose another with --preview-bind)"
            )
        })?;
    let web = web_settings(
        &config,
        listener.local_addr()?,
        preview_listener.local_addr()?,
    )?;
    let master_key = config.master_key()?;
    let master_key_rotating = master_key.has_previous();
    let webhooks =
        sandbox_agents_webhooks::Webhooks::new(config.webhook_settings()?, master_key.clone())
            .context("setting up webhook delivery")?;
    let Database { db, embedded } = open_database(&config, APPLICATION_NAME).await?;
    let hub = EventHub::start(db.clone(), shutdown.clone());
    let (sessions, runs, credentials) =
        services(&config, &db, master_key, shutdown.clone()).await?;
    runs.attach_hub(hub.clone());
    if let Err(e) = sessions.reconcile_on_start().await {
        tracing::error!(error = %e, "could not reconcile sessions with the sandboxes that exist; the periodic sweep will retry");
    }
    sessions.spawn_workers();
    if master_key_rotating {
        reseal_in_background(credentials.clone(), webhooks.clone(), db.clone());
    }
    let dispatcher = sandbox_agents_webhooks::Dispatcher::new(db.clone(), webhooks.clone())
        .spawn(shutdown.clone());
    sessions.start_pool();
    let state = AppState {
        db: db.clone(),
        hub,
        sessions: sessions.clone(),
        runs,
        credentials,
        settings: Arc::new(ApiSettings {
            default_model: config.default_model.clone(),
            backends: vec![BackendInfo {
                name: "docker".into(),
                default: true,
            }],
            heartbeat: sandbox_agents_api::routes::events::HEARTBEAT,
            model_proxy: model_proxy(),
            public_url: web.public_url,
            hosts: Arc::new(web.hosts),
            preview: web.preview,
            preview_hosts: web.preview_hosts,
            auth: Arc::new(
                sandbox_agents_api::auth::Auth::new(config.token.as_deref()).with_rate_limit(Some(
                    sandbox_agents_api::auth::RateLimit {
                        per_minute: config.rate_limit_per_minute,
                        burst: config.rate_limit_burst,
                    },
                )),
            ),
            ui: sandbox_agents_api::ui::UiAssets::Embedded,
        }),
        webhooks,
        shutdown: shutdown.clone(),
    };
    if !state.settings.ui.is_built() {
        tracing::warn!("this binary was built without the web UI: / explains how to build it (cd web && npm ci && npm run build, or scripts/serve)");
    }
    tracing::info!(addr = %listener.local_addr()?, previews = %preview_listener.local_addr()?, "listening");
    let listeners = sandbox_agents_api::Listeners {
        api: listener,
        preview: Some(preview_listener),
    };
    let served = sandbox_agents_api::serve(listeners, state).await;
    shutdown.cancel();
    sessions.drain(std::time::Duration::from_secs(10)).await;
    // Sends in flight get their timeout; whatever is cut short goes again after restart.
    let _ = dispatcher.await;
    db.close().await;
    if let Some(pg) = embedded {
        pg.stop()
            .await
            .context("stopping the embedded PostgreSQL")?;
    }
    served.context("serving HTTP")?;
    tracing::info!("stopped");
    Ok(())
}

/// What browsers see of the server, from the flags (`sandbox_agents_api::web`), with the
/// preview key from `--preview-key` or its file.
fn web_settings(
    config: &Config,
    api: std::net::SocketAddr,
    preview: std::net::SocketAddr,
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
        allowed_hosts: &config.allowed_hosts,
    };
    sandbox_agents_api::web::web_settings(options, api, preview).map_err(anyhow::Error::msg)
}

/// A master key rotation in progress: moves every stored value to the current key and says
/// when the previous keys are no longer needed. Idempotent; every start does it again while
/// previous keys are configured.
fn reseal_in_background(
    credentials: Credentials,
    webhooks: sandbox_agents_webhooks::Webhooks,
    db: Db,
) {
    tokio::spawn(async move {
        let mut passes = match credentials.reseal_secrets().await {
            Ok(p) => p,
            Err(e) => {
                tracing::error!(error = %e, "resealing secrets under the new master key failed; the next start retries");
                return;
            }
        };
        match webhooks.reseal_secrets(&db).await {
            Ok(r) => passes.push((
                sandbox_agents_store::sealed::SealedColumn::WebhookSecrets,
                r,
            )),
            Err(e) => {
                tracing::error!(error = %e, "resealing webhook secrets under the new master key failed; the next start retries");
                return;
            }
        }
        let unreadable: usize = passes.iter().map(|(_, r)| r.unreadable).sum();
        for (column, r) in &passes {
            tracing::info!(column = ?column, moved = r.moved, unreadable = r.unreadable, "resealed under the current master key");
        }
        if unreadable == 0 {
            tracing::info!("every stored value uses the current master key: SANDBOX_AGENTS_PREVIOUS_MASTER_KEYS can be removed");
        } else {
            tracing::warn!(unreadable, "some stored values open with no configured key; they stay unreadable until set again");
        }
    });
}

/// The services: the sandbox lifecycle (the sandbox backend, the blob store under the data
/// directory, and the settings from the configuration), the run loop registered with it, and
/// the credentials both use. A backend that cannot be reached is logged and replaced by one
/// that refuses every operation with the reason.
pub(crate) async fn services(
    config: &Config,
    db: &Db,
    master_key: sandbox_agents_vault::MasterKey,
    shutdown: CancellationToken,
) -> anyhow::Result<(Sessions, Runs, Credentials)> {
    let deployment = sandbox_agents_store::deployment::id(db).await?;
    let backend: Arc<dyn SandboxBackend> = match DockerBackend::connect(&deployment).await {
        Ok(b) => Arc::new(b),
        Err(e) => {
            tracing::error!(error = %e, "the docker backend is unavailable: sessions cannot boot until it is");
            Arc::new(Unavailable {
                name: "docker",
                reason: e.to_string(),
            })
        }
    };
    let blobs =
        LocalBlobStore::new(config.data_dir.join("blobs")).context("creating the blob store")?;
    let credentials = Credentials::new(db.clone(), master_key, config.git_known_hosts()?);
    let settings = SessionSettings {
        default_image: config.image.clone(),
        default_model: config.default_model.clone(),
        limits: Limits {
            cpus: config.sandbox_cpus,
            memory_bytes: config.sandbox_memory_mb * 1024 * 1024,
            pids: config.sandbox_pids,
        },
        idle_ttl: std::time::Duration::from_secs(config.idle_ttl_seconds),
        sweep_interval: std::time::Duration::from_secs(30),
        manifest: ManifestPolicy {
            local_dir_roots: config.local_dir_roots.clone(),
        },
        warm_pool: config.warm_pool_size,
    };
    let sessions = Sessions::new(
        db.clone(),
        backend,
        Arc::new(blobs),
        settings,
        credentials.clone(),
        shutdown,
    );
    let runs = Runs::new(sessions.clone(), model_clients());
    sessions.register_runs(runs.hooks());
    Ok((sessions, runs, credentials))
}

/// The model clients runs use: the LiteLLM proxy (`LITELLM_PROXY_API_BASE`,
/// `LITELLM_PROXY_API_KEY`) for the `proxy`/`litellm` transports, OpenAI (`OPENAI_API_KEY`,
/// `OPENAI_BASE_URL`) for `openai`. A transport left unconfigured fails its runs with a
/// clear error.
fn model_clients() -> ModelClients {
    use sandbox_agents_model::{ModelClient, ModelConfig, Transport};
    let build = |name: &str, t: Result<Transport, sandbox_agents_model::ModelError>| {
        let client = t.and_then(|t| ModelClient::new(ModelConfig::new(t)));
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

/// The LiteLLM proxy named by `LITELLM_PROXY_API_BASE`, when there is one.
fn model_proxy() -> Option<sandbox_agents_model::Catalogue> {
    use sandbox_agents_model::{ModelClient, ModelConfig, Transport};
    let transport = Transport::proxy_from_env().ok()?;
    match ModelClient::new(ModelConfig::new(transport)) {
        Ok(client) => Some(sandbox_agents_model::Catalogue::new(client)),
        Err(e) => {
            tracing::error!(error = %e, "the LiteLLM proxy settings are not usable");
            None
        }
    }
}

/// Applies migrations and exits.
pub async fn migrate(config: Config) -> anyhow::Result<()> {
    let Database { db, embedded } = open_database(&config, "sandbox-agents-migrate").await?;
    db.close().await;
    // A cluster that was running already is a server's: leave it running.
    if let Some(pg) = embedded.filter(|pg| !pg.adopted()) {
        pg.stop().await?;
    }
    tracing::info!("migrations applied");
    Ok(())
}

/// Resolves when SIGTERM or SIGINT arrives.
pub async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).expect("installing a SIGTERM handler");
    tokio::select! {
        _ = term.recv() => tracing::info!("SIGTERM: shutting down"),
        _ = tokio::signal::ctrl_c() => tracing::info!("SIGINT: shutting down"),
    }
}
