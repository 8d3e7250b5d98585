//! [`SandboxBackend`] on Kubernetes (`kube`, `k8s-openapi`): one pod per sandbox.
//!
//! Each sandbox is a pod `sa-<session>-<nonce>` in the configured namespace, labelled with the
//! deployment and the session (`pod.rs` makes it, and nothing else does), running as uid/gid
//! 1000 with no privilege, no capability, seccomp `RuntimeDefault`, a read-only root
//! filesystem and no service-account token. An init container copies the daemon in from its
//! own image; the daemon is the container's process and listens on the pod network for the
//! control plane only (`daemon.rs`: a per-pod token), which reaches it there or, from outside
//! the cluster, through the API server's port-forward (`DaemonRoute`). Each pod has a
//! NetworkPolicy of its own (`network.rs`): the control plane in, the egress proxy (or public
//! addresses) out. Every operation after creation goes through the daemon; the API server is
//! asked only to create, watch, list, relabel and delete pods (and to port-forward to them),
//! and to apply, list and delete their policies.
//!
//! What differs from Docker (`docs/kubernetes.md`): snapshots keep the workspace archive only
//! (a pod has no commit), there are no writes as root (no extra CA or `s3_mount` staging), the
//! pids limit is the kubelet's (per node), the disk is measured through the daemon (`du`
//! over the pod's `emptyDir`s), and image builds are not built yet. A warm pool's pods carry
//! the pool's label instead of a session's until one is handed to a session (`assign`: its
//! labels change; a pod cannot be renamed).

mod daemon;
mod disk;
mod error;
pub mod network;
pub mod pod;
mod settings;
mod start;
pub mod status;
mod watch;

pub use daemon::{egress_token, token};
pub use settings::{ControlPlanePods, DaemonRoute, KubernetesSettings};

use crate::daemon_link::DaemonLinks;
use crate::{
    Capabilities, ExecOutput, ExecRequest, ListedSandbox, Result, Sandbox, SandboxBackend,
    SandboxError, SandboxSpec, SandboxStatus, SnapshotKind, WORKDIR,
};
use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::wait::{await_condition, conditions};
use kube::{Api, Client};
use sandboxd::client::{Client as DaemonClient, ClientError};
use sandboxd::proto::ErrorKind;
use status::Progress;
use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

/// The field manager of what the backend applies (server-side apply).
const FIELD_MANAGER: &str = "sandbox-agents";

/// The Kubernetes backend. Cheap to clone.
#[derive(Clone)]
pub struct KubernetesBackend {
    client: Client,
    pods: Api<Pod>,
    policies: Api<NetworkPolicy>,
    settings: KubernetesSettings,
    deployment: String,
    network: Arc<daemon::PodNetwork>,
    links: Arc<DaemonLinks>,
}

impl std::fmt::Debug for KubernetesBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubernetesBackend")
            .field("namespace", &self.settings.namespace)
            .field("deployment", &self.deployment)
            .finish_non_exhaustive()
    }
}

impl KubernetesBackend {
    /// Connects with `settings` and checks the cluster will run this deployment's sandboxes
    /// (see `start.rs`); every error is a sentence for the operator.
    pub async fn connect(settings: &KubernetesSettings, deployment: &str) -> Result<Self> {
        start::connect(settings, deployment).await
    }

    /// `streams`: the client of the port-forward route (`start::streaming_client`).
    fn new(
        client: Client,
        streams: Option<Client>,
        settings: KubernetesSettings,
        deployment: &str,
    ) -> Self {
        let pods = Api::<Pod>::namespaced(client.clone(), &settings.namespace);
        let network = Arc::new(daemon::PodNetwork {
            pods: pods.clone(),
            namespace: settings.namespace.clone(),
            key: settings.daemon_key,
            addresses: Default::default(),
        });
        let transport: Arc<dyn crate::daemon_link::DaemonTransport> = match settings.route {
            DaemonRoute::PortForward => Arc::new(daemon::PortForward {
                pods: Api::namespaced(
                    streams.unwrap_or_else(|| client.clone()),
                    &settings.namespace,
                ),
                namespace: settings.namespace.clone(),
                key: settings.daemon_key,
            }),
            // `start::connect` resolves `Auto` before the backend is made.
            DaemonRoute::PodNetwork | DaemonRoute::Auto => network.clone(),
        };
        KubernetesBackend {
            links: DaemonLinks::new(transport),
            policies: Api::namespaced(client.clone(), &settings.namespace),
            client,
            pods,
            settings,
            deployment: deployment.to_owned(),
            network,
        }
    }

