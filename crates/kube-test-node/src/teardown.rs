//! The end of a pod on this node: its containers stopped within the grace period and removed
//! with its volumes, then the kubelet's final delete; and the removal of what pods that no
//! longer exist left behind.

use crate::{containers, volumes, Context};
use bollard::query_parameters::{
    ListContainersOptions, RemoveContainerOptions, StopContainerOptions,
};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, Preconditions};
use std::collections::HashSet;
use std::time::Duration;

/// The grace period of a pod that names none (the API server's default).
const DEFAULT_GRACE: i64 = 30;

/// Removes containers and volumes of this node whose pod is not in `known`.
pub async fn sweep(ctx: &Context, known: &HashSet<String>) -> anyhow::Result<()> {
    let options = ListContainersOptions {
        all: true,
        filters: Some(ctx.owner.filters(None)),
        ..Default::default()
    };
    let mut orphans = HashSet::new();
    for c in ctx.docker.list_containers(Some(options)).await? {
        let uid = c
            .labels
            .and_then(|mut l| l.remove(crate::labels::UID))
            .unwrap_or_default();
        if !known.contains(&uid) {
            orphans.insert(uid);
        }
    }
    for uid in orphans {
        tracing::info!(pod.uid = %uid, "removing the containers of a pod that no longer exists");
        remove(ctx, &uid, None).await?;
    }
    Ok(())
}

/// The kubelet's part of a deletion: stop within the grace period, remove, final delete.
pub async fn terminate(ctx: &Context, pod: &Pod) -> anyhow::Result<()> {
    let uid = pod.metadata.uid.clone().unwrap_or_default();
    let grace = pod
        .metadata
        .deletion_grace_period_seconds
        .or(pod
            .spec
            .as_ref()
            .and_then(|s| s.termination_grace_period_seconds))
        .unwrap_or(DEFAULT_GRACE)
        .max(0);
    remove(ctx, &uid, Some(grace)).await?;
    let api: Api<Pod> = Api::namespaced(
        ctx.client.clone(),
        pod.metadata.namespace.as_deref().unwrap_or("default"),
    );
    let name = pod.metadata.name.as_deref().unwrap_or_default();
    let params = DeleteParams {
        grace_period_seconds: Some(0),
        preconditions: Some(Preconditions {
            uid: Some(uid.clone()),
            resource_version: None,
        }),
        ..Default::default()
    };
    match api.delete(name, &params).await {
        Ok(_) => {}
        // Already deleted, or a new pod of the same name.
        Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => {}
        Err(e) => return Err(e.into()),
    }
    tracing::info!(pod = %name, "the pod was stopped and deleted");
    Ok(())
}

/// Stops (within `grace` seconds; None: at once) and removes a pod's containers, then its
/// volumes.
pub async fn remove(ctx: &Context, uid: &str, grace: Option<i64>) -> anyhow::Result<()> {
    let containers = containers::observe(ctx, uid).await?;
    if let Some(grace) = grace {
        let docker = ctx
            .docker
            .clone()
            .with_timeout(Duration::from_secs(grace as u64 + 60));
        let stops = containers
            .values()
            .filter(|i| i.state.as_ref().and_then(|s| s.running) == Some(true))
            .map(|i| {
                let options = StopContainerOptions {
                    t: Some(i32::try_from(grace).unwrap_or(i32::MAX)),
                    signal: None,
                };
                let docker = docker.clone();
                let id = i.id.clone().unwrap_or_default();
                async move { docker.stop_container(&id, Some(options)).await }
            });
        for stopped in futures::future::join_all(stops).await {
            if let Err(e) = stopped {
                tracing::warn!(error = %e, "could not stop a container; removing it by force");
            }
        }
    }
    for inspect in containers.values() {
        let options = RemoveContainerOptions {
            force: true,
            v: true,
            link: false,
        };
        match ctx
            .docker
            .remove_container(inspect.id.as_deref().unwrap_or_default(), Some(options))
            .await
        {
            Ok(())
            | Err(bollard::errors::Error::DockerResponseServerError {
                status_code: 404, ..
            }) => {}
            Err(e) => return Err(e.into()),
        }
    }
    volumes::remove(ctx, uid).await
}
