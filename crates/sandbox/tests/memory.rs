//! What only the in-memory backend does (the conformance suite in `backends.rs` holds it to
//! the trait): its interpreter's subset of `sh`, commands a test scripts, system files, and
//! deployments sharing one plane.

mod support;

use bytes::Bytes;
use futures::TryStreamExt;
use sandbox_agents_sandbox::memory::{MemoryBackend, BASE_IMAGE};
use sandbox_agents_sandbox::{ExecOutput, Sandbox, SandboxBackend, SandboxError};
use std::time::Duration;
use support::{req, session, sh, spec_of, text};

async fn sandbox(backend: &MemoryBackend) -> Sandbox {
    backend
        .create(&spec_of(BASE_IMAGE.into(), &session()))
        .await
        .unwrap()
}

async fn run(backend: &MemoryBackend, sb: &Sandbox, script: &str) -> (i64, String, String) {
    let out = backend.exec(&sb.id, &sh(script)).await.unwrap();
    (
        out.exit_code,
        text(&out.stdout).to_owned(),
        text(&out.stderr).to_owned(),
    )
}

#[tokio::test]
async fn scripts_chain_redirect_and_expand_like_sh() {
    let b = MemoryBackend::new("test");
    let sb = sandbox(&b).await;
    let cases: &[(&str, (i64, &str, &str))] = &[
        ("false && echo no || echo yes", (0, "yes\n", "")),
        ("true || echo no; echo $?", (0, "0\n", "")),
        ("X='a b'; echo \"[$X]\" [$X]", (0, "[a b] [a b]\n", "")),
        (
            "echo one > f; echo two >> f; cat < f | wc -l",
            (0, "2\n", ""),
        ),
        ("echo out 2>&1 >/dev/null; echo err 1>&2", (0, "", "err\n")),
        (
            "mkdir -p a/b && cd a/b && pwd && touch x && ls",
            (0, "/workspace/a/b\nx\n", ""),
        ),
        ("printf '%s=%d\\n' a 1 b 2", (0, "a=1\nb=2\n", "")),
        (
            "printf 'x\\ny\\nz\\n' > l; head -n 2 l; tail -n 1 l; tail -c 2 l",
            (0, "x\ny\nz\nz\n", ""),
        ),
        (
            "echo hi > f2; cp f2 f3; mv f3 f4; test -f f3 || cat f4; rm f2 f4; ls f2",
            (
                1,
                "hi\n",
                "ls: cannot access 'f2': No such file or directory\n",
            ),
        ),
        (
            "[ -d /tmp ] && [ ! -e /nope ] && [ 3 -gt 2 ] && echo ok",
            (0, "ok\n", ""),
        ),
        (
            "sh -c 'echo \"$0 $1\"; exit 4' me you; echo $?",
            (0, "me you\n4\n", ""),
        ),
        (
            "env A=1 env | grep -v x",
            (127, "", "sh: grep: not found\n"),
        ),
        ("nope", (127, "", "sh: nope: not found\n")),
        (
            "echo hi > /etc/hosts",
            (1, "", "sh: cannot create /etc/hosts: Permission denied\n"),
        ),
        (
            "if true; then echo; fi",
            (
                2,
                "",
                "sh: `if` is not supported by the in-memory backend's shell\n",
            ),
        ),
    ];
    for (script, want) in cases {
        let (code, out, err) = run(&b, &sb, script).await;
        assert_eq!((code, out.as_str(), err.as_str()), *want, "{script}");
    }
}

#[tokio::test]
async fn a_scripted_command_answers_for_the_exec_or_for_a_command_of_a_script() {
    let b = MemoryBackend::new("test");
    let sb = sandbox(&b).await;
    b.on_command(&["git", "status"], |call| ExecOutput {
        exit_code: 0,
        stdout: format!("clean in {} ({} bytes in)\n", call.cwd, call.stdin.len()).into_bytes(),
        ..Default::default()
    });
    b.on_command(&["sh", "-c", "pytest -q"], |_| ExecOutput {
        exit_code: 1,
        stderr: b"1 failed\n".to_vec(),
        ..Default::default()
    });
    let (code, out, _) = run(&b, &sb, "echo abc | git status --short && echo after").await;
    assert_eq!(
        (code, out.as_str()),
        (0, "clean in /workspace (4 bytes in)\nafter\n")
    );
    let (code, _, err) = run(&b, &sb, "pytest -q").await;
    assert_eq!((code, err.as_str()), (1, "1 failed\n"));
    // Unscripted, git is no command of the interpreter's.
    assert_eq!(run(&b, &sb, "git log").await.0, 127);
}

#[tokio::test]
async fn system_files_are_roots_and_stopped_sandboxes_keep_their_files() {
    let b = MemoryBackend::new("test");
    let sb = sandbox(&b).await;
    b.put_system_file(
        &sb.id,
        "/usr/local/share/ca/extra.crt",
        Bytes::from_static(b"CERT"),
        0o644,
    )
    .await
    .unwrap();
    let (code, out, _) = run(&b, &sb, "stat -c '%U %a %s' /usr/local/share/ca/extra.crt /usr/local/share/ca; rm /usr/local/share/ca/extra.crt").await;
    assert_eq!((code, out.as_str()), (1, "root 644 4\nroot 755 0\n"));
    b.remove_system_path(&sb.id, "/usr/local/share/ca")
        .await
        .unwrap();
    b.remove_system_path(&sb.id, "/usr/local/share/ca")
        .await
        .unwrap();
    assert_eq!(run(&b, &sb, "test -e /usr/local/share/ca").await.0, 1);

    run(&b, &sb, "echo kept > k").await;
    b.stop(&sb.id, Duration::ZERO).await.unwrap();
    assert!(matches!(
        b.exec(&sb.id, &req(&["true"])).await,
        Err(SandboxError::Backend(_))
    ));
    let tar: Vec<Bytes> = b
        .get_archive(&sb.id, "/workspace/k")
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    let tar = tar.concat();
    let mut archive = tar::Archive::new(&tar[..]);
    let names: Vec<String> = archive
        .entries()
        .unwrap()
        .map(|e| e.unwrap().path().unwrap().display().to_string())
        .collect();
    assert_eq!(names, ["k"]);
}

#[tokio::test]
async fn deployments_on_one_plane_see_their_own_sandboxes() {
    let a = MemoryBackend::new("a");
    let other = a.for_deployment("b");
    let sa = sandbox(&a).await;
    let sb = sandbox(&other).await;
    let ids = |l: Vec<sandbox_agents_sandbox::ListedSandbox>| {
        l.into_iter().map(|s| s.id).collect::<Vec<_>>()
    };
    assert_eq!(ids(a.list().await.unwrap()), [sa.id.as_str()]);
    assert_eq!(ids(other.list().await.unwrap()), [sb.id.as_str()]);
    // One plane: a sandbox is reachable by its id from either, as on one Docker Engine.
    assert_eq!(run(&other, &sa, "echo hi").await.1, "hi\n");
    assert!(a.image_exists(BASE_IMAGE).await.unwrap());
    assert!(!a.image_exists("elsewhere:1").await.unwrap());
    let named = a.clone().with_image("elsewhere:1");
    assert!(
        other.image_exists("elsewhere:1").await.unwrap()
            && named.image_exists("elsewhere:1").await.unwrap()
    );
}
