//! The test databases: one shared PostgreSQL cluster (started once, adopted by every test
//! process, or named by `SANDBOX_AGENTS_TEST_DATABASE_URL`) with a fresh, migrated database
//! per test.

use sandbox_agents_store::embedded::EmbeddedPostgres;
use sandbox_agents_store::Db;
use sqlx::postgres::PgConnectOptions;
use sqlx::{ConnectOptions, Connection};
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;
use tokio::sync::OnceCell;

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
    crate::eventually(
        &format!("the lock {}", lock.display()),
        Duration::from_secs(120),
        async || match std::fs::create_dir(&lock) {
            Ok(()) => Some(()),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                // A lock left by a process that died while starting the cluster.
                let stale = std::fs::metadata(&lock)
                    .and_then(|m| m.modified())
                    .map(|t| t.elapsed().unwrap_or_default() > Duration::from_secs(120))
                    .unwrap_or(false);
                if stale {
                    let _ = std::fs::remove_dir(&lock);
                }
                None
            }
            Err(e) => panic!("cannot create {}: {e}", lock.display()),
        },
    )
    .await;
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
    let (db, options, name) = empty_database(20).await;
    sandbox_agents_store::migrate(&db)
        .await
        .expect("migrating the test database");
    (db, options, name)
}

/// A new database of its own in the shared test cluster, with no migration applied (for a
/// test of the migrations themselves), and a pool of `connections` on it.
pub async fn empty_database(connections: u32) -> (Db, PgConnectOptions, String) {
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
    let db = sandbox_agents_store::connect(options.clone(), connections)
        .await
        .expect("connecting to the test database");
    (db, options, name)
}
