//! The [`Sessions`] service: what every lifecycle operation shares (the database, the sandbox
//! backend, the blob store, the credentials, the background tasks) and the settings it runs
//! with.

use crate::hooks::{EnvironmentHooks, RunHooks};
use sandbox_agents_credentials::Credentials;
use sandbox_agents_domain::ca::ExtraCaCerts;
use sandbox_agents_sandbox::{Limits, SandboxBackend};
use sandbox_agents_store::Db;
use sandbox_agents_workspace::s3::{S3Client, S3Settings};
use sandbox_agents_workspace::{BlobStore, ManifestPolicy};
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// The longest a shutdown waits for the warm pool to stop and its sandboxes to go.
const POOL_STOP: Duration = Duration::from_secs(30);

#[derive(Clone, Debug)]
pub struct SessionSettings {
    /// The image sessions boot when neither the agent nor a snapshot names one.
    pub default_image: String,
    /// The runtime classes an agent or environment may name for its sandboxes
    /// (`--kubernetes-runtime-classes`); empty on a backend without them.
    pub runtime_classes: Vec<String>,
    /// The model a session uses when neither it nor its agent names one.
    pub default_model: String,
    /// The input window (tokens) runs compact against when the model catalogue gives none
    /// for the model.
    pub default_max_input_tokens: u64,
    /// A sandbox's limits unless its session sets `resources`.
    pub limits: Limits,
    /// The most CPUs a session's `resources` may ask for.
    pub max_cpus: f64,
    /// The most memory (MiB) a session's `resources` may ask for.
    pub max_memory_mb: i64,
    /// How long a running, idle sandbox may sit unused when its agent does not say (0 = never).
    pub idle_ttl: Duration,
    /// How often the idle reaper and the orphan sweep look.
    pub sweep_interval: Duration,
    /// The most bytes a running sandbox may write to its own filesystem before it is stopped
    /// (`disk.rs`); `None`: no limit.
    pub disk_limit: Option<u64>,
    /// How often the disk limit is checked.
    pub disk_check_interval: Duration,
    pub manifest: ManifestPolicy,
    /// How many started sandboxes of the default image wait for sessions (0: no pool).
    /// Every server process of a deployment should say the same: each one's sweep trims the
    /// pool to its own setting.
    pub warm_pool: usize,
    /// The most the pool grows to under demand (at least `warm_pool`; equal: a fixed pool).
    pub warm_pool_max: usize,
    /// Whether the pool's sandboxes outlive the deployment's last process (`--keep-warm-pool`);
    /// otherwise [`Sessions::stop_pool`] removes them when no other process is alive.
    pub keep_warm_pool: bool,
    /// CA certificates every sandbox trusts besides its image's (`--extra-ca-certs`).
    pub extra_ca: Option<ExtraCaCerts>,
    /// Whether sandboxes leave only through the egress proxy (`--egress-proxy`): secret
    /// bindings for egress (`inject`, `placeholder`) need it, and a boot without it refuses
    /// them rather than send placeholders, or nothing, where a secret was meant.
    pub egress_proxy: bool,
    /// How `s3_mount` entries reach their buckets (the control plane's client; nothing of it
    /// enters a sandbox).
    pub s3: S3Settings,
    /// Sandboxes the deployment and each project may hold at once (`--max-sandboxes`,
    /// `--max-sandboxes-per-project`); a boot over them waits, queued.
    pub admission: sandbox_agents_store::admission::Limits,
    /// Boots this process runs at once (`--max-concurrent-boots`); more wait their turn.
    pub max_concurrent_boots: usize,
}

/// The sandbox lifecycle service; cheap to clone.
#[derive(Clone)]
pub struct Sessions {
    pub(crate) inner: Arc<Inner>,
}

