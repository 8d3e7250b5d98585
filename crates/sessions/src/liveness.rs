//! This process's liveness key: an advisory lock (see `sandbox_agents_store::liveness`) held
//! on a connection of its own, outside the pool, for as long as the process lives. The key is
//! what the process stamps on the runs it drives, the boots it takes on and the lifecycle
//! leases it holds; a key nobody holds is a dead process, whose work others take over.

use crate::Sessions;
use sandbox_agents_errors::Result;
use sandbox_agents_store::{liveness, Db};
use sqlx::Connection;
use std::collections::HashMap;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// How often the process checks that its liveness connection still answers.
const HEARTBEAT: Duration = Duration::from_secs(10);

/// The key, taken on first use, and what keeps it.
#[derive(Default)]
pub(crate) struct Liveness {
    key: tokio::sync::OnceCell<i32>,
}

impl Sessions {
    /// This process's liveness key, taking its lock on first use.
    pub async fn worker_key(&self) -> Result<i32> {
        let st = &self.inner;
        let key = st
            .liveness
            .key
            .get_or_try_init(|| async {
                let (key, conn) = take_liveness(&st.db, None).await?;
                spawn_heartbeat(st.db.clone(), st.shutdown.clone(), key, conn);
                Ok::<_, sandbox_agents_errors::ServiceError>(key)
            })
            .await?;
        Ok(*key)
    }

    /// Whether the process holding the liveness key `key` is alive (this one is).
    pub async fn is_alive(&self, key: i32) -> Result<bool> {
        if key == self.worker_key().await? {
            return Ok(true);
        }
        Ok(liveness::is_alive(&self.inner.db, key).await?)
    }

    /// A sweep's view of which processes are alive: each key is asked once.
    pub fn alive_processes(&self) -> AliveProcesses<'_> {
        AliveProcesses {
            sessions: self,
            known: HashMap::new(),
        }
    }
}

/// Which processes a sweep found alive, asked once per key (see
/// [`Sessions::alive_processes`]). Holds no connection between questions.
pub struct AliveProcesses<'a> {
    sessions: &'a Sessions,
    known: HashMap<i32, bool>,
}

impl AliveProcesses<'_> {
    /// Whether the process with liveness key `key` is alive; no key is no process.
    pub async fn check(&mut self, key: Option<i32>) -> Result<bool> {
        let Some(key) = key else { return Ok(false) };
        if let Some(known) = self.known.get(&key) {
            return Ok(*known);
        }
        let alive = self.sessions.is_alive(key).await?;
        self.known.insert(key, alive);
        Ok(alive)
    }
}

/// Takes `key` (after a dropped connection) or a fresh random key, on a connection that
/// leaves the pool for good.
async fn take_liveness(db: &Db, key: Option<i32>) -> Result<(i32, sqlx::PgConnection)> {
    let mut conn = db.acquire().await?.detach();
    for _ in 0..16 {
        let k = key.unwrap_or_else(|| {
            (uuid::Uuid::new_v4().as_u128() as i32)
                .wrapping_abs()
                .max(1)
        });
        if liveness::try_hold(&mut conn, k).await? {
            tracing::info!(worker = k, "holding this process's liveness lock");
            return Ok((k, conn));
        }
        if key.is_some() {
            break;
        }
    }
    Err(anyhow::anyhow!("could not take a liveness lock: every key tried was held").into())
}

/// Keeps the liveness connection alive and takes the lock again if it dropped.
fn spawn_heartbeat(db: Db, shutdown: CancellationToken, key: i32, mut conn: sqlx::PgConnection) {
    tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = tokio::time::sleep(HEARTBEAT) => {}
                _ = shutdown.cancelled() => break,
            }
            if conn.ping().await.is_ok() {
                continue;
            }
            tracing::warn!(
                worker = key,
                "the liveness connection dropped; taking the lock again"
            );
            match take_liveness(&db, Some(key)).await {
                Ok((_, c)) => conn = c,
                Err(e) => {
                    tracing::error!(worker = key, error = %e, "could not take the liveness lock again; other servers may take over this process's runs and boots")
                }
            }
        }
        // Runs and boots end before the process does; the lock goes with the connection.
        let _ = conn.close().await;
    });
}
