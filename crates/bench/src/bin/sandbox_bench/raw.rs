//! The baselines: the same Docker work as a session, straight on bollard, with no control plane.

use anyhow::{bail, Context};
use bollard::container::LogOutput;
use bollard::exec::{CreateExecOptions, StartExecOptions, StartExecResults};
use bollard::models::{ContainerCreateBody, HostConfig, Mount, MountType};
use bollard::query_parameters::{
    CreateContainerOptions, ListContainersOptions, RemoveContainerOptions, UploadToContainerOptions,
};
use bollard::{body_full, Docker};
use bytes::Bytes;
use futures::StreamExt;
use sandbox_agents_sandbox::{Limits, LABEL_DEPLOYMENT, LABEL_SESSION, WORKDIR};
use std::collections::HashMap;
use std::time::Duration;

/// Every container the baselines make carries this label (`=1`), so they can be found and
/// removed at the end, also after an error.
pub const BENCH_LABEL: &str = "io.sandbox-agents.bench";
/// Their deployment label: not the server's, so its reconciler never sees them.
const RAW_DEPLOYMENT: &str = "sandbox-bench-raw";

/// The local Engine (`DOCKER_HOST` or the default socket), with the API version agreed.
pub async fn connect() -> anyhow::Result<Docker> {
    let docker = Docker::connect_with_defaults().context("connecting to the Docker Engine")?;
    let docker = docker
        .negotiate_version()
        .await
        .context("talking to dockerd")?;
    docker.ping().await.context("pinging dockerd")?;
    Ok(docker)
}