    /// The pod of `spec` under `name` for `owner`, with the hash of that pod's daemon token
    /// and, under the proxy, its way to it.
    fn pod_of(
        &self,
        spec: &SandboxSpec,
        owner: pod::Owner<'_>,
        name: &str,
        egress: Option<&pod::PodEgress>,
    ) -> Pod {
        let token = daemon::token(&self.settings.daemon_key, &self.settings.namespace, name);
        let image = self.settings.image.as_deref().unwrap_or(&spec.image);
        pod::pod(
            &self.settings,
            &self.deployment,
            name,
            (spec, owner),
            image,
            &sandboxd::tcp::token_hash(&token),
            egress,
        )
    }

    /// The pod `name`'s way to the egress proxy, when the deployment runs it: the proxy's
    /// address resolved here (a Service's name, say: the sandbox has no cluster DNS).
    async fn egress_of(&self, name: &str) -> Result<Option<pod::PodEgress>> {
        let Some(proxy) = &self.settings.egress_proxy else {
            return Ok(None);
        };
        let proxy = tokio::net::lookup_host(proxy.as_str())
            .await
            .ok()
            .and_then(|mut addrs| addrs.next())
            .ok_or_else(|| {
                SandboxError::Backend(format!(
                    "the egress proxy's address {proxy} (--kubernetes-egress-proxy) does not resolve"
                ))
            })?;
        let token = daemon::egress_token(&self.settings.daemon_key, &self.settings.namespace, name);
        Ok(Some(pod::PodEgress {
            proxy,
            token: sandboxd::egress::token_value(name, &token),
        }))
    }

    /// Where the control plane reaches the pod's exposed `ports`: at the pod's address on the
    /// pod network; through a port-forward, nowhere (they are reached through the daemon's
    /// tunnel, `connect_port`, as on Docker behind the egress proxy).
    fn port_addresses(
        &self,
        ip: IpAddr,
        ports: impl Iterator<Item = u16>,
    ) -> BTreeMap<u16, SocketAddr> {
        if self.settings.route == DaemonRoute::PortForward {
            return BTreeMap::new();
        }
        ports.map(|p| (p, SocketAddr::new(ip, p))).collect()
    }

    /// This deployment's pods, or those of one session.
    async fn pods_of(&self, session: Option<&str>) -> Result<Vec<Pod>> {
        let mut selector = format!("{}={}", pod::LABEL_DEPLOYMENT, self.deployment);
        if let Some(s) = session {
            selector.push_str(&format!(",{}={s}", pod::LABEL_SESSION));
        }
        Ok(self
            .pods
            .list(&ListParams::default().labels(&selector))
            .await
            .map_err(error::api)?
            .items)
    }

    /// Deletes the pod `name` at once (a force delete: the node stops its containers after),
    /// and waits until the API server no longer has it. A missing pod is fine.
    async fn delete_now(&self, name: &str) -> Result<()> {
        self.links.forget(name);
        self.network.forget(name);
        let params = DeleteParams {
            grace_period_seconds: Some(0),
            ..Default::default()
        };
        match self.pods.delete(name, &params).await {
            Ok(_) => {}
            Err(e) if error::is_not_found(&e) => {}
            Err(e) => return Err(error::api(e)),
        }
        // Its garbage collector deletes the policy with the pod; a cluster that has none (the
        // test cluster), or a policy whose owner was never set, is covered here.
        match self.policies.delete(name, &DeleteParams::default()).await {
            Ok(_) => Ok(()),
            Err(e) if error::is_not_found(&e) => Ok(()),
            Err(e) => Err(error::api(e)),
        }
    }

