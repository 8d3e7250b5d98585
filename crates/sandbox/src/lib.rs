//! Where sessions' sandboxes run. [`SandboxBackend`] is what the control plane needs from a
//! compute plane, in sandbox terms; `docker` implements it on the Docker Engine API (and is
//! the only module that knows Docker), `memory` is a test double held in the process, and a
//! Kubernetes backend is the next. [`BackendSettings`] picks one at start and is the only
//! place a backend is made; [`daemon_link`] is how any of them reaches a sandbox's daemon.
//! Every implementation runs the conformance suite (`tests/conformance/`). Every sandbox a
//! backend creates carries labels naming the deployment and the session, so a reconciler can
//! find what nobody owns.

mod daemon_exec;
pub mod daemon_link;
pub mod docker;
pub mod egress;
pub mod kubernetes;
pub mod memory;
pub mod path;
pub mod settings;
pub mod unavailable;

pub use daemon_link::DaemonIo;
pub use docker::DockerBackend;
pub use egress::EgressGateway;
pub use kubernetes::{KubernetesBackend, KubernetesSettings};
pub use memory::MemoryBackend;
/// The daemon's protocol and client, for the services that talk to it.
pub use sandboxd;
/// Which stream a chunk of a command's output came on.
pub use sandboxd::client::Stream as OutputStream;
pub use settings::{BackendSettings, DockerSettings};
/// What takes a command's output as it comes (see [`SandboxBackend::exec_streaming`]).
pub type OnOutput<'a> = dyn for<'b> FnMut(OutputStream, &'b [u8]) + Send + 'a;

/// Hands a finished command's output to `on_output`, stdout first.
pub(crate) fn emit_whole(out: &ExecOutput, on_output: &mut OnOutput<'_>) {
    if !out.stdout.is_empty() {
        on_output(OutputStream::Stdout, &out.stdout);
    }
    if !out.stderr.is_empty() {
        on_output(OutputStream::Stderr, &out.stderr);
    }
}

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::BoxStream;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

/// Exit code of a command that timed out (`timeout`'s), on every backend.
pub const TIMEOUT_EXIT: i64 = 124;
/// How long past a command's timeout the control plane keeps waiting for its end.
pub const HOST_GRACE: Duration = Duration::from_secs(15);

/// The workspace root inside every sandbox; all workspace paths are relative to it.
pub const WORKDIR: &str = "/workspace";
/// Label naming the deployment that owns a sandbox.
pub const LABEL_DEPLOYMENT: &str = "io.sandbox-agents.deployment";
/// Label naming the session a sandbox belongs to.
pub const LABEL_SESSION: &str = "io.sandbox-agents.session";
/// Label of a warm-pool sandbox, naming the image it was pooled for. Such a sandbox has no
/// session label (it was created before any session); who owns it is the database's record.
pub const LABEL_POOL: &str = "io.sandbox-agents.pool";

#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    /// The sandbox does not exist (any more).
    #[error("the sandbox {0} does not exist")]
    NotFound(String),
    /// A path inside the sandbox that does not exist.
    #[error("no such file or directory: {0}")]
    NoSuchPath(String),
    /// The image is not present and cannot be pulled (on Kubernetes the kubelet's reason
    /// follows the image's name).
    #[error("the image {0} is not available to the sandbox backend: build it first (images/sandbox/build-offline.sh), or make it pullable by the cluster")]
    ImageMissing(String),
    /// The sandbox's daemon went away while it ran a command (the command, or something else
    /// in the sandbox, may have killed it): the command's outcome is unknown. The next call
    /// starts the daemon again.
    #[error("the sandbox's daemon went away while the command ran (did the command kill it?), so its outcome is unknown; the next command starts the daemon again")]
    DaemonLost,
    /// The backend is unreachable or refused the request.
    #[error("sandbox backend error: {0}")]
    Backend(String),
}

pub type Result<T, E = SandboxError> = std::result::Result<T, E>;

/// The address sandboxes' exposed ports are published on: loopback only, and never the
/// loopback address people reach the API at. Browsers send cookies to every port of a host,
/// so a port published on 127.0.0.1 would receive the operator's session cookie from a page
/// that fetches it directly; 127.0.0.2 is another host (and another site) to a browser.
/// (The whole of 127.0.0.0/8 is loopback on Linux.)
pub const PUBLISH_IP: std::net::Ipv4Addr = std::net::Ipv4Addr::new(127, 0, 0, 2);

