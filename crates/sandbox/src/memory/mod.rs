//! [`SandboxBackend`] held entirely in this process: a test double, so that what sits on the
//! trait (sessions, admission, the pool, the reconciler, runs) is tested in seconds without
//! Docker. It passes the conformance suite for what it declares ([`Capabilities`]).
//!
//! What it is: sandboxes as records (id, name, session or pool label, running flag, env,
//! ports), each with a filesystem of its own (`fs.rs`: a map of absolute paths to files,
//! directories and a few devices, with owners and modes; `/workspace` the sandbox user's),
//! archives in and out with the Docker backend's rules (`archive.rs`), images as copies of a
//! filesystem (the base image, and snapshots: everything outside `/workspace`), and commands
//! run by a small interpreter (`shell/`) over that filesystem, as uid 1000, with the
//! request's deadline and output caps. Tests script other commands with
//! [`MemoryBackend::on_command`].
//!
//! What it is not: no isolation and no limits (nothing runs in a real process: there is no
//! kernel to isolate or limit it, so `Capabilities::isolation` is false), no daemon (no
//! background processes, terminals or output as it is written: `exec_streaming` hands
//! output over at the end), no image builds, no reachable ports (an exposed port maps to
//! `127.0.0.2:0`, where nothing answers, and `connect_port` finds nothing listening), and
//! no shell beyond the subset `shell/parse.rs` names. A command in the background runs to its end at once (see `shell/`).

mod archive;
mod exec;
mod fs;
mod shell;

pub use shell::{CommandCall, CommandHandler};

use crate::{
    Capabilities, ExecOutput, ExecRequest, ListedSandbox, Result, Sandbox, SandboxBackend,
    SandboxError, SandboxSpec, SandboxStatus, SnapshotKind, PUBLISH_IP, WORKDIR,
};
use async_trait::async_trait;
use bytes::Bytes;
use fs::{normalize, Entry, Fs, FsError, SANDBOX_UID};
use futures::stream::{self, BoxStream, StreamExt, TryStreamExt};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard, RwLock};
use std::time::Duration;

/// The image every in-memory backend has from the start (the server's default `--image`).
pub const BASE_IMAGE: &str = "sandbox-agents-sandbox:1";
/// Repository of the images [`SandboxBackend::snapshot_image`] makes, as on Docker.
pub const SNAPSHOT_REPO: &str = "sandbox-agents-snapshot";

/// The in-memory backend of one deployment. Cheap to clone: clones, and the backends of
/// other deployments made with [`MemoryBackend::for_deployment`], share one "compute plane"
/// (the sandboxes, images and scripted commands), as the backends of several servers share
/// one Docker Engine; each lists and measures only its own deployment's sandboxes.
#[derive(Clone)]
pub struct MemoryBackend {
    deployment: String,
    plane: Arc<Plane>,
}

struct Plane {
    state: Mutex<State>,
    /// Scripted commands, in the order they were installed.
    handlers: RwLock<Vec<(Vec<String>, CommandHandler)>>,
}

#[derive(Default)]
struct State {
    sandboxes: BTreeMap<String, MemorySandbox>,
    images: BTreeMap<String, Arc<Fs>>,
}

struct MemorySandbox {
    deployment: String,
    name: String,
    session: Option<String>,
    pool: Option<String>,
    running: bool,
    env: BTreeMap<String, String>,
    ports: BTreeMap<u16, SocketAddr>,
    fs: Arc<Mutex<Fs>>,
}

impl std::fmt::Debug for MemoryBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryBackend")
            .field("deployment", &self.deployment)
            .finish_non_exhaustive()
    }
}

/// A sandbox's filesystem, locked. A command that panicked while holding it left it as it
/// was at that moment, which is what a crashed process leaves on a disk: go on with it.
fn lock(fs: &Mutex<Fs>) -> MutexGuard<'_, Fs> {
    fs.lock().unwrap_or_else(|e| e.into_inner())
}

/// What `docker::container_name` names a session's sandbox, so both backends agree.
fn session_name(session: &str) -> String {
    crate::docker::container_name(session)
}

impl MemoryBackend {
    /// A backend of `deployment` on a plane of its own, with no sandboxes and the image
    /// [`BASE_IMAGE`].
    pub fn new(deployment: &str) -> Self {
        let mut state = State::default();
        state
            .images
            .insert(BASE_IMAGE.to_owned(), Arc::new(Fs::base_image()));
        MemoryBackend {
            deployment: deployment.to_owned(),
            plane: Arc::new(Plane {
                state: Mutex::new(state),
                handlers: RwLock::new(Vec::new()),
            }),
        }
    }

    /// The backend of `deployment` on this backend's plane: the same images, scripted
    /// commands and sandboxes (a sandbox of another deployment can be reached by its id, as
    /// on one Docker Engine), but its own in `list` and `disk_usage`.
    pub fn for_deployment(&self, deployment: &str) -> Self {
        MemoryBackend {
            deployment: deployment.to_owned(),
            plane: self.plane.clone(),
        }
    }