    /// Waits until the pod `name` runs, or cannot.
    async fn until_running(&self, name: &str) -> Result<IpAddr> {
        let settled = |pod: Option<&Pod>| {
            pod.is_none_or(|p| !matches!(status::progress(p), Progress::Starting(_)))
        };
        let watched = tokio::time::timeout(
            self.settings.start_timeout,
            await_condition(self.pods.clone(), name, settled),
        )
        .await;
        match watched {
            Ok(Ok(Some(pod))) => match status::progress(&pod) {
                Progress::Running(ip) => Ok(ip),
                Progress::Failed(e) => Err(e),
                Progress::Starting(s) => Err(SandboxError::Backend(s)),
            },
            Ok(Ok(None)) => Err(SandboxError::NotFound(name.to_owned())),
            Ok(Err(e)) => Err(SandboxError::Backend(format!(
                "watching the pod {name}: {e}"
            ))),
            Err(_) => {
                let now = match self.pods.get_opt(name).await {
                    Ok(Some(pod)) => status::describe(&pod),
                    Ok(None) => "it is gone".to_owned(),
                    Err(e) => format!("it cannot be read: {e}"),
                };
                Err(SandboxError::Backend(format!(
                    "the pod {name} did not start within {:?}: {now}",
                    self.settings.start_timeout
                )))
            }
        }
    }

    /// The daemon of a sandbox, or why there is none: the pod is gone, or its daemon does
    /// not answer.
    async fn client(&self, id: &str) -> Result<DaemonClient> {
        if let Some(client) = self.links.client(id).await {
            return Ok(client);
        }
        match self.pods.get_opt(id).await.map_err(error::api)? {
            None => Err(SandboxError::NotFound(id.to_owned())),
            Some(pod) if pod.metadata.deletion_timestamp.is_some() => {
                Err(SandboxError::NotFound(id.to_owned()))
            }
            Some(pod) => Err(SandboxError::Backend(format!(
                "the daemon of the sandbox {id} does not answer ({})",
                status::describe(&pod)
            ))),
        }
    }
}

/// A daemon's failure on a path: a missing path is [`SandboxError::NoSuchPath`].
fn on_path(path: &str, what: &'static str) -> impl Fn(ClientError) -> SandboxError {
    let path = path.to_owned();
    move |e| match e {
        ClientError::Daemon(d) if d.kind == ErrorKind::NotFound => {
            SandboxError::NoSuchPath(path.clone())
        }
        e if e.is_transport() => SandboxError::DaemonLost,
        e => SandboxError::Backend(format!("{what} {path}: {e}")),
    }
}

impl KubernetesBackend {
    /// Creates the pod `name`, waits until it runs and its daemon answers; removes it when it
    /// does not.
    /// The pod's NetworkPolicy is applied first (`network.rs`: under the namespace's default
    /// deny the pod has no traffic until it exists), then handed to the pod.
    async fn start_pod(
        &self,
        name: &str,
        pod: Pod,
        spec: &SandboxSpec,
        egress: Option<&pod::PodEgress>,
    ) -> Result<Sandbox> {
        let name = name.to_owned();
        let policy = network::network_policy(
            &self.settings,
            &self.deployment,
            &name,
            egress.map(|e| e.proxy.port()),
        );
        self.policies
            .patch(
                &name,
                &PatchParams::apply(FIELD_MANAGER).force(),
                &Patch::Apply(&policy),
            )
            .await
            .map_err(error::api)?;
        let created = match self.pods.create(&PostParams::default(), &pod).await {
            Ok(created) => created,
            Err(e) => {
                let _ = self.delete_now(&name).await;
                return Err(error::api(e));
            }
        };
        if let Some(uid) = created.metadata.uid.as_deref() {
            let owner = serde_json::json!({
                "metadata": {"ownerReferences": [network::owned_by_pod(&name, uid)]}
            });
            if let Err(e) = self
                .policies
                .patch(&name, &PatchParams::default(), &Patch::Merge(&owner))
                .await
            {
                // The policy still holds; only the cluster's own clean-up of it is lost.
                tracing::warn!(error = %e, pod = %name, "the pod's NetworkPolicy could not be handed to it");
            }
        }
        let started = async {
            let ip = self.until_running(&name).await?;
            self.network.remember(&name, ip);
            self.links
                .connect_within(&name, self.settings.start_timeout)
                .await
                .map_err(|e| {
                    SandboxError::Backend(format!(
                        "the pod {name} runs but its daemon ({}, port {}) does not answer: {e}",
                        match self.settings.route {
                            DaemonRoute::PortForward => "through a port-forward".to_owned(),
                            _ => format!("at {ip}"),
                        },
                        pod::DAEMON_PORT
                    ))
                })?;
            Ok::<_, SandboxError>(ip)
        };
        let ip = match started.await {
            Ok(ip) => ip,
            Err(e) => {
                let _ = self.delete_now(&name).await;
                return Err(e);
            }
        };
        let ports = self.port_addresses(ip, spec.exposed_ports.iter().copied());
        tracing::debug!(%ip, "sandbox pod running");
        Ok(Sandbox {
            id: name,
            workdir: WORKDIR.to_owned(),
            ports,
        })
    }
}