/// Resource limits of one sandbox.
#[derive(Clone, Debug, PartialEq)]
pub struct Limits {
    /// CPUs (fractional).
    pub cpus: f64,
    pub memory_bytes: i64,
    pub pids: i64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            cpus: 1.0,
            memory_bytes: 1024 * 1024 * 1024,
            pids: 512,
        }
    }
}

/// What to create.
#[derive(Clone, Debug)]
pub struct SandboxSpec {
    /// The session id (its canonical string): the sandbox's name and label.
    pub session: String,
    pub image: String,
    pub env: BTreeMap<String, String>,
    /// Container ports to publish on [`PUBLISH_IP`] (random host ports), or to reach on the
    /// sandbox network.
    pub exposed_ports: Vec<u16>,
    pub limits: Limits,
    /// The runtime class to run under (a Kubernetes RuntimeClass), one the operator offers;
    /// `None`: the backend's default. Backends without runtime classes get `None` only (the
    /// sessions layer refuses a session naming one on them).
    pub runtime_class: Option<String>,
}

/// A created, running sandbox.
#[derive(Clone, Debug)]
pub struct Sandbox {
    /// The backend's id for it (on Docker, the container id).
    pub id: String,
    pub workdir: String,
    /// Container port → where it is reachable from the control plane (`PUBLISH_IP`:<random>,
    /// or the sandbox's address on the network it shares with the control plane).
    pub ports: BTreeMap<u16, SocketAddr>,
}

/// What `inspect` finds.
#[derive(Clone, Debug, PartialEq)]
pub struct SandboxStatus {
    pub running: bool,
    pub ports: BTreeMap<u16, SocketAddr>,
}

/// A sandbox of this deployment, as listed for the reconciler.
#[derive(Clone, Debug)]
pub struct ListedSandbox {
    pub id: String,
    /// The backend's name for it (on Docker, the container name without the leading `/`).
    pub name: String,
    /// The session label, if any.
    pub session: Option<String>,
    /// The pool label (the image it was pooled for), if any.
    pub pool: Option<String>,
    pub running: bool,
}

/// A sandbox that ended on its own (its process killed for memory, evicted, its node lost, or
/// removed by someone else), as a backend that watches its sandboxes reports it
/// ([`SandboxBackend::ended`]). Ends the control plane asked for are reported too: whoever
/// consumes these checks whether the sandbox was still meant to run.
#[derive(Clone, Debug, PartialEq)]
pub struct SandboxEnded {
    pub id: String,
    /// Why, for a person: the backend's own words (`OOMKilled (exit 137)`, `Evicted: ...`).
    pub reason: String,
}

/// A command to run. `Debug` shows the environment's names, never its values (secrets are
/// among them).
#[derive(Clone)]
pub struct ExecRequest {
    /// argv; use `["sh", "-c", script]` for shell syntax.
    pub argv: Vec<String>,
    /// Working directory inside the sandbox (default [`WORKDIR`]).
    pub workdir: Option<String>,
    pub env: Vec<(String, String)>,
    /// After this the command's process tree (only it) is killed and `timed_out` is set.
    pub timeout: Duration,
    /// At most this many bytes of stdout, and of stderr, are kept; the rest is drained.
    pub max_output: usize,
    /// Bytes written to the command's stdin, then stdin is closed.
    pub stdin: Option<Bytes>,
}

impl std::fmt::Debug for ExecRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let env: Vec<&str> = self.env.iter().map(|(k, _)| k.as_str()).collect();
        f.debug_struct("ExecRequest")
            .field("argv", &self.argv)
            .field("workdir", &self.workdir)
            .field("env", &env)
            .field("timeout", &self.timeout)
            .field("max_output", &self.max_output)
            .field("stdin", &self.stdin.as_ref().map(|b| b.len()))
            .finish()
    }
}

/// What a command did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ExecOutput {
    /// The exit code; 124 when the command timed out.
    pub exit_code: i64,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    pub stdout_truncated: bool,
    pub stderr_truncated: bool,
    pub timed_out: bool,
}

