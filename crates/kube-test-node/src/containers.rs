//! A pod's containers in Docker: a container spec translated into a Docker container (image,
//! command, env, limits, security context, mounts, network), and what Docker says of the
//! pod's containers now.
//!
//! As the kubelet: `command` replaces the image's entrypoint and `args` its cmd; a
//! `command` without `args` runs with no arguments (the image's cmd is dropped). Memory
//! limits set Docker's memory and memory+swap (no swap); CPU limits set `NanoCpus`;
//! `ephemeral-storage` is ignored (Docker cannot bound a container's writable layer on every
//! storage driver). `ports` publish nothing: the pod IP is reachable from the host.

use crate::{labels, quantity, Context};
use bollard::models::{
    ContainerCreateBody, ContainerInspectResponse, EndpointIpamConfig, EndpointSettings,
    HostConfig, Mount, MountType, MountVolumeOptions, NetworkingConfig,
};
use bollard::query_parameters::{CreateContainerOptions, ListContainersOptions};
use k8s_openapi::api::core::v1::{Container, Pod, SecurityContext};
use std::collections::HashMap;
use std::net::Ipv4Addr;

/// Why a container could not be created, as the kubelet reports it: the container stays
/// Waiting with this reason and the pod Pending, and creation is tried again later.
#[derive(Debug, Clone, PartialEq)]
pub struct Waiting {
    pub reason: &'static str,
    pub message: String,
}

impl Waiting {
    fn config(message: String) -> Self {
        Self {
            reason: "CreateContainerConfigError",
            message,
        }
    }
}

/// Where a container sits on the pod network.
pub enum Placement {
    /// Its own address, picked by Docker (init containers).
    Own,
    /// The pod IP (the first app container).
    PodIp(Ipv4Addr),
    /// The network namespace of the pod's first app container (the other app containers).
    Join(String),
}

/// The Docker name of a pod's container, as dockershim named them.
pub fn docker_name(pod: &Pod, container: &str) -> String {
    format!(
        "k8s_{container}_{}_{}_{}_0",
        pod.metadata.name.as_deref().unwrap_or_default(),
        pod.metadata.namespace.as_deref().unwrap_or_default(),
        pod.metadata.uid.as_deref().unwrap_or_default()
    )
}

/// The Docker volume of a pod's `emptyDir`.
pub fn volume_name(uid: &str, volume: &str) -> String {
    format!("kube-{uid}-{volume}")
}

