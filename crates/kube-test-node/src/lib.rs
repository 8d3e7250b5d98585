//! The test node agent: a stand-in for the kubelet (and, for its own node, the scheduler) of
//! the Kubernetes test cluster (`scripts/kube-test-cluster`), which runs a real kube-apiserver
//! and etcd but no kubelet. It runs each pod bound to its node as Docker containers.
//!
//! What it does, as a kubelet would as far as the Kubernetes sandbox backend needs:
//! - registers a `Node` (Ready, addresses, capacity, nodeInfo) and renews its Ready heartbeat
//!   every [`node::HEARTBEAT`] ([`node`]);
//! - binds pods that name no node, whose `nodeSelector` its labels satisfy and whose
//!   scheduler is the default one, through `pods/binding`; a pod whose selector does not match
//!   gets `PodScheduled=False`, reason `Unschedulable` ([`schedule`]);
//! - runs the pods bound to it: `emptyDir` volumes as Docker volumes, init containers in
//!   order, then the app containers, with the spec's command, args, env, working directory,
//!   limits and security context, the pod's namespaced sysctls and, with `dnsPolicy: None`,
//!   the `resolv.conf` of its `dnsConfig` ([`containers`], [`dns`]), and reports phase, pod IP, conditions and
//!   container states through the `status` subresource ([`status`]); deletion stops the
//!   containers within the grace period and ends with the kubelet's final delete ([`pods`]);
//! - serves `pods/portforward` over WebSocket, as the kubelet's streaming server does
//!   ([`streaming`]).
//!
//! The pod network ([`network`]): one Docker bridge network (`--docker-network`, created with
//! `--pod-cidr` if missing). A pod's IP is chosen by the agent from the lower half of that
//! subnet and given to its first app container, whose network namespace the pod's other app
//! containers join (`network_mode: container:<first>`): they share `localhost` and the pod
//! IP, as in a pod. Init containers run before that container exists, and no image is known
//! to hold a "pause" program, so each init container has its own address, which Docker picks
//! from the upper half of the subnet: an init container sees the network, but not at the
//! pod IP. Pod IPs are reachable from the host (the bridge's gateway is the host, and the
//! node's InternalIP).
//!
//! What it does NOT do, compared with a kubelet: no image pulls (every pod behaves as
//! `imagePullPolicy: Never`: a missing image is `ErrImageNeverPull`); no restarts (every pod
//! is run as `restartPolicy: Never`, whatever it says: an exited container stays terminated);
//! no probes (a running container is ready); no CNI, NetworkPolicy, Services or kube-proxy;
//! no exec, attach or logs server (the API server's `pods/exec` and `pods/log` fail against this
//! node), and port-forward over WebSocket only, not SPDY ([`streaming`]); no Secrets, ConfigMaps, projected or
//! service-account volumes, no `envFrom`, no `$(VAR)` expansion, no Service environment
//! variables, no `subPath`; requests, node affinity, taints and tolerations are not
//! considered when binding; `ephemeral-storage` limits and an on-disk `emptyDir`'s
//! `sizeLimit` are not enforced; no eviction, no static pods, no node lease; and nothing marks
//! the Node NotReady when the agent stops (no node lifecycle controller runs).

pub mod containers;
pub mod dns;
pub mod events;
pub mod labels;
pub mod network;
pub mod node;
pub mod pods;
pub mod quantity;
pub mod schedule;
pub mod status;
pub mod streaming;
pub mod teardown;
pub mod volumes;

use anyhow::Context as _;
use std::collections::BTreeMap;
use tokio_util::sync::CancellationToken;

