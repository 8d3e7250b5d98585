//! The scheduler for this node alone: binds the pods that name no node, use the default
//! scheduler and whose `nodeSelector` the node's labels satisfy; marks the others
//! `PodScheduled=False` (`Unschedulable`) and leaves them Pending.
//!
//! Not a scheduler: no resource accounting (requests are not compared with what is
//! allocatable), no affinity, taints, tolerations, topology spread or preemption. With two
//! agents on one cluster, a pod one of them cannot take is still marked Unschedulable by it
//! even if the other binds it.

use crate::Context;
use futures::StreamExt as _;
use k8s_openapi::api::core::v1::{Binding, Pod};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::{watcher, WatchStreamExt as _};
use serde_json::json;
use std::collections::BTreeMap;
use tokio_util::sync::CancellationToken;

/// The name pods give the default scheduler (an unset `schedulerName` means it too).
const DEFAULT_SCHEDULER: &str = "default-scheduler";

/// Watches unbound pods until `shutdown`, binding or refusing each as it appears or changes.
pub async fn run(ctx: Context, shutdown: CancellationToken) {
    let pods: Api<Pod> = Api::all(ctx.client.clone());
    let config = watcher::Config::default()
        .fields("spec.nodeName=,status.phase!=Succeeded,status.phase!=Failed");
    let mut stream = std::pin::pin!(watcher(pods, config).default_backoff().applied_objects());
    let labels = ctx.settings.labels();
    loop {
        let pod = tokio::select! {
            _ = shutdown.cancelled() => return,
            next = stream.next() => match next {
                Some(Ok(pod)) => pod,
                Some(Err(e)) => {
                    tracing::warn!(error = %e, "the watch of unscheduled pods failed; it retries");
                    continue;
                }
                None => return,
            },
        };
        if let Err(e) = schedule(&ctx, &labels, &pod).await {
            tracing::warn!(
                error = %e,
                pod = %format!("{}/{}", pod.metadata.namespace.as_deref().unwrap_or_default(),
                    pod.metadata.name.as_deref().unwrap_or_default()),
                "could not schedule the pod"
            );
        }
    }
}

/// The labels a selector asks for that `labels` lacks, as `key=value` (none: it matches).
pub fn unmatched(
    selector: &BTreeMap<String, String>,
    labels: &BTreeMap<String, String>,
) -> Vec<String> {
    selector
        .iter()
        .filter(|(k, v)| labels.get(*k) != Some(*v))
        .map(|(k, v)| format!("{k}={v}"))
        .collect()
}

async fn schedule(ctx: &Context, labels: &BTreeMap<String, String>, pod: &Pod) -> kube::Result<()> {
    let Some(spec) = &pod.spec else { return Ok(()) };
    if pod.metadata.deletion_timestamp.is_some()
        || spec.node_name.as_deref().is_some_and(|n| !n.is_empty())
        || spec
            .scheduler_name
            .as_deref()
            .is_some_and(|s| s != DEFAULT_SCHEDULER)
    {
        return Ok(());
    }
    let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
    let name = pod.metadata.name.as_deref().unwrap_or_default();
    let api: Api<Pod> = Api::namespaced(ctx.client.clone(), namespace);
    let missing = unmatched(&spec.node_selector.clone().unwrap_or_default(), labels);
    if missing.is_empty() {
        let binding: Binding = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Binding",
            "metadata": {"name": name, "namespace": namespace, "uid": pod.metadata.uid},
            "target": {"apiVersion": "v1", "kind": "Node", "name": ctx.settings.node_name},
        }))
        .map_err(kube::Error::SerdeError)?;
        let bound: kube::Result<serde_json::Value> = api
            .create_subresource("binding", name, &PostParams::default(), &binding)
            .await;
        return match bound {
            // Bound meanwhile (by another agent), or gone.
            Err(kube::Error::Api(e)) if e.code == 409 || e.code == 404 => Ok(()),
            other => other.map(|_| tracing::info!(%namespace, %name, "bound the pod")),
        };
    }
    let message = format!(
        "0/1 nodes are available: the node {} lacks the label(s) {} that the pod's nodeSelector \
         asks for (add them with --node-label, or change the selector).",
        ctx.settings.node_name,
        missing.join(", ")
    );
    let already = pod
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "PodScheduled"))
        .is_some_and(|c| c.status == "False" && c.message.as_deref() == Some(message.as_str()));
    if already {
        return Ok(());
    }
    let now =
        k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(k8s_openapi::jiff::Timestamp::now());
    let patch = json!({"status": {"conditions": [{
        "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
        "message": message, "lastTransitionTime": now,
    }]}});
    api.patch_status(name, &PatchParams::default(), &Patch::Strategic(&patch))
        .await
        .map(drop)
}
