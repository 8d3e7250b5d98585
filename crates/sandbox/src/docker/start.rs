//! The Docker backend as [`DockerSettings`] describe it: the Engine connected, the daemon's
//! binary loaded, the network checked.

use super::daemon::DaemonBinary;
use super::{DockerBackend, DEFAULT_HOST};
use crate::{SandboxBackend, SandboxError};
use std::path::PathBuf;
use std::sync::Arc;

/// What the Docker backend starts with.
#[derive(Clone, Debug, Default)]
pub struct DockerSettings {
    /// The Engine's address (`DOCKER_HOST`); `None`: the local socket.
    pub host: Option<String>,
    /// The Docker network sandboxes join (`--docker-network`); `None`: the default bridge,
    /// ports published on the host's loopback.
    pub network: Option<String>,
    /// The sandbox daemon's binary mounted into every sandbox (`--sandboxd-bin`); `None`:
    /// every command is a Docker exec.
    pub sandboxd: Option<PathBuf>,
    /// The control plane's egress proxy (`--egress-proxy`): sandboxes get no network of
    /// their own, only their socket to it. `None`: the network above, unfiltered.
    pub egress: Option<Arc<dyn crate::egress::EgressGateway>>,
}

/// Why the backend did not start.
pub(crate) enum StartError {
    /// The Engine does not answer (now): the deployment serves without sandboxes until it does.
    Unreachable(SandboxError),
    /// A setting that cannot work: the server does not start.
    Config(SandboxError),
}

pub(crate) async fn connect(
    settings: &DockerSettings,
    deployment: &str,
) -> Result<Arc<dyn SandboxBackend>, StartError> {
    let host = settings.host.as_deref().unwrap_or(DEFAULT_HOST);
    let backend = DockerBackend::connect_to(host, deployment)
        .await
        .map_err(StartError::Unreachable)?;
    let backend = with_daemon(backend, settings.sandboxd.as_deref());
    // A network that is named but missing is a configuration error, not an outage: the
    // server refuses to start rather than boot sandboxes it could not reach.
    let backend = match &settings.network {
        Some(net) => backend
            .with_network(net)
            .await
            .map_err(StartError::Config)?,
        None => backend,
    };
    let backend = match &settings.egress {
        Some(gateway) => backend
            .with_egress(gateway.clone())
            .await
            .map_err(StartError::Unreachable)?,
        None => backend,
    };
    Ok(Arc::new(backend))
}

/// The backend with the daemon at `path`, when there is one to load; without it (every
/// command a Docker exec) otherwise, which is said once.
fn with_daemon(backend: DockerBackend, path: Option<&std::path::Path>) -> DockerBackend {
    let Some(path) = path else {
        tracing::info!(
            "no sandbox daemon (--sandboxd-bin): every command in a sandbox is a Docker exec"
        );
        return backend;
    };
    match DaemonBinary::load(path) {
        Ok(binary) => {
            tracing::info!(path = %path.display(), digest = %&binary.digest[..16], "sandboxes get their daemon");
            backend.with_daemon(binary)
        }
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e, "cannot read the sandbox daemon: every command in a sandbox is a Docker exec");
            backend
        }
    }
}
