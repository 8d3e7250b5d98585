//! [`SandboxBackend`] on the Docker Engine API (bollard): one container per session.
//!
//! Each sandbox is a container named `sa-<session>`, labelled with the deployment and the
//! session, running as uid/gid 1000 with every capability dropped, `no-new-privileges`, the
//! spec's pids/memory/CPU limits, no host mounts, and its ports published on loopback only
//! (`PUBLISH_IP`), or, with [`DockerBackend::with_network`], on a network shared with the
//! control plane's container and published nowhere.

pub mod archive;
mod build;
mod create;
pub mod daemon;
mod dockerfile;
pub mod egress;
mod error;
mod exec;
mod images;
pub(crate) mod start;
mod workspace;

pub use archive::owned_by_sandbox_user;
pub use create::{container_name, CONTAINER_PREFIX};
pub use exec::{HOST_GRACE, TIMEOUT_EXIT};
pub use start::DockerSettings;

use crate::{
    BuildFailure, BuildLog, ExecOutput, ExecRequest, ImageRecipe, ListedSandbox, Result, Sandbox,
    SandboxBackend, SandboxError, SandboxSpec, SandboxStatus, LABEL_DEPLOYMENT, LABEL_POOL,
    LABEL_SESSION, WORKDIR,
};
use async_trait::async_trait;
use bollard::models::{ContainerConfig, ContainerStateStatusEnum, ContainerSummaryStateEnum};
use bollard::query_parameters::{
    CommitContainerOptions, CreateContainerOptions, ListContainersOptions, RemoveContainerOptions,
    RemoveImageOptions, RenameContainerOptions, StopContainerOptions,
};
use bollard::Docker;
use bytes::Bytes;
use futures::stream::BoxStream;
use std::collections::{HashMap, HashSet};
use std::time::Duration;

/// The sandbox user (the image's `sandbox`).
pub const SANDBOX_UID: u64 = 1000;
pub const SANDBOX_GID: u64 = 1000;
/// Repository of the images [`SandboxBackend::snapshot_image`] makes.
pub const SNAPSHOT_REPO: &str = "sandbox-agents-snapshot";
/// Label of the images built from `images/sandbox/`; such an image owns `/workspace` as
/// the sandbox user.
pub const IMAGE_VERSION_LABEL: &str = "io.sandbox-agents.image-version";
/// Where the Engine is when `DOCKER_HOST` is unset.
pub const DEFAULT_HOST: &str = "unix:///var/run/docker.sock";

/// The Docker backend. Cheap to clone (the client is shared).
#[derive(Clone, Debug)]
pub struct DockerBackend {
    docker: Docker,
    deployment: String,
    /// The sandboxes' daemons (none reached without a binary: every call is a Docker exec).
    daemons: std::sync::Arc<daemon::Daemons>,
    /// The network sandboxes share with a control plane in a container (`with_network`);
    /// None: the default bridge, ports published on `PUBLISH_IP`.
    network: Option<String>,
    /// Container removals in flight at once ([`REMOVALS_AT_ONCE`]).
    removals: std::sync::Arc<tokio::sync::Semaphore>,
    /// The control plane's egress proxy (`with_egress`): sandboxes get no network of their
    /// own, only its socket. None: the network above, unfiltered.
    egress: Option<std::sync::Arc<dyn crate::egress::EgressGateway>>,
}

/// Container removals this backend has in flight at once; the rest wait here, in order.
///
/// Why: the Engine releases every container's layer under one lock of its layer store, so a
/// burst of removals (a hundred sessions deleted at once) gains nothing from being sent
/// together: they queue inside the Engine, where each one's HTTP deadline runs while it
/// waits. In CI, a hundred force-removals of running sandboxes sent together once left
/// Docker 20.10 (Debian 12's docker.io) with every later create and remove hanging until
/// dockerd restarted; queued here, the Engine sees a few at a time, and a removal's deadline
/// counts only its own work.
const REMOVALS_AT_ONCE: usize = 4;

/// Removes a short-lived container of ours that did a job on volumes (`what` it did, for the
/// log), never the volumes it mounted; a failure is logged, not returned, as the job is done.
pub(crate) async fn remove_helper(docker: &Docker, id: &str, name: &str, what: &str) {
    let options = RemoveContainerOptions {
        force: true,
        v: false,
        link: false,
    };
    if let Err(e) = docker.remove_container(id, Some(options)).await {
        tracing::warn!(error = %e, container = %name, "could not remove the container that {what}");
    }
}

