//! The Docker backend against a real Engine and the real sandbox image
//! (`SANDBOX_AGENTS_IMAGE`, default `sandbox-agents-sandbox:1`).
//!
//! Every test uses its own deployment id, so `list` sees only its own sandboxes, and a
//! [`Cleanup`] that removes them (and any snapshot images) even when the test fails.

use bytes::Bytes;
use futures::TryStreamExt;
use sandbox_agents_sandbox::{
    DockerBackend, ExecOutput, ExecRequest, Limits, Sandbox, SandboxBackend, SandboxError,
    SandboxSpec,
};
use std::collections::BTreeMap;
use std::io::Read;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn image() -> String {
    std::env::var("SANDBOX_AGENTS_IMAGE").unwrap_or_else(|_| "sandbox-agents-sandbox:1".to_owned())
}

fn spec(session: &str) -> SandboxSpec {
    SandboxSpec {
        session: session.to_owned(),
        image: image(),
        env: BTreeMap::new(),
        exposed_ports: vec![],
        limits: Limits {
            cpus: 1.0,
            memory_bytes: 512 << 20,
            pids: 256,
        },
    }
}

fn session() -> String {
    uuid::Uuid::new_v4().to_string()
}

fn req(argv: &[&str]) -> ExecRequest {
    ExecRequest {
        argv: argv.iter().map(|s| s.to_string()).collect(),
        workdir: None,
        env: vec![],
        timeout: Duration::from_secs(20),
        max_output: 1 << 20,
        stdin: None,
    }
}

fn sh(script: &str) -> ExecRequest {
    req(&["sh", "-c", script])
}

fn text(b: &[u8]) -> &str {
    std::str::from_utf8(b).unwrap()
}

/// A backend on a fresh deployment id; removes everything of that deployment when dropped.
struct Cleanup {
    backend: DockerBackend,
    images: Vec<String>,
    done: bool,
}

impl Cleanup {
    /// A backend whose sandboxes get their daemon (`testkit::test_sandboxd`).
    async fn new() -> Self {
        let binary = sandbox_agents_testkit::test_sandboxd();
        let binary = sandbox_agents_sandbox::docker::daemon::DaemonBinary::load(&binary)
            .unwrap_or_else(|e| {
                panic!(
                    "the sandbox daemon {} ({e}): build it with scripts/build-sandboxd",
                    binary.display()
                )
            });
        Self::with(|b| b.with_daemon(binary)).await
    }

    /// A backend that runs every command as a Docker exec (no daemon).
    async fn docker_exec() -> Self {
        Self::with(|b| b).await
    }

    async fn with(f: impl FnOnce(DockerBackend) -> DockerBackend) -> Self {
        let deployment = format!("test-{}", uuid::Uuid::new_v4());
        let backend = DockerBackend::connect(&deployment)
            .await
            .expect("the Docker Engine answers");
        let backend = f(backend);
        Cleanup {
            backend,
            images: Vec::new(),
            done: false,
        }
    }

    async fn create(&self, spec: &SandboxSpec) -> Sandbox {
        self.backend.create(spec).await.expect("create")
    }

    async fn exec(&self, sb: &Sandbox, req: &ExecRequest) -> ExecOutput {
        self.backend.exec(&sb.id, req).await.expect("exec")
    }

    /// Removes what the test made and checks nothing is left.
    async fn finish(mut self) {
        remove_all(&self.backend, &self.images).await;
        assert!(
            self.backend.list().await.unwrap().is_empty(),
            "containers left behind"
        );
        self.done = true;
    }
}

async fn remove_all(backend: &DockerBackend, images: &[String]) {
    for s in backend.list().await.unwrap_or_default() {
        let _ = backend.remove(&s.id).await;
    }
    for image in images {
        let _ = backend.remove_image(image).await;
    }
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        // A failed test: clean up on a runtime of our own (this one may be unwinding).
        let deployment = self.backend.deployment().to_owned();
        let images = std::mem::take(&mut self.images);
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async {
                if let Ok(backend) = DockerBackend::connect(&deployment).await {
                    remove_all(&backend, &images).await;
                }
            })
        })
        .join();
    }
}

