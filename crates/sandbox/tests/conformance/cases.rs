//! Conformance cases about a sandbox's life, its files, its hardening, snapshots, the warm
//! pool and disk measurement (commands are in `exec_cases.rs`).

use super::{not_applicable, req, session, sh, text, Harness, Subject};
use bytes::Bytes;
use futures::TryStreamExt;
use sandbox_agents_sandbox::{SandboxError, SnapshotKind};
use std::collections::BTreeMap;
use std::io::Read;
use std::time::Duration;

pub async fn lifecycle_labels_stop_and_idempotent_remove(subject: impl Subject) {
    let t = Harness::new(subject).await;
    let s = session();
    let sb = t.create(&t.spec(&s)).await;
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
    assert!(
        !t.backend.known_running(&sb.id),
        "a stopped sandbox is not known to run"
    );
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

pub async fn the_same_session_replaces_its_old_sandbox_and_missing_images_are_reported(
    subject: impl Subject,
) {
    let t = Harness::new(subject).await;
    let sp = t.spec(&session());
    let first = t.create(&sp).await;
    let second = t.create(&sp).await;
    assert_ne!(first.id, second.id);
    assert_eq!(t.backend.inspect(&first.id).await.unwrap(), None);
    let listed = t.backend.list().await.unwrap();
    assert_eq!(
        listed.iter().map(|s| s.id.as_str()).collect::<Vec<_>>(),
        [second.id.as_str()]
    );

    let mut sp = t.spec(&session());
    sp.image = "sandbox-agents-no-such-image:0".into();
    assert!(matches!(
        t.backend.create(&sp).await,
        Err(SandboxError::ImageMissing(_))
    ));
    // A backend that neither builds nor snapshots images has none of its own to tell about
    // (a cluster's images are its registry's).
    let caps = t.caps();
    if caps.image_builds || caps.snapshots == SnapshotKind::Image {
        assert!(!t.backend.image_exists(&sp.image).await.unwrap());
        assert!(t.backend.image_exists(&t.subject.image()).await.unwrap());
    }
    t.finish().await;
}

/// Uploads land as the sandbox user's files, read back byte for byte, with the same errors
/// whichever way the backend carries them (its daemon, or the backend's own file API).
pub async fn archives_round_trip_as_the_sandbox_user(subject: impl Subject) {
    let t = Harness::new(subject).await;
    let sb = t.create(&t.spec(&session())).await;
    assert_eq!(
        t.backend.daemon(&sb.id).await.is_some(),
        t.caps().daemon,
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

    // A directory of the image's that the sandbox user may not write (root's, 755): written
    // for the control plane all the same, owned by the sandbox user, where the backend
    // writes as root; refused, and nothing written, where it cannot.
    let mut b = tar::Builder::new(Vec::new());
    let mut h = tar::Header::new_gnu();
    h.set_size(3);
    h.set_mode(0o644);
    b.append_data(&mut h, "sa-archive-test.txt", &b"etc"[..])
        .unwrap();
    let into_etc = t
        .backend
        .put_archive(&sb.id, "/etc", b.into_inner().unwrap().into())
        .await;
    let out = t
        .exec(
            &sb,
            &sh("cat /etc/sa-archive-test.txt; stat -c ' %u' /etc/sa-archive-test.txt"),
        )
        .await;
    if t.caps().system_files {
        into_etc.unwrap();
        assert_eq!(
            (out.exit_code, text(&out.stdout)),
            (0, "etc 1000\n"),
            "{}",
            text(&out.stderr)
        );
    } else {
        assert!(into_etc.is_err(), "a write as root where there is no root");
        assert_ne!(out.exit_code, 0, "nothing was written");
    }

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
        .get_archive("sa-no-such-sandbox", "/workspace")
        .await;
    assert!(
        matches!(gone, Err(SandboxError::NotFound(_))),
        "{:?}",
        gone.err()
    );
    t.finish().await;
}

/// What runs in a sandbox is untrusted: the sandbox user, no way to the backend's own
/// control socket and, where the backend isolates (`Capabilities::isolation`), no
/// capability, no new privileges and the spec's limits, as the kernel reports them.
pub async fn the_sandbox_is_unprivileged_and_limited(subject: impl Subject) {
    let t = Harness::new(subject).await;
    let sb = t.create(&t.spec(&session())).await;
    let out = t.exec(&sb, &sh("id -u; id -g")).await;
    assert_eq!(text(&out.stdout), "1000\n1000\n", "{}", text(&out.stderr));
    // No Docker socket inside (nor any other control socket of the backend's).
    assert_ne!(
        t.exec(&sb, &req(&["test", "-e", "/var/run/docker.sock"]))
            .await
            .exit_code,
        0
    );
    if !t.caps().isolation {
        not_applicable("capabilities and limits", "it isolates nothing");
        return t.finish().await;
    }
    let out = t
        .exec(
            &sb,
            &sh("grep -E '^(CapEff|CapBnd|NoNewPrivs)' /proc/self/status"),
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
    // The spec's limits (cgroup v2 or v1 file names).
    let out = t
        .exec(
            &sb,
            &sh("cat /sys/fs/cgroup/pids.max 2>/dev/null || cat /sys/fs/cgroup/pids/pids.max; \
                 cat /sys/fs/cgroup/memory.max 2>/dev/null || cat /sys/fs/cgroup/memory/memory.limit_in_bytes"),
        )
        .await;
    let pids = if t.caps().pids_limit {
        "256".to_owned()
    } else {
        // The node's limit, whatever it is: only that there is one.
        text(&out.stdout)
            .lines()
            .next()
            .unwrap_or_default()
            .to_owned()
    };
    assert_ne!(pids, "max", "a sandbox's processes are limited");
    assert_eq!(text(&out.stdout), format!("{pids}\n{}\n", 512 << 20));
    t.finish().await;
}

pub async fn a_snapshot_keeps_the_filesystem_but_not_the_workspace_or_the_session_env(
    subject: impl Subject,
) {
    let mut t = Harness::new(subject).await;
    if t.caps().snapshots != SnapshotKind::Image {
        not_applicable("snapshots", "it takes no image snapshots");
        return t.finish().await;
    }
    let mut sp = t.spec(&session());
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
    assert!(t.backend.image_exists(&image).await.unwrap());

    let mut sp2 = t.spec(&session());
    sp2.image = image.clone();
    let restored = t.create(&sp2).await;
    let out = t
        .exec(
            &restored,
            &sh("cat /home/sandbox/marker; test -e /workspace/w || echo no workspace; echo \"[$SESSION_SECRET]\"; id -u"),
        )
        .await;
    // The workspace is not in the snapshot (the caller archives it).
    assert_eq!(text(&out.stdout), "kept\nno workspace\n[]\n1000\n");

    for s in t.backend.list().await.unwrap() {
        t.backend.remove(&s.id).await.unwrap();
    }
    t.backend.remove_image(&image).await.unwrap();
    t.backend.remove_image(&image).await.unwrap();
    let mut sp3 = t.spec(&session());
    sp3.image = image;
    assert!(matches!(
        t.backend.create(&sp3).await,
        Err(SandboxError::ImageMissing(_))
    ));
    t.finish().await;
}

/// A pooled sandbox is listed as the pool's (no session), and once assigned is found as the
/// session's sandbox would be: a later `create` for that session replaces it.
pub async fn a_pooled_sandbox_is_handed_to_a_session(subject: impl Subject) {
    let t = Harness::new(subject).await;
    if !t.caps().warm_pool {
        not_applicable("warm pool", "it has no warm pool");
        return t.finish().await;
    }
    let sp = t.spec(&session());
    let name = format!("sa-pool-{}", uuid::Uuid::new_v4().simple());
    let pooled = t.backend.create_pooled(&name, &sp).await.unwrap();
    let listed = t.backend.list().await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(
        (listed[0].session.as_deref(), listed[0].pool.as_deref()),
        (None, Some(sp.image.as_str())),
        "a pooled sandbox belongs to the pool of its image"
    );
    assert_eq!(t.exec(&pooled, &req(&["id", "-u"])).await.stdout, b"1000\n");

    let s = session();
    t.backend.assign(&pooled.id, &s).await.unwrap();
    assert!(
        t.backend
            .inspect(&pooled.id)
            .await
            .unwrap()
            .unwrap()
            .running
    );
    // The session's own boot after a crash replaces whatever holds its name.
    let own = t.create(&t.spec(&s)).await;
    assert_ne!(own.id, pooled.id);
    assert_eq!(t.backend.inspect(&pooled.id).await.unwrap(), None);
    t.finish().await;
}

/// What a sandbox writes, in its workspace or elsewhere, shows in `disk_usage`.
pub async fn disk_usage_counts_what_a_sandbox_writes(subject: impl Subject) {
    let t = Harness::new(subject).await;
    if !t.caps().disk_measurement {
        not_applicable("disk usage", "it does not measure disks");
        return t.finish().await;
    }
    let sb = t.create(&t.spec(&session())).await;
    let usage = |all: Vec<(String, u64)>| all.into_iter().find(|(id, _)| *id == sb.id);
    let before = usage(t.backend.disk_usage().await.unwrap())
        .expect("a running sandbox is measured")
        .1;
    let out = t
        .exec(
            &sb,
            &sh("head -c 3000000 /dev/urandom > /workspace/w.bin && head -c 2000000 /dev/urandom > /home/sandbox/h.bin"),
        )
        .await;
    assert_eq!(out.exit_code, 0, "{}", text(&out.stderr));
    let after = usage(t.backend.disk_usage().await.unwrap()).unwrap().1;
    assert!(
        after >= before + 5_000_000,
        "5 MB written, the measure went from {before} to {after}"
    );
    t.finish().await;
}

/// A snapshot taken while commands keep starting in the sandbox completes, and the sandbox
/// goes on answering. (A snapshot that froze the sandbox deadlocked with a command started
/// meanwhile, and the Engine behind it: every later removal hung.)
pub async fn a_snapshot_while_commands_start_completes(subject: impl Subject) {
    let mut t = Harness::new(subject).await;
    if t.caps().snapshots != SnapshotKind::Image {
        not_applicable("snapshots", "it takes no image snapshots");
        return t.finish().await;
    }
    let sb = t.create(&t.spec(&session())).await;
    let stop = std::sync::atomic::AtomicBool::new(false);
    let trivial = req(&["true"]);
    // At least one batch runs whatever the timing: a backend whose snapshot finishes in its
    // first poll (the in-memory one) would otherwise leave the loop before any command.
    let busy = async {
        loop {
            let batch = (0..4).map(|_| t.backend.exec(&sb.id, &trivial));
            for out in futures::future::join_all(batch).await {
                assert_eq!(out.expect("exec during the snapshot").exit_code, 0);
            }
            if stop.load(std::sync::atomic::Ordering::Relaxed) {
                break;
            }
        }
    };
    let name = format!("test-{}", uuid::Uuid::new_v4());
    let snapshot = async {
        let image = tokio::time::timeout(
            Duration::from_secs(60),
            t.backend.snapshot_image(&sb.id, &name),
        )
        .await;
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        image
    };
    // `busy` is polled first, so its first commands are in flight when the snapshot starts.
    let (_, image) = tokio::join!(busy, snapshot);
    let image = image
        .expect("the snapshot finished within 60 s while commands started")
        .unwrap();
    t.images.push(image.clone());
    assert_eq!(
        t.exec(&sb, &req(&["echo", "alive"])).await.stdout,
        b"alive\n"
    );
    t.backend.remove_image(&image).await.unwrap();
    t.finish().await;
}