impl DockerBackend {
    /// This deployment's containers (all, or running only; with their sizes if asked), each
    /// with its name. Only containers this backend made: a container started by someone
    /// else from one of our images inherits the image's deployment label, and must not be
    /// taken for an orphan and removed, nor measured.
    async fn containers(
        &self,
        all: bool,
        size: bool,
    ) -> Result<Vec<(String, bollard::models::ContainerSummary)>> {
        let filters = HashMap::from([(
            "label".to_owned(),
            vec![format!("{LABEL_DEPLOYMENT}={}", self.deployment)],
        )]);
        let options = ListContainersOptions {
            all,
            size,
            filters: Some(filters),
            ..Default::default()
        };
        let containers = self
            .docker
            .list_containers(Some(options))
            .await
            .map_err(error::backend)?;
        Ok(containers
            .into_iter()
            .filter_map(|c| {
                let name = c
                    .names
                    .as_ref()
                    .and_then(|n| n.first())
                    .map(|n| n.trim_start_matches('/').to_owned())
                    .unwrap_or_default();
                // The workspace measurer's short-lived containers carry the deployment's
                // label and our prefix, but are no sandbox: listed, the orphan sweep would
                // remove one mid-measurement and a test counting sandboxes would count it.
                (name.starts_with(create::CONTAINER_PREFIX) && !workspace::is_measurer(&name))
                    .then_some((name, c))
            })
            .collect())
    }

    /// Connects to the Engine named by `DOCKER_HOST` (default: the local socket), agrees on
    /// an API version and checks the Engine answers. `deployment` identifies this control
    /// plane's deployment: it labels every sandbox, and [`SandboxBackend::list`] finds only
    /// those.
    pub async fn connect(deployment: &str) -> Result<Self> {
        let host = std::env::var("DOCKER_HOST").unwrap_or_else(|_| DEFAULT_HOST.to_owned());
        Self::connect_to(&host, deployment).await
    }

    /// [`DockerBackend::connect`] to an explicit host (`unix://`, `tcp://`, `http://`).
    pub async fn connect_to(host: &str, deployment: &str) -> Result<Self> {
        let unreachable = |e: &dyn std::fmt::Display| {
            SandboxError::Backend(format!(
                "cannot reach the Docker Engine at {host}: is dockerd running? ({e})"
            ))
        };
        let docker = Docker::connect_with_host(host).map_err(|e| unreachable(&e))?;
        let docker = docker
            .negotiate_version()
            .await
            .map_err(|e| unreachable(&e))?;
        docker.ping().await.map_err(|e| unreachable(&e))?;
        tracing::debug!(%host, api = %docker.client_version(), "connected to the Docker Engine");
        Ok(Self::with_client(docker, deployment))
    }

    /// Wraps a client the caller has set up (and checked) itself.
    pub fn with_client(docker: Docker, deployment: &str) -> Self {
        Self {
            daemons: std::sync::Arc::new(daemon::Daemons::new(&docker, None)),
            docker,
            deployment: deployment.to_owned(),
            network: None,
            removals: std::sync::Arc::new(tokio::sync::Semaphore::new(REMOVALS_AT_ONCE)),
            egress: None,
        }
    }

    /// Puts every sandbox created from now on on the Docker network `name` (which must exist:
    /// it is looked up here, so a typo fails at start rather than at the first boot), and
    /// reaches their exposed ports at their address on it instead of publishing them on the
    /// host. For a control plane that runs in a container attached to the same network, where
    /// the host's loopback is out of reach.
    pub async fn with_network(mut self, name: &str) -> Result<Self> {
        let network = self
            .docker
            .inspect_network(name, None)
            .await
            .map_err(|e| {
                if error::is_not_found(&e) {
                    SandboxError::Backend(format!(
                        "the Docker network '{name}' (--docker-network) does not exist: create it (docker network create {name}) and attach this server's container to it"
                    ))
                } else {
                    error::backend(e)
                }
            })?;
        // The name the Engine keys a container's endpoints by, even when given an id.
        let canonical = network.name.unwrap_or_else(|| name.to_owned());
        tracing::info!(network = %canonical, driver = ?network.driver, "sandboxes join the Docker network; their ports are reached on it");
        self.network = Some(canonical);
        Ok(self)
    }

