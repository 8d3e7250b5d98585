//! Conformance cases about commands: their results, deadlines, output caps, output as it is
//! written, and background processes.

use super::{not_applicable, req, session, sh, text, Harness, Subject};
use bytes::Bytes;
use sandbox_agents_sandbox::{OutputStream, SandboxError};
use std::time::{Duration, Instant};

pub async fn exit_codes_stdin_env_and_workdir(subject: impl Subject) {
    let t = Harness::new(subject).await;
    let sb = t.create(&t.spec(&session())).await;
    let daemon = t.caps().daemon;
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

pub async fn a_timeout_kills_the_command_tree_not_the_sandbox(subject: impl Subject) {
    let t = Harness::new(subject).await;
    let sb = t.create(&t.spec(&session())).await;

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

pub async fn output_beyond_the_cap_is_drained(subject: impl Subject) {
    let t = Harness::new(subject).await;
    let sb = t.create(&t.spec(&session())).await;
    let mut r = sh("head -c 1000000 /dev/zero; echo done >&2");
    r.max_output = 1000;
    let out = t.exec(&sb, &r).await;
    assert_eq!(out.exit_code, 0);
    assert_eq!(out.stdout.len(), 1000);
    assert!(out.stdout_truncated);
    assert_eq!((text(&out.stderr), out.stderr_truncated), ("done\n", false));
    t.finish().await;
}

/// `exec_streaming` hands over what the output holds, capped as `exec` caps it; with the
/// daemon, the first chunk arrives while the command still runs.
pub async fn output_streams_as_it_is_written(subject: impl Subject) {
    let t = Harness::new(subject).await;
    let sb = t.create(&t.spec(&session())).await;
    let mut r = sh("echo first; echo oops >&2; sleep 2; echo second");
    r.max_output = 1 << 10;
    let started = Instant::now();
    let (mut stdout, mut stderr, mut first_at) = (Vec::new(), Vec::new(), None);
    let out = t
        .backend
        .exec_streaming(&sb.id, &r, &mut |stream, chunk| {
            first_at.get_or_insert_with(|| started.elapsed());
            match stream {
                OutputStream::Stdout => stdout.extend_from_slice(chunk),
                OutputStream::Stderr => stderr.extend_from_slice(chunk),
            }
        })
        .await
        .unwrap();
    assert_eq!(out.exit_code, 0);
    assert_eq!(
        (text(&stdout), text(&stderr)),
        ("first\nsecond\n", "oops\n")
    );
    assert_eq!(
        (out.stdout, out.stderr),
        (stdout, stderr),
        "the chunks are the output"
    );
    if t.caps().daemon {
        let first = first_at.unwrap();
        assert!(
            first < Duration::from_millis(1500),
            "the first line came {first:?} after the start, with the command's end"
        );
    }
    t.finish().await;
}

/// Background processes through the sandbox's daemon: started, listed, waited for, their
/// output read, and a killed one ends its tree.
pub async fn background_processes_through_the_daemon(subject: impl Subject) {
    let t = Harness::new(subject).await;
    if !t.caps().daemon {
        not_applicable("background processes", "its sandboxes have no daemon");
        return t.finish().await;
    }
    let sb = t.create(&t.spec(&session())).await;
    let daemon = t.backend.daemon(&sb.id).await.expect("the daemon answers");
    let spec = |argv: &[&str]| sandbox_agents_sandbox::sandboxd::proto::ProcessSpec {
        argv: argv.iter().map(|s| s.to_string()).collect(),
        cwd: None,
        env: vec![("WHO".into(), "conformance".into())],
    };

    let quick = daemon
        .start_process(&spec(&["sh", "-c", "echo \"hello $WHO\"; exit 7"]))
        .await
        .unwrap();
    assert_eq!(quick.cwd, "/workspace");
    let ended = daemon.wait_process(&quick.id, 10_000).await.unwrap();
    assert_eq!(ended.exit_code, Some(7));
    let detail = daemon.process(&quick.id).await.unwrap();
    assert_eq!(detail.stdout, "hello conformance\n");

    let slow = daemon
        .start_process(&spec(&["sh", "-c", "sleep 201 & sleep 202"]))
        .await
        .unwrap();
    let listed = daemon.processes().await.unwrap();
    assert!(listed.iter().any(|p| p.id == slow.id), "{listed:?}");
    let killed = daemon.kill_process(&slow.id).await.unwrap();
    assert!(killed.info.exit_code.is_some(), "{killed:?}");
    let out = t.exec(&sb, &req(&["pgrep", "-f", "sleep 20[12]"])).await;
    assert_eq!(out.exit_code, 1, "still running: {}", text(&out.stdout));
    t.finish().await;
}