/// Label of an image built for environments, naming the digest of what it was built from
/// (`environment_builds.digest`), so a sweep can tell which images are whose.
pub const LABEL_ENVIRONMENT_DIGEST: &str = "io.sandbox-agents.environment-digest";

mod image;
pub use image::{BuildCause, BuildFailure, BuildLog, ImageRecipe};

/// How a backend keeps what a sandbox changed outside its workspace in a snapshot.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SnapshotKind {
    /// An image of the sandbox's filesystem ([`SandboxBackend::snapshot_image`]); the
    /// workspace goes in the snapshot's archive beside it.
    Image,
    /// Only the workspace's archive: packages installed outside it are not kept.
    ArchiveOnly,
}

/// What a backend can do, as it declares it: `GET /api/backends` shows it, and the
/// conformance suite runs the cases that need each part only where it is declared.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Capabilities {
    pub snapshots: SnapshotKind,
    /// [`SandboxBackend::build_image`] (environments with packages).
    pub image_builds: bool,
    /// Each sandbox runs the sandbox daemon: background processes, terminals (a PTY),
    /// command output as it is written, files by absolute path.
    pub daemon: bool,
    /// [`SandboxBackend::create_pooled`] and [`SandboxBackend::assign`] (a warm pool).
    pub warm_pool: bool,
    /// [`SandboxBackend::disk_usage`] measures what sandboxes wrote (the disk limit).
    pub disk_measurement: bool,
    /// What runs in a sandbox is isolated and limited by the kernel: no capabilities, no new
    /// privileges, the spec's limits in its cgroup. A backend that runs commands in no real
    /// process (the in-memory test double) has nothing to isolate and declares false; the
    /// conformance suite checks the kernel's view only where this is declared.
    pub isolation: bool,
    /// The control plane writes as root in a sandbox: [`SandboxBackend::put_system_file`],
    /// [`SandboxBackend::remove_system_path`], and archives into directories of the image's
    /// that the sandbox user may not write (an extra CA, `s3_mount` staging). A pod runs
    /// with no root at all.
    pub system_files: bool,
    /// The spec's pids limit is the sandbox's own (on Kubernetes the kubelet sets one per
    /// node, `podPidsLimit`).
    pub pids_limit: bool,
}

impl Capabilities {
    /// A backend that can do nothing beyond the trait's required methods.
    pub const NONE: Capabilities = Capabilities {
        snapshots: SnapshotKind::ArchiveOnly,
        image_builds: false,
        daemon: false,
        warm_pool: false,
        disk_measurement: false,
        isolation: false,
        system_files: false,
        pids_limit: false,
    };
}

