//! The session runtime. Lifecycle operations on one session (boot, stop, start, delete,
//! snapshot, restore) are serialised across every server process by a PostgreSQL advisory
//! lock keyed by the session id, held on a connection of its own: a crash releases it.

mod exec;
pub mod files;
mod lifecycle;
mod pool;
mod snapshots;
mod workers;

use crate::blobs::BlobStore;
use crate::manifest::ManifestPolicy;
use sandbox_agents_domain::SessionId;
use sandbox_agents_sandbox::{Limits, SandboxBackend};
use sandbox_agents_store::Db;
use sqlx::pool::PoolConnection;
use sqlx::Postgres;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

pub use exec::MAX_OUTPUT_BYTES;
pub use lifecycle::StopReason;

#[derive(Clone, Debug)]
pub struct RuntimeSettings {
    /// The image sessions boot when neither the agent nor a snapshot names one.
    pub default_image: String,
    /// The model a session uses when neither it nor its agent names one.
    pub default_model: String,
    pub limits: Limits,
    /// How long a running, idle sandbox may sit unused when its agent does not say (0 = never).
    pub idle_ttl: Duration,
    /// How often the idle reaper and the orphan sweep look.
    pub sweep_interval: Duration,
    pub manifest: ManifestPolicy,
    /// The deployment's known_hosts for git over ssh (deploy key tests, clones): host keys
    /// are accepted on first use and checked on every later one.
    pub git_known_hosts: std::path::PathBuf,
    /// How many started sandboxes of the default image wait for sessions (0: no pool).
    /// Every server process of a deployment should say the same: each one's sweep trims the
    /// pool to its own setting.
    pub warm_pool: usize,
    /// Seals and opens the credentials the runtime stores (secret values, the environment a
    /// sandbox was booted with, deploy keys). Every process of a deployment holds the same.
    pub master_key: sandbox_agents_vault::MasterKey,
}

/// The session runtime; cheap to clone.
#[derive(Clone)]
pub struct Runtime {
    pub(crate) inner: Arc<Inner>,
}

pub(crate) struct Inner {
    pub db: Db,
    pub backend: Arc<dyn SandboxBackend>,
    pub blobs: Arc<dyn BlobStore>,
    pub settings: RuntimeSettings,
    pub tasks: TaskTracker,
    pub shutdown: CancellationToken,
    /// The model clients runs use, one per transport that is configured.
    pub models: crate::runs::ModelClients,
    /// The runs this process drives, each with the token that cancels it.
    pub runs: crate::runs::LocalRuns,
    /// The live event fan-out, once the server attached it: how a run waiting on a client
    /// learns of an answer committed by any process (without it, it polls).
    pub hub: std::sync::OnceLock<sandbox_agents_store::EventHub>,
    /// This process's liveness key (see `runs::liveness`), taken on first use.
    pub liveness: tokio::sync::OnceCell<i32>,
    /// Wakes the warm pool's refill worker (see `pool.rs`).
    pub pool_wanted: tokio::sync::Notify,
    /// Set once the refill worker runs.
    pub pool_started: std::sync::atomic::AtomicBool,
    /// The refill worker, for a shutdown that waits for it.
    pub pool_worker: std::sync::Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl Runtime {
    pub fn new(
        db: Db,
        backend: Arc<dyn SandboxBackend>,
        blobs: Arc<dyn BlobStore>,
        settings: RuntimeSettings,
        models: crate::runs::ModelClients,
        shutdown: CancellationToken,
    ) -> Self {
        Runtime {
            inner: Arc::new(Inner {
                db,
                backend,
                blobs,
                settings,
                tasks: TaskTracker::new(),
                shutdown,
                models,
                runs: Default::default(),
                hub: Default::default(),
                liveness: Default::default(),
                pool_wanted: tokio::sync::Notify::new(),
                pool_started: Default::default(),
                pool_worker: Default::default(),
            }),
        }
    }

    /// Gives runs the process's event hub (once; later calls are ignored).
    pub fn attach_hub(&self, hub: sandbox_agents_store::EventHub) {
        let _ = self.inner.hub.set(hub);
    }

    pub fn backend_name(&self) -> &'static str {
        self.inner.backend.name()
    }

    /// The sandbox backend (tests and benchmarks reach through it).
    pub fn backend(&self) -> &Arc<dyn SandboxBackend> {
        &self.inner.backend
    }

    pub fn settings(&self) -> &RuntimeSettings {
        &self.inner.settings
    }

    /// Waits (bounded) for background boots to finish, for a clean shutdown; whatever is still
    /// booting is picked up again by the next start's reconciliation.
    pub async fn drain(&self, within: Duration) {
        self.inner.tasks.close();
        let _ = tokio::time::timeout(within, async {
            self.inner.tasks.wait().await;
            self.stop_pool().await;
        })
        .await;
    }
}

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
    pub(crate) async fn acquire(db: &Db, id: SessionId) -> crate::Result<Self> {
        let key = lock_key(id);
        let mut conn = db.acquire().await?;
        sqlx::query("select pg_advisory_lock($1)")
            .bind(key)
            .execute(&mut *conn)
            .await?;
        Ok(SessionLock {
            conn: Some(conn),
            key,
        })
    }

    /// Takes the lock only if nobody holds it.
    pub(crate) async fn try_acquire(db: &Db, id: SessionId) -> crate::Result<Option<Self>> {
        let key = lock_key(id);
        let mut conn = db.acquire().await?;
        let (got,): (bool,) = sqlx::query_as("select pg_try_advisory_lock($1)")
            .bind(key)
            .fetch_one(&mut *conn)
            .await?;
        Ok(got.then_some(SessionLock {
            conn: Some(conn),
            key,
        }))
    }

    pub(crate) async fn release(mut self) {
        if let Some(mut conn) = self.conn.take() {
            if sqlx::query("select pg_advisory_unlock($1)")
                .bind(self.key)
                .execute(&mut *conn)
                .await
                .is_err()
            {
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
pub(crate) fn not_found(e: sandbox_agents_store::Error, id: SessionId) -> crate::RuntimeError {
    match e {
        sandbox_agents_store::Error::NotFound => {
            crate::RuntimeError::NotFound(format!("session '{id}' not found"))
        }
        other => other.into(),
    }
}