#[tokio::test]
async fn lifecycle_labels_stop_and_idempotent_remove() {
    let t = Cleanup::new().await;
    let s = session();
    let sb = t.create(&spec(&s)).await;
    assert_eq!(sb.workdir, "/workspace");
    assert!(t.backend.inspect(&sb.id).await.unwrap().unwrap().running);

    let listed = t.backend.list().await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].id, sb.id);
    assert_eq!(listed[0].session.as_deref(), Some(s.as_str()));
    assert!(listed[0].running);

    t.backend
        .stop(&sb.id, Duration::from_secs(1))
        .await
        .unwrap();
    assert!(!t.backend.inspect(&sb.id).await.unwrap().unwrap().running);
    assert!(!t.backend.list().await.unwrap()[0].running);

    t.backend.remove(&sb.id).await.unwrap();
    t.backend.remove(&sb.id).await.unwrap();
    assert_eq!(t.backend.inspect(&sb.id).await.unwrap(), None);
    assert!(matches!(
        t.backend.exec(&sb.id, &req(&["true"])).await,
        Err(SandboxError::NotFound(_))
    ));
    t.finish().await;
}

#[tokio::test]
async fn ports_are_published_on_loopback_and_reachable() {
    let t = Cleanup::new().await;
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

#[tokio::test]
async fn exec_streams_exit_codes_stdin_env_and_workdir_through_the_daemon() {
    let t = Cleanup::new().await;
    exit_codes_stdin_env_and_workdir(t, true).await;
}

#[tokio::test]
async fn exec_streams_exit_codes_stdin_env_and_workdir_through_docker_exec() {
    exit_codes_stdin_env_and_workdir(Cleanup::docker_exec().await, false).await;
}

async fn exit_codes_stdin_env_and_workdir(t: Cleanup, daemon: bool) {
    let sb = t.create(&spec(&session())).await;
    assert_eq!(
        t.backend.daemon(&sb.id).await.is_some(),
        daemon,
        "the path under test"
    );

    let out = t.exec(&sb, &sh("echo out; echo err >&2; exit 3")).await;
    assert_eq!(
        (out.exit_code, text(&out.stdout), text(&out.stderr)),
        (3, "out\n", "err\n")
    );
    assert!(!out.timed_out && !out.stdout_truncated && !out.stderr_truncated);

    let out = t.exec(&sb, &req(&["pwd"])).await;
    assert_eq!((out.exit_code, text(&out.stdout)), (0, "/workspace\n"));

    let mut r = sh("echo \"$GREETING\"; pwd");
    r.env = vec![("GREETING".into(), "hi there".into())];
    r.workdir = Some("/tmp".into());
    assert_eq!(text(&t.exec(&sb, &r).await.stdout), "hi there\n/tmp\n");

    let out = t.exec(&sb, &req(&["no-such-command"])).await;
    assert_eq!(out.exit_code, 127);
    let mut r = req(&["pwd"]);
    r.workdir = Some("/nonexistent".into());
    let bad = t.backend.exec(&sb.id, &r).await;
    assert!(
        matches!(bad, Err(SandboxError::NoSuchPath(ref p)) if p == "/nonexistent"),
        "{bad:?}"
    );

    // stdin, small and larger than any pipe buffer, written while output is read.
    let mut r = req(&["cat"]);
    r.stdin = Some(Bytes::from_static(b"hello\nworld"));
    assert_eq!(text(&t.exec(&sb, &r).await.stdout), "hello\nworld");
    let big: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
    let mut r = req(&["cat"]);
    r.stdin = Some(Bytes::from(big.clone()));
    r.max_output = 4 << 20;
    let out = t.exec(&sb, &r).await;
    assert!(
        out.stdout == big,
        "cat echoed {} of {} bytes",
        out.stdout.len(),
        big.len()
    );

    // Round trip of a trivial command.
    let mut times = Vec::new();
    for _ in 0..20 {
        let started = Instant::now();
        assert_eq!(t.exec(&sb, &req(&["true"])).await.exit_code, 0);
        times.push(started.elapsed());
    }
    times.sort();
    eprintln!(
        "exec round trip (daemon: {daemon}): p50 {:?}, max {:?}",
        times[times.len() / 2],
        times[times.len() - 1]
    );
    t.finish().await;
}

#[tokio::test]
async fn a_timeout_kills_the_command_tree_not_the_sandbox_through_the_daemon() {
    let t = Cleanup::new().await;
    timeouts_kill_the_tree(t, true).await;
}

#[tokio::test]
async fn a_timeout_kills_the_command_tree_not_the_sandbox_through_docker_exec() {
    timeouts_kill_the_tree(Cleanup::docker_exec().await, false).await;
}

async fn timeouts_kill_the_tree(t: Cleanup, daemon: bool) {
    let sb = t.create(&spec(&session())).await;
    assert_eq!(
        t.backend.daemon(&sb.id).await.is_some(),
        daemon,
        "the path under test"
    );

    let mut r = sh("echo started; sleep 101 & sleep 102");
    r.timeout = Duration::from_secs(1);
    let started = Instant::now();
    let out = t.exec(&sb, &r).await;
    let took = started.elapsed();
    assert_eq!((out.exit_code, out.timed_out), (124, true));
    assert_eq!(text(&out.stdout), "started\n");
    assert!(took < Duration::from_secs(4), "took {took:?}");

    // The background child went with it; the sandbox did not.
    let out = t.exec(&sb, &req(&["pgrep", "-f", "sleep 10[12]"])).await;
    assert_eq!(out.exit_code, 1, "still running: {}", text(&out.stdout));
    assert!(t.backend.inspect(&sb.id).await.unwrap().unwrap().running);
    assert_eq!(
        text(&t.exec(&sb, &req(&["echo", "alive"])).await.stdout),
        "alive\n"
    );

    // A command that ignores TERM is KILLed and still counts as timed out.
    let mut r = sh("trap '' TERM; sleep 103");
    r.timeout = Duration::from_millis(500);
    let out = t.exec(&sb, &r).await;
    assert_eq!((out.exit_code, out.timed_out), (124, true));

    // A command exiting 124 by itself, in time, did not time out.
    let out = t.exec(&sb, &sh("exit 124")).await;
    assert_eq!((out.exit_code, out.timed_out), (124, false));
    t.finish().await;
}

#[tokio::test]
async fn output_beyond_the_cap_is_drained_through_the_daemon() {
    let t = Cleanup::new().await;
    output_beyond_the_cap(t, true).await;
}

#[tokio::test]
async fn output_beyond_the_cap_is_drained_through_docker_exec() {
    output_beyond_the_cap(Cleanup::docker_exec().await, false).await;
}

async fn output_beyond_the_cap(t: Cleanup, daemon: bool) {
    let sb = t.create(&spec(&session())).await;
    assert_eq!(
        t.backend.daemon(&sb.id).await.is_some(),
        daemon,
        "the path under test"
    );
    let mut r = sh("yes | head -c 1000000; echo done >&2");
    r.max_output = 1000;
    let out = t.exec(&sb, &r).await;
    assert_eq!(out.exit_code, 0);
    assert_eq!(out.stdout.len(), 1000);
    assert!(out.stdout_truncated);
    assert_eq!((text(&out.stderr), out.stderr_truncated), ("done\n", false));
    t.finish().await;
}

#[tokio::test]
async fn archives_round_trip_as_the_sandbox_user_through_the_daemon() {
    archives_round_trip(Cleanup::new().await, true).await;
}

#[tokio::test]
async fn archives_round_trip_as_the_sandbox_user_through_the_engine() {
    archives_round_trip(Cleanup::docker_exec().await, false).await;
}

/// Uploads go through the daemon when it answers and through the Engine otherwise, with the
/// same result: the sandbox user's files, the same errors.
async fn archives_round_trip(t: Cleanup, daemon: bool) {
    let sb = t.create(&spec(&session())).await;
    assert_eq!(
        t.backend.daemon(&sb.id).await.is_some(),
        daemon,
        "the path under test"
    );

    let blob: Vec<u8> = (0..300_000u32).map(|i| (i * 7 % 256) as u8).collect();
    let mut b = tar::Builder::new(Vec::new());
    for (path, data) in [
        ("dir/hello.txt", &b"hello\n"[..]),
        ("dir/sub/blob.bin", &blob[..]),
    ] {
        let mut h = tar::Header::new_gnu();
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        h.set_uid(0);
        b.append_data(&mut h, path, data).unwrap();
    }
    let tar = b.into_inner().unwrap();
    t.backend
        .put_archive(&sb.id, "/workspace", tar.into())
        .await
        .unwrap();

    let out = t
        .exec(
            &sb,
            &sh(
                "cat dir/hello.txt; stat -c '%u:%g %n' dir dir/sub dir/sub/blob.bin; touch dir/new",
            ),
        )
        .await;
    assert_eq!(out.exit_code, 0, "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout),
        "hello\n1000:1000 dir\n1000:1000 dir/sub\n1000:1000 dir/sub/blob.bin\n"
    );

    let chunks: Vec<Bytes> = t
        .backend
        .get_archive(&sb.id, "/workspace/dir")
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    let tar = chunks.concat();
    let mut files = BTreeMap::new();
    for entry in tar::Archive::new(&tar[..]).entries().unwrap() {
        let mut entry = entry.unwrap();
        let path = entry.path().unwrap().display().to_string();
        let mut data = Vec::new();
        entry.read_to_end(&mut data).unwrap();
        files.insert(path, data);
    }
    assert_eq!(files["dir/hello.txt"], b"hello\n");
    assert!(files["dir/sub/blob.bin"] == blob);
    assert!(files.contains_key("dir/new"));

    // A directory of the image's that the sandbox user may not write (root's, 755): the
    // daemon is refused, and the Engine, as root, writes it as before the daemon took uploads.
    let mut b = tar::Builder::new(Vec::new());
    let mut h = tar::Header::new_gnu();
    h.set_size(3);
    h.set_mode(0o644);
    b.append_data(&mut h, "sa-archive-test.txt", &b"etc"[..])
        .unwrap();
    t.backend
        .put_archive(&sb.id, "/etc", b.into_inner().unwrap().into())
        .await
        .unwrap();
    let out = t
        .exec(
            &sb,
            &sh("cat /etc/sa-archive-test.txt; stat -c ' %u' /etc/sa-archive-test.txt"),
        )
        .await;
    assert_eq!(
        (out.exit_code, text(&out.stdout)),
        (0, "etc 1000\n"),
        "{}",
        text(&out.stderr)
    );

    let missing = t.backend.get_archive(&sb.id, "/workspace/nope").await;
    assert!(
        matches!(missing, Err(SandboxError::NoSuchPath(ref p)) if p == "/workspace/nope"),
        "{:?}",
        missing.err()
    );
    let missing = t
        .backend
        .put_archive(&sb.id, "/workspace/nope", Bytes::new())
        .await;
    assert!(
        matches!(missing, Err(SandboxError::NoSuchPath(_))),
        "{missing:?}"
    );
    let gone = t
        .backend
        .get_archive("sa-no-such-container", "/workspace")
        .await;
    assert!(
        matches!(gone, Err(SandboxError::NotFound(_))),
        "{:?}",
        gone.err()
    );
    t.finish().await;
}

#[tokio::test]
async fn the_sandbox_is_unprivileged() {
    let t = Cleanup::new().await;
    let sb = t.create(&spec(&session())).await;
    let out = t
        .exec(
            &sb,
            &sh("grep -E '^(CapEff|CapBnd|NoNewPrivs)' /proc/self/status; id -u; id -g"),
        )
        .await;
    let status: BTreeMap<&str, &str> = text(&out.stdout)
        .lines()
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k, v.trim()))
        .collect();
    assert_eq!(status["CapEff"], "0000000000000000");
    assert_eq!(status["CapBnd"], "0000000000000000");
    assert_eq!(status["NoNewPrivs"], "1");
    assert!(
        text(&out.stdout).ends_with("1000\n1000\n"),
        "{}",
        text(&out.stdout)
    );
    // The spec's limits (cgroup v2 or v1 file names).
    let out = t
        .exec(
            &sb,
            &sh("cat /sys/fs/cgroup/pids.max 2>/dev/null || cat /sys/fs/cgroup/pids/pids.max; \
                 cat /sys/fs/cgroup/memory.max 2>/dev/null || cat /sys/fs/cgroup/memory/memory.limit_in_bytes"),
        )
        .await;
    assert_eq!(text(&out.stdout), format!("256\n{}\n", 512 << 20));
    // No Docker socket inside.
    assert_ne!(
        t.exec(&sb, &req(&["test", "-e", "/var/run/docker.sock"]))
            .await
            .exit_code,
        0
    );
    t.finish().await;
}

