//! The Node object: registered (created, or its labels updated) at start, and its Ready
//! condition renewed every [`HEARTBEAT`], as a kubelet's status updates do. No Lease is kept
//! and no controller watches the heartbeat: a stopped agent's Node stays Ready.

use crate::Context;
use anyhow::Context as _;
use k8s_openapi::api::core::v1::{Node, NodeStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// How often the Ready condition is renewed.
pub const HEARTBEAT: Duration = Duration::from_secs(10);

/// Creates the Node, or updates the labels of one that exists, then writes its status.
pub async fn register(ctx: &Context) -> anyhow::Result<()> {
    let nodes: Api<Node> = Api::all(ctx.client.clone());
    let name = &ctx.settings.node_name;
    let node: Node = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": ctx.settings.labels()},
    }))?;
    match nodes.create(&PostParams::default(), &node).await {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 409 => {
            let patch = json!({"metadata": {"labels": ctx.settings.labels()}});
            nodes
                .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .with_context(|| format!("updating the labels of the Node {name}"))?;
        }
        Err(e) => return Err(e).with_context(|| format!("creating the Node {name}")),
    }
    let status = status(ctx).await?;
    nodes
        .patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(&json!({"status": status})),
        )
        .await
        .with_context(|| format!("writing the status of the Node {name}"))?;
    Ok(())
}

/// Renews the Ready condition until `shutdown`; a Node deleted meanwhile is registered again.
pub async fn heartbeat(ctx: Context, shutdown: CancellationToken) {
    let nodes: Api<Node> = Api::all(ctx.client.clone());
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(HEARTBEAT) => {}
        }
        let patch = json!({"status": {"conditions": [ready_condition()]}});
        let renewed = nodes
            .patch_status(
                &ctx.settings.node_name,
                &PatchParams::default(),
                &Patch::Strategic(&patch),
            )
            .await;
        let result = match renewed {
            Err(kube::Error::Api(e)) if e.code == 404 => register(&ctx).await,
            other => other.map(drop).map_err(Into::into),
        };
        if let Err(e) = result {
            tracing::warn!(
                error = format!("{e:#}"),
                "could not renew the node's Ready condition"
            );
        }
    }
}

fn ready_condition() -> serde_json::Value {
    let now = Time(k8s_openapi::jiff::Timestamp::now());
    json!({
        "type": "Ready", "status": "True", "reason": "KubeletReady",
        "message": "the test node agent is running (kube-test-node, not a kubelet)",
        "lastHeartbeatTime": now, "lastTransitionTime": now,
    })
}

/// The Node's status: Ready, its address on the pod network, this machine's capacity, and
/// what runs it.
async fn status(ctx: &Context) -> anyhow::Result<NodeStatus> {
    let info = ctx
        .docker
        .info()
        .await
        .context("asking Docker for its info")?;
    let version = ctx
        .docker
        .version()
        .await
        .context("asking Docker its version")?;
    let apiserver = ctx
        .client
        .apiserver_version()
        .await
        .context("asking the API server its version")?;
    let storage = info
        .docker_root_dir
        .as_deref()
        .and_then(|dir| rustix::fs::statvfs(dir).ok())
        .or_else(|| rustix::fs::statvfs("/").ok())
        .map(|s| s.f_blocks * s.f_frsize)
        .unwrap_or(0);
    let capacity = json!({
        "cpu": info.ncpu.unwrap_or(1).to_string(),
        "memory": info.mem_total.unwrap_or(0).to_string(),
        "pods": "110",
        "ephemeral-storage": storage.to_string(),
    });
    let read = |path: &str| {
        std::fs::read_to_string(path)
            .map(|s| s.trim().to_owned())
            .unwrap_or_default()
    };
    Ok(serde_json::from_value(json!({
        "conditions": [ready_condition()],
        "addresses": [
            {"type": "InternalIP", "address": ctx.network.gateway.to_string()},
            {"type": "Hostname", "address": ctx.settings.node_name},
        ],
        "capacity": capacity,
        "allocatable": capacity,
        // The field is spelled `Port` in the API.
        "daemonEndpoints": {"kubeletEndpoint": {"Port": ctx.streaming_port}},
        "nodeInfo": {
            "architecture": crate::kube_arch(),
            "bootID": read("/proc/sys/kernel/random/boot_id"),
            "containerRuntimeVersion": format!("docker://{}", version.version.unwrap_or_default()),
            "kernelVersion": info.kernel_version.unwrap_or_default(),
            "kubeProxyVersion": "",
            "kubeletVersion": format!("{}-kube-test-node", apiserver.git_version),
            "machineID": read("/etc/machine-id"),
            "operatingSystem": "linux",
            "osImage": info.operating_system.unwrap_or_default(),
            "systemUUID": "",
        },
    }))?)
}
