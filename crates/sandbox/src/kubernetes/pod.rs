//! The pod a sandbox is: its hardening, limits, labels, the daemon copied in by an init
//! container, and reading back what the cluster reports about it.
//!
//! Every pod is made here and nowhere else, so the golden file of this module's test is the
//! whole of what the backend asks a cluster to run (`tests/golden/kubernetes/pod.json`).

use super::settings::KubernetesSettings;
use crate::docker::{SANDBOX_GID, SANDBOX_UID};
use crate::{SandboxSpec, WORKDIR};
use k8s_openapi::api::core::v1::{
    Capabilities, Container, ContainerPort, EmptyDirVolumeSource, EnvVar, LocalObjectReference,
    Pod, PodDNSConfig, PodDNSConfigOption, PodSecurityContext, PodSpec, ResourceRequirements,
    SeccompProfile, SecurityContext, Sysctl, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use std::collections::BTreeMap;

/// Label naming the deployment that owns a pod (Kubernetes label keys take a DNS prefix, so
/// these are not the Docker labels' spelling).
pub const LABEL_DEPLOYMENT: &str = "sandbox-agents.io/deployment";
/// Label naming the session a pod belongs to.
pub const LABEL_SESSION: &str = "sandbox-agents.io/session";
/// Label naming the pod itself (its NetworkPolicy selects it by this: a pod's name is no
/// label).
pub const LABEL_SANDBOX: &str = "sandbox-agents.io/sandbox";
/// Label of a warm-pool pod: a digest of the image it was pooled for (a label value cannot
/// hold an image reference); the image itself is the annotation [`ANNOTATION_POOL_IMAGE`].
pub const LABEL_POOL: &str = "sandbox-agents.io/pool";
/// Annotation of a warm-pool pod naming the image it was pooled for.
pub const ANNOTATION_POOL_IMAGE: &str = "sandbox-agents.io/pool-image";
/// The start of every sandbox pod's name (`sa-<session>`).
pub const POD_PREFIX: &str = "sa-";
/// The port the daemon listens on in every pod.
pub const DAEMON_PORT: u16 = sandboxd::tcp::DEFAULT_TCP_PORT;
/// The sandbox's container (the one the daemon and every command run in).
pub const CONTAINER: &str = "sandbox";
/// Where the daemon's image holds it (the server's image holds it there too).
pub const SANDBOXD_IN_IMAGE: &str = "/usr/local/bin/sandboxd";
/// Where the init container puts the daemon, in the sandbox's container.
const DAEMON_DIR: &str = "/opt/sandbox-agents/bin";
/// Where the sandbox user's home is seeded from the image (a read-only root keeps it
/// writable this way).
const HOME: &str = "/home/sandbox";
const HOME_SEED: &str = "/opt/sandbox-agents/home";

/// Whom a pod is made for: its owner label.
#[derive(Clone, Copy, Debug)]
pub enum Owner<'a> {
    /// The session `spec.session`.
    Session,
    /// The warm pool of this image.
    Pool(&'a str),
}

/// The label value of the pool of `image`.
pub fn pool_label(image: &str) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(image.as_bytes());
    digest[..16].iter().map(|b| format!("{b:02x}")).collect()
}

/// The pod name of a session's sandbox.
pub fn pod_name(session: &str) -> String {
    format!("{POD_PREFIX}{session}")
}

fn quantity(s: impl Into<String>) -> Quantity {
    Quantity(s.into())
}

/// What the kubelet's `ephemeral-storage` limit allows beyond the disk limit: a quarter of it,
/// at least 256 MiB. The control plane enforces the disk limit itself, by measurement, and
/// stops the session with its own event (`sessions/src/disk.rs`); the kubelet's eviction is the
/// backstop for a sandbox that writes faster than that measurement runs, so it must not fire
/// first on a sandbox that is merely at its limit.
pub fn ephemeral_storage_limit(disk: u64) -> u64 {
    disk.saturating_add((disk / 4).max(256 * 1024 * 1024))
}

