//! The pod network: one Docker bridge network, and the choice of each pod's IP.
//!
//! Docker gives a container a fixed address only on a network whose subnet was configured,
//! and hands out addresses of its own from the network's `ip_range`. So the network is
//! created with the subnet `--pod-cidr` and an `ip_range` of its upper half (for init
//! containers, which Docker addresses), and pod IPs are picked by the agent from the lower
//! half, at random among those no container on the network holds. Two agents (two test
//! clusters) may share the network; a pick that another agent made at the same moment is
//! refused by Docker at start, and the caller picks again ([`is_address_taken`]).

use anyhow::{bail, Context as _};
use bollard::models::{Ipam, IpamConfig, NetworkCreateRequest};
use bollard::Docker;
use ipnet::Ipv4Net;
use std::net::Ipv4Addr;

#[derive(Debug)]
pub struct PodNetwork {
    pub name: String,
    pub subnet: Ipv4Net,
    /// The bridge's address on the host: the node's InternalIP and every pod's hostIP.
    pub gateway: Ipv4Addr,
}

impl PodNetwork {
    /// The network `name`, created as a bridge on `cidr` if missing.
    pub async fn ensure(docker: &Docker, name: &str, cidr: Ipv4Net) -> anyhow::Result<Self> {
        let cidr = cidr.trunc();
        if docker.inspect_network(name, None).await.is_err() {
            let upper = cidr
                .subnets(cidr.prefix_len() + 1)
                .ok()
                .and_then(|mut halves| halves.nth(1))
                .context("--pod-cidr is too small to split in two (use a /24 or larger)")?;
            let request = NetworkCreateRequest {
                name: name.to_owned(),
                driver: Some("bridge".to_owned()),
                ipam: Some(Ipam {
                    config: Some(vec![IpamConfig {
                        subnet: Some(cidr.to_string()),
                        ip_range: Some(upper.to_string()),
                        // Named: left to Docker, the host's address is taken from the range
                        // (10.244.128.0 here, whatever the Node reports).
                        gateway: cidr.hosts().next().map(|g| g.to_string()),
                        ..Default::default()
                    }]),
                    ..Default::default()
                }),
                ..Default::default()
            };
            if let Err(e) = docker.create_network(request).await {
                // Another agent may have created it meanwhile; the inspect below decides.
                tracing::info!(error = %e, network = name, "could not create the pod network");
            }
        }
        let inspect = docker
            .inspect_network(name, None)
            .await
            .with_context(|| format!("inspecting the Docker network {name}"))?;
        let config = inspect.ipam.and_then(|i| i.config).and_then(|c| {
            c.into_iter().find(|c| {
                c.subnet
                    .as_deref()
                    .is_some_and(|s| s.parse::<Ipv4Net>().is_ok())
            })
        });
        let Some(config) = config else {
            bail!(
                "the Docker network {name} has no IPv4 subnet of its own, so pods cannot get fixed \
                 addresses on it: remove it (docker network rm {name}) and the agent creates it, \
                 or name another with --docker-network"
            );
        };
        let subnet: Ipv4Net = config.subnet.as_deref().unwrap_or_default().parse()?;
        let gateway = match config.gateway.as_deref() {
            Some(g) if !g.is_empty() => g.parse()?,
            _ => subnet
                .hosts()
                .next()
                .context("the pod network's subnet has no hosts")?,
        };
        Ok(Self {
            name: name.to_owned(),
            subnet,
            gateway,
        })
    }

    /// A pod IP from the lower half of the subnet that no container on the network holds.
    pub async fn pick_ip(&self, docker: &Docker) -> anyhow::Result<Ipv4Addr> {
        let inspect = docker
            .inspect_network(&self.name, None)
            .await
            .with_context(|| format!("inspecting the Docker network {}", self.name))?;
        let taken: Vec<Ipv4Addr> = inspect
            .containers
            .unwrap_or_default()
            .values()
            .filter_map(|c| c.ipv4_address.as_deref())
            .filter_map(|a| a.split('/').next()?.parse().ok())
            .collect();
        let first = u32::from(self.subnet.network()) + 2;
        let half = 1u32 << (31 - u32::from(self.subnet.prefix_len()));
        let last = u32::from(self.subnet.network()) + half - 1;
        for _ in 0..64 {
            let ip = Ipv4Addr::from(fastrand::u32(first..last));
            if ip != self.gateway && !taken.contains(&ip) {
                return Ok(ip);
            }
        }
        bail!("no free pod IP found in the lower half of {}", self.subnet)
    }
}

/// Whether Docker refused a start because another container holds the address asked for.
pub fn is_address_taken(e: &bollard::errors::Error) -> bool {
    let text = e.to_string();
    text.contains("Address already in use") || text.contains("address already in use")
}
