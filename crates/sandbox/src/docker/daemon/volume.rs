//! Putting the daemon's binary where every sandbox can run it, without touching images: a
//! Docker volume per build of the binary (`sandbox-agents-sandboxd-<sha256 prefix>`),
//! filled once per Engine through the archive API (so a remote `DOCKER_HOST` works too) and
//! mounted read-only at [`MOUNT`] in every sandbox. A mount costs nothing at create, where
//! an upload of the binary into each container would cost one archive call (65–85 ms on
//! Engine 20.10).
//!
//! Filling is idempotent: a volume whose binary has the right size is left alone, so a
//! second server process never rewrites a binary sandboxes run (which the kernel would
//! refuse, `ETXTBSY`). Two processes filling a new volume at the same moment write the same
//! bytes; a sandbox that starts its daemon in between fails its handshake and uses the
//! Docker exec path until its next connection.

use crate::docker::error;
use crate::{Result, SandboxError};
use bollard::models::{ContainerCreateBody, HostConfig, Mount, MountType, VolumeCreateRequest};
use bollard::query_parameters::{
    CreateContainerOptions, DownloadFromContainerOptions, UploadToContainerOptions,
};
use bollard::Docker;
use bytes::Bytes;
use futures::StreamExt;
use sha2::{Digest, Sha256};
use std::collections::HashMap;

/// Where the volume is mounted in every sandbox.
pub const MOUNT: &str = "/opt/sandbox-agents";
/// The daemon inside the sandbox.
pub const BINARY: &str = "/opt/sandbox-agents/sandboxd";
/// The label naming the binary's digest on its volume.
const LABEL: &str = "io.sandbox-agents.sandboxd";

/// The daemon's binary as the control plane holds it.
#[derive(Clone, Debug)]
pub struct DaemonBinary {
    pub bytes: Bytes,
    pub digest: String,
}

impl DaemonBinary {
    /// Reads the binary at `path`.
    pub fn load(path: &std::path::Path) -> std::io::Result<Self> {
        let bytes = Bytes::from(std::fs::read(path)?);
        let digest = format!("{:x}", Sha256::digest(&bytes));
        Ok(DaemonBinary { bytes, digest })
    }

    /// The volume holding this build.
    pub fn volume(&self) -> String {
        format!("sandbox-agents-sandboxd-{}", &self.digest[..16])
    }

    /// The volume's mount in a sandbox: read-only, never filled from the image.
    pub fn mount(&self) -> Mount {
        Mount {
            target: Some(MOUNT.to_owned()),
            source: Some(self.volume()),
            typ: Some(MountType::VOLUME),
            read_only: Some(true),
            volume_options: Some(bollard::models::MountVolumeOptions {
                no_copy: Some(true),
                ..Default::default()
            }),
            ..Default::default()
        }
    }
}

/// Makes sure the volume exists and holds the binary, through a container of `image` that
/// is created (never started) for the purpose and removed after.
pub(crate) async fn fill(docker: &Docker, binary: &DaemonBinary, image: &str) -> Result<()> {
    let volume = binary.volume();
    let labels = HashMap::from([(LABEL.to_owned(), binary.digest.clone())]);
    docker
        .create_volume(VolumeCreateRequest {
            name: Some(volume.clone()),
            labels: Some(labels),
            ..Default::default()
        })
        .await
        .map_err(error::backend)?;
    let name = format!("sandbox-agents-fill-{}", uuid::Uuid::new_v4().simple());
    let body = ContainerCreateBody {
        image: Some(image.to_owned()),
        cmd: Some(vec!["true".to_owned()]),
        entrypoint: Some(vec![]),
        network_disabled: Some(true),
        host_config: Some(HostConfig {
            mounts: Some(vec![Mount {
                target: Some(MOUNT.to_owned()),
                source: Some(volume.clone()),
                typ: Some(MountType::VOLUME),
                read_only: Some(false),
                ..Default::default()
            }]),
            ..Default::default()
        }),
        ..Default::default()
    };
    let options = CreateContainerOptions {
        name: Some(name.clone()),
        platform: String::new(),
    };
    let created = docker
        .create_container(Some(options), body)
        .await
        .map_err(error::backend)?;
    let filled = async {
        if present_size(docker, &created.id).await? == Some(binary.bytes.len() as u64) {
            return Ok(());
        }
        let tar = binary_tar(&binary.bytes)?;
        let options = UploadToContainerOptions {
            path: MOUNT.to_owned(),
            no_overwrite_dir_non_dir: Some("true".to_owned()),
            copy_uidgid: None,
        };
        docker
            .upload_to_container(&created.id, Some(options), bollard::body_full(tar))
            .await
            .map_err(|e| error::archive(&created.id, MOUNT, e))?;
        tracing::info!(%volume, bytes = binary.bytes.len(), "put the sandbox daemon on its volume");
        Ok(())
    }
    .await;
    crate::docker::remove_helper(docker, &created.id, &name, "filled the daemon's volume").await;
    filled
}

/// The size of the binary on the volume, if it is there.
async fn present_size(docker: &Docker, container: &str) -> Result<Option<u64>> {
    let options = DownloadFromContainerOptions {
        path: BINARY.to_owned(),
    };
    let mut stream = docker.download_from_container(container, Some(options));
    // The tar's first block is the entry's header: enough to read the size.
    let mut head = Vec::new();
    while head.len() < 512 {
        match stream.next().await {
            Some(Ok(chunk)) => head.extend_from_slice(&chunk),
            Some(Err(e)) if error::is_not_found(&e) => return Ok(None),
            Some(Err(e)) => return Err(error::backend(e)),
            None => return Ok(None),
        }
    }
    let header = tar::Header::from_byte_slice(&head[..512]);
    Ok(header.size().ok())
}

fn binary_tar(bytes: &[u8]) -> Result<Bytes> {
    let mut builder = tar::Builder::new(Vec::new());
    let mut h = tar::Header::new_gnu();
    h.set_entry_type(tar::EntryType::Regular);
    h.set_mode(0o755);
    h.set_uid(0);
    h.set_gid(0);
    h.set_size(bytes.len() as u64);
    builder
        .append_data(&mut h, "sandboxd", bytes)
        .map_err(|e| SandboxError::Backend(e.to_string()))?;
    builder
        .into_inner()
        .map(Bytes::from)
        .map_err(|e| SandboxError::Backend(e.to_string()))
}
