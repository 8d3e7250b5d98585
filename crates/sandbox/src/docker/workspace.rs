//! The workspace volume's size, for the disk limit. A sandbox's workspace is a volume of its
//! own (see `create::workspace_volume`), outside the writable layer the Engine sizes with a
//! container listing. The Engine sizes volumes only in `GET /system/df`, whose answer changed
//! shape across API versions, so the volumes are measured the way the fill of the daemon's
//! volume writes one: a short-lived container of ours that mounts them read-only and runs
//! `du` as root with only the capabilities reading needs. The sandbox cannot hide anything from
//! it (a directory it made unreadable is read through `CAP_DAC_READ_SEARCH`; `-x` stays on
//! the volume, blocks are counted, so sparse files count what they hold, hard links once).
//! The container carries the deployment's label and a name of ours, so the orphan sweep
//! removes one a crash left behind.

use crate::docker::{create::CONTAINER_PREFIX, error};
use crate::{Result, SandboxError, LABEL_DEPLOYMENT};
use bollard::container::LogOutput;
use bollard::models::{ContainerCreateBody, HostConfig, Mount, MountType};
use bollard::query_parameters::{
    CreateContainerOptions, ListVolumesOptions, LogsOptions, RemoveVolumeOptions,
    StartContainerOptions,
};
use bollard::Docker;
use futures::StreamExt;
use std::collections::HashMap;

/// What follows our prefix in the names of the short-lived containers that measure
/// workspace volumes.
const MEASURER: &str = "measure-";

/// Whether a container of ours is a workspace measurer, not a sandbox.
pub(crate) fn is_measurer(name: &str) -> bool {
    name.strip_prefix(CONTAINER_PREFIX)
        .is_some_and(|rest| rest.starts_with(MEASURER))
}

/// Volumes measured by one container (mounts per container stay well under the Engine's
/// limits, and one slow volume delays only its batch).
const BATCH: usize = 64;

/// Bytes each of `volumes` holds, by volume name, measured with `image`'s `du`.
pub(crate) async fn sizes(
    docker: &Docker,
    deployment: &str,
    image: &str,
    volumes: &[String],
) -> Result<HashMap<String, u64>> {
    let mut sizes = HashMap::new();
    for batch in volumes.chunks(BATCH) {
        sizes.extend(measure(docker, deployment, image, batch).await?);
    }
    Ok(sizes)
}

async fn measure(
    docker: &Docker,
    deployment: &str,
    image: &str,
    volumes: &[String],
) -> Result<HashMap<String, u64>> {
    let at = |i: usize| format!("/measure/{i}");
    let mut cmd = vec![
        "du".to_owned(),
        "-s".into(),
        "-x".into(),
        "-B1".into(),
        "--".into(),
    ];
    cmd.extend((0..volumes.len()).map(at));
    let mounts = volumes
        .iter()
        .enumerate()
        .map(|(i, v)| Mount {
            target: Some(at(i)),
            source: Some(v.clone()),
            typ: Some(MountType::VOLUME),
            read_only: Some(true),
            ..Default::default()
        })
        .collect();
    let body = ContainerCreateBody {
        image: Some(image.to_owned()),
        entrypoint: Some(Vec::new()),
        cmd: Some(cmd),
        user: Some("0:0".to_owned()),
        network_disabled: Some(true),
        labels: Some(HashMap::from([(
            LABEL_DEPLOYMENT.to_owned(),
            deployment.to_owned(),
        )])),
        host_config: Some(HostConfig {
            mounts: Some(mounts),
            cap_drop: Some(vec!["ALL".to_owned()]),
            cap_add: Some(vec!["DAC_READ_SEARCH".to_owned()]),
            security_opt: Some(vec!["no-new-privileges".to_owned()]),
            network_mode: Some("none".to_owned()),
            ..Default::default()
        }),
        ..Default::default()
    };
    let name = format!(
        "{CONTAINER_PREFIX}{MEASURER}{}",
        uuid::Uuid::new_v4().simple()
    );
    let created = docker
        .create_container(
            Some(CreateContainerOptions {
                name: Some(name.clone()),
                platform: String::new(),
            }),
            body,
        )
        .await
        .map_err(error::backend)?;
    let measured = async {
        docker
            .start_container(&created.id, None::<StartContainerOptions>)
            .await
            .map_err(error::backend)?;
        // Following the log until it ends is waiting for the container to exit.
        let mut logs = docker.logs(
            &created.id,
            Some(LogsOptions {
                follow: true,
                stdout: true,
                stderr: true,
                ..Default::default()
            }),
        );
        let (mut out, mut err) = (String::new(), String::new());
        while let Some(chunk) = logs.next().await {
            match chunk.map_err(error::backend)? {
                LogOutput::StdOut { message } => out.push_str(&String::from_utf8_lossy(&message)),
                LogOutput::StdErr { message } => err.push_str(&String::from_utf8_lossy(&message)),
                _ => {}
            }
        }
        parse(&out, volumes).ok_or_else(|| {
            SandboxError::Backend(format!(
                "measuring workspace volumes: unexpected du output {out:?} ({})",
                err.trim()
            ))
        })
    }
    .await;
    crate::docker::remove_helper(docker, &created.id, &name, "measured workspace volumes").await;
    measured
}

