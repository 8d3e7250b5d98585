//! The lock that serialises lifecycle operations on one session (boot, stop, start, delete,
//! snapshot, restore) across every server process: a PostgreSQL advisory lock keyed by the
//! session id, held on a connection of its own, so a crash releases it.

use sandbox_agents_domain::SessionId;
use sandbox_agents_errors::{Result, ServiceError};
use sandbox_agents_store::{session_locks, Db};
use sqlx::pool::PoolConnection;
use sqlx::Postgres;

/// An advisory lock on one session, held on its own connection until dropped or released.
pub(crate) struct SessionLock {
    conn: Option<PoolConnection<Postgres>>,
    key: i64,
}

fn lock_key(id: SessionId) -> i64 {
    let b = id.0.as_bytes();
    i64::from_be_bytes([b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]])
}

impl SessionLock {
    /// Waits for the session's lock.
    pub(crate) async fn acquire(db: &Db, id: SessionId) -> Result<Self> {
        let key = lock_key(id);
        let mut conn = db.acquire().await?;
        session_locks::lock(&mut conn, key).await?;
        Ok(SessionLock {
            conn: Some(conn),
            key,
        })
    }

    /// Takes the lock only if nobody holds it.
    pub(crate) async fn try_acquire(db: &Db, id: SessionId) -> Result<Option<Self>> {
        let key = lock_key(id);
        let mut conn = db.acquire().await?;
        let got = session_locks::try_lock(&mut conn, key).await?;
        Ok(got.then_some(SessionLock {
            conn: Some(conn),
            key,
        }))
    }

    pub(crate) async fn release(mut self) {
        if let Some(mut conn) = self.conn.take() {
            if session_locks::unlock(&mut conn, self.key).await.is_err() {
                // The lock is tied to the connection: closing it is the sure way to let go.
                let _ = conn.detach();
            }
        }
    }
}

impl Drop for SessionLock {
    fn drop(&mut self) {
        // Dropped without `release` (an early return or a panic): never hand a connection
        // that still holds the lock back to the pool.
        if let Some(conn) = self.conn.take() {
            drop(conn.detach());
        }
    }
}

/// A store `NotFound` as the API's 404 for this session.
pub fn not_found(e: sandbox_agents_store::Error, id: SessionId) -> ServiceError {
    match e {
        sandbox_agents_store::Error::NotFound => {
            ServiceError::NotFound(format!("session '{id}' not found"))
        }
        other => other.into(),
    }
}
