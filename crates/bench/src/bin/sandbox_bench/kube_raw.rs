//! The Kubernetes part's baselines: what a client of the API server does without the
//! backend, with kube's client alone (the pod spec is the backend's own, from `pod::pod`,
//! so the node runs exactly what a session's pod runs), and the removal between iterations.

use anyhow::Context;
use futures::TryStreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{DeleteParams, PostParams, WatchEvent, WatchParams};
use kube::Api;
use sandbox_agents_sandbox::kubernetes::pod::DAEMON_PORT;
use sandbox_agents_sandbox::sandboxd;
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

/// The steps of a raw cold boot, in order.
pub const STEPS: [&str; 4] = [
    "API create (`POST` until its response)",
    "scheduling: until the watch sees the pod bound to the node",
    "node start: bound until phase `Running` (init containers, then the sandbox's)",
    "daemon: `Running` until the daemon answers `hello` (TCP + token + HTTP/2)",
];

/// A raw cold boot: the time of each step of [`STEPS`], and the pod's uid and address.
pub struct Boot {
    pub steps: [Duration; 4],
    pub uid: String,
    pub ip: IpAddr,
}

/// Creates `pod` and watches it, from the version the create returned (so no change is
/// missed), until its phase is `Running`; then opens its daemon with `token`. The first
/// three steps are the raw baseline (no daemon), the fourth what the backend adds on top.
pub async fn boot(pods: &Api<Pod>, pod: &Pod, token: &[u8; 32]) -> anyhow::Result<Boot> {
    let name = pod.metadata.name.clone().context("the pod has a name")?;
    let t0 = Instant::now();
    let created = pods.create(&PostParams::default(), pod).await?;
    let posted = t0.elapsed();
    let uid = created.metadata.uid.clone().unwrap_or_default();
    let version = created
        .metadata
        .resource_version
        .clone()
        .unwrap_or_default();
    let params = WatchParams::default()
        .fields(&format!("metadata.name={name}"))
        .timeout(120);
    let mut events = std::pin::pin!(pods.watch(&params, &version).await?);
    let mut bound = None;
    let ip = loop {
        let event = events
            .try_next()
            .await?
            .with_context(|| format!("the watch of {name} ended before it ran"))?;
        let pod = match event {
            WatchEvent::Added(p) | WatchEvent::Modified(p) => p,
            WatchEvent::Deleted(_) => anyhow::bail!("the pod {name} was deleted while starting"),
            WatchEvent::Bookmark(_) => continue,
            WatchEvent::Error(e) => anyhow::bail!("watching {name}: {e:?}"),
        };
        if bound.is_none()
            && pod
                .spec
                .as_ref()
                .and_then(|s| s.node_name.as_ref())
                .is_some()
        {
            bound = Some(t0.elapsed());
        }
        let status = pod.status.as_ref();
        match status.and_then(|s| s.phase.as_deref()) {
            Some("Running") => {
                let ip = status
                    .and_then(|s| s.pod_ip.as_deref())
                    .context("a running pod has an address")?;
                break ip.parse::<IpAddr>()?;
            }
            Some(p @ ("Failed" | "Succeeded")) => anyhow::bail!("the pod {name} ended: {p}"),
            _ => {}
        }
    };
    let running = t0.elapsed();
    let bound = bound.unwrap_or(running);
    daemon_hello(SocketAddr::new(ip, DAEMON_PORT), token).await?;
    let answered = t0.elapsed();
    Ok(Boot {
        steps: [posted, bound - posted, running - bound, answered - running],
        uid,
        ip,
    })
}

/// Connects to a daemon that may not listen yet (its process starts with the container),
/// retrying a refused connection every 5 ms for at most 30 s, and asks for its greeting.
async fn daemon_hello(addr: SocketAddr, token: &[u8; 32]) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(30);
    let io = loop {
        match sandboxd::tcp::connect(addr, token).await {
            Ok(io) => break io,
            Err(e) if Instant::now() < deadline => {
                let _ = e;
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            Err(e) => return Err(e).with_context(|| format!("connecting to {addr}")),
        }
    };
    let (client, driver) = sandboxd::client::Client::handshake(io).await?;
    let driver = tokio::spawn(driver);
    client.hello().await?;
    drop(client);
    driver.abort();
    Ok(())
}

/// Deletes the pod at once (grace 0, as the backend's removal does) and waits until the node
/// removed its containers, so that no teardown competes with the next timed boot.
pub async fn delete(
    pods: &Api<Pod>,
    docker: &bollard::Docker,
    name: &str,
    uid: &str,
) -> anyhow::Result<()> {
    let params = DeleteParams {
        grace_period_seconds: Some(0),
        ..Default::default()
    };
    match pods.delete(name, &params).await {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 404 => {}
        Err(e) => return Err(e.into()),
    }
    containers_gone(docker, uid).await
}

/// Waits (polling Docker every 20 ms, for at most 60 s) until no container of the pod with
/// `uid` is left on the test node.
pub async fn containers_gone(docker: &bollard::Docker, uid: &str) -> anyhow::Result<()> {
    use bollard::query_parameters::ListContainersOptions;
    let filters = std::collections::HashMap::from([(
        "label".to_owned(),
        vec![format!("io.sandbox-agents.kube-test-node.uid={uid}")],
    )]);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let left = docker
            .list_containers(Some(ListContainersOptions {
                all: true,
                filters: Some(filters.clone()),
                ..Default::default()
            }))
            .await?;
        if left.is_empty() {
            return Ok(());
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "the containers of the pod {uid} were not removed within 60 s"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The uid of the pod `name`, if it exists.
pub async fn uid(pods: &Api<Pod>, name: &str) -> anyhow::Result<Option<String>> {
    Ok(pods.get_opt(name).await?.and_then(|p| p.metadata.uid))
}