    /// Serves sandboxes through their daemon, `binary` (see `daemon`): it is mounted into
    /// every sandbox created from now on, and commands, files and terminals go through it
    /// wherever it answers.
    pub fn with_daemon(mut self, binary: daemon::DaemonBinary) -> Self {
        self.daemons = std::sync::Arc::new(daemon::Daemons::new(&self.docker, Some(binary)));
        self
    }

    /// Sends every sandbox's traffic through `gateway` (see `crate::egress`), and binds the
    /// ways in of the sandboxes that exist already.
    pub async fn with_egress(
        mut self,
        gateway: std::sync::Arc<dyn crate::egress::EgressGateway>,
    ) -> Result<Self> {
        let existing: Vec<(String, String)> = self
            .containers(true, false)
            .await?
            .into_iter()
            .filter_map(|(_, c)| {
                let key = c.labels.as_ref()?.get(egress::LABEL_EGRESS_KEY)?.clone();
                Some((key, c.id?))
            })
            .collect();
        egress::reattach(gateway.as_ref(), &existing);
        tracing::info!(
            sandboxes = existing.len(),
            "sandboxes reach the network only through the egress proxy"
        );
        self.egress = Some(gateway);
        Ok(self)
    }

    pub fn deployment(&self) -> &str {
        &self.deployment
    }

    /// The underlying client.
    pub fn client(&self) -> &Docker {
        &self.docker
    }

    /// Force-removes a container and its anonymous volumes; a missing one is fine.
    async fn remove_container(&self, id: &str) -> Result<()> {
        let options = RemoveContainerOptions {
            force: true,
            v: true,
            link: false,
        };
        // Never closed, so acquiring only waits.
        let _turn = self.removals.acquire().await.ok();
        match self.docker.remove_container(id, Some(options)).await {
            Ok(()) => Ok(()),
            Err(e) if error::is_not_found(&e) => Ok(()),
            // Someone else is already removing it.
            Err(e)
                if error::status(&e) == Some(409)
                    && e.to_string().contains("already in progress") =>
            {
                Ok(())
            }
            Err(e) => Err(error::backend(e)),
        }
    }

    /// Whether `image` is present, and whether it is one of ours: an image labelled
    /// [`IMAGE_VERSION_LABEL`] has `/workspace` owned by the sandbox user already (both
    /// Dockerfiles under `images/sandbox/` make it so, and snapshots inherit the label), so
    /// a boot need not upload the directory before starting. `ImageMissing` otherwise.
    async fn check_image(&self, image: &str) -> Result<bool> {
        match self.docker.inspect_image(image).await {
            Ok(i) => Ok(i
                .config
                .and_then(|c| c.labels)
                .is_some_and(|l| l.contains_key(IMAGE_VERSION_LABEL))),
            Err(e) if error::is_not_found(&e) => Err(SandboxError::ImageMissing(image.to_owned())),
            Err(e) => Err(error::backend(e)),
        }
    }

    /// Creates the container `name` from `body` and starts it; a container already holding
    /// the name (left by a crashed earlier boot) is replaced. Nothing is left behind when it
    /// fails. `workspace_ready`: the image owns `/workspace` as the sandbox user already;
    /// otherwise a directory entry is uploaded before the start to make it so.
    async fn create_and_start(
        &self,
        name: &str,
        mut body: bollard::models::ContainerCreateBody,
        workspace_ready: bool,
    ) -> Result<Sandbox> {
        if let Some(gateway) = &self.egress {
            let dir = gateway.prepare(name).map_err(|e| {
                SandboxError::Backend(format!(
                    "the sandbox's egress socket could not be made: {e}"
                ))
            })?;
            egress::confine(&mut body, &dir, name);
        }
        let created = self
            .create_and_start_confined(name, body, workspace_ready)
            .await;
        if let Some(gateway) = &self.egress {
            match &created {
                Ok(sandbox) => gateway.bind(name, &sandbox.id),
                Err(_) => gateway.abandon(name),
            }
        }
        created
    }