/// Removes the workspace volumes of `deployment` that no container uses: a sandbox removed
/// behind the server's back (`docker rm -f` without `-v`) leaves its volume. Only dangling
/// volumes with the deployment's label are listed, and one a container took meanwhile
/// refuses its removal (409), so nothing in use goes.
pub(crate) async fn remove_stray(docker: &Docker, deployment: &str) -> Result<usize> {
    let filters = HashMap::from([
        ("dangling".to_owned(), vec!["true".to_owned()]),
        (
            "label".to_owned(),
            vec![format!("{LABEL_DEPLOYMENT}={deployment}")],
        ),
    ]);
    let listed = docker
        .list_volumes(Some(ListVolumesOptions {
            filters: Some(filters),
        }))
        .await
        .map_err(error::backend)?;
    let mut removed = 0;
    for v in listed.volumes.unwrap_or_default() {
        match docker
            .remove_volume(&v.name, None::<RemoveVolumeOptions>)
            .await
        {
            Ok(()) => removed += 1,
            Err(e) if error::is_not_found(&e) || error::status(&e) == Some(409) => {}
            Err(e) => return Err(error::backend(e)),
        }
    }
    if removed > 0 {
        tracing::info!(removed, "removed workspace volumes no sandbox uses");
    }
    Ok(removed)
}

/// `du -s` lines (`<bytes>\t/measure/<i>`) as sizes by volume; `None` unless every volume has
/// one.
fn parse(out: &str, volumes: &[String]) -> Option<HashMap<String, u64>> {
    let mut sizes = HashMap::new();
    for line in out.lines().filter(|l| !l.trim().is_empty()) {
        let (bytes, path) = line.split_once('\t')?;
        let i: usize = path.trim().strip_prefix("/measure/")?.parse().ok()?;
        sizes.insert(volumes.get(i)?.clone(), bytes.trim().parse().ok()?);
    }
    (sizes.len() == volumes.len()).then_some(sizes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn du_lines_are_read_by_their_mount() {
        let v = vec!["a".to_owned(), "b".to_owned()];
        let got = parse("4096\t/measure/1\n123456\t/measure/0\n", &v).unwrap();
        assert_eq!(
            got,
            HashMap::from([("a".into(), 123456), ("b".into(), 4096)])
        );
        assert!(
            parse("4096\t/measure/1\n", &v).is_none(),
            "a volume without a line"
        );
        assert!(parse("du: cannot read\n", &v).is_none());
    }
}
