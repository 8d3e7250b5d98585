//! What the Kubernetes backend starts with: one value the server resolves from its
//! `--kubernetes-*` flags, checked against the cluster when the backend connects.

use std::collections::BTreeMap;
use std::path::PathBuf;

/// How the control plane reaches a sandbox pod's daemon (`--kubernetes-daemon-route`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DaemonRoute {
    /// The pod network when the server runs in the cluster (its configuration is the
    /// in-cluster one), the API server's port-forward otherwise: resolved at connect.
    #[default]
    Auto,
    /// The pod's address on the cluster network: the control plane runs in the cluster (or
    /// on a network that routes to pods, as the test cluster's host does).
    PodNetwork,
    /// The API server's `pods/portforward` (over WebSocket) to the daemon's port: a control
    /// plane outside the cluster, which has no route to pods. Each sandbox's one connection
    /// costs a WebSocket through the API server and the node; exposed ports are reached
    /// through the daemon's tunnel on that connection (`connect_port`), not at the pod's IP.
    PortForward,
}

impl DaemonRoute {
    /// The route as the flag spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            DaemonRoute::Auto => "auto",
            DaemonRoute::PodNetwork => "pod-network",
            DaemonRoute::PortForward => "port-forward",
        }
    }
}

/// The control plane's pods, as a sandbox pod's NetworkPolicy names them: the only peers
/// that reach its daemon and, under the egress proxy, the only ones it reaches.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ControlPlanePods {
    /// Their namespace (`--kubernetes-control-plane-namespace`).
    pub namespace: String,
    /// Labels they all carry (`--kubernetes-control-plane-labels k=v,...`).
    pub labels: BTreeMap<String, String>,
}

impl Default for ControlPlanePods {
    /// What `deploy/kubernetes/` deploys.
    fn default() -> Self {
        ControlPlanePods {
            namespace: "sandbox-agents".to_owned(),
            labels: BTreeMap::from([(
                "app.kubernetes.io/name".to_owned(),
                "sandbox-agents".to_owned(),
            )]),
        }
    }
}

/// The Kubernetes backend's settings.
#[derive(Clone)]
pub struct KubernetesSettings {
    /// A kubeconfig to read; `None`: in-cluster configuration when the server runs in a pod,
    /// else `KUBECONFIG` or `~/.kube/config` (as `kubectl` finds it).
    pub kubeconfig: Option<PathBuf>,
    /// The namespace sandboxes' pods live in (`--kubernetes-namespace`).
    pub namespace: String,
    /// The sandbox image as the cluster pulls it (`--kubernetes-image`); `None`: the image a
    /// session asks for, as it is named (the control plane's default sandbox image).
    pub image: Option<String>,
    /// The image the init container copies the daemon from (`--kubernetes-sandboxd-image`):
    /// one holding the static `sandboxd` at `/sandboxd`, such as the server's own image.
    pub sandboxd_image: String,
    /// The runtime class sandboxes run under (`--kubernetes-runtime-class`: gVisor, Kata);
    /// `None`: the cluster's default runtime.
    pub runtime_class: Option<String>,
    /// The runtime classes an agent or environment may name (`--kubernetes-runtime-classes`,
    /// with `runtime_class`): each is tried at connect (a `dryRun` pod), so one the cluster
    /// lacks stops the server instead of failing boots.
    pub runtime_classes: Vec<String>,
    /// The disk a sandbox may fill, in bytes (`--sandbox-disk-mb`; `None`: no limit): its
    /// pod's `ephemeral-storage` request, and its limit with headroom
    /// (`pod::ephemeral_storage_limit`: the control plane's measurement acts first).
    pub disk_limit: Option<u64>,
    /// Node labels a sandbox's pod must land on (`--kubernetes-node-selector k=v,...`).
    pub node_selector: BTreeMap<String, String>,
    /// The Secret the kubelet pulls the images with (`--kubernetes-image-pull-secret`).
    pub image_pull_secret: Option<String>,
    /// How the daemon is reached.
    pub route: DaemonRoute,
    /// The control plane's pods (each sandbox's NetworkPolicy admits them alone).
    pub control_plane: ControlPlanePods,
    /// The egress proxy as pods reach it, `host:port` (`--kubernetes-egress-proxy`: the
    /// proxy's Service, say), when the deployment runs it: the name is resolved by the
    /// control plane when it makes a pod, so the sandbox needs no DNS of the cluster. `None`:
    /// no proxy, and a pod's NetworkPolicy lets it reach the internet but no private,
    /// link-local or metadata address.
    pub egress_proxy: Option<String>,
    /// The key the per-sandbox daemon tokens are derived from (the server derives it from its
    /// master key, so every replica reaches every sandbox). Never sent anywhere: a pod holds
    /// only the hash of its own token.
    pub daemon_key: [u8; 32],
    /// How long a pod may take from creation to a daemon that answers.
    pub start_timeout: std::time::Duration,
}

impl std::fmt::Debug for KubernetesSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubernetesSettings")
            .field("kubeconfig", &self.kubeconfig)
            .field("namespace", &self.namespace)
            .field("image", &self.image)
            .field("sandboxd_image", &self.sandboxd_image)
            .field("runtime_class", &self.runtime_class)
            .field("runtime_classes", &self.runtime_classes)
            .field("disk_limit", &self.disk_limit)
            .field("node_selector", &self.node_selector)
            .field("image_pull_secret", &self.image_pull_secret)
            .field("route", &self.route)
            .field("control_plane", &self.control_plane)
            .field("egress_proxy", &self.egress_proxy)
            .finish_non_exhaustive()
    }
}

impl KubernetesSettings {
    /// Settings for `namespace` with everything else at its default.
    pub fn new(namespace: &str, sandboxd_image: &str, daemon_key: [u8; 32]) -> Self {
        KubernetesSettings {
            kubeconfig: None,
            namespace: namespace.to_owned(),
            image: None,
            sandboxd_image: sandboxd_image.to_owned(),
            runtime_class: None,
            runtime_classes: Vec::new(),
            disk_limit: None,
            node_selector: BTreeMap::new(),
            image_pull_secret: None,
            route: DaemonRoute::PodNetwork,
            control_plane: ControlPlanePods::default(),
            egress_proxy: None,
            daemon_key,
            start_timeout: std::time::Duration::from_secs(120),
        }
    }
}