    /// [`DockerBackend::create_and_start`] once the body is confined (or not) to the proxy.
    async fn create_and_start_confined(
        &self,
        name: &str,
        mut body: bollard::models::ContainerCreateBody,
        workspace_ready: bool,
    ) -> Result<Sandbox> {
        let image = body.image.clone().unwrap_or_default();
        if let Some(mount) = self.daemons.mount(&self.docker, &image).await {
            if let Some(hc) = body.host_config.as_mut() {
                hc.mounts.get_or_insert_with(Vec::new).push(mount);
            }
        }
        let options = || CreateContainerOptions {
            name: Some(name.to_owned()),
            platform: String::new(),
        };
        // The name is normally free: try first, and only on a conflict remove the stale one,
        // which saves a round trip on every boot.
        //
        // Invariant: a name is only ever created by its owner (a session's boot, under the
        // session's lock; the pool, with a fresh name), so a conflict is a leftover of an
        // earlier boot, never a rival. That leftover may still be *in the making*: Docker
        // finishes a create whose client died (a server killed mid-boot) and holds the name
        // until then, while removing it by name can find nothing yet, or a removal already
        // in progress. So a create that still conflicts after the removal removes and tries
        // again, backing off, for up to `NAME_TAKEN_FOR` (a dead boot's request is done by
        // then), rather than failing the boot of a session whose only fault was a crash.
        const NAME_TAKEN_FOR: Duration = Duration::from_secs(30);
        let mut first_conflict: Option<std::time::Instant> = None;
        let mut pause = Duration::from_millis(50);
        let created = loop {
            match self
                .docker
                .create_container(Some(options()), body.clone())
                .await
            {
                Err(e)
                    if error::status(&e) == Some(409)
                        && first_conflict.is_none_or(|t| t.elapsed() < NAME_TAKEN_FOR) =>
                {
                    if first_conflict.is_some() {
                        // Still taken after a removal: a create or a removal in flight.
                        tokio::time::sleep(pause).await;
                        pause = (pause * 2).min(Duration::from_secs(1));
                    }
                    first_conflict.get_or_insert_with(std::time::Instant::now);
                    tracing::info!(%name, "replacing a container left by an earlier boot");
                    self.remove_container(name).await?;
                }
                other => break other.map_err(error::backend)?,
            }
        };
        let id = created.id;
        tracing::Span::current().record("container.id", id.as_str());
        let started = async {
            if !workspace_ready {
                // Not started yet, so no daemon: the Engine writes it.
                archive::put_archive(&self.docker, None, &id, "/", workdir_entry()?.into()).await?;
            }
            self.docker
                .start_container(&id, None)
                .await
                .map_err(error::backend)?;
            self.status(&id)
                .await?
                .ok_or_else(|| SandboxError::NotFound(id.clone()))
        }
        .await;
        match started {
            Ok(status) if status.running => {
                self.daemons.warm(&id);
                Ok(Sandbox {
                    id,
                    workdir: WORKDIR.to_owned(),
                    ports: status.ports,
                })
            }
            failed => {
                let err = match failed {
                    Err(e) => e,
                    Ok(_) => SandboxError::Backend(format!(
                        "the container {id} exited right after starting"
                    )),
                };
                if let Err(e) = self.remove_container(&id).await {
                    tracing::warn!(error = %e, "could not remove the container that failed to start");
                }
                Err(err)
            }
        }
    }

    async fn status(&self, id: &str) -> Result<Option<SandboxStatus>> {
        match self.docker.inspect_container(id, None).await {
            Ok(c) => Ok(Some(SandboxStatus {
                running: c.state.as_ref().and_then(|s| s.running).unwrap_or(false)
                    && c.state.as_ref().and_then(|s| s.status)
                        != Some(ContainerStateStatusEnum::PAUSED),
                ports: match &self.network {
                    Some(net) => {
                        create::network_ports(c.config.as_ref(), c.network_settings.as_ref(), net)
                    }
                    None => create::published_ports(c.network_settings.as_ref()),
                },
            })),
            Err(e) if error::is_not_found(&e) => Ok(None),
            Err(e) => Err(error::backend(e)),
        }
    }
}

