//! What every handler can reach.

use sandbox_agents_agent::Runs;
use sandbox_agents_credentials::Credentials;
use sandbox_agents_sessions::Sessions;
use sandbox_agents_store::{Db, EventHub};
use serde::Serialize;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;
use utoipa::ToSchema;

/// Settings the API needs from the server's configuration.
#[derive(Clone, Debug)]
pub struct ApiSettings {
    /// The model an agent with `model: null` uses; resolved into every `Agent` response.
    pub default_model: String,
    /// The compute planes this deployment runs, the default first.
    pub backends: Vec<BackendInfo>,
    /// Silence after which an event stream writes `: ping` (15 s; the client's read timeout
    /// is 60 s). Tests shorten it.
    pub heartbeat: std::time::Duration,
    /// The LiteLLM proxy whose catalogue `GET /api/models` shows; None when not configured.
    pub model_proxy: Option<sandbox_agents_model::Catalogue>,
    /// Where browsers reach the API and its pages, without a trailing slash (links in `Me`,
    /// recovery links, whether cookies are `Secure`).
    pub public_url: String,
    /// The hosts and origins the API's listener answers for.
    pub hosts: Arc<crate::guard::HostPolicy>,
    /// Where previews are served (their own origin) and what signs their URLs.
    pub preview: crate::preview::links::PreviewSettings,
    /// The hosts the preview listener answers for.
    pub preview_hosts: crate::guard::HostPolicy,
    /// Checks credentials (the shared token, API keys) or reports open mode.
    pub auth: Arc<crate::authenticator::Auth>,
    /// Where the web UI's files come from: the embedded build (the binary), or a folder.
    pub ui: crate::ui::UiAssets,
    /// Whether sandboxes leave through the egress proxy (`--egress-proxy` on a backend with
    /// a network), so that an empty egress log can say why.
    pub egress: bool,
}

/// `BackendInfo`: a compute plane this deployment runs, as configured.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct BackendInfo {
    pub name: String,
    pub default: bool,
    /// What it can do, as the backend declares it.
    pub capabilities: BackendCapabilities,
    /// The runtime classes an agent's or environment's `runtime_class` may name
    /// (`--kubernetes-runtime-classes`); empty when there is none to choose.
    pub runtime_classes: Vec<String>,
}

/// What a backend can do, as it declares it.
#[derive(Clone, Copy, Debug, Serialize, ToSchema)]
pub struct BackendCapabilities {
    /// How a snapshot keeps what a sandbox changed outside its workspace: `image` (an image
    /// of its filesystem, beside the workspace's archive) or `archive_only` (the workspace
    /// alone).
    #[schema(value_type = String, pattern = "^(image|archive_only)$")]
    pub snapshots: sandbox_agents_sandbox::SnapshotKind,
    /// Environments with packages can be built.
    pub image_builds: bool,
    /// Sandboxes run the sandbox daemon: background processes, terminals, command output
    /// as it is written.
    pub daemon: bool,
    /// Sessions can start from a warm pool of sandboxes.
    pub warm_pool: bool,
    /// The disk limit can be enforced (what a sandbox writes is measured).
    pub disk_measurement: bool,
    /// Each sandbox is isolated by the kernel (its own namespaces, no capabilities,
    /// no-new-privileges) and held to its CPU, memory and process limits. Only a test
    /// double lacks it.
    pub isolation: bool,
}

impl From<sandbox_agents_sandbox::Capabilities> for BackendCapabilities {
    fn from(c: sandbox_agents_sandbox::Capabilities) -> Self {
        BackendCapabilities {
            snapshots: c.snapshots,
            image_builds: c.image_builds,
            daemon: c.daemon,
            warm_pool: c.warm_pool,
            disk_measurement: c.disk_measurement,
            isolation: c.isolation,
        }
    }
}

impl BackendInfo {
    /// The configured backend, as the one (and so default) entry of `GET /api/backends`, with
    /// the runtime classes it offers.
    pub fn configured(
        backend: &dyn sandbox_agents_sandbox::SandboxBackend,
        runtime_classes: &[String],
    ) -> Self {
        BackendInfo {
            name: backend.name().to_owned(),
            default: true,
            capabilities: backend.capabilities().into(),
            runtime_classes: runtime_classes.to_vec(),
        }
    }
}

#[derive(Clone)]
pub struct AppState {
    pub db: Db,
    pub hub: EventHub,
    /// Which project a request names, from memory while that is safe.
    pub project_ids: sandbox_agents_store::ProjectIds,
    pub settings: Arc<ApiSettings>,
    /// Sessions' sandboxes: boot, stop, exec, files.
    pub sessions: Sessions,
    /// Runs: messages, interrupts, client tool calls.
    pub runs: Runs,
    /// Agents' schedules, and the worker that fires them.
    pub schedules: sandbox_agents_schedules::Schedules,
    /// The E2B-compatible API's sandboxes (sessions of ours).
    pub e2b: sandbox_agents_e2b::E2b,
    /// Secrets and git deploy keys.
    pub credentials: Credentials,
    /// Environments and their image builds.
    pub environments: sandbox_agents_environments::Environments,
    /// Skill bundles and their versions.
    pub bundles: sandbox_agents_skills::Bundles,
    /// Sealing webhook secrets, checking their URLs, and test pings.
    pub webhooks: sandbox_agents_webhooks::Webhooks,
    /// Cancelled when the server shuts down: open streams end so that shutdown is not blocked
    /// (event streams through the hub's feeds, which it stops; terminals watch it directly).
    pub shutdown: CancellationToken,
}