/// A compute plane that runs sandboxes.
#[async_trait]
pub trait SandboxBackend: Send + Sync + 'static {
    /// `docker`, `kubernetes`, ...: what `GET /api/backends` lists.
    fn name(&self) -> &'static str;

    /// What this backend can do (see [`Capabilities`]).
    fn capabilities(&self) -> Capabilities {
        Capabilities::NONE
    }

    /// Creates and starts a sandbox; returns once it runs. Any sandbox left over with the same
    /// session (a crashed earlier boot) is replaced.
    async fn create(&self, spec: &SandboxSpec) -> Result<Sandbox>;

    /// Creates and starts a sandbox for the warm pool, named `name`: hardened and limited
    /// exactly as [`SandboxBackend::create`] would for `spec`, but labelled as pooled for
    /// `spec.image` instead of for a session (`spec.session` is ignored), so it can later be
    /// handed to any session. `spec.exposed_ports` must be empty (ports are published at
    /// creation, for a session that does not exist yet).
    async fn create_pooled(&self, name: &str, spec: &SandboxSpec) -> Result<Sandbox> {
        let _ = (name, spec);
        Err(SandboxError::Backend(format!(
            "the {} backend has no warm pool",
            self.name()
        )))
    }

    /// The name of a new warm-pool sandbox, unique by `key` (a fresh id): what the pool
    /// reserves, passes to [`SandboxBackend::create_pooled`] and finds again in
    /// [`SandboxBackend::list`], in the backend's own naming (on Docker, a name of the
    /// deployment's containers, `sa-pool-<key>`).
    fn pooled_name(&self, key: &str) -> String {
        format!("pool-{key}")
    }

    /// Names a pooled sandbox after the session a claim gave it to (`sa-<session>` on
    /// Docker, as a sandbox created for the session is named), so operators and tools that
    /// look for a session's sandbox by name find it. A sandbox holding the name already (left
    /// by an unfinished boot of the same session) is removed first.
    async fn assign(&self, id: &str, session: &str) -> Result<()> {
        let _ = (id, session);
        Ok(())
    }

    /// `None` when the sandbox no longer exists.
    async fn inspect(&self, id: &str) -> Result<Option<SandboxStatus>>;

    /// This deployment's sandboxes as they end, for as long as the stream is read (it
    /// reconnects by itself); `None` when the backend does not watch its sandboxes, and a
    /// lost one is found when it is next used or at the next start.
    fn ended(&self) -> Option<BoxStream<'static, SandboxEnded>> {
        None
    }

    /// Whether the sandbox is known to run without asking the backend (the Docker backend:
    /// this process's connection to its daemon is open). `false` means unknown: ask
    /// [`SandboxBackend::inspect`].
    fn known_running(&self, id: &str) -> bool {
        let _ = id;
        false
    }

    /// The client of the sandbox's daemon (`sandboxd`), for what only it does: background
    /// processes, terminals, files by absolute path, output as it is written. `None` when
    /// the backend has none or it cannot be reached (its image cannot run it).
    async fn daemon(&self, id: &str) -> Option<sandboxd::client::Client> {
        let _ = id;
        None
    }

    /// A TCP connection to `port` on the sandbox's loopback, as a byte stream: how the
    /// control plane reaches an exposed port that has no address of its own to connect to
    /// (a sandbox behind the egress proxy has no network but loopback). `Ok(None)` when
    /// nothing listens on the port. Through the sandbox's daemon by default, so an error
    /// when it has none or it cannot be reached.
    async fn connect_port(&self, id: &str, port: u16) -> Result<Option<Box<dyn DaemonIo>>> {
        let Some(client) = self.daemon(id).await else {
            return Err(SandboxError::Backend(format!(
                "port {port} of the sandbox {id} can be reached only through its daemon, \
                 which does not answer"
            )));
        };
        match client.connect_port(port).await {
            Ok(stream) => Ok(Some(Box::new(stream))),
            Err(e) if sandboxd::client::is_not_found(&e) => Ok(None),
            Err(e) => Err(SandboxError::Backend(format!(
                "connecting to port {port} of the sandbox {id}: {e}"
            ))),
        }
    }

    async fn exec(&self, id: &str, req: &ExecRequest) -> Result<ExecOutput>;

    /// [`SandboxBackend::exec`], handing each chunk of output to `on_output` as the command
    /// writes it (through the daemon), or all of it when the command ends (where output
    /// cannot be had sooner). The chunks are what the output holds: capped the same way.
    async fn exec_streaming(
        &self,
        id: &str,
        req: &ExecRequest,
        on_output: &mut OnOutput<'_>,
    ) -> Result<ExecOutput> {
        let out = self.exec(id, req).await?;
        emit_whole(&out, on_output);
        Ok(out)
    }

    /// Extracts a tar archive into `dir` (absolute, inside the sandbox), as the sandbox user.
    async fn put_archive(&self, id: &str, dir: &str, tar: Bytes) -> Result<()>;

    /// Extracts an archive the control plane built itself (an upload's framing) or that
    /// [`SandboxBackend::get_archive`] of one of this deployment's sandboxes produced (a stopped
    /// workspace, a snapshot), streamed, as it is: its entries already belong to the sandbox
    /// user, so nothing is rewritten and nothing is held in memory whatever its size. Never
    /// pass it an archive from outside; that is what [`SandboxBackend::put_archive`] checks and
    /// rewrites.
    async fn put_archive_stream(
        &self,
        id: &str,
        dir: &str,
        tar: BoxStream<'static, std::io::Result<Bytes>>,
    ) -> Result<()> {
        use futures::TryStreamExt;
        let chunks: Vec<Bytes> = tar
            .try_collect()
            .await
            .map_err(|e| SandboxError::Backend(format!("reading the archive: {e}")))?;
        self.put_archive(id, dir, Bytes::from(chunks.concat()))
            .await
    }

    /// Writes one file at `path` (absolute) owned by root with `mode`, replacing what is
    /// there; missing parent directories are created owned by root. For the few system files
    /// the control plane itself sets at boot (the trust store), never for anything a caller
    /// sends: the sandbox user cannot change such a file afterwards.
    async fn put_system_file(&self, id: &str, path: &str, data: Bytes, mode: u32) -> Result<()> {
        let _ = (id, path, data, mode);
        Err(SandboxError::Backend(format!(
            "the {} backend cannot write system files",
            self.name()
        )))
    }

    /// Removes `path` (absolute) and everything under it as root, whoever owns it; a missing
    /// path is fine. For paths the control plane itself stages root-owned files at (an
    /// `s3_mount`'s directory, staged afresh at every boot), never for a path a caller names.
    async fn remove_system_path(&self, id: &str, path: &str) -> Result<()> {
        let _ = (id, path);
        Err(SandboxError::Backend(format!(
            "the {} backend cannot remove system paths",
            self.name()
        )))
    }

    /// A tar archive of `path` (absolute), streamed.
    async fn get_archive(&self, id: &str, path: &str) -> Result<BoxStream<'static, Result<Bytes>>>;

    /// Stops the sandbox, giving its processes `grace` to exit.
    async fn stop(&self, id: &str, grace: Duration) -> Result<()>;

    /// Removes the sandbox and its filesystem. Removing one that is gone is not an error.
    async fn remove(&self, id: &str) -> Result<()>;

    /// Every sandbox this deployment created, running or not.
    async fn list(&self) -> Result<Vec<ListedSandbox>>;

    /// The bytes each running sandbox of this deployment has written to its own filesystem
    /// (for Docker, the container's writable layer and its workspace volume), by sandbox id; what the disk limit is
    /// enforced on. Backends that cannot tell answer with nothing.
    async fn disk_usage(&self) -> Result<Vec<(String, u64)>> {
        Ok(Vec::new())
    }

    /// Removes what this deployment's sandboxes left behind once they were gone: on Docker,
    /// workspace volumes no container uses any more (their sandbox was removed by someone else
    /// without its volumes, e.g. `docker rm -f`); on Kubernetes, NetworkPolicies whose pod was
    /// never made or is gone. Returns how many. Nothing a live sandbox uses is ever one of
    /// them. Backends that leave nothing behind have none.
    async fn remove_strays(&self) -> Result<usize> {
        Ok(0)
    }

    /// Captures the sandbox's filesystem outside the workspace (installed packages included)
    /// as an image; returns its reference. The workspace is never in it: the caller archives
    /// the workspace itself (leaving out what must not be kept, such as mounted buckets).
    async fn snapshot_image(&self, id: &str, name: &str) -> Result<String>;

    /// Removes an image made by [`SandboxBackend::snapshot_image`] or
    /// [`SandboxBackend::build_image`]; a missing one is fine.
    async fn remove_image(&self, image: &str) -> Result<()>;

    /// Builds `recipe` and tags the image, streaming the builder's output to `log`. The
    /// outer error is the backend's (unreachable, refused); the inner one is the build's own
    /// failure (a step that failed, a base image that cannot be used), typed.
    async fn build_image(
        &self,
        recipe: &ImageRecipe,
        log: BuildLog<'_>,
    ) -> Result<std::result::Result<(), BuildFailure>> {
        let _ = (recipe, log);
        Err(SandboxError::Backend(format!(
            "the {} backend cannot build images",
            self.name()
        )))
    }

    /// What [`SandboxBackend::build_image`] makes of `recipe`, for a person reading the
    /// build's log (on Docker, the Dockerfile under a `# Dockerfile` heading); `None` when
    /// there is nothing more to show than the recipe itself.
    fn describe_build(&self, recipe: &ImageRecipe) -> Option<String> {
        let _ = recipe;
        None
    }

    /// Whether the image is present on the backend.
    async fn image_exists(&self, image: &str) -> Result<bool> {
        let _ = image;
        Ok(false)
    }
}
