//! Connecting and migrating.

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use std::time::Duration;

pub type Db = sqlx::PgPool;

/// The migrations under the repository's top-level `migrations/`, compiled in.
pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../../migrations");

/// A pool sized for a server: enough connections for concurrent requests and workers, with a
/// short acquire timeout so an exhausted pool shows up as an error rather than a hang.
pub async fn connect(options: PgConnectOptions, max_connections: u32) -> Result<Db, sqlx::Error> {
    PgPoolOptions::new()
        .max_connections(max_connections)
        .min_connections(1)
        .acquire_timeout(Duration::from_secs(10))
        .connect_with(options)
        .await
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