#[async_trait]
impl SandboxBackend for DockerBackend {
    fn name(&self) -> &'static str {
        "docker"
    }

    fn capabilities(&self) -> crate::Capabilities {
        crate::Capabilities {
            snapshots: crate::SnapshotKind::Image,
            image_builds: true,
            daemon: self.daemons.enabled(),
            warm_pool: true,
            disk_measurement: true,
            isolation: true,
            system_files: true,
            pids_limit: true,
        }
    }

    #[tracing::instrument(skip_all, fields(session = %spec.session, container.id = tracing::field::Empty))]
    async fn create(&self, spec: &SandboxSpec) -> Result<Sandbox> {
        let workspace_ready = self.check_image(&spec.image).await?;
        let name = container_name(&spec.session);
        let body = create::container_body(
            &self.deployment,
            spec,
            create::Owner::Session,
            self.network.as_deref(),
        );
        let sandbox = self.create_and_start(&name, body, workspace_ready).await?;
        // Behind the egress proxy the sandbox has no network, so nothing is published: its
        // exposed ports are reached through its daemon (`connect_port`) instead.
        let missing: Vec<u16> = spec
            .exposed_ports
            .iter()
            .copied()
            .filter(|p| self.egress.is_none() && !sandbox.ports.contains_key(p))
            .collect();
        if !missing.is_empty() {
            let _ = self.remove_container(&sandbox.id).await;
            return Err(SandboxError::Backend(match &self.network {
                Some(net) => format!("ports {missing:?} have no address on the network {net}"),
                None => format!(
                    "ports {missing:?} were not published on {}",
                    crate::PUBLISH_IP
                ),
            }));
        }
        tracing::debug!(ports = ?sandbox.ports, "sandbox running");
        Ok(sandbox)
    }

    #[tracing::instrument(skip_all, fields(name = %name, image = %spec.image, container.id = tracing::field::Empty))]
    async fn create_pooled(&self, name: &str, spec: &SandboxSpec) -> Result<Sandbox> {
        if !spec.exposed_ports.is_empty() {
            return Err(SandboxError::Backend(
                "a pooled sandbox cannot publish ports: they are published at creation".into(),
            ));
        }
        let workspace_ready = self.check_image(&spec.image).await?;
        let body = create::container_body(
            &self.deployment,
            spec,
            create::Owner::Pool(&spec.image),
            self.network.as_deref(),
        );
        self.create_and_start(name, body, workspace_ready).await
    }

    fn pooled_name(&self, key: &str) -> String {
        format!("{CONTAINER_PREFIX}pool-{key}")
    }

    #[tracing::instrument(skip_all, fields(container.id = %id, session = %session))]
    async fn assign(&self, id: &str, session: &str) -> Result<()> {
        let name = container_name(session);
        let rename = || {
            self.docker
                .rename_container(id, RenameContainerOptions { name: name.clone() })
        };
        match rename().await {
            // The name is taken: a container an unfinished boot of this session created.
            Err(e) if error::status(&e) == Some(409) => {
                self.remove_container(&name).await?;
                rename().await.map_err(error::container(id))
            }
            other => other.map_err(error::container(id)),
        }
    }

    #[tracing::instrument(skip_all, fields(container.id = %id))]
    async fn inspect(&self, id: &str) -> Result<Option<SandboxStatus>> {
        self.status(id).await
    }

    fn known_running(&self, id: &str) -> bool {
        self.daemons.connected(id)
    }

    async fn daemon(&self, id: &str) -> Option<sandboxd::client::Client> {
        self.daemons.client(id).await
    }

    #[tracing::instrument(skip_all, fields(container.id = %id))]
    async fn exec(&self, id: &str, req: &ExecRequest) -> Result<ExecOutput> {
        match self.daemons.client(id).await {
            Some(client) => daemon::exec(&client, req, |_, _| {}).await,
            None => exec::exec(&self.docker, id, req).await,
        }
    }

    #[tracing::instrument(skip_all, fields(container.id = %id))]
    async fn exec_streaming(
        &self,
        id: &str,
        req: &ExecRequest,
        on_output: &mut crate::OnOutput<'_>,
    ) -> Result<ExecOutput> {
        match self.daemons.client(id).await {
            Some(client) => daemon::exec(&client, req, on_output).await,
            // Docker exec's output comes whole, at the end.
            None => {
                let out = exec::exec(&self.docker, id, req).await?;
                crate::emit_whole(&out, on_output);
                Ok(out)
            }
        }
    }

    #[tracing::instrument(skip_all, fields(container.id = %id, dir = %dir, bytes = tar.len()))]
    async fn put_archive(&self, id: &str, dir: &str, tar: Bytes) -> Result<()> {
        let daemon = self.daemons.client(id).await;
        archive::put_archive(&self.docker, daemon, id, dir, tar).await
    }

    #[tracing::instrument(skip_all, fields(container.id = %id, dir = %dir))]
    async fn put_archive_stream(
        &self,
        id: &str,
        dir: &str,
        tar: BoxStream<'static, std::io::Result<Bytes>>,
    ) -> Result<()> {
        archive::put_archive_stream(&self.docker, id, dir, tar).await
    }

    #[tracing::instrument(skip_all, fields(container.id = %id, path = %path))]
    async fn put_system_file(&self, id: &str, path: &str, data: Bytes, mode: u32) -> Result<()> {
        archive::put_system_file(&self.docker, id, path, data, mode).await
    }

    async fn remove_system_path(&self, id: &str, path: &str) -> Result<()> {
        exec::remove_as_root(&self.docker, id, path).await
    }

    async fn get_archive(&self, id: &str, path: &str) -> Result<BoxStream<'static, Result<Bytes>>> {
        archive::get_archive(&self.docker, id, path).await
    }

    #[tracing::instrument(skip_all, fields(container.id = %id))]
    async fn stop(&self, id: &str, grace: Duration) -> Result<()> {
        let t = i32::try_from(grace.as_secs() + u64::from(grace.subsec_nanos() > 0))
            .unwrap_or(i32::MAX);
        let options = StopContainerOptions {
            t: Some(t),
            signal: None,
        };
        // The Engine answers once the container is down; leave room for the grace period.
        let docker = self
            .docker
            .clone()
            .with_timeout(grace + Duration::from_secs(60));
        self.daemons.forget(id);
        docker
            .stop_container(id, Some(options))
            .await
            .map_err(error::container(id))
    }

    #[tracing::instrument(skip_all, fields(container.id = %id))]
    async fn remove(&self, id: &str) -> Result<()> {
        self.daemons.forget(id);
        self.remove_container(id).await?;
        if let Some(gateway) = &self.egress {
            gateway.forget(id);
        }
        Ok(())
    }

    #[tracing::instrument(skip_all, fields(deployment = %self.deployment))]
    async fn list(&self) -> Result<Vec<ListedSandbox>> {
        Ok(self
            .containers(true, false)
            .await?
            .into_iter()
            .filter_map(|(name, c)| {
                let mut labels = c.labels.unwrap_or_default();
                Some(ListedSandbox {
                    id: c.id?,
                    name,
                    session: labels.remove(LABEL_SESSION).filter(|l| !l.is_empty()),
                    pool: labels.remove(LABEL_POOL).filter(|l| !l.is_empty()),
                    running: c.state == Some(ContainerSummaryStateEnum::RUNNING),
                })
            })
            .collect())
    }

    #[tracing::instrument(skip_all, fields(deployment = %self.deployment))]
    async fn remove_strays(&self) -> Result<usize> {
        workspace::remove_stray(&self.docker, &self.deployment).await
    }

    async fn disk_usage(&self) -> Result<Vec<(String, u64)>> {
        // `size`: the engine sums each running container's writable layer (it walks the
        // layer's files), so this is asked on its own timer, not with every sweep. The
        // workspace is a volume beside the layer, measured apart and added.
        let listed: Vec<(String, u64, Option<String>, Option<String>)> = self
            .containers(false, true)
            .await?
            .into_iter()
            .filter_map(|(_, c)| {
                let volume = c.mounts.iter().flatten().find_map(|m| {
                    (m.destination.as_deref() == Some(WORKDIR)).then(|| m.name.clone())?
                });
                // The Engine leaves `SizeRw` out when it is 0.
                let layer = u64::try_from(c.size_rw.unwrap_or(0)).unwrap_or(0);
                Some((c.id?, layer, volume, c.image))
            })
            .collect();
        let volumes: Vec<String> = listed.iter().filter_map(|(_, _, v, _)| v.clone()).collect();
        let image = listed.iter().find_map(|(_, _, _, image)| image.clone());
        let measured = match image {
            Some(image) if !volumes.is_empty() => {
                workspace::sizes(&self.docker, &self.deployment, &image, &volumes)
                    .await
                    .unwrap_or_else(|e| {
                        tracing::warn!(error = %e, "could not measure the workspace volumes; the disk limit counts the sandboxes' layers only this time");
                        HashMap::new()
                    })
            }
            _ => HashMap::new(),
        };
        Ok(listed
            .into_iter()
            .map(|(id, layer, volume, _)| {
                let workspace = volume.and_then(|v| measured.get(&v).copied()).unwrap_or(0);
                (id, layer + workspace)
            })
            .collect())
    }

    #[tracing::instrument(skip_all, fields(container.id = %id, name = %name))]
    async fn snapshot_image(&self, id: &str, name: &str) -> Result<String> {
        let container = self
            .docker
            .inspect_container(id, None)
            .await
            .map_err(error::container(id))?;
        let config = snapshot_config(&self.docker, &container).await?;
        let options = CommitContainerOptions {
            container: Some(id.to_owned()),
            repo: Some(SNAPSHOT_REPO.to_owned()),
            tag: Some(name.to_owned()),
            comment: Some(format!("snapshot of sandbox {id}")),
            // Never paused: a command started in a frozen container (a turn's exec, the
            // daemon's bridge reconnecting) joins the frozen cgroup and holds runc's lock,
            // so the Engine's unpause waits for it forever with the container's lock held,
            // and every image removal and container listing behind it waits too (seen in
            // this project's tests on Docker 20.10: a wedged Engine until the cgroup was
            // thawed by hand). A snapshot is taken between turns; a file written during
            // it may be caught half-written, as a copy of a live filesystem would be.
            pause: false,
            ..Default::default()
        };
        self.docker
            .commit_container(options, config)
            .await
            .map_err(error::container(id))?;
        Ok(format!("{SNAPSHOT_REPO}:{name}"))
    }

    #[tracing::instrument(skip_all, fields(image = %image))]
    async fn remove_image(&self, image: &str) -> Result<()> {
        let options = RemoveImageOptions {
            force: false,
            noprune: false,
            platforms: None,
        };
        match self.docker.remove_image(image, Some(options), None).await {
            Ok(_) => Ok(()),
            Err(e) if error::is_not_found(&e) => Ok(()),
            Err(e) => Err(error::backend(e)),
        }
    }

    #[tracing::instrument(skip_all, fields(image = %recipe.tag))]
    async fn build_image(
        &self,
        recipe: &ImageRecipe,
        log: BuildLog<'_>,
    ) -> Result<std::result::Result<(), BuildFailure>> {
        self.build(recipe, log).await
    }

    fn describe_build(&self, recipe: &ImageRecipe) -> Option<String> {
        Some(format!("# Dockerfile\n{}", Self::dockerfile(recipe)))
    }

    async fn image_exists(&self, image: &str) -> Result<bool> {
        self.has_image(image).await
    }
}