#[tokio::test]
async fn the_same_session_replaces_its_old_sandbox_and_missing_images_are_reported() {
    let t = Cleanup::new().await;
    let sp = spec(&session());
    let first = t.create(&sp).await;
    let second = t.create(&sp).await;
    assert_ne!(first.id, second.id);
    assert_eq!(t.backend.inspect(&first.id).await.unwrap(), None);
    let listed = t.backend.list().await.unwrap();
    assert_eq!(
        listed.iter().map(|s| s.id.as_str()).collect::<Vec<_>>(),
        [second.id.as_str()]
    );

    let mut sp = spec(&session());
    sp.image = "sandbox-agents-no-such-image:0".into();
    assert!(matches!(
        t.backend.create(&sp).await,
        Err(SandboxError::ImageMissing(_))
    ));
    t.finish().await;
}

/// The workspace volume goes with its sandbox; one whose container someone else removed
/// without `-v` is removed by the sweep's `remove_stray_volumes`, and one in use never is.
#[tokio::test]
async fn workspace_volumes_go_with_their_sandbox_and_strays_are_swept() {
    let t = Cleanup::new().await;
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
    assert_eq!(t.backend.remove_stray_volumes().await.unwrap(), 1);
    assert!(!volume_exists(&dropped_volume));
    assert!(volume_exists(&kept_volume), "a volume in use stays");
    // The backend's own removal takes the volume with the container.
    t.backend.remove(&kept.id).await.unwrap();
    assert!(!volume_exists(&kept_volume));
    assert_eq!(t.backend.remove_stray_volumes().await.unwrap(), 0);
    t.finish().await;
}