/// The pod's containers that exist in Docker, by their name in the pod spec.
pub async fn observe(
    ctx: &Context,
    uid: &str,
) -> anyhow::Result<HashMap<String, ContainerInspectResponse>> {
    let options = ListContainersOptions {
        all: true,
        filters: Some(ctx.owner.filters(Some(uid))),
        ..Default::default()
    };
    let mut found = HashMap::new();
    for summary in ctx.docker.list_containers(Some(options)).await? {
        let (Some(id), Some(name)) = (
            summary.id,
            summary.labels.and_then(|mut l| l.remove(labels::CONTAINER)),
        ) else {
            continue;
        };
        match ctx.docker.inspect_container(&id, None).await {
            Ok(inspect) => {
                found.insert(name, inspect);
            }
            // Removed between the list and the inspect: it is gone.
            Err(bollard::errors::Error::DockerResponseServerError {
                status_code: 404, ..
            }) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(found)
}

/// The container's address on the pod network, if it has one now.
pub fn ip_of(ctx: &Context, inspect: &ContainerInspectResponse) -> Option<Ipv4Addr> {
    inspect
        .network_settings
        .as_ref()?
        .networks
        .as_ref()?
        .get(&ctx.network.name)?
        .ip_address
        .as_deref()?
        .parse()
        .ok()
}

/// Creates and starts the container; its Docker id, or why it waits.
pub async fn start(
    ctx: &Context,
    pod: &Pod,
    container: &Container,
    placement: &Placement,
    pod_ip: Option<Ipv4Addr>,
) -> Result<String, Waiting> {
    let image = container.image.clone().unwrap_or_default();
    let image_user = match ctx.docker.inspect_image(&image).await {
        Ok(i) => i.config.and_then(|c| c.user).unwrap_or_default(),
        Err(_) => {
            return Err(Waiting {
                reason: "ErrImageNeverPull",
                message: format!(
                    "Container image \"{image}\" is not present with pull policy of Never (the \
                     test node never pulls: build or load the image into its Docker first)"
                ),
            })
        }
    };
    let body = body(ctx, pod, container, placement, pod_ip, &image_user)?;
    let name = docker_name(pod, &container.name);
    let options = CreateContainerOptions {
        name: Some(name.clone()),
        platform: String::new(),
    };
    let created = ctx
        .docker
        .create_container(Some(options), body)
        .await
        .map_err(|e| Waiting {
            reason: "CreateContainerError",
            message: format!("Docker refused to create the container {name}: {e}"),
        })?;
    if let Err(e) = ctx.docker.start_container(&created.id, None).await {
        let _ = ctx
            .docker
            .remove_container(
                &created.id,
                Some(bollard::query_parameters::RemoveContainerOptions {
                    force: true,
                    ..Default::default()
                }),
            )
            .await;
        return Err(Waiting {
            reason: if crate::network::is_address_taken(&e) {
                "PodIPTaken"
            } else {
                "RunContainerError"
            },
            message: format!("Docker could not start the container {name}: {e}"),
        });
    }
    Ok(created.id)
}

/// The Docker container for `container`, or why it cannot be made.
fn body(
    ctx: &Context,
    pod: &Pod,
    container: &Container,
    placement: &Placement,
    pod_ip: Option<Ipv4Addr>,
    image_user: &str,
) -> Result<ContainerCreateBody, Waiting> {
    let spec = pod.spec.clone().unwrap_or_default();
    let pod_sc = spec.security_context.clone().unwrap_or_default();
    let sc = container.security_context.clone().unwrap_or_default();
    let pod_ref = format!(
        "pod: \"{}/{}\", container: {}",
        pod.metadata.namespace.as_deref().unwrap_or_default(),
        pod.metadata.name.as_deref().unwrap_or_default(),
        container.name
    );
    let run_as_user = sc.run_as_user.or(pod_sc.run_as_user);
    let run_as_group = sc.run_as_group.or(pod_sc.run_as_group);
    if sc.run_as_non_root.or(pod_sc.run_as_non_root) == Some(true) {
        check_non_root(run_as_user, image_user)
            .map_err(|m| Waiting::config(format!("{m} ({pod_ref})")))?;
    }
    let user = match (run_as_user, run_as_group) {
        (Some(u), Some(g)) => Some(format!("{u}:{g}")),
        (Some(u), None) => Some(u.to_string()),
        (None, Some(g)) => Some(format!(
            "{}:{g}",
            image_user
                .split(':')
                .next()
                .filter(|u| !u.is_empty())
                .unwrap_or("0")
        )),
        (None, None) => None,
    };
    let env = env(ctx, pod, container, pod_ip)
        .map_err(|m| Waiting::config(format!("{m} ({pod_ref})")))?;
    let mounts = mounts(pod, container).map_err(|m| Waiting::config(format!("{m} ({pod_ref})")))?;
    let limits = container
        .resources
        .as_ref()
        .and_then(|r| r.limits.clone())
        .unwrap_or_default();
    let memory = limits.get("memory").and_then(|q| quantity::bytes(&q.0));
    let mut security_opt = Vec::new();
    if sc.allow_privilege_escalation == Some(false) {
        security_opt.push("no-new-privileges".to_owned());
    }
    let seccomp = sc
        .seccomp_profile
        .clone()
        .or(pod_sc.seccomp_profile.clone());
    if seccomp.is_some_and(|s| s.type_ == "Unconfined") {
        security_opt.push("seccomp=unconfined".to_owned());
    }
    let SecurityContext {
        capabilities,
        privileged,
        read_only_root_filesystem,
        ..
    } = sc;
    let (network_mode, networking_config, hostname) = match placement {
        Placement::Join(first) => (Some(format!("container:{first}")), None, None),
        Placement::Own | Placement::PodIp(_) => {
            let endpoint = EndpointSettings {
                ipam_config: match placement {
                    Placement::PodIp(ip) => Some(EndpointIpamConfig {
                        ipv4_address: Some(ip.to_string()),
                        ..Default::default()
                    }),
                    _ => None,
                },
                ..Default::default()
            };
            (
                Some(ctx.network.name.clone()),
                Some(NetworkingConfig {
                    endpoints_config: Some(HashMap::from([(ctx.network.name.clone(), endpoint)])),
                }),
                // The pod's name, cut to a hostname's 63 bytes as the kubelet cuts it.
                pod.metadata
                    .name
                    .as_deref()
                    .map(|n| n.chars().take(63).collect()),
            )
        }
    };
    let mut docker_labels = ctx.owner.pod_labels(
        pod.metadata.namespace.as_deref().unwrap_or_default(),
        pod.metadata.name.as_deref().unwrap_or_default(),
        pod.metadata.uid.as_deref().unwrap_or_default(),
    );
    docker_labels.insert(labels::CONTAINER.to_owned(), container.name.clone());
    // The pod's sysctls go with the container that holds its network namespace (namespaced
    // ones only, as here), as the kubelet gives them to the pod's sandbox.
    let owns_network = matches!(placement, Placement::PodIp(_));
    let sysctls: HashMap<String, String> = pod_sc
        .sysctls
        .iter()
        .flatten()
        .filter(|_| owns_network)
        .map(|s| (s.name.clone(), s.value.clone()))
        .collect();
    let group_add: Vec<String> = pod_sc
        .supplemental_groups
        .iter()
        .flatten()
        .chain(pod_sc.fs_group.iter())
        .map(|g| g.to_string())
        .collect();
    Ok(ContainerCreateBody {
        image: container.image.clone(),
        entrypoint: container.command.clone(),
        // A command without args drops the image's cmd, as in Kubernetes.
        cmd: container
            .args
            .clone()
            .or_else(|| container.command.as_ref().map(|_| Vec::new())),
        env: Some(env),
        working_dir: container.working_dir.clone(),
        user,
        hostname,
        labels: Some(docker_labels),
        tty: container.tty,
        open_stdin: container.stdin,
        host_config: Some(HostConfig {
            network_mode,
            mounts: Some(mounts),
            pids_limit: Some(ctx.settings.pod_max_pids),
            memory,
            memory_swap: memory,
            nano_cpus: limits.get("cpu").and_then(|q| quantity::nano_cpus(&q.0)),
            readonly_rootfs: read_only_root_filesystem,
            privileged,
            cap_add: capabilities.as_ref().and_then(|c| c.add.clone()),
            cap_drop: capabilities.as_ref().and_then(|c| c.drop.clone()),
            security_opt: Some(security_opt),
            group_add: (!group_add.is_empty()).then_some(group_add),
            sysctls: (!sysctls.is_empty()).then_some(sysctls),
            ..Default::default()
        }),
        networking_config,
        ..Default::default()
    })
}

/// The kubelet's check of `runAsNonRoot`: the uid the container runs as must be known and
/// not 0.
fn check_non_root(run_as_user: Option<i64>, image_user: &str) -> Result<(), String> {
    match run_as_user {
        Some(0) => Err("container's runAsUser breaks non-root policy".to_owned()),
        Some(_) => Ok(()),
        None => {
            let user = image_user.split(':').next().unwrap_or_default();
            match user.parse::<u64>() {
                _ if user.is_empty() || user == "root" => {
                    Err("container has runAsNonRoot and image will run as root".to_owned())
                }
                Ok(0) => Err("container has runAsNonRoot and image will run as root".to_owned()),
                Ok(_) => Ok(()),
                Err(_) => Err(format!(
                    "container has runAsNonRoot and image has non-numeric user ({user}), cannot \
                     verify user is non-root (set runAsUser)"
                )),
            }
        }
    }
}

/// The container's environment: literal values and the pod fields the downward API names.
fn env(
    ctx: &Context,
    pod: &Pod,
    container: &Container,
    pod_ip: Option<Ipv4Addr>,
) -> Result<Vec<String>, String> {
    if container.env_from.as_ref().is_some_and(|e| !e.is_empty()) {
        return Err(
            "envFrom is not supported by the test node agent (it reads no Secret or ConfigMap)"
                .to_owned(),
        );
    }
    let pod_ip = pod_ip.map(|ip| ip.to_string());
    let mut out = Vec::new();
    for var in container.env.iter().flatten() {
        let value = match &var.value_from {
            None => var.value.clone().unwrap_or_default(),
            Some(from) => {
                let Some(field) = &from.field_ref else {
                    return Err(format!(
                        "env {}: only value and valueFrom.fieldRef are supported by the test node \
                         agent (it reads no Secret or ConfigMap, nor resource fields)",
                        var.name
                    ));
                };
                field_value(ctx, pod, &field.field_path, pod_ip.as_deref()).ok_or_else(|| {
                    format!(
                        "env {}: the field {} is not supported",
                        var.name, field.field_path
                    )
                })?
            }
        };
        out.push(format!("{}={value}", var.name));
    }
    Ok(out)
}

fn field_value(ctx: &Context, pod: &Pod, path: &str, pod_ip: Option<&str>) -> Option<String> {
    let meta = &pod.metadata;
    let keyed = |prefix: &str, map: &Option<std::collections::BTreeMap<String, String>>| {
        let key = path.strip_prefix(prefix)?.strip_suffix("']")?;
        Some(
            map.as_ref()
                .and_then(|m| m.get(key))
                .cloned()
                .unwrap_or_default(),
        )
    };
    Some(match path {
        "metadata.name" => meta.name.clone()?,
        "metadata.namespace" => meta.namespace.clone()?,
        "metadata.uid" => meta.uid.clone()?,
        "spec.nodeName" => ctx.settings.node_name.clone(),
        "spec.serviceAccountName" => pod
            .spec
            .as_ref()?
            .service_account_name
            .clone()
            .unwrap_or_default(),
        "status.podIP" | "status.podIPs" => pod_ip.unwrap_or_default().to_owned(),
        "status.hostIP" | "status.hostIPs" => ctx.network.gateway.to_string(),
        _ => keyed("metadata.labels['", &meta.labels)
            .or_else(|| keyed("metadata.annotations['", &meta.annotations))?,
    })
}

/// The container's volume mounts: each names an `emptyDir` of the pod (checked before).
fn mounts(pod: &Pod, container: &Container) -> Result<Vec<Mount>, String> {
    let uid = pod.metadata.uid.as_deref().unwrap_or_default();
    // `dnsPolicy: None`: the resolver configuration the agent wrote from the pod's `dnsConfig`
    // (`dns::write`), read-only, as the kubelet mounts its own.
    let resolv_conf = crate::dns::custom_dns(pod).then(|| Mount {
        target: Some("/etc/resolv.conf".to_owned()),
        source: Some(crate::dns::resolv_conf(uid).to_string_lossy().into_owned()),
        typ: Some(MountType::BIND),
        read_only: Some(true),
        ..Default::default()
    });
    container
        .volume_mounts
        .iter()
        .flatten()
        .map(|m| {
            if m.sub_path.as_ref().is_some_and(|s| !s.is_empty()) || m.sub_path_expr.is_some() {
                return Err(format!(
                    "the volume mount {} has a subPath, which the test node agent does not support",
                    m.name
                ));
            }
            Ok(Mount {
                target: Some(m.mount_path.clone()),
                source: Some(volume_name(uid, &m.name)),
                typ: Some(MountType::VOLUME),
                // An emptyDir starts empty: Docker would otherwise copy the image's files at
                // the mount point (and their owner) into the new volume.
                volume_options: Some(MountVolumeOptions {
                    no_copy: Some(true),
                    ..Default::default()
                }),
                read_only: m.read_only,
                ..Default::default()
            })
        })
        .chain(resolv_conf.map(Ok))
        .collect()
}