/// A tar holding only a `workspace` directory entry (it is rewritten to belong to the sandbox
/// user on upload).
fn workdir_entry() -> Result<Vec<u8>> {
    let mut workdir = tar::Builder::new(Vec::new());
    let mut h = tar::Header::new_gnu();
    h.set_entry_type(tar::EntryType::Directory);
    h.set_mode(0o755);
    h.set_size(0);
    workdir
        .append_data(&mut h, WORKDIR.trim_start_matches('/'), std::io::empty())
        .map_err(|e| SandboxError::Backend(e.to_string()))?;
    workdir
        .into_inner()
        .map_err(|e| SandboxError::Backend(e.to_string()))
}

/// The config committed with a snapshot. The Engine merges the container's config into it
/// and cannot drop variables, so the session's own environment (which may hold secrets) is
/// masked: variables the base image did not set are committed empty. The session label is
/// cleared for the same reason; a sandbox created from the snapshot gets its own. So is the
/// pool label of a sandbox that came from the warm pool (an empty label counts as none).
async fn snapshot_config(
    docker: &Docker,
    container: &bollard::models::ContainerInspectResponse,
) -> Result<ContainerConfig> {
    let base_env = match container.image.as_deref() {
        Some(image) => match docker.inspect_image(image).await {
            Ok(i) => i.config.and_then(|c| c.env).unwrap_or_default(),
            Err(e) if error::is_not_found(&e) => Vec::new(),
            Err(e) => return Err(error::backend(e)),
        },
        None => Vec::new(),
    };
    let base_keys: HashSet<&str> = base_env
        .iter()
        .map(|kv| kv.split('=').next().unwrap_or(kv))
        .collect();
    let mut env = base_env.clone();
    for kv in container
        .config
        .as_ref()
        .and_then(|c| c.env.as_ref())
        .into_iter()
        .flatten()
    {
        let key = kv.split('=').next().unwrap_or(kv);
        if !base_keys.contains(key) {
            env.push(format!("{key}="));
        }
    }
    let labels = HashMap::from([
        (LABEL_SESSION.to_owned(), String::new()),
        (LABEL_POOL.to_owned(), String::new()),
    ]);
    Ok(ContainerConfig {
        env: Some(env),
        labels: Some(labels),
        ..Default::default()
    })
}
