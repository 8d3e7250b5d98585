//! The backend conformance suite (`conformance/`) run against every implementation of
//! `SandboxBackend` in this crate: Docker with the sandbox daemon (what a deployment runs),
//! and Docker without it (every command a Docker exec: images that cannot run the daemon).
//! Docker-only behaviour (published ports, workspace volumes, the Engine's errors) is in
//! `docker.rs`.

mod conformance;

use async_trait::async_trait;
use conformance::Subject;
use sandbox_agents_sandbox::{DockerBackend, SandboxBackend};
use std::sync::Arc;

fn image() -> String {
    std::env::var("SANDBOX_AGENTS_IMAGE").unwrap_or_else(|_| "sandbox-agents-sandbox:1".to_owned())
}

/// The Docker backend on the Engine at `DOCKER_HOST` (or the default socket).
#[derive(Clone, Copy)]
struct Docker {
    /// Sandboxes get the daemon (`testkit::test_sandboxd`); without it every command is a
    /// Docker exec.
    daemon: bool,
}

#[async_trait]
impl Subject for Docker {
    async fn backend(&self, deployment: &str) -> Arc<dyn SandboxBackend> {
        let backend = DockerBackend::connect(deployment)
            .await
            .expect("the Docker Engine answers");
        if !self.daemon {
            return Arc::new(backend);
        }
        let binary = sandbox_agents_testkit::test_sandboxd();
        let binary = sandbox_agents_sandbox::docker::daemon::DaemonBinary::load(&binary)
            .unwrap_or_else(|e| {
                panic!(
                    "the sandbox daemon {} ({e}): build it with scripts/build-sandboxd",
                    binary.display()
                )
            });
        Arc::new(backend.with_daemon(binary))
    }

    fn image(&self) -> String {
        image()
    }
}

conformance_suite!(docker_with_daemon, crate::Docker { daemon: true });
conformance_suite!(docker_exec_only, crate::Docker { daemon: false });