/// What every operation shares (the database, the backend, the blob store, the settings, the
/// credentials, the task tracker and shutdown, the hooks), then this process's state in owned
/// parts: each a type of the module that owns it (named beside it), reached from elsewhere
/// only through its methods.
pub(crate) struct Inner {
    pub db: Db,
    pub backend: Arc<dyn SandboxBackend>,
    pub blobs: Arc<dyn BlobStore>,
    /// The control plane's S3 client, for `s3_mount` entries (`mounts.rs`).
    pub s3: S3Client,
    pub settings: SessionSettings,
    /// Resolves a boot's secret variables and opens them for each command.
    pub credentials: Credentials,
    /// Background boots and garbage collection, and the runs the run loop drives (it spawns
    /// them here too), so one drain waits for all of them.
    pub tasks: TaskTracker,
    pub shutdown: CancellationToken,
    /// What the lifecycle asks of the run loop and of environments, given at construction.
    pub hooks: SessionHooks,
    /// The warm pool's refill worker and the boots it gives way to (`pool.rs`).
    pub pool: crate::pool::WarmPool,
    /// Open terminals per session (`terminal.rs`).
    pub terminals: crate::terminal::TerminalCounts,
    /// This process's liveness key (`liveness.rs`).
    pub liveness: crate::liveness::Liveness,
    /// The lifecycle leases this process holds (`lease.rs`).
    pub leases: crate::lease::Leases,
    /// The boots this process took on (`boot_queue.rs`).
    pub boots: crate::boot_queue::BootQueue,
}

/// What the lifecycle asks of the services built around it, required to build it: a wiring
/// that forgets one does not compile. Both are weak handles on services that hold the
/// lifecycle (`Runs::new` and `Environments::new` make them with `Arc::new_cyclic`), so the
/// lifecycle never keeps them alive; once they are gone (a teardown), no session has a run
/// and no analysis environment is made.
pub struct SessionHooks {
    /// What the lifecycle asks of the run loop (see [`RunHooks`]).
    pub runs: Arc<dyn RunHooks>,
    /// What the lifecycle asks of environments (see [`EnvironmentHooks`]).
    pub environments: Arc<dyn EnvironmentHooks>,
}

impl Sessions {
    pub fn new(
        db: Db,
        backend: Arc<dyn SandboxBackend>,
        blobs: Arc<dyn BlobStore>,
        settings: SessionSettings,
        credentials: Credentials,
        shutdown: CancellationToken,
        hooks: SessionHooks,
    ) -> Self {
        Sessions {
            inner: Arc::new(Inner {
                db,
                backend,
                blobs,
                s3: S3Client::new(settings.s3.clone()),
                credentials,
                tasks: TaskTracker::new(),
                shutdown,
                hooks,
                pool: crate::pool::WarmPool::new(),
                terminals: Default::default(),
                liveness: Default::default(),
                leases: Default::default(),
                boots: crate::boot_queue::BootQueue::new(settings.max_concurrent_boots),
                settings,
            }),
        }
    }

    /// What the lifecycle asks of the run loop.
    pub(crate) fn runs(&self) -> &dyn RunHooks {
        self.inner.hooks.runs.as_ref()
    }

    /// What the lifecycle asks of environments.
    pub(crate) fn environments(&self) -> &dyn EnvironmentHooks {
        self.inner.hooks.environments.as_ref()
    }

    pub fn backend_name(&self) -> &'static str {
        self.inner.backend.name()
    }

    /// The sandbox backend (tests and benchmarks reach through it).
    pub fn backend(&self) -> &Arc<dyn SandboxBackend> {
        &self.inner.backend
    }

    pub fn settings(&self) -> &SessionSettings {
        &self.inner.settings
    }

    pub fn db(&self) -> &Db {
        &self.inner.db
    }

    pub fn credentials(&self) -> &Credentials {
        &self.inner.credentials
    }

    /// The server's shutdown signal.
    pub fn shutdown(&self) -> &CancellationToken {
        &self.inner.shutdown
    }

    /// Runs `task` in the background, among the tasks [`Sessions::drain`] waits for.
    pub fn spawn<F>(&self, task: F)
    where
        F: std::future::Future<Output = ()> + Send + 'static,
    {
        self.inner.tasks.spawn(task);
    }

    /// Waits (bounded) for background boots and runs to finish, for a clean shutdown;
    /// whatever is still booting is picked up again by the next start's reconciliation. Then
    /// stops the warm pool ([`Sessions::stop_pool`]: its sandboxes go with the deployment's
    /// last process), on a bound of its own so that slow boots cannot cut it short.
    pub async fn drain(&self, within: Duration) {
        self.inner.tasks.close();
        let _ = tokio::time::timeout(within, self.inner.tasks.wait()).await;
        let _ = tokio::time::timeout(POOL_STOP, self.stop_pool()).await;
    }
}