#[async_trait]
impl SandboxBackend for KubernetesBackend {
    fn name(&self) -> &'static str {
        "kubernetes"
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            snapshots: SnapshotKind::ArchiveOnly,
            image_builds: false,
            daemon: true,
            warm_pool: true,
            disk_measurement: true,
            isolation: true,
            system_files: false,
            pids_limit: false,
        }
    }

    #[tracing::instrument(skip_all, fields(session = %spec.session, pod = tracing::field::Empty))]
    async fn create(&self, spec: &SandboxSpec) -> Result<Sandbox> {
        // Whatever an earlier boot of this session left goes first.
        for old in self.pods_of(Some(&spec.session)).await? {
            if let Some(name) = old.metadata.name.as_deref() {
                self.delete_now(name).await?;
            }
        }
        let nonce = &uuid::Uuid::new_v4().simple().to_string()[..8];
        let name = format!("{}-{nonce}", pod::pod_name(&spec.session));
        tracing::Span::current().record("pod", name.as_str());
        let egress = self.egress_of(&name).await?;
        let pod = self.pod_of(spec, pod::Owner::Session, &name, egress.as_ref());
        self.start_pod(&name, pod, spec, egress.as_ref()).await
    }

    #[tracing::instrument(skip_all, fields(pod = %name, image = %spec.image))]
    async fn create_pooled(&self, name: &str, spec: &SandboxSpec) -> Result<Sandbox> {
        if !spec.exposed_ports.is_empty() {
            return Err(SandboxError::Backend(
                "a pooled sandbox has no exposed ports: they are the session's".into(),
            ));
        }
        let egress = self.egress_of(name).await?;
        let pod = self.pod_of(spec, pod::Owner::Pool(&spec.image), name, egress.as_ref());
        self.start_pod(name, pod, spec, egress.as_ref()).await
    }

    fn pooled_name(&self, key: &str) -> String {
        format!("{}pool-{key}", pod::POD_PREFIX)
    }

    /// Hands a pooled pod to `session`: its labels say so from now on (a pod cannot be
    /// renamed). An optimistic update on the pod's `resourceVersion`, read again when the
    /// pod changed meanwhile (its status moves it on too), so no label is ever written over a
    /// version it was not read from.
    #[tracing::instrument(skip_all, fields(pod = %id, session = %session))]
    async fn assign(&self, id: &str, session: &str) -> Result<()> {
        for _ in 0..5 {
            let pod = self
                .pods
                .get_opt(id)
                .await
                .map_err(error::api)?
                .ok_or_else(|| SandboxError::NotFound(id.to_owned()))?;
            let patch = serde_json::json!({"metadata": {
                "resourceVersion": pod.metadata.resource_version,
                "labels": {pod::LABEL_SESSION: session, pod::LABEL_POOL: null},
                "annotations": {pod::ANNOTATION_POOL_IMAGE: null},
            }});
            match self
                .pods
                .patch(id, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                Ok(_) => return Ok(()),
                Err(e) if error::status(&e) == Some(409) => continue,
                Err(e) => return Err(error::api(e)),
            }
        }
        Err(SandboxError::Backend(format!(
            "the pod {id} kept changing while it was handed to {session}"
        )))
    }

    #[tracing::instrument(skip_all, fields(pod = %id))]
    async fn inspect(&self, id: &str) -> Result<Option<SandboxStatus>> {
        let Some(pod) = self.pods.get_opt(id).await.map_err(error::api)? else {
            return Ok(None);
        };
        let ports = match status::address(&pod) {
            Some(ip) => self.port_addresses(
                ip,
                pod.spec
                    .iter()
                    .flat_map(|s| &s.containers)
                    .filter(|c| c.name == pod::CONTAINER)
                    .flat_map(|c| c.ports.iter().flatten())
                    .filter_map(|p| u16::try_from(p.container_port).ok())
                    .filter(|p| *p != pod::DAEMON_PORT),
            ),
            None => BTreeMap::new(),
        };
        Ok(Some(SandboxStatus {
            running: status::is_running(&pod),
            ports,
        }))
    }

    fn ended(&self) -> Option<BoxStream<'static, crate::SandboxEnded>> {
        let selector = format!("{}={}", pod::LABEL_DEPLOYMENT, self.deployment);
        Some(watch::ended(self.pods.clone(), selector))
    }

    fn known_running(&self, id: &str) -> bool {
        self.links.connected(id)
    }

    async fn daemon(&self, id: &str) -> Option<DaemonClient> {
        self.links.client(id).await
    }

    #[tracing::instrument(skip_all, fields(pod = %id))]
    async fn exec(&self, id: &str, req: &ExecRequest) -> Result<ExecOutput> {
        let client = self.client(id).await?;
        crate::daemon_exec::exec(&client, req, |_, _| {}).await
    }

    #[tracing::instrument(skip_all, fields(pod = %id))]
    async fn exec_streaming(
        &self,
        id: &str,
        req: &ExecRequest,
        on_output: &mut crate::OnOutput<'_>,
    ) -> Result<ExecOutput> {
        let client = self.client(id).await?;
        crate::daemon_exec::exec(&client, req, on_output).await
    }

    #[tracing::instrument(skip_all, fields(pod = %id, dir = %dir, bytes = tar.len()))]
    async fn put_archive(&self, id: &str, dir: &str, tar: Bytes) -> Result<()> {
        let tar = Bytes::from(
            tokio::task::spawn_blocking(move || crate::docker::owned_by_sandbox_user(&tar))
                .await
                .map_err(|e| SandboxError::Backend(format!("put_archive: {e}")))??,
        );
        let whole = futures::stream::once(std::future::ready(Ok(tar))).boxed();
        self.put_archive_stream(id, dir, whole).await
    }

    #[tracing::instrument(skip_all, fields(pod = %id, dir = %dir))]
    async fn put_archive_stream(
        &self,
        id: &str,
        dir: &str,
        tar: BoxStream<'static, std::io::Result<Bytes>>,
    ) -> Result<()> {
        let client = self.client(id).await?;
        client
            .put_archive(dir, tar)
            .await
            .map(|_| ())
            .map_err(on_path(dir, "put_archive"))
    }

    #[tracing::instrument(skip_all, fields(pod = %id, path = %path))]
    async fn get_archive(&self, id: &str, path: &str) -> Result<BoxStream<'static, Result<Bytes>>> {
        let client = self.client(id).await?;
        let stream = client
            .get_archive(path)
            .await
            .map_err(on_path(path, "get_archive"))?;
        let path = path.to_owned();
        Ok(stream.map_err(on_path(&path, "get_archive")).boxed())
    }

    #[tracing::instrument(skip_all, fields(pod = %id))]
    async fn stop(&self, id: &str, grace: Duration) -> Result<()> {
        // A pod cannot be stopped and kept: its daemon ends every process of the sandbox
        // and then itself, so the pod completes and stays, as a stopped container does.
        let client = self.client(id).await?;
        self.links.forget(id);
        let grace_ms = u64::try_from(grace.as_millis()).unwrap_or(u64::MAX);
        match client.shutdown(grace_ms).await {
            Ok(()) => {}
            Err(e) if e.is_transport() => {}
            Err(e) => return Err(SandboxError::Backend(format!("stopping {id}: {e}"))),
        }
        let ended = |pod: Option<&Pod>| pod.is_none_or(|p| !status::is_running(p));
        match tokio::time::timeout(
            grace + Duration::from_secs(30),
            await_condition(self.pods.clone(), id, ended),
        )
        .await
        {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => Err(SandboxError::Backend(format!("watching the pod {id}: {e}"))),
            Err(_) => Err(SandboxError::Backend(format!(
                "the pod {id} still runs {:?} after its daemon was told to stop",
                grace + Duration::from_secs(30)
            ))),
        }
    }

    #[tracing::instrument(skip_all, fields(pod = %id))]
    async fn remove(&self, id: &str) -> Result<()> {
        let uid = match self.pods.get_opt(id).await.map_err(error::api)? {
            Some(pod) => pod.metadata.uid,
            None => None,
        };
        self.delete_now(id).await?;
        let Some(uid) = uid else { return Ok(()) };
        tokio::time::timeout(
            Duration::from_secs(30),
            await_condition(self.pods.clone(), id, conditions::is_deleted(&uid)),
        )
        .await
        .map_err(|_| SandboxError::Backend(format!("the pod {id} was not deleted within 30 s")))?
        .map_err(|e| SandboxError::Backend(format!("watching the pod {id}: {e}")))?;
        Ok(())
    }

    async fn list(&self) -> Result<Vec<ListedSandbox>> {
        Ok(self
            .pods_of(None)
            .await?
            .into_iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .map(|p| {
                let labels = p.metadata.labels.clone().unwrap_or_default();
                let name = p.metadata.name.clone().unwrap_or_default();
                let pool = p
                    .metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get(pod::ANNOTATION_POOL_IMAGE))
                    .filter(|_| labels.contains_key(pod::LABEL_POOL))
                    .cloned();
                ListedSandbox {
                    id: name.clone(),
                    name,
                    session: labels.get(pod::LABEL_SESSION).cloned(),
                    pool,
                    running: status::is_running(&p),
                }
            })
            .collect())
    }

    async fn disk_usage(&self) -> Result<Vec<(String, u64)>> {
        self.measure_pods().await
    }

    async fn remove_strays(&self) -> Result<usize> {
        let selector = format!("{}={}", pod::LABEL_DEPLOYMENT, self.deployment);
        let policies = self
            .policies
            .list(&ListParams::default().labels(&selector))
            .await
            .map_err(error::api)?
            .items;
        if policies.is_empty() {
            return Ok(0);
        }
        // Listed after the policies: a pod made since is listed, so its policy is kept.
        let pods: std::collections::HashSet<String> = self
            .pods_of(None)
            .await?
            .into_iter()
            .filter_map(|p| p.metadata.name)
            .collect();
        let strays = network::strays(&policies, &pods, k8s_openapi::jiff::Timestamp::now());
        for name in &strays {
            tracing::warn!(policy = %name, "removing a NetworkPolicy whose pod is gone");
            match self.policies.delete(name, &DeleteParams::default()).await {
                Ok(_) => {}
                Err(e) if error::is_not_found(&e) => {}
                Err(e) => return Err(error::api(e)),
            }
        }
        Ok(strays.len())
    }

    async fn snapshot_image(&self, id: &str, _name: &str) -> Result<String> {
        Err(SandboxError::Backend(format!(
            "the kubernetes backend keeps a snapshot of {id} as its workspace archive only: a pod cannot be committed to an image"
        )))
    }

    async fn remove_image(&self, _image: &str) -> Result<()> {
        // It makes no images; what it is asked to remove is not its own.
        Ok(())
    }
}
