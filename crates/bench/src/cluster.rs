//! The cluster a benchmark runs in: an embedded one under a directory of its own (started
//! here and stopped at the end unless it was already running), or the one a URL names. Each
//! run creates a database of its own there and drops it at the end.

use anyhow::Context;
use sandbox_agents_store::embedded::EmbeddedPostgres;
use sqlx::postgres::PgConnectOptions;
use sqlx::{ConnectOptions, Connection};
use std::path::Path;
use std::str::FromStr;

/// Whether a postmaster is running for `data_dir` (its pid file names a live process).
pub fn cluster_running(data_dir: &Path) -> bool {
    std::fs::read_to_string(data_dir.join("postmaster.pid"))
        .ok()
        .and_then(|s| s.lines().next().and_then(|l| l.trim().parse::<u32>().ok()))
        .is_some_and(|pid| Path::new(&format!("/proc/{pid}")).exists())
}

pub struct Cluster {
    /// Options for the cluster's maintenance database.
    pub admin: PgConnectOptions,
    /// The embedded cluster, and whether it was running before this run.
    embedded: Option<(EmbeddedPostgres, bool)>,
}

impl Cluster {
    /// Adopts `database_url`'s cluster, or starts (or adopts) the embedded one in `pg_dir`.
    pub async fn open(
        database_url: Option<&str>,
        pg_dir: &Path,
        log: impl Fn(String),
    ) -> anyhow::Result<Self> {
        if let Some(url) = database_url {
            return Ok(Self {
                admin: PgConnectOptions::from_str(url).context("parsing --database-url")?,
                embedded: None,
            });
        }
        let was_running = cluster_running(&pg_dir.join("data"));
        log(format!(
            "{} the embedded cluster in {}",
            if was_running { "adopting" } else { "starting" },
            pg_dir.display()
        ));
        let pg = EmbeddedPostgres::start(pg_dir)
            .await
            .context("starting the embedded PostgreSQL cluster")?;
        Ok(Self {
            admin: pg.connect_options_for("postgres"),
            embedded: Some((pg, was_running)),
        })
    }

    /// A new database named `<prefix>_<random>`, and options to connect to it.
    pub async fn create_database(
        &self,
        prefix: &str,
    ) -> anyhow::Result<(String, PgConnectOptions)> {
        let name = format!("{prefix}_{}", uuid::Uuid::new_v4().simple());
        let mut conn = self
            .admin
            .connect()
            .await
            .context("connecting to the cluster")?;
        // Identifiers cannot be bound as parameters; the name is generated above.
        sqlx::query(&format!("create database {name}"))
            .execute(&mut conn)
            .await
            .context("creating the bench database")?;
        conn.close().await.ok();
        Ok((name.clone(), self.admin.clone().database(&name)))
    }

    /// Drops a database [`Cluster::create_database`] made, closing its connections.
    pub async fn drop_database(&self, name: &str, log: impl Fn(String)) {
        if let Ok(mut conn) = self.admin.connect().await {
            if let Err(e) = sqlx::query(&format!("drop database if exists {name} with (force)"))
                .execute(&mut conn)
                .await
            {
                log(format!("could not drop database {name}: {e}"));
            }
            conn.close().await.ok();
        }
    }

    /// Stops the embedded cluster if this run started it.
    pub async fn close(self, log: impl Fn(String)) {
        match self.embedded {
            Some((_, true)) => {
                log("leaving the embedded cluster running (it was running before)".into())
            }
            Some((pg, false)) => {
                log("stopping the embedded cluster it started".into());
                if let Err(e) = pg.stop().await {
                    log(format!("could not stop the embedded cluster: {e:#}"));
                }
            }
            None => {}
        }
    }
}