/// The agent's settings, from flags or the environment.
#[derive(clap::Parser, Clone, Debug)]
#[command(
    name = "kube-test-node",
    about = "A test stand-in for a kubelet: runs pods as Docker containers"
)]
pub struct Settings {
    /// The admin kubeconfig of the cluster (else KUBECONFIG).
    #[arg(long, env = "KUBECONFIG")]
    pub kubeconfig: std::path::PathBuf,
    /// The Node's name.
    #[arg(long, default_value = "kube-test-node")]
    pub node_name: String,
    /// The Docker bridge network pods run on (created if missing).
    #[arg(long, default_value = "sa-kube-pods")]
    pub docker_network: String,
    /// The subnet of that network when the agent creates it.
    #[arg(long, default_value = "10.244.0.0/16")]
    pub pod_cidr: ipnet::Ipv4Net,
    /// A label of the Node, `key=value` (repeatable), beside the well-known ones.
    #[arg(long = "node-label", value_parser = parse_label)]
    pub node_labels: Vec<(String, String)>,
    /// Docker's pids limit for every container (the kubelet's podPidsLimit).
    #[arg(long, default_value_t = 1024)]
    pub pod_max_pids: i64,
}

fn parse_label(s: &str) -> Result<(String, String), String> {
    s.split_once('=')
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .ok_or_else(|| format!("a node label is key=value, not {s:?}"))
}

impl Settings {
    /// The Node's labels: the well-known ones a kubelet sets, then those of `--node-label`.
    pub fn labels(&self) -> BTreeMap<String, String> {
        let mut labels = BTreeMap::from([
            ("kubernetes.io/hostname".to_owned(), self.node_name.clone()),
            ("kubernetes.io/os".to_owned(), "linux".to_owned()),
            ("kubernetes.io/arch".to_owned(), kube_arch().to_owned()),
        ]);
        labels.extend(self.node_labels.iter().cloned());
        labels
    }
}

/// The Go name of this machine's architecture, as Kubernetes spells it.
pub fn kube_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    }
}

/// What every part of the agent shares.
#[derive(Clone)]
pub struct Context {
    pub client: kube::Client,
    pub docker: bollard::Docker,
    pub settings: Settings,
    /// Who this agent's containers belong to ([`labels::Owner`]).
    pub owner: labels::Owner,
    pub network: std::sync::Arc<network::PodNetwork>,
    /// The port of the streaming server ([`streaming`]) on the network's gateway: the Node's
    /// kubelet endpoint.
    pub streaming_port: u16,
}

/// Runs the agent until `shutdown` is cancelled; containers are left running for the next
/// agent to adopt.
pub async fn run(settings: Settings, shutdown: CancellationToken) -> anyhow::Result<()> {
    let kubeconfig = kube::config::Kubeconfig::read_from(&settings.kubeconfig)
        .with_context(|| format!("reading the kubeconfig {}", settings.kubeconfig.display()))?;
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .context("loading the kubeconfig")?;
    // As the kubeconfig writes it (no trailing slash), so that a script can name it.
    let cluster = config
        .cluster_url
        .to_string()
        .trim_end_matches('/')
        .to_owned();
    let client = kube::Client::try_from(config).context("building the Kubernetes client")?;
    let docker = bollard::Docker::connect_with_defaults()
        .context("connecting to Docker")?
        .negotiate_version()
        .await
        .context("asking Docker its API version (is dockerd running?)")?;
    let network =
        network::PodNetwork::ensure(&docker, &settings.docker_network, settings.pod_cidr).await?;
    let streaming_port =
        streaming::start(client.clone(), network.gateway, shutdown.clone()).await?;
    let owner = labels::Owner {
        node: settings.node_name.clone(),
        cluster,
    };
    let ctx = Context {
        client,
        docker,
        settings,
        owner,
        network: std::sync::Arc::new(network),
        streaming_port,
    };
    node::register(&ctx).await?;
    tracing::info!(node = %ctx.settings.node_name, "the node is registered and Ready");
    let heartbeat = tokio::spawn(node::heartbeat(ctx.clone(), shutdown.clone()));
    let scheduler = tokio::spawn(schedule::run(ctx.clone(), shutdown.clone()));
    let pods = pods::run(ctx.clone(), shutdown.clone()).await;
    shutdown.cancel();
    let _ = tokio::join!(heartbeat, scheduler);
    pods
}
