//! The [`Runs`] service: the lifecycle it drives runs in, the model clients, and what this
//! process knows about the runs it drives.

use crate::local::LocalRuns;
use crate::models::ModelClients;
use sandbox_agents_sessions::Sessions;
use sandbox_agents_store::admission::Limits;
use sandbox_agents_store::{Db, EventHub};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// The run loop service; cheap to clone.
#[derive(Clone)]
pub struct Runs {
    pub(crate) inner: Arc<Inner>,
}

pub(crate) struct Inner {
    /// The lifecycle: the sandbox a run's tools use, waking it, the background tasks.
    pub sessions: Sessions,
    pub db: Db,
    pub shutdown: CancellationToken,
    /// The model clients runs use, one per transport that is configured.
    pub models: ModelClients,
    /// The runs this process drives, each with the token that cancels it.
    pub runs: LocalRuns,
    /// The live event fan-out, once the server attached it: how a run waiting on a client
    /// learns of an answer committed by any process (without it, it polls).
    pub hub: std::sync::OnceLock<EventHub>,
    /// The models' input windows, from the proxies' catalogues (`compaction.rs`).
    pub windows: crate::compaction::Windows,
    /// `--max-runs`, `--max-runs-per-project` (`admission.rs`).
    pub run_limits: Limits,
    /// Woken when a turn of this process ends or parks, for the runs waiting under the limits.
    pub run_room: tokio::sync::Notify,
    /// Bounds the admission asks in flight (`admission.rs`).
    pub admission_asks: tokio::sync::Semaphore,
    /// The connections to MCP servers of this process's sessions (`mcp.rs`).
    pub mcp: std::sync::OnceLock<std::sync::Arc<sandbox_agents_mcp::McpHub>>,
}

impl Runs {
    /// Gives runs the process's event hub (once; later calls are ignored).
    pub fn attach_hub(&self, hub: EventHub) {
        let _ = self.inner.hub.set(hub);
    }

    /// The lifecycle these runs use.
    pub fn sessions(&self) -> &Sessions {
        &self.inner.sessions
    }
}
