//! The container a sandbox is: its configuration (hardening, limits, labels, ports) and
//! reading back where its ports were published.

use super::{SANDBOX_GID, SANDBOX_UID};
use crate::{SandboxSpec, LABEL_DEPLOYMENT, LABEL_POOL, LABEL_SESSION, WORKDIR};
use bollard::models::{
    ContainerConfig, ContainerCreateBody, HostConfig, Mount, MountType, MountVolumeOptions,
    NetworkSettings, PortBinding,
};
use std::collections::{BTreeMap, HashMap};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use crate::PUBLISH_IP;

/// The container name of a session's sandbox.
/// The start of every sandbox container's name (`sa-<session>`, `sa-pool-<id>`). The
/// deployment label alone does not make a container ours: images we build or commit carry it
/// too, and so does any container someone else starts from one of them.
pub const CONTAINER_PREFIX: &str = "sa-";

pub fn container_name(session: &str) -> String {
    format!("{CONTAINER_PREFIX}{session}")
}

/// Whom a container is created for: its owner label.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Owner<'a> {
    /// The session `spec.session`.
    Session,
    /// The warm pool of `spec.image`.
    Pool(&'a str),
}

/// The container of `spec`. Hardening, limits, user and working directory do not depend on
/// `owner`: a pooled container is the same container a session would get, bar its label.
///
/// `network`: the Docker network sandboxes share with a control plane that runs in a
/// container (`--docker-network`). On it, nothing is published on the host: the control plane
/// reaches exposed ports at the sandbox's own address ([`network_ports`]). Without it, the
/// default bridge and ports published on [`PUBLISH_IP`] ([`published_ports`]).
pub(crate) fn container_body(
    deployment: &str,
    spec: &SandboxSpec,
    owner: Owner<'_>,
    network: Option<&str>,
) -> ContainerCreateBody {
    let owner_label = match owner {
        Owner::Session => (LABEL_SESSION.to_owned(), spec.session.clone()),
        Owner::Pool(image) => (LABEL_POOL.to_owned(), image.to_owned()),
    };
    let labels = HashMap::from([
        (LABEL_DEPLOYMENT.to_owned(), deployment.to_owned()),
        owner_label,
    ]);
    let env = spec.env.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let exposed: Vec<String> = spec
        .exposed_ports
        .iter()
        .map(|p| format!("{p}/tcp"))
        .collect();
    let port_bindings: HashMap<String, Option<Vec<PortBinding>>> = exposed
        .iter()
        .filter(|_| network.is_none())
        .map(|p| {
            let binding = PortBinding {
                host_ip: Some(PUBLISH_IP.to_string()),
                // Empty: the Engine picks a free port.
                host_port: Some(String::new()),
            };
            (p.clone(), Some(vec![binding]))
        })
        .collect();
    let limits = &spec.limits;
    let host_config = HostConfig {
        privileged: Some(false),
        cap_drop: Some(vec!["ALL".to_owned()]),
        cap_add: Some(Vec::new()),
        security_opt: Some(vec!["no-new-privileges".to_owned()]),
        pids_limit: Some(limits.pids),
        memory: Some(limits.memory_bytes),
        // Equal to `memory`: no swap on top.
        memory_swap: Some(limits.memory_bytes),
        nano_cpus: Some((limits.cpus * 1e9).round() as i64),
        // The image's ENTRYPOINT is tini already.
        init: Some(false),
        ipc_mode: Some("private".to_owned()),
        binds: Some(Vec::new()),
        mounts: Some(vec![workspace_volume(deployment)]),
        port_bindings: Some(port_bindings),
        network_mode: network.map(str::to_owned),
        publish_all_ports: Some(false),
        auto_remove: Some(false),
        ..Default::default()
    };
    ContainerCreateBody {
        image: Some(spec.image.clone()),
        user: Some(format!("{SANDBOX_UID}:{SANDBOX_GID}")),
        working_dir: Some(WORKDIR.to_owned()),
        env: Some(env),
        labels: Some(labels),
        exposed_ports: Some(exposed),
        tty: Some(false),
        open_stdin: Some(false),
        attach_stdin: Some(false),
        attach_stdout: Some(false),
        attach_stderr: Some(false),
        host_config: Some(host_config),
        ..Default::default()
    }
}

