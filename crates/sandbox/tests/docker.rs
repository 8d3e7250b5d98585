//! What only the Docker backend does, against a real Engine and the real sandbox image
//! (`SANDBOX_AGENTS_IMAGE`, default `sandbox-agents-sandbox:1`): ports published on loopback,
//! the workspace as a volume of its own, snapshots as tagged images, the Engine's errors.
//! What every backend does is the conformance suite (`backends.rs`).
//!
//! Every test uses its own deployment id, so `list` sees only its own sandboxes, and a
//! `Harness` that removes them (and any snapshot images) even when the test fails.

use sandbox_agents_sandbox::{DockerBackend, SandboxSpec};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

mod support;

use support::{image, session, sh, Docker, Harness};

fn spec(session: &str) -> SandboxSpec {
    support::spec_of(image(), session)
}

/// A Docker backend (with the daemon) on a fresh deployment id, cleaned up even when a
/// test fails.
async fn harness() -> Harness<Docker> {
    Harness::new(Docker { daemon: true }).await
}

#[tokio::test]
async fn ports_are_published_on_loopback_and_reachable() {
    let t = harness().await;
    let mut sp = spec(&session());
    sp.exposed_ports = vec![8080];
    let sb = t.create(&sp).await;
    let addr = sb.ports[&8080];
    assert!(addr.ip().is_loopback(), "{addr}");
    assert_eq!(
        t.backend.inspect(&sb.id).await.unwrap().unwrap().ports,
        sb.ports
    );

    let out = t
        .exec(
            &sb,
            &sh("nohup python3 -m http.server 8080 >/dev/null 2>&1 &"),
        )
        .await;
    assert_eq!(out.exit_code, 0);
    let answer = sandbox_agents_testkit::eventually(
        &format!("the server in the sandbox to answer on {addr}"),
        Duration::from_secs(10),
        async || {
            let attempt = async {
                let mut conn = tokio::net::TcpStream::connect(addr).await?;
                conn.write_all(b"GET / HTTP/1.0\r\nHost: sandbox\r\n\r\n")
                    .await?;
                let mut answer = Vec::new();
                conn.read_to_end(&mut answer).await?;
                Ok::<_, std::io::Error>(String::from_utf8_lossy(&answer).into_owned())
            };
            match tokio::time::timeout(Duration::from_secs(2), attempt).await {
                Ok(Ok(a)) if a.starts_with("HTTP/") => Ok(a),
                other => Err(format!("{other:?}")),
            }
        },
    )
    .await;
    assert!(answer.starts_with("HTTP/1.0 200"), "{answer}");
    t.finish().await;
}

/// The workspace volume goes with its sandbox; one whose container someone else removed
/// without `-v` is removed by the sweep's `remove_strays`, and one in use never is.
#[tokio::test]
async fn workspace_volumes_go_with_their_sandbox_and_strays_are_swept() {
    let t = harness().await;
    let kept = t.create(&spec(&session())).await;
    let dropped = t.create(&spec(&session())).await;
    let volume_of = |id: &str| {
        let out = std::process::Command::new("docker")
            .args([
                "inspect",
                "-f",
                "{{range .Mounts}}{{if eq .Destination \"/workspace\"}}{{.Name}}{{end}}{{end}}",
                id,
            ])
            .output()
            .unwrap();
        String::from_utf8(out.stdout).unwrap().trim().to_owned()
    };
    let volume_exists = |name: &str| {
        std::process::Command::new("docker")
            .args(["volume", "inspect", name])
            .output()
            .unwrap()
            .status
            .success()
    };
    let (kept_volume, dropped_volume) = (volume_of(&kept.id), volume_of(&dropped.id));
    assert!(!kept_volume.is_empty() && !dropped_volume.is_empty());
    // Removed behind the backend's back, without its volumes.
    let rm = std::process::Command::new("docker")
        .args(["rm", "-f", &dropped.id])
        .output()
        .unwrap();
    assert!(rm.status.success(), "{rm:?}");
    assert!(
        volume_exists(&dropped_volume),
        "docker rm without -v leaves the volume"
    );
    assert_eq!(t.backend.remove_strays().await.unwrap(), 1);
    assert!(!volume_exists(&dropped_volume));
    assert!(volume_exists(&kept_volume), "a volume in use stays");
    // The backend's own removal takes the volume with the container.
    t.backend.remove(&kept.id).await.unwrap();
    assert!(!volume_exists(&kept_volume));
    assert_eq!(t.backend.remove_strays().await.unwrap(), 0);
    t.finish().await;
}

#[tokio::test]
async fn an_unreachable_engine_is_reported_clearly() {
    let err = DockerBackend::connect_to("unix:///nonexistent/docker.sock", "test")
        .await
        .unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("cannot reach the Docker Engine at unix:///nonexistent/docker.sock: is dockerd running?"), "{msg}");
}

/// A snapshot is an image tagged with the name it was given, in the snapshots' repository.
#[tokio::test]
async fn a_snapshot_is_an_image_tagged_with_its_name() {
    let mut t = harness().await;
    let sb = t.create(&spec(&session())).await;
    let name = format!("test-{}", uuid::Uuid::new_v4());
    let image = t.backend.snapshot_image(&sb.id, &name).await.unwrap();
    t.images.push(image.clone());
    assert_eq!(image, format!("sandbox-agents-snapshot:{name}"));
    t.finish().await;
}
