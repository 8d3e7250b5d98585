//! The `sandbox-agents` binary: configuration, the database (embedded or external), the
//! wiring ([`app`], which the test harness builds its servers with too), the HTTP server,
//! and one shutdown signal that every part listens to.

pub mod app;
pub mod config;
pub mod egress;
mod teardown;
pub mod telemetry;

pub use teardown::teardown;

use anyhow::Context;
use app::Settings;
use config::Config;
use sandbox_agents_credentials::Credentials;
use sandbox_agents_store::embedded::EmbeddedPostgres;
use sandbox_agents_store::Db;
use sqlx::postgres::PgConnectOptions;
use std::str::FromStr;
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
    let metrics_listener =
        match config.metrics_bind {
            Some(addr) => Some(tokio::net::TcpListener::bind(addr).await.with_context(|| {
                format!("cannot listen for metrics on {addr} (--metrics-bind)")
            })?),
            None => None,
        };
    let settings = Settings::resolve(
        &config,
        listener.local_addr()?,
        preview_listener.local_addr()?,
    )?;
    let master_key_rotating = settings.services.master_key.has_previous();
    let Database { db, embedded } = open_database(&config, APPLICATION_NAME).await?;
    let mut app = app::build(settings, db.clone(), shutdown.clone()).await?;
    let egress_writer = app.egress_writer.take();
    if !app.state.settings.ui.is_built() {
        tracing::warn!("this binary was built without the web UI: / explains how to build it (cd web && npm ci && npm run build, or scripts/serve)");
    }
    let sessions = app.state.sessions.clone();
    if master_key_rotating {
        reseal_in_background(
            app.state.credentials.clone(),
            app.state.webhooks.clone(),
            db.clone(),
        );
    }
    let dispatcher = app.start_workers().await;
    tracing::info!(addr = %listener.local_addr()?, previews = %preview_listener.local_addr()?, "listening");
    let listeners = sandbox_agents_api::Listeners {
        api: listener,
        preview: Some(preview_listener),
        metrics: metrics_listener,
    };
    let served = app.serve(listeners).await;
    shutdown.cancel();
    sessions.drain(std::time::Duration::from_secs(10)).await;
    // Sends in flight get their timeout; whatever is cut short goes again after restart.
    let _ = dispatcher.await;
    if let Some(writer) = egress_writer {
        // The last egress denials and sums, those of tunnels that closed while the sessions
        // drained included; a database that does not answer is not waited for long.
        writer.finish(std::time::Duration::from_secs(10)).await;
    }
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