/// The `ephemeral-storage` a sandbox's pod requests with a disk limit `disk`: the limit up to
/// 1 GiB. Requesting the whole limit (10 GiB by default) would let a node with 50 GiB of disk
/// hold five sandboxes, most of which write little; requesting none would let the scheduler
/// fill a node whose disk is gone. (A request left out would default to the limit.)
pub fn ephemeral_storage_request(disk: u64) -> u64 {
    disk.min(1 << 30)
}

/// The sandbox container's requests and limits: CPU and memory requested as much as they are
/// limited (the scheduler places what the sandbox may use), and with a disk limit,
/// `ephemeral-storage` requested at [`ephemeral_storage_request`] and limited at
/// [`ephemeral_storage_limit`]. The pod's other containers set none, so the pod's ephemeral
/// storage (its `emptyDir`s, logs and writable layers together) is held to this container's
/// limit.
fn sandbox_resources(
    cpu_memory: BTreeMap<String, Quantity>,
    disk: Option<u64>,
) -> ResourceRequirements {
    let (mut limits, mut requests) = (cpu_memory.clone(), cpu_memory);
    if let Some(disk) = disk {
        let storage = "ephemeral-storage".to_owned();
        requests.insert(
            storage.clone(),
            quantity(ephemeral_storage_request(disk).to_string()),
        );
        limits.insert(storage, quantity(ephemeral_storage_limit(disk).to_string()));
    }
    ResourceRequirements {
        limits: Some(limits),
        requests: Some(requests),
        ..Default::default()
    }
}

/// The hardening every container of the pod gets: no privilege, no escalation, no
/// capability, the runtime's default seccomp profile, a read-only root filesystem.
fn hardened() -> SecurityContext {
    SecurityContext {
        allow_privilege_escalation: Some(false),
        privileged: Some(false),
        capabilities: Some(Capabilities {
            drop: Some(vec!["ALL".to_owned()]),
            add: None,
        }),
        read_only_root_filesystem: Some(true),
        run_as_non_root: Some(true),
        run_as_user: Some(SANDBOX_UID as i64),
        run_as_group: Some(SANDBOX_GID as i64),
        seccomp_profile: Some(SeccompProfile {
            type_: "RuntimeDefault".to_owned(),
            localhost_profile: None,
        }),
        ..Default::default()
    }
}

fn mount(name: &str, path: &str, read_only: bool) -> VolumeMount {
    VolumeMount {
        name: name.to_owned(),
        mount_path: path.to_owned(),
        read_only: read_only.then_some(true),
        ..Default::default()
    }
}

fn empty_dir(name: &str, limit: Option<&str>) -> Volume {
    Volume {
        name: name.to_owned(),
        empty_dir: Some(EmptyDirVolumeSource {
            medium: None,
            size_limit: limit.map(quantity),
        }),
        ..Default::default()
    }
}

/// How a pod reaches the egress proxy when the deployment runs it: the proxy's address on
/// the pod network, and the pod's name and egress token as its daemon sends them
/// (`sandboxd::egress::TOKEN_ENV`).
#[derive(Clone)]
pub struct PodEgress {
    pub proxy: std::net::SocketAddr,
    pub token: String,
}

impl std::fmt::Debug for PodEgress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PodEgress")
            .field("proxy", &self.proxy)
            .finish_non_exhaustive()
    }
}

fn var(name: &str, value: &str) -> EnvVar {
    EnvVar {
        name: name.to_owned(),
        value: Some(value.to_owned()),
        value_from: None,
    }
}

