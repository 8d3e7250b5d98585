//! The database connection: the server's pool, a listener's own small pool, migrating, and
//! the health check's ping. (The warm pool of sandboxes is `sandbox_pool` here and
//! `sessions::pool`.)

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use std::time::Duration;

pub type Db = sqlx::PgPool;

/// The migrations under the repository's top-level `migrations/`, compiled in.
pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../../migrations");

/// A pooled connection idle for at least this long is pinged before it is handed out; one
/// used more recently is not.
const PING_IDLE_FOR: Duration = Duration::from_secs(5);

/// A pool sized for a server: enough connections for concurrent requests and workers, with a
/// short acquire timeout so an exhausted pool shows up as an error rather than a hang.
///
/// sqlx pings every connection before handing it out by default: a round trip to the database
/// before every query, which was a tenth of an exec's time through the API. Here only a
/// connection idle for [`PING_IDLE_FOR`] is pinged (the ones a database restart, a proxy's
/// idle timeout or a network blip may have closed while nobody used them), and one that fails
/// the ping is closed and another taken. A connection that died within the last seconds fails
/// its query instead, which the request reports; sqlx then drops it.
pub async fn connect(options: PgConnectOptions, max_connections: u32) -> Result<Db, sqlx::Error> {
    PgPoolOptions::new()
        .max_connections(max_connections)
        .min_connections(1)
        .acquire_timeout(Duration::from_secs(10))
        .test_before_acquire(false)
        .before_acquire(|conn, meta| {
            Box::pin(async move {
                if meta.idle_for >= PING_IDLE_FOR {
                    sqlx::Connection::ping(conn).await?;
                }
                Ok(true)
            })
        })
        .connect_with(options)
        .await
}

/// A small pool of its own on the same database, for a `LISTEN` that lasts as long as the
/// process: `PgListener` keeps the connection it takes (and takes another to reconnect), and
/// one taken from the server's pool would be one fewer for requests, and could not be had
/// again while that pool is exhausted. Connects on first use; the second connection only
/// bridges a reconnect while the dead one is given back.
pub fn listener_pool(db: &Db) -> Db {
    PgPoolOptions::new()
        .max_connections(2)
        .min_connections(0)
        .acquire_timeout(Duration::from_secs(10))
        .connect_lazy_with((*db.connect_options()).clone())
}

/// How long a connection took to come from the pool: what a request would wait for one now
/// (the pool-wait probe samples it, `sandbox_agents_db_pool_wait_seconds`).
pub async fn acquire_wait(db: &Db) -> Result<Duration, sqlx::Error> {
    let started = std::time::Instant::now();
    let conn = db.acquire().await?;
    let waited = started.elapsed();
    drop(conn);
    Ok(waited)
}

/// Applies pending migrations. Safe to run from several processes at once: sqlx takes an
/// advisory lock around the run.
pub async fn migrate(db: &Db) -> Result<(), sqlx::migrate::MigrateError> {
    MIGRATOR.run(db).await
}

/// One round trip to the database: the health check's question.
pub async fn ping(db: &Db) -> Result<(), sqlx::Error> {
    sqlx::query_scalar!("select 1 as one")
        .fetch_one(db)
        .await
        .map(|_| ())
}

/// How many connections of processes calling themselves `application_name` the database
/// has (teardown asks about serving processes, and refuses while there are any).
pub async fn servers_connected(db: &Db, application_name: &str) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar!(
        r#"select count(*) as "n!" from pg_stat_activity
          where application_name = $1 and datname = current_database()"#,
        application_name
    )
    .fetch_one(db)
    .await
}
