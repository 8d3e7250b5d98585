//! A pod's `emptyDir` volumes as Docker volumes named after the pod's uid, shared by all its
//! containers and removed with the pod. `medium: Memory` is a tmpfs volume (its `sizeLimit`
//! its size); any other is a local volume on disk whose `sizeLimit` is not enforced. Both are
//! world-writable (mode 1777; on disk, set on the volume's directory, which needs the agent
//! to run as root beside dockerd), as a kubelet's emptyDir is writable by any uid, and empty:
//! the mounts turn off Docker's copy of the image's files into a new volume
//! ([`crate::containers`]).
//!
//! A pod's `resolv.conf` (`dnsPolicy: None`) is written and removed with them ([`crate::dns`]).
//!
//! Other volume kinds (Secrets, ConfigMaps, projected, hostPath, PVCs) are refused: the pod
//! fails with the reason [`UNSUPPORTED`].

use crate::containers::volume_name;
use crate::{quantity, Context};
use bollard::models::VolumeCreateRequest;
use bollard::query_parameters::{ListVolumesOptions, RemoveVolumeOptions};
use k8s_openapi::api::core::v1::Pod;
use std::collections::HashMap;

/// The pod's reason when it names a volume kind the agent does not provide.
pub const UNSUPPORTED: &str = "UnsupportedVolume";

/// A sentence naming the first volume that is not an `emptyDir`, if any.
pub fn unsupported(pod: &Pod) -> Option<String> {
    let volumes = pod.spec.as_ref()?.volumes.as_ref()?;
    let volume = volumes.iter().find(|v| v.empty_dir.is_none())?;
    Some(format!(
        "the volume {} is not an emptyDir: the test node agent provides emptyDir volumes only",
        volume.name
    ))
}

/// Creates the pod's volumes that do not exist yet, and writes its resolver configuration.
pub async fn ensure(ctx: &Context, pod: &Pod) -> anyhow::Result<()> {
    let meta = &pod.metadata;
    let uid = meta.uid.as_deref().unwrap_or_default();
    crate::dns::write(pod)?;
    let labels = ctx.owner.pod_labels(
        meta.namespace.as_deref().unwrap_or_default(),
        meta.name.as_deref().unwrap_or_default(),
        uid,
    );
    for volume in pod.spec.iter().flat_map(|s| s.volumes.iter().flatten()) {
        let Some(empty_dir) = &volume.empty_dir else {
            continue;
        };
        let name = volume_name(uid, &volume.name);
        let memory = empty_dir.medium.as_deref() == Some("Memory");
        let driver_opts = memory.then(|| {
            let size = empty_dir
                .size_limit
                .as_ref()
                .and_then(|q| quantity::bytes(&q.0))
                .map(|b| format!(",size={b}"))
                .unwrap_or_default();
            HashMap::from([
                ("type".to_owned(), "tmpfs".to_owned()),
                ("device".to_owned(), "tmpfs".to_owned()),
                ("o".to_owned(), format!("mode=1777{size}")),
            ])
        });
        let created = ctx
            .docker
            .create_volume(VolumeCreateRequest {
                name: Some(name.clone()),
                driver: Some("local".to_owned()),
                driver_opts,
                labels: Some(labels.clone()),
                ..Default::default()
            })
            .await?;
        if !memory {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = std::fs::Permissions::from_mode(0o1777);
            if let Err(e) = std::fs::set_permissions(&created.mountpoint, mode) {
                tracing::warn!(
                    error = %e, volume = %name,
                    "could not make the emptyDir world-writable (is the agent root?): only root may write it"
                );
            }
        }
    }
    Ok(())
}

/// Removes the pod's volumes and files (its containers must be gone).
pub async fn remove(ctx: &Context, uid: &str) -> anyhow::Result<()> {
    crate::dns::remove(uid)?;
    let options = ListVolumesOptions {
        filters: Some(ctx.owner.filters(Some(uid))),
    };
    let listed = ctx.docker.list_volumes(Some(options)).await?;
    for volume in listed.volumes.into_iter().flatten() {
        ctx.docker
            .remove_volume(&volume.name, Some(RemoveVolumeOptions { force: true }))
            .await?;
    }
    Ok(())
}