/// The pod of `spec`, named `name`, running `image`, whose daemon accepts only the token
/// whose hash is `token_hash`; with `egress`, confined to the proxy: its tools are pointed at
/// the daemon's forwarder, its names at the daemon's DNS (which ask the proxy), and its
/// NetworkPolicy (`network.rs`) leaves it no other route.
/// Hardening, limits, user and volumes do not depend on `owner`: a pooled pod is the pod a
/// session would get, bar its label.
pub fn pod(
    settings: &KubernetesSettings,
    deployment: &str,
    name: &str,
    (spec, owner): (&SandboxSpec, Owner<'_>),
    image: &str,
    token_hash: &str,
    egress: Option<&PodEgress>,
) -> Pod {
    let (owner_label, annotations) = match owner {
        Owner::Session => ((LABEL_SESSION.to_owned(), spec.session.clone()), None),
        Owner::Pool(pooled) => (
            (LABEL_POOL.to_owned(), pool_label(pooled)),
            Some(BTreeMap::from([(
                ANNOTATION_POOL_IMAGE.to_owned(),
                pooled.to_owned(),
            )])),
        ),
    };
    let labels = BTreeMap::from([
        (LABEL_DEPLOYMENT.to_owned(), deployment.to_owned()),
        (LABEL_SANDBOX.to_owned(), name.to_owned()),
        owner_label,
        (
            "app.kubernetes.io/managed-by".to_owned(),
            "sandbox-agents".to_owned(),
        ),
        (
            "app.kubernetes.io/component".to_owned(),
            "sandbox".to_owned(),
        ),
    ]);
    let mut env: Vec<EnvVar> = spec.env.iter().map(|(k, v)| var(k, v)).collect();
    env.push(var("HOME", HOME));
    env.push(var(sandboxd::tcp::TOKEN_ENV, token_hash));
    if let Some(egress) = egress {
        // The daemon takes its two out of its environment at start; the proxy variables are
        // the tools'.
        env.push(var(sandboxd::egress::PROXY_ENV, &egress.proxy.to_string()));
        env.push(var(sandboxd::egress::TOKEN_ENV, &egress.token));
        env.extend(crate::egress::proxy_env().iter().map(|(k, v)| var(k, v)));
    }
    let limits = &spec.limits;
    // Millicores, rounded up to one: the API refuses finer.
    let cpu = format!("{}m", ((limits.cpus * 1000.0).ceil() as i64).max(1));
    let resources = BTreeMap::from([
        ("cpu".to_owned(), quantity(cpu)),
        (
            "memory".to_owned(),
            quantity(limits.memory_bytes.to_string()),
        ),
    ]);
    let mut ports = vec![ContainerPort {
        name: Some("sandboxd".to_owned()),
        container_port: i32::from(DAEMON_PORT),
        protocol: Some("TCP".to_owned()),
        ..Default::default()
    }];
    ports.extend(spec.exposed_ports.iter().map(|p| ContainerPort {
        container_port: i32::from(*p),
        protocol: Some("TCP".to_owned()),
        ..Default::default()
    }));
    let small = ResourceRequirements {
        limits: Some(BTreeMap::from([
            ("cpu".to_owned(), quantity("200m")),
            ("memory".to_owned(), quantity("64Mi")),
        ])),
        requests: Some(BTreeMap::from([
            ("cpu".to_owned(), quantity("10m")),
            ("memory".to_owned(), quantity("16Mi")),
        ])),
        ..Default::default()
    };
    let init = vec![
        // The daemon, from an image that holds only it (or the server's own), onto a
        // volume the sandbox's container runs it from: any image gets it unchanged.
        Container {
            name: "sandboxd".to_owned(),
            image: Some(settings.sandboxd_image.clone()),
            command: Some(vec![
                SANDBOXD_IN_IMAGE.to_owned(),
                "install".to_owned(),
                DAEMON_DIR.to_owned(),
            ]),
            volume_mounts: Some(vec![mount("sandboxd", DAEMON_DIR, false)]),
            security_context: Some(hardened()),
            resources: Some(small.clone()),
            ..Default::default()
        },
        // The image's home, copied where it stays writable under a read-only root.
        Container {
            name: "home".to_owned(),
            image: Some(image.to_owned()),
            // Not `-a`: the volume's own directory is not the sandbox user's to set times or
            // modes on; its files become the user's, as the image's home holds them.
            command: Some(vec![
                "cp".to_owned(),
                "-RP".to_owned(),
                format!("{HOME}/."),
                format!("{HOME_SEED}/"),
            ]),
            volume_mounts: Some(vec![mount("home", HOME_SEED, false)]),
            security_context: Some(hardened()),
            resources: Some(small),
            ..Default::default()
        },
    ];
    let sandbox = Container {
        name: CONTAINER.to_owned(),
        image: Some(image.to_owned()),
        // `args`, not `command`: the image's entrypoint (an init such as tini, which reaps
        // what commands leave behind) runs the daemon.
        args: Some(vec![
            format!("{DAEMON_DIR}/sandboxd"),
            "serve".to_owned(),
            "--listen".to_owned(),
            format!("0.0.0.0:{DAEMON_PORT}"),
        ]),
        env: Some(env),
        working_dir: Some(WORKDIR.to_owned()),
        ports: Some(ports),
        resources: Some(sandbox_resources(resources, settings.disk_limit)),
        security_context: Some(hardened()),
        volume_mounts: Some(vec![
            mount("sandboxd", DAEMON_DIR, true),
            mount("workspace", WORKDIR, false),
            mount("home", HOME, false),
            mount("tmp", "/tmp", false),
            mount("var-tmp", "/var/tmp", false),
        ]),
        ..Default::default()
    };
    Pod {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some(settings.namespace.clone()),
            labels: Some(labels),
            annotations,
            ..Default::default()
        },
        spec: Some(PodSpec {
            automount_service_account_token: Some(false),
            // No variables naming the namespace's services: a sandbox learns no address.
            enable_service_links: Some(false),
            restart_policy: Some("Never".to_owned()),
            termination_grace_period_seconds: Some(5),
            // The session's own (an agent's or environment's choice, from the operator's
            // list), else the deployment's.
            runtime_class_name: spec
                .runtime_class
                .clone()
                .or_else(|| settings.runtime_class.clone()),
            node_selector: (!settings.node_selector.is_empty())
                .then(|| settings.node_selector.clone()),
            image_pull_secrets: settings
                .image_pull_secret
                .as_ref()
                .map(|s| vec![LocalObjectReference { name: s.clone() }]),
            // Under the proxy, names are the daemon's to answer (`sandboxd::egress::dns`, on
            // port 53 of the pod's loopback, which the sandbox user may bind): the cluster's
            // DNS would be a way out.
            dns_policy: egress.map(|_| "None".to_owned()),
            dns_config: egress.map(|_| PodDNSConfig {
                nameservers: Some(vec!["127.0.0.1".to_owned()]),
                options: Some(vec![PodDNSConfigOption {
                    name: Some("ndots".to_owned()),
                    value: Some("1".to_owned()),
                }]),
                searches: None,
            }),
            security_context: Some(PodSecurityContext {
                sysctls: egress.map(|_| {
                    vec![Sysctl {
                        name: "net.ipv4.ip_unprivileged_port_start".to_owned(),
                        value: "53".to_owned(),
                    }]
                }),
                run_as_non_root: Some(true),
                run_as_user: Some(SANDBOX_UID as i64),
                run_as_group: Some(SANDBOX_GID as i64),
                fs_group: Some(SANDBOX_GID as i64),
                seccomp_profile: Some(SeccompProfile {
                    type_: "RuntimeDefault".to_owned(),
                    localhost_profile: None,
                }),
                ..Default::default()
            }),
            init_containers: Some(init),
            containers: vec![sandbox],
            volumes: Some(vec![
                empty_dir("sandboxd", Some("64Mi")),
                empty_dir("workspace", None),
                empty_dir("home", None),
                empty_dir("tmp", None),
                empty_dir("var-tmp", None),
            ]),
            ..Default::default()
        }),
        status: None,
    }
}