    /// Also has the base image under `name` (the image a test server is configured with).
    pub fn with_image(self, name: &str) -> Self {
        self.state()
            .images
            .insert(name.to_owned(), Arc::new(Fs::base_image()));
        self
    }

    pub fn deployment(&self) -> &str {
        &self.deployment
    }

    /// Runs `handler` instead of the interpreter for every command whose argv starts with
    /// `prefix`: a whole exec's argv (`["sh", "-c", "pytest"]`) or one command of a script
    /// (`["git", "clone"]`). The handler installed last wins where several match.
    pub fn on_command(
        &self,
        prefix: &[&str],
        handler: impl Fn(&CommandCall) -> ExecOutput + Send + Sync + 'static,
    ) {
        let prefix = prefix.iter().map(|s| s.to_string()).collect();
        self.plane
            .handlers
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .push((prefix, Arc::new(handler)));
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.plane.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The filesystem of sandbox `id`.
    fn fs_of(&self, id: &str) -> Result<Arc<Mutex<Fs>>> {
        self.state()
            .sandboxes
            .get(id)
            .map(|s| s.fs.clone())
            .ok_or_else(|| SandboxError::NotFound(id.to_owned()))
    }

    /// Starts a sandbox from `spec.image` with these labels.
    fn start(
        &self,
        spec: &SandboxSpec,
        name: String,
        session: Option<String>,
        pool: Option<String>,
    ) -> Result<Sandbox> {
        let mut state = self.state();
        let image = state
            .images
            .get(&spec.image)
            .ok_or_else(|| SandboxError::ImageMissing(spec.image.clone()))?;
        let mut fs = Fs::clone(image);
        fs.mkdir_all(WORKDIR, SANDBOX_UID, 0o755)
            .map_err(|e| SandboxError::Backend(format!("the image has no {WORKDIR}: {e}")))?;
        // What a crashed earlier boot of the session left holds its name: replaced.
        state.sandboxes.retain(|_, s| {
            s.name != name && (session.is_none() || s.session.as_ref() != session.as_ref())
        });
        let id = format!("mem-{}", uuid::Uuid::new_v4().simple());
        let ports: BTreeMap<u16, SocketAddr> = spec
            .exposed_ports
            .iter()
            .map(|p| (*p, SocketAddr::from((PUBLISH_IP, 0))))
            .collect();
        state.sandboxes.insert(
            id.clone(),
            MemorySandbox {
                deployment: self.deployment.clone(),
                name,
                session,
                pool,
                running: true,
                env: spec.env.clone(),
                ports: ports.clone(),
                fs: Arc::new(Mutex::new(fs)),
            },
        );
        Ok(Sandbox {
            id,
            workdir: WORKDIR.to_owned(),
            ports,
        })
    }
}

#[async_trait]
impl SandboxBackend for MemoryBackend {
    fn name(&self) -> &'static str {
        "memory"
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            snapshots: SnapshotKind::Image,
            image_builds: false,
            daemon: false,
            warm_pool: true,
            disk_measurement: true,
            isolation: false,
            system_files: true,
            pids_limit: false,
        }
    }

    async fn create(&self, spec: &SandboxSpec) -> Result<Sandbox> {
        let session = Some(spec.session.clone());
        self.start(spec, session_name(&spec.session), session, None)
    }

    async fn create_pooled(&self, name: &str, spec: &SandboxSpec) -> Result<Sandbox> {
        if !spec.exposed_ports.is_empty() {
            return Err(SandboxError::Backend(
                "a pooled sandbox cannot expose ports (they are published at creation)".into(),
            ));
        }
        self.start(spec, name.to_owned(), None, Some(spec.image.clone()))
    }

    async fn assign(&self, id: &str, session: &str) -> Result<()> {
        let name = session_name(session);
        let mut state = self.state();
        if !state.sandboxes.contains_key(id) {
            return Err(SandboxError::NotFound(id.to_owned()));
        }
        state
            .sandboxes
            .retain(|other, s| other == id || s.name != name);
        state.sandboxes.get_mut(id).expect("present").name = name;
        Ok(())
    }

    async fn inspect(&self, id: &str) -> Result<Option<SandboxStatus>> {
        Ok(self.state().sandboxes.get(id).map(|s| SandboxStatus {
            running: s.running,
            ports: s.ports.clone(),
        }))
    }

    fn known_running(&self, id: &str) -> bool {
        self.state().sandboxes.get(id).is_some_and(|s| s.running)
    }

    /// Nothing runs in a process here, so nothing ever listens: every port of a running
    /// sandbox is closed.
    async fn connect_port(&self, id: &str, port: u16) -> Result<Option<Box<dyn crate::DaemonIo>>> {
        let _ = port;
        match self.state().sandboxes.get(id) {
            Some(s) if s.running => Ok(None),
            _ => Err(SandboxError::NotFound(id.to_owned())),
        }
    }

    async fn exec(&self, id: &str, req: &ExecRequest) -> Result<ExecOutput> {
        exec::exec(self, id, req).await
    }

    async fn put_archive(&self, id: &str, dir: &str, tar: Bytes) -> Result<()> {
        let fs = self.fs_of(id)?;
        let dir = archive::target_dir(&lock(&fs), "put_archive", dir)?;
        let tar = tokio::task::spawn_blocking(move || crate::docker::owned_by_sandbox_user(&tar))
            .await
            .map_err(|e| SandboxError::Backend(format!("put_archive: {e}")))??;
        let mut fs = lock(&fs);
        archive::extract(&mut fs, &dir, &tar)
    }

    async fn put_archive_stream(
        &self,
        id: &str,
        dir: &str,
        tar: BoxStream<'static, std::io::Result<Bytes>>,
    ) -> Result<()> {
        let fs = self.fs_of(id)?;
        let dir = archive::target_dir(&lock(&fs), "put_archive_stream", dir)?;
        let chunks: Vec<Bytes> = tar
            .try_collect()
            .await
            .map_err(|e| SandboxError::Backend(format!("reading the archive: {e}")))?;
        let mut fs = lock(&fs);
        archive::extract(&mut fs, &dir, &chunks.concat())
    }

    async fn put_system_file(&self, id: &str, path: &str, data: Bytes, mode: u32) -> Result<()> {
        let fs = self.fs_of(id)?;
        let mut fs = lock(&fs);
        let target = normalize("/", path);
        if !path.starts_with('/') || target == "/" {
            return Err(SandboxError::Backend(format!(
                "put_system_file: '{path}' is not an absolute file path"
            )));
        }
        let fail = |e: FsError| SandboxError::Backend(format!("put_system_file: {path}: {e}"));
        fs.mkdir_all(fs::parent(&target), 0, 0o755).map_err(fail)?;
        fs.put(&target, Entry::file(data, 0, mode & 0o7777))
            .map_err(fail)
    }

    async fn remove_system_path(&self, id: &str, path: &str) -> Result<()> {
        let fs = self.fs_of(id)?;
        let mut fs = lock(&fs);
        match fs.remove(&normalize("/", path), true) {
            Ok(()) | Err(FsError::NotFound) => Ok(()),
            Err(e) => Err(SandboxError::Backend(format!(
                "remove_system_path: {path}: {e}"
            ))),
        }
    }

    async fn get_archive(&self, id: &str, path: &str) -> Result<BoxStream<'static, Result<Bytes>>> {
        if !path.starts_with('/') {
            return Err(SandboxError::Backend(format!(
                "get_archive: '{path}' is not absolute"
            )));
        }
        let fs = self.fs_of(id)?;
        let fs = lock(&fs);
        let target = normalize("/", path);
        if fs.get(&target).is_none() {
            return Err(SandboxError::NoSuchPath(path.to_owned()));
        }
        let tar = archive::build(&fs, &target)?;
        Ok(stream::once(async move { Ok(tar) }).boxed())
    }

    async fn stop(&self, id: &str, _grace: Duration) -> Result<()> {
        match self.state().sandboxes.get_mut(id) {
            Some(s) => {
                s.running = false;
                Ok(())
            }
            None => Err(SandboxError::NotFound(id.to_owned())),
        }
    }

    async fn remove(&self, id: &str) -> Result<()> {
        self.state().sandboxes.remove(id);
        Ok(())
    }

    async fn list(&self) -> Result<Vec<ListedSandbox>> {
        Ok(self
            .state()
            .sandboxes
            .iter()
            .filter(|(_, s)| s.deployment == self.deployment)
            .map(|(id, s)| ListedSandbox {
                id: id.clone(),
                name: s.name.clone(),
                session: s.session.clone(),
                pool: s.pool.clone(),
                running: s.running,
            })
            .collect())
    }

    async fn disk_usage(&self) -> Result<Vec<(String, u64)>> {
        Ok(self
            .state()
            .sandboxes
            .iter()
            .filter(|(_, s)| s.running && s.deployment == self.deployment)
            .map(|(id, s)| {
                let fs = lock(&s.fs);
                (id.clone(), fs.written_bytes())
            })
            .collect())
    }

    async fn snapshot_image(&self, id: &str, name: &str) -> Result<String> {
        let fs = self.fs_of(id)?;
        // Copied on a blocking thread, as a large filesystem takes a while; commands go on
        // meanwhile, and a file written during the copy may be caught half-written, as a
        // Docker commit without pausing would catch it.
        let image = tokio::task::spawn_blocking(move || {
            fs.lock()
                .unwrap_or_else(|e| e.into_inner())
                .without_workspace()
        })
        .await
        .map_err(|e| SandboxError::Backend(format!("snapshot_image: {e}")))?;
        let reference = format!("{SNAPSHOT_REPO}:{name}");
        self.state()
            .images
            .insert(reference.clone(), Arc::new(image));
        Ok(reference)
    }

    async fn remove_image(&self, image: &str) -> Result<()> {
        self.state().images.remove(image);
        Ok(())
    }

    async fn image_exists(&self, image: &str) -> Result<bool> {
        Ok(self.state().images.contains_key(image))
    }
}
