//! The one-key advisory locks that serialise lifecycle operations on one session, across
//! server processes (the two-key space is the liveness locks'). A lock belongs to the
//! connection that took it: the caller holds that connection for as long as it holds the lock.

use crate::error::Result;
use sqlx::PgConnection;

/// Waits for the lock `key`.
pub async fn lock(conn: &mut PgConnection, key: i64) -> Result<()> {
    sqlx::query_scalar!("select pg_advisory_lock($1)", key)
        .fetch_one(&mut *conn)
        .await?;
    Ok(())
}

/// Takes the lock `key` if nobody holds it.
pub async fn try_lock(conn: &mut PgConnection, key: i64) -> Result<bool> {
    Ok(
        sqlx::query_scalar!(r#"select pg_try_advisory_lock($1) as "got!""#, key)
            .fetch_one(&mut *conn)
            .await?,
    )
}

/// Gives the lock `key` back.
pub async fn unlock(conn: &mut PgConnection, key: i64) -> Result<()> {
    sqlx::query_scalar!(r#"select pg_advisory_unlock($1) as "released!""#, key)
        .fetch_one(&mut *conn)
        .await?;
    Ok(())
}
