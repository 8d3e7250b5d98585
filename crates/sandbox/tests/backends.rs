//! The backend conformance suite (`conformance/`) run against every implementation of
//! `SandboxBackend` in this crate: Docker with the sandbox daemon (what a deployment runs),
//! Docker without it (every command a Docker exec: images that cannot run the daemon), and
//! the in-memory test double (`memory/`), which runs the suite in seconds without Docker,
//! and Kubernetes on the test cluster (`testkit::kube`: a real API server, our test node),
//! with the daemons reached over the pod network and through the API server's port-forward.
//! Docker-only behaviour (published ports, workspace volumes, the Engine's errors) is in
//! `docker.rs`.

mod conformance;
mod support;

conformance_suite!(docker_with_daemon, crate::support::Docker { daemon: true });
conformance_suite!(docker_exec_only, crate::support::Docker { daemon: false });
conformance_suite!(in_memory, crate::support::Memory);
conformance_suite!(kubernetes, crate::support::Kubernetes::new().await);
conformance_suite!(
    kubernetes_port_forward,
    crate::support::Kubernetes::port_forward().await
);
