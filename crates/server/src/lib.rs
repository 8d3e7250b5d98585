//! The `sandbox-agents` binary's wiring: configuration, the database (embedded or external),
//! the event hub, the HTTP server, and one shutdown signal that every part listens to.

pub mod config;
pub mod telemetry;

use anyhow::Context;
use config::Config;
use sandbox_agents_api::{ApiSettings, AppState, BackendInfo};
use sandbox_agents_store::embedded::EmbeddedPostgres;
use sandbox_agents_store::{Db, EventHub};
use sqlx::postgres::PgConnectOptions;
use std::str::FromStr;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// The database the server uses, and the embedded cluster when it runs one.
pub struct Database {
    pub db: Db,
    pub embedded: Option<EmbeddedPostgres>,
}

/// Connects to `DATABASE_URL`, or starts the embedded cluster; then applies migrations.
pub async fn open_database(config: &Config) -> anyhow::Result<Database> {
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
    let Database { db, embedded } = open_database(&config).await?;
    let hub = EventHub::start(db.clone(), shutdown.clone());
    let state = AppState {
        db: db.clone(),
        hub,
        settings: Arc::new(ApiSettings {
            default_model: config.default_model.clone(),
            backends: vec![BackendInfo {
                name: "docker".into(),
                default: true,
            }],
            heartbeat: sandbox_agents_api::routes::events::HEARTBEAT,
        }),
        shutdown: shutdown.clone(),
    };
    tracing::info!(addr = %listener.local_addr()?, "listening");
    let served = sandbox_agents_api::serve(listener, state).await;
    shutdown.cancel();
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

/// Applies migrations and exits.
pub async fn migrate(config: Config) -> anyhow::Result<()> {
    let Database { db, embedded } = open_database(&config).await?;
    db.close().await;
    if let Some(pg) = embedded {
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