#[tokio::test]
async fn a_snapshot_keeps_the_filesystem_but_not_the_workspace_or_the_session_env() {
    let mut t = Cleanup::new().await;
    let mut sp = spec(&session());
    sp.env = BTreeMap::from([("SESSION_SECRET".into(), "hunter2".into())]);
    let sb = t.create(&sp).await;
    let out = t
        .exec(
            &sb,
            &sh("echo kept > /home/sandbox/marker && echo work > /workspace/w"),
        )
        .await;
    assert_eq!(out.exit_code, 0, "{}", text(&out.stderr));

    let name = format!("test-{}", uuid::Uuid::new_v4());
    let image = t.backend.snapshot_image(&sb.id, &name).await.unwrap();
    t.images.push(image.clone());
    assert_eq!(image, format!("sandbox-agents-snapshot:{name}"));

    let mut sp2 = spec(&session());
    sp2.image = image.clone();
    let restored = t.create(&sp2).await;
    let out = t
        .exec(
            &restored,
            &sh("cat /home/sandbox/marker; test -e /workspace/w || echo no workspace; echo \"[$SESSION_SECRET]\"; id -u"),
        )
        .await;
    // The workspace is a volume, which the commit leaves out (the caller archives it).
    assert_eq!(text(&out.stdout), "kept\nno workspace\n[]\n1000\n");

    for s in t.backend.list().await.unwrap() {
        t.backend.remove(&s.id).await.unwrap();
    }
    t.backend.remove_image(&image).await.unwrap();
    t.backend.remove_image(&image).await.unwrap();
    let mut sp3 = spec(&session());
    sp3.image = image;
    assert!(matches!(
        t.backend.create(&sp3).await,
        Err(SandboxError::ImageMissing(_))
    ));
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
