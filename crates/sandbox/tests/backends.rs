//! The backend conformance suite (`conformance/`) run against every implementation of
//! `SandboxBackend` in this crate: Docker with the sandbox daemon (what a deployment runs),
//! and Docker without it (every command a Docker exec: images that cannot run the daemon).
//! Docker-only behaviour (published ports, workspace volumes, the Engine's errors) is in
//! `docker.rs`.

mod conformance;
mod support;

conformance_suite!(docker_with_daemon, crate::support::Docker { daemon: true });
conformance_suite!(docker_exec_only, crate::support::Docker { daemon: false });
