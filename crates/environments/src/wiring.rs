//! How environments and the lifecycle are made together: each holds the other (a finished
//! build boots the sessions that waited; the lifecycle asks for the `analysis` environment
//! through its hooks), so [`Environments::new`] builds both in one `Arc::new_cyclic`. Apart
//! from `service.rs` and `analysis.rs` (the hooks), so neither of those imports the other.

use crate::service::Inner;
use crate::{EnvironmentSettings, Environments};
use sandbox_agents_sessions::{EnvironmentHooks, Sessions};
use sandbox_agents_workspace::BlobStore;
use std::sync::Arc;
use tokio::sync::Semaphore;
use tokio_util::task::TaskTracker;

impl Environments {
    /// Environments and the lifecycle they hold, made together: `lifecycle` gets the hooks the
    /// lifecycle calls for environments (they hold these environments weakly, `analysis.rs`)
    /// and builds the [`Sessions`] they use. The database and the shutdown signal are the
    /// lifecycle's.
    pub fn new(
        lifecycle: impl FnOnce(Arc<dyn EnvironmentHooks>) -> Sessions,
        blobs: Arc<dyn BlobStore>,
        deployment: String,
        settings: EnvironmentSettings,
    ) -> Self {
        let inner = Arc::new_cyclic(|weak| {
            let sessions = lifecycle(crate::analysis::for_lifecycle(weak.clone()));
            Inner {
                db: sessions.db().clone(),
                shutdown: sessions.shutdown().clone(),
                backends: vec![sessions.backend_name().to_owned()],
                sessions,
                blobs,
                deployment,
                permits: Arc::new(Semaphore::new(settings.max_concurrent_builds.max(1))),
                settings,
                inflight: Default::default(),
                tasks: TaskTracker::new(),
            }
        });
        Environments { inner }
    }
}