/// The workspace is a volume of the container's own (anonymous: created with it, seeded with
/// the image's empty `/workspace`, removed with it, as every removal passes `v`), not part of
/// its writable layer. So a commit (`snapshot_image`) never captures it: the snapshot's
/// archive holds the workspace, with the buckets of `s3_mount` entries left out, and the
/// image holds only what lives outside it (installed packages), never a bucket's files. The
/// disk limit counts it beside the layer (`workspace.rs`). Labelled with the deployment, so
/// that one a failed removal left behind can be told apart from others' volumes.
pub(crate) fn workspace_volume(deployment: &str) -> Mount {
    Mount {
        target: Some(WORKDIR.to_owned()),
        typ: Some(MountType::VOLUME),
        read_only: Some(false),
        volume_options: Some(MountVolumeOptions {
            labels: Some(HashMap::from([(
                LABEL_DEPLOYMENT.to_owned(),
                deployment.to_owned(),
            )])),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// Container port → <loopback>:<host port>, from an inspected container's network settings.
pub(crate) fn published_ports(settings: Option<&NetworkSettings>) -> BTreeMap<u16, SocketAddr> {
    let mut ports = BTreeMap::new();
    let Some(map) = settings.and_then(|s| s.ports.as_ref()) else {
        return ports;
    };
    for (key, bindings) in map {
        let Some(port) = key.strip_suffix("/tcp").and_then(|p| p.parse::<u16>().ok()) else {
            continue;
        };
        let found = bindings.iter().flatten().find_map(|b| {
            let ip: Ipv4Addr = b.host_ip.as_deref()?.parse().ok()?;
            let host_port: u16 = b.host_port.as_deref()?.parse().ok()?;
            (ip.is_loopback() && host_port != 0).then(|| SocketAddr::from((ip, host_port)))
        });
        if let Some(addr) = found {
            ports.insert(port, addr);
        }
    }
    ports
}

/// Exposed container port → <sandbox address on `network`>:<port>, from an inspected
/// container: every port its configuration exposes, at its address on that network (none
/// when it is not attached to it).
pub(crate) fn network_ports(
    config: Option<&ContainerConfig>,
    settings: Option<&NetworkSettings>,
    network: &str,
) -> BTreeMap<u16, SocketAddr> {
    let ip: Option<IpAddr> = settings
        .and_then(|s| s.networks.as_ref())
        .and_then(|n| n.get(network))
        .and_then(|e| e.ip_address.as_deref())
        .and_then(|ip| ip.parse().ok());
    let Some(ip) = ip else {
        return BTreeMap::new();
    };
    config
        .and_then(|c| c.exposed_ports.as_ref())
        .into_iter()
        .flatten()
        .filter_map(|key| key.strip_suffix("/tcp")?.parse::<u16>().ok())
        .map(|port| (port, SocketAddr::new(ip, port)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Limits;
    use bollard::models::EndpointSettings;

    #[test]
    fn the_container_is_hardened_and_labelled() {
        let spec = SandboxSpec {
            session: "s1".into(),
            image: "img:1".into(),
            env: BTreeMap::from([("A".into(), "b".into())]),
            exposed_ports: vec![8080],
            limits: Limits {
                cpus: 0.5,
                memory_bytes: 1 << 30,
                pids: 100,
            },
            runtime_class: None,
        };
        let body = container_body("dep", &spec, Owner::Session, None);
        let pooled = container_body("dep", &spec, Owner::Pool("img:1"), None);
        assert_eq!(
            format!("{:?}", pooled.host_config),
            format!("{:?}", body.host_config),
            "a pooled container is hardened and limited alike"
        );
        assert_eq!(pooled.labels.as_ref().unwrap()[LABEL_POOL], "img:1");
        assert!(!pooled.labels.as_ref().unwrap().contains_key(LABEL_SESSION));
        let hc = body.host_config.as_ref().unwrap();
        assert_eq!(hc.cap_drop.as_deref(), Some(&["ALL".to_owned()][..]));
        assert_eq!(hc.privileged, Some(false));
        assert_eq!(hc.memory_swap, hc.memory);
        assert_eq!(hc.nano_cpus, Some(500_000_000));
        let b = &hc.port_bindings.as_ref().unwrap()["8080/tcp"]
            .as_ref()
            .unwrap()[0];
        assert_eq!(
            b.host_ip.as_deref(),
            Some("127.0.0.2"),
            "never the API's loopback host"
        );
        assert_eq!(body.labels.as_ref().unwrap()[LABEL_SESSION], "s1");
        assert_eq!(body.user.as_deref(), Some("1000:1000"));
    }

    #[test]
    fn only_loopback_tcp_bindings_count() {
        let settings = NetworkSettings {
            ports: Some(HashMap::from([
                (
                    "8080/tcp".to_owned(),
                    Some(vec![
                        PortBinding {
                            host_ip: Some("0.0.0.0".into()),
                            host_port: Some("1".into()),
                        },
                        PortBinding {
                            host_ip: Some("127.0.0.1".into()),
                            host_port: Some("49153".into()),
                        },
                    ]),
                ),
                ("9090/tcp".to_owned(), None),
                (
                    "53/udp".to_owned(),
                    Some(vec![PortBinding {
                        host_ip: Some("127.0.0.1".into()),
                        host_port: Some("2".into()),
                    }]),
                ),
            ])),
            ..Default::default()
        };
        let ports = published_ports(Some(&settings));
        assert_eq!(ports.len(), 1);
        assert_eq!(ports[&8080], "127.0.0.1:49153".parse().unwrap());
    }

    #[test]
    fn on_a_network_nothing_is_published_and_ports_are_at_the_sandbox_address() {
        let spec = SandboxSpec {
            session: "s1".into(),
            image: "img:1".into(),
            env: BTreeMap::new(),
            exposed_ports: vec![8080, 3000],
            limits: Limits::default(),
            runtime_class: None,
        };
        let body = container_body("dep", &spec, Owner::Session, Some("sbx"));
        let hc = body.host_config.as_ref().unwrap();
        assert_eq!(hc.network_mode.as_deref(), Some("sbx"));
        assert!(hc.port_bindings.as_ref().unwrap().is_empty());
        assert_eq!(hc.publish_all_ports, Some(false));
        assert_eq!(body.exposed_ports.as_ref().unwrap().len(), 2);

        let config = ContainerConfig {
            exposed_ports: Some(vec!["8080/tcp".into(), "53/udp".into()]),
            ..Default::default()
        };
        let endpoint = |ip: &str| EndpointSettings {
            ip_address: Some(ip.into()),
            ..Default::default()
        };
        let settings = NetworkSettings {
            networks: Some(HashMap::from([
                ("bridge".to_owned(), endpoint("172.17.0.9")),
                ("sbx".to_owned(), endpoint("172.20.0.4")),
            ])),
            ..Default::default()
        };
        let ports = network_ports(Some(&config), Some(&settings), "sbx");
        assert_eq!(ports.len(), 1, "{ports:?}");
        assert_eq!(ports[&8080], "172.20.0.4:8080".parse().unwrap());
        assert!(network_ports(Some(&config), Some(&settings), "other").is_empty());
    }
}