/// The container `DockerBackend` creates (`crates/sandbox/src/docker/create.rs`): the same
/// hardening, limits, user, workdir, workspace volume and labels, no published ports (the
/// agent has none).
fn body(image: &str, limits: &Limits, session: &str) -> ContainerCreateBody {
    let labels = HashMap::from([
        (LABEL_DEPLOYMENT.to_owned(), RAW_DEPLOYMENT.to_owned()),
        (LABEL_SESSION.to_owned(), session.to_owned()),
        (BENCH_LABEL.to_owned(), "1".to_owned()),
    ]);
    ContainerCreateBody {
        image: Some(image.to_owned()),
        user: Some("1000:1000".to_owned()),
        working_dir: Some(WORKDIR.to_owned()),
        env: Some(Vec::new()),
        labels: Some(labels),
        exposed_ports: Some(Vec::new()),
        tty: Some(false),
        open_stdin: Some(false),
        attach_stdin: Some(false),
        attach_stdout: Some(false),
        attach_stderr: Some(false),
        host_config: Some(HostConfig {
            privileged: Some(false),
            cap_drop: Some(vec!["ALL".to_owned()]),
            cap_add: Some(Vec::new()),
            security_opt: Some(vec!["no-new-privileges".to_owned()]),
            pids_limit: Some(limits.pids),
            memory: Some(limits.memory_bytes),
            memory_swap: Some(limits.memory_bytes),
            nano_cpus: Some((limits.cpus * 1e9).round() as i64),
            init: Some(false),
            ipc_mode: Some("private".to_owned()),
            binds: Some(Vec::new()),
            // The workspace is a volume of the container's own, as a sandbox's is.
            mounts: Some(vec![Mount {
                target: Some(WORKDIR.to_owned()),
                typ: Some(MountType::VOLUME),
                read_only: Some(false),
                ..Default::default()
            }]),
            port_bindings: Some(HashMap::new()),
            publish_all_ports: Some(false),
            auto_remove: Some(false),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The timed baseline of create-to-running: create, start, and upload the manifest's tar
/// (already owned by uid 1000) into the workspace. Returns the container id.
pub async fn create_start_upload(
    docker: &Docker,
    image: &str,
    limits: &Limits,
    tar: &Bytes,
) -> anyhow::Result<String> {
    let session = uuid::Uuid::new_v4().to_string();
    let options = CreateContainerOptions {
        name: Some(format!("sandbox-bench-raw-{session}")),
        platform: String::new(),
    };
    let id = docker
        .create_container(Some(options), body(image, limits, &session))
        .await
        .context("create_container")?
        .id;
    let started = async {
        docker
            .start_container(&id, None)
            .await
            .context("start_container")?;
        let options = UploadToContainerOptions {
            path: WORKDIR.to_owned(),
            no_overwrite_dir_non_dir: Some("true".to_owned()),
            copy_uidgid: None,
        };
        docker
            .upload_to_container(&id, Some(options), body_full(tar.clone()))
            .await
            .context("upload_to_container")
    }
    .await;
    if let Err(e) = started {
        let _ = remove(docker, &id).await;
        return Err(e);
    }
    Ok(id)
}

pub async fn remove(docker: &Docker, id: &str) -> anyhow::Result<()> {
    let options = RemoveContainerOptions {
        force: true,
        v: true,
        link: false,
    };
    docker
        .remove_container(id, Some(options))
        .await
        .with_context(|| format!("removing container {id}"))
}

/// Removes every container labelled [`BENCH_LABEL`]; returns how many there were.
pub async fn remove_all(docker: &Docker) -> anyhow::Result<usize> {
    let filters = HashMap::from([("label".to_owned(), vec![format!("{BENCH_LABEL}=1")])]);
    let options = ListContainersOptions {
        all: true,
        filters: Some(filters),
        ..Default::default()
    };
    let found = docker.list_containers(Some(options)).await?;
    for c in &found {
        if let Some(id) = &c.id {
            remove(docker, id).await?;
        }
    }
    Ok(found.len())
}

/// One exec round trip as `DockerBackend::exec` makes it: create (attached stdout/stderr, user
/// 1000, workdir /workspace), attached start collecting the output until it closes, inspect
/// for the exit code (again, briefly, while the Engine still says running). Fails unless the
/// command exits 0.
pub async fn exec(docker: &Docker, id: &str, argv: &[&str]) -> anyhow::Result<()> {
    let options = CreateExecOptions {
        attach_stdout: Some(true),
        attach_stderr: Some(true),
        tty: Some(false),
        cmd: Some(argv.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>()),
        user: Some("1000:1000".to_owned()),
        working_dir: Some(WORKDIR.to_owned()),
        ..Default::default()
    };
    let created = docker
        .create_exec(id, options)
        .await
        .context("create_exec")?;
    let start = StartExecOptions {
        detach: false,
        tty: false,
        output_capacity: Some(64 * 1024),
    };
    let StartExecResults::Attached { mut output, .. } = docker
        .start_exec(&created.id, Some(start))
        .await
        .context("start_exec")?
    else {
        bail!("start_exec did not attach");
    };
    let mut bytes = 0usize;
    while let Some(item) = output.next().await {
        match item.context("reading exec output")? {
            LogOutput::StdOut { message }
            | LogOutput::StdErr { message }
            | LogOutput::Console { message } => bytes += message.len(),
            LogOutput::StdIn { .. } => {}
        }
    }
    let mut pause = Duration::from_millis(2);
    for _ in 0..12 {
        let inspected = docker
            .inspect_exec(&created.id)
            .await
            .context("inspect_exec")?;
        if inspected.running != Some(true) {
            match inspected.exit_code {
                Some(0) => return Ok(()),
                Some(code) => bail!("{argv:?} exited {code} ({bytes} bytes of output)"),
                None => {}
            }
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_millis(250));
    }
    bail!("exec {}: output ended but it still runs", created.id)
}

/// The steps of [`sequence`], as the breakdown table names them.
pub const STEPS: [&str; 6] = [
    "inspect_image (is the image there? does it own /workspace?)",
    "create_container",
    "start_container",
    "inspect_container (running? ports?)",
    "rewrite the manifest tar's owners (spawn_blocking)",
    "upload_to_container of the manifest tar",
];

/// `DockerBackend::create` + `put_archive`, call by call on bollard, each step timed: where the
/// Docker part of a boot spends its time beyond the three calls of the baseline.
pub async fn sequence(
    docker: &Docker,
    image: &str,
    limits: &Limits,
    tar: &Bytes,
) -> anyhow::Result<(String, [Duration; 6])> {
    use sandbox_agents_sandbox::docker::owned_by_sandbox_user;
    let mut steps = [Duration::ZERO; 6];
    let mut t = std::time::Instant::now();
    let mut lap = |i: usize| {
        steps[i] = t.elapsed();
        t = std::time::Instant::now();
    };
    let session = uuid::Uuid::new_v4().to_string();
    let name = format!("sandbox-bench-raw-{session}");
    docker.inspect_image(image).await.context("inspect_image")?;
    lap(0);
    let options = CreateContainerOptions {
        name: Some(name),
        platform: String::new(),
    };
    let id = docker
        .create_container(Some(options), body(image, limits, &session))
        .await
        .context("create_container")?
        .id;
    lap(1);
    let run = async {
        docker
            .start_container(&id, None)
            .await
            .context("start_container")?;
        lap(2);
        let c = docker
            .inspect_container(&id, None)
            .await
            .context("inspect_container")?;
        anyhow::ensure!(c.state.and_then(|s| s.running) == Some(true), "not running");
        lap(3);
        let tar = tar.clone();
        let tar = tokio::task::spawn_blocking(move || owned_by_sandbox_user(&tar)).await??;
        lap(4);
        upload(docker, &id, WORKDIR, tar.into()).await?;
        lap(5);
        Ok::<(), anyhow::Error>(())
    }
    .await;
    if let Err(e) = run {
        let _ = remove(docker, &id).await;
        return Err(e);
    }
    Ok((id, steps))
}

async fn upload(docker: &Docker, id: &str, dir: &str, tar: Bytes) -> anyhow::Result<()> {
    let options = UploadToContainerOptions {
        path: dir.to_owned(),
        no_overwrite_dir_non_dir: Some("true".to_owned()),
        copy_uidgid: None,
    };
    docker
        .upload_to_container(id, Some(options), body_full(tar))
        .await
        .with_context(|| format!("upload_to_container {dir}"))
}
