//! Which backend a deployment runs its sandboxes on, and with what: one value chosen when the
//! server starts ([`BackendSettings`]), and the one place that turns it into a
//! [`SandboxBackend`] ([`BackendSettings::connect`]). The server resolves its flags into this
//! value; nothing outside this crate knows what a backend needs to start.

pub use crate::docker::DockerSettings;
pub use crate::kubernetes::KubernetesSettings;
use crate::unavailable::Unavailable;
use crate::{Result, SandboxBackend};
use std::sync::Arc;

/// The backend of a deployment and its settings.
// Made once at start and cloned a handful of times: the variants' sizes do not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug)]
pub enum BackendSettings {
    /// Sandboxes are containers of one Docker Engine.
    Docker(DockerSettings),
    /// Sandboxes are pods of a Kubernetes cluster.
    Kubernetes(KubernetesSettings),
    /// Sandboxes held in this process ([`crate::memory`]): a test double, for tests of what
    /// sits on the trait. Every server given this value shares the one plane, as servers
    /// share one Docker Engine; each sees its own deployment's sandboxes.
    Memory(Arc<crate::memory::MemoryBackend>),
}

impl BackendSettings {
    /// `docker`, ...: the name `GET /api/backends` and sessions' `backend` show.
    pub fn name(&self) -> &'static str {
        match self {
            BackendSettings::Docker(_) => "docker",
            BackendSettings::Kubernetes(_) => "kubernetes",
            BackendSettings::Memory(_) => "memory",
        }
    }

    /// The backend of `deployment`. A backend that cannot be reached now is logged and
    /// replaced by one that refuses every operation with the reason ([`Unavailable`]), so the
    /// API still serves what needs no sandbox; an error is a configuration that can never
    /// work (a named Docker network that does not exist), which stops the server instead.
    /// A cluster is checked whole at start (reachable, the namespace, the permissions, a
    /// dry run of the pod): any failure there stops the server, since a control plane
    /// pointed at the wrong cluster or namespace should say so rather than serve.
    pub async fn connect(&self, deployment: &str) -> Result<Arc<dyn SandboxBackend>> {
        match self {
            BackendSettings::Memory(plane) if plane.deployment() == deployment => Ok(plane.clone()),
            BackendSettings::Memory(plane) => Ok(Arc::new(plane.for_deployment(deployment))),
            BackendSettings::Kubernetes(k) => Ok(Arc::new(
                crate::kubernetes::KubernetesBackend::connect(k, deployment).await?,
            )),
            BackendSettings::Docker(docker) => {
                match crate::docker::start::connect(docker, deployment).await {
                    Ok(backend) => Ok(backend),
                    Err(crate::docker::start::StartError::Config(e)) => Err(e),
                    Err(crate::docker::start::StartError::Unreachable(e)) => {
                        tracing::error!(error = %e, "the docker backend is unavailable: sessions cannot boot until it is");
                        Ok(Arc::new(Unavailable {
                            name: self.name(),
                            reason: e.to_string(),
                        }))
                    }
                }
            }
        }
    }
}
