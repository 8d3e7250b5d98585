//! The daemon in-process, on one end of a socket pair, driven by the client on the other:
//! commands, their limits and their ends, background processes, terminals and files.

use bytes::Bytes;
use futures::StreamExt;
use sandboxd::client::{Client, ClientError, Stream};
use sandboxd::proto::{ErrorKind, ExecSpec, Frame, ProcessSpec, ProcessState, PtySize};
use std::sync::Arc;
use std::time::{Duration, Instant};

async fn connect(daemon: &Arc<sandboxd::daemon::Daemon>) -> Client {
    let (ours, theirs) = tokio::net::UnixStream::pair().unwrap();
    tokio::spawn(sandboxd::daemon::serve_connection(daemon.clone(), theirs));
    let (client, driver) = Client::handshake(ours).await.unwrap();
    tokio::spawn(driver);
    client
}

async fn daemon() -> (Arc<sandboxd::daemon::Daemon>, Client) {
    let daemon = Arc::new(sandboxd::daemon::Daemon::default());
    let client = connect(&daemon).await;
    (daemon, client)
}

fn spec(argv: &[&str]) -> ExecSpec {
    ExecSpec {
        argv: argv.iter().map(|s| (*s).to_owned()).collect(),
        timeout_ms: Some(30_000),
        ..Default::default()
    }
}

/// Runs to the end; (exit, stdout, stderr).
async fn run(
    client: &Client,
    spec: ExecSpec,
    stdin: Option<&'static [u8]>,
) -> (sandboxd::proto::ExitInfo, Vec<u8>, Vec<u8>) {
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let exit = client
        .run(spec, stdin.map(Bytes::from_static), |s, b| match s {
            Stream::Stdout => out.extend_from_slice(&b),
            Stream::Stderr => err.extend_from_slice(&b),
        })
        .await
        .unwrap();
    (exit, out, err)
}

/// Whether a process whose command line holds `needle` runs (zombies do not count).
fn running_with(needle: &str) -> bool {
    std::fs::read_dir("/proc").unwrap().flatten().any(|e| {
        let cmdline = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
        let stat = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
        let zombie = stat
            .rsplit(')')
            .next()
            .is_some_and(|s| s.trim_start().starts_with('Z'));
        !zombie
            && cmdline
                .split(|b| *b == 0)
                .any(|arg| arg == needle.as_bytes())
    })
}

async fn until(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_command_gives_its_exit_code_and_both_streams() {
    let (_d, client) = daemon().await;
    assert_eq!(
        client.hello().await.unwrap().protocol,
        sandboxd::proto::PROTOCOL
    );
    let (exit, out, err) = run(
        &client,
        spec(&["sh", "-c", "echo out; echo err >&2; exit 3"]),
        None,
    )
    .await;
    assert_eq!((exit.code, exit.timed_out), (3, false));
    assert_eq!(out, b"out\n");
    assert_eq!(err, b"err\n");
    let (exit, out, _) = run(&client, spec(&["cat"]), Some(b"piped in")).await;
    assert_eq!(exit.code, 0);
    assert_eq!(out, b"piped in");
}

#[tokio::test]
async fn a_missing_program_is_127_and_a_missing_directory_an_error() {
    let (_d, client) = daemon().await;
    let (exit, _, err) = run(&client, spec(&["no-such-program-x"]), None).await;
    assert_eq!(exit.code, 127);
    assert!(String::from_utf8_lossy(&err).contains("no-such-program-x"));
    let mut s = spec(&["true"]);
    s.cwd = Some("/no/such/dir".into());
    let e = client.run(s, None, |_, _| {}).await.unwrap_err();
    assert_eq!(e.kind(), Some(ErrorKind::NotFound), "{e}");
}

#[tokio::test]
async fn a_timeout_kills_the_whole_tree_and_says_124() {
    let (_d, client) = daemon().await;
    let mut s = spec(&[
        "sh",
        "-c",
        "sleep 31.1 & setsid sleep 31.2 & echo started; sleep 31.3",
    ]);
    s.timeout_ms = Some(300);
    let started = Instant::now();
    let (exit, out, _) = run(&client, s, None).await;
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!((exit.code, exit.timed_out), (124, true));
    assert_eq!(out, b"started\n");
    for needle in ["31.1", "31.2", "31.3"] {
        until(needle, || !running_with(needle)).await;
    }
}

#[tokio::test]
async fn output_over_the_limit_is_counted_and_dropped() {
    let (_d, client) = daemon().await;
    let mut s = spec(&["head", "-c", "300000", "/dev/zero"]);
    s.max_output = 1000;
    let (exit, out, _) = run(&client, s, None).await;
    assert_eq!(out.len(), 1000);
    assert!(exit.stdout_truncated);
    assert_eq!(exit.stdout_bytes, 300_000);
}

#[tokio::test]
async fn a_command_that_backgrounds_a_process_returns_when_it_exits() {
    let (_d, client) = daemon().await;
    let started = Instant::now();
    let (exit, out, _) = run(&client, spec(&["sh", "-c", "sleep 32.1 & echo done"]), None).await;
    assert_eq!((exit.code, out.as_slice()), (0, &b"done\n"[..]));
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    assert!(
        running_with("32.1"),
        "the background process is left running"
    );
    let _ = std::process::Command::new("pkill")
        .args(["-f", "sleep 32.1"])
        .status();
}

#[tokio::test]
async fn an_abandoned_command_is_killed() {
    let (_d, client) = daemon().await;
    let mut execution = client
        .exec(spec(&["sh", "-c", "sleep 33.1"]))
        .await
        .unwrap();
    assert!(matches!(
        execution.frames.next().await,
        Some(Ok(Frame::Started(_)))
    ));
    until("the command", || running_with("33.1")).await;
    drop(execution);
    until("the kill", || !running_with("33.1")).await;
}

/// A command's tree is what it started, not only what kept its group and its mark: a program
/// that left its session and cleared its environment, a background job on a terminal (job
/// control puts it in a group of its own) and an orphan of the terminal's session end with it.
#[tokio::test]
async fn an_abandoned_command_takes_what_left_its_group_and_mark_with_it() {
    let (_d, client) = daemon().await;
    let execution = client
        .exec(spec(&[
            "sh",
            "-c",
            "setsid env -u SA_EXEC sleep 33.2 & sleep 33.3",
        ]))
        .await
        .unwrap();
    until("the commands", || {
        running_with("33.2") && running_with("33.3")
    })
    .await;
    drop(execution);
    until("the kill", || {
        !running_with("33.2") && !running_with("33.3")
    })
    .await;

    let mut s = spec(&["bash", "--norc", "--noprofile", "-i"]);
    s.pty = Some(PtySize { rows: 24, cols: 80 });
    let mut execution = client.exec(s).await.unwrap();
    execution
        .input
        .send(Frame::Stdin(Bytes::from_static(
            b"env -u SA_EXEC sleep 33.4 & sh -c 'env -u SA_EXEC sleep 33.5 &'; echo started-$((1+1))\n",
        )))
        .await
        .unwrap();
    let mut seen = String::new();
    while !seen.contains("started-2") {
        match execution.frames.next().await {
            Some(Ok(Frame::Stdout(b))) => seen.push_str(&String::from_utf8_lossy(&b)),
            Some(Ok(_)) => {}
            other => panic!("the terminal ended: {other:?} after {seen:?}"),
        }
    }
    // 33.5 is an orphan by now (its `sh` exited): only its session ties it to the terminal.
    until("the jobs", || running_with("33.4") && running_with("33.5")).await;
    drop(execution);
    until("the jobs' kill", || {
        !running_with("33.4") && !running_with("33.5")
    })
    .await;
}

#[tokio::test]
async fn a_terminal_is_a_tty_of_the_size_asked_and_resizes() {
    let (_d, client) = daemon().await;
    let mut s = spec(&["sh", "-c", "stty size; read line; stty size"]);
    s.pty = Some(PtySize {
        rows: 30,
        cols: 100,
    });
    let mut execution = client.exec(s).await.unwrap();
    let mut seen = String::new();
    let mut resized = false;
    while let Some(frame) = execution.frames.next().await {
        match frame.unwrap() {
            Frame::Stdout(b) => seen.push_str(&String::from_utf8_lossy(&b)),
            Frame::Exit(exit) => {
                assert_eq!(exit.code, 0);
                break;
            }
            _ => {}
        }
        if seen.contains("30 100") && !resized {
            resized = true;
            let resize = Frame::Resize(PtySize {
                rows: 40,
                cols: 120,
            });
            execution.input.send(resize).await.unwrap();
            execution
                .input
                .send(Frame::Stdin(Bytes::from_static(b"go\n")))
                .await
                .unwrap();
        }
    }
    assert!(
        seen.contains("30 100") && seen.contains("40 120"),
        "{seen:?}"
    );
}

#[tokio::test]
async fn background_processes_outlive_their_connection() {
    let daemon = Arc::new(sandboxd::daemon::Daemon::default());
    let first = connect(&daemon).await;
    // It runs until the test says it may end (a file appears).
    let dir = tempfile::tempdir().unwrap();
    let go = dir.path().join("go");
    let script = format!(
        "echo hi; echo oops >&2; while [ ! -e {} ]; do sleep 0.01; done; exit 5",
        go.display()
    );
    let proc = first
        .start_process(&ProcessSpec {
            argv: vec!["sh".into(), "-c".into(), script],
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(proc.state, ProcessState::Running);
    drop(first);
    let second = connect(&daemon).await;
    let listed = second.processes().await.unwrap();
    assert!(listed
        .iter()
        .any(|p| p.id == proc.id && p.state == ProcessState::Running));
    std::fs::write(&go, b"").unwrap();
    let ended = second.wait_process(&proc.id, 10_000).await.unwrap();
    assert_eq!(
        (ended.state, ended.exit_code),
        (ProcessState::Exited, Some(5))
    );
    let detail = second.process(&proc.id).await.unwrap();
    assert_eq!(
        (detail.stdout.as_str(), detail.stderr.as_str()),
        ("hi\n", "oops\n")
    );

    let long = second
        .start_process(&ProcessSpec {
            argv: vec!["sleep".into(), "34.1".into()],
            ..Default::default()
        })
        .await
        .unwrap();
    let killed = second.kill_process(&long.id).await.unwrap();
    assert_eq!(killed.info.state, ProcessState::Exited);
    assert_eq!(killed.info.signal, Some(15));
    // A killed process is forgotten, and so is an exited one when it is killed.
    let gone = second.process(&long.id).await.unwrap_err();
    assert!(matches!(gone, ClientError::Daemon(ref b) if b.kind == ErrorKind::NotFound));
    let cleared = second.kill_process(&proc.id).await.unwrap();
    assert_eq!(
        (cleared.info.exit_code, cleared.stdout.as_str()),
        (Some(5), "hi\n")
    );
    let listed = second.processes().await.unwrap();
    assert!(
        listed.iter().all(|p| p.id != proc.id && p.id != long.id),
        "{listed:?}"
    );
    let missing = second.process("proc_nope").await.unwrap_err();
    assert!(matches!(missing, ClientError::Daemon(ref b) if b.kind == ErrorKind::NotFound));
}

#[tokio::test]
async fn files_travel_byte_for_byte() {
    let (_d, client) = daemon().await;
    let dir = tempfile::tempdir().unwrap();
    let path = format!("{}/sub/big.bin", dir.path().display());
    let data: Vec<u8> = (0..10 * 1024 * 1024u32)
        .map(|i| (i * 7 % 251) as u8)
        .collect();
    let chunks: Vec<std::io::Result<Bytes>> = data
        .chunks(100_000)
        .map(|c| Ok(Bytes::copy_from_slice(c)))
        .collect();
    let stat = client
        .write_file(
            &path,
            Some(0o600),
            true,
            futures::stream::iter(chunks).boxed(),
        )
        .await
        .unwrap();
    assert_eq!((stat.size, stat.mode), (data.len() as u64, 0o600));
    let (size, stream) = client.read_file(&path).await.unwrap();
    assert_eq!(size, Some(data.len() as u64));
    let back: Vec<Bytes> = stream.map(|c| c.unwrap()).collect().await;
    assert!(back.concat() == data, "the bytes differ");

    let listing = client
        .list_dir(&format!("{}/sub", dir.path().display()))
        .await
        .unwrap();
    assert_eq!(listing.entries.len(), 1);
    assert_eq!(listing.entries[0].name, "big.bin");
    let moved = format!("{}/moved.bin", dir.path().display());
    client.rename(&path, &moved).await.unwrap();
    assert!(client.stat(&path).await.is_err());
    client.remove(&moved, false).await.unwrap();
    let gone = client.read_file(&moved).await.err().unwrap();
    assert_eq!(gone.kind(), Some(ErrorKind::NotFound));
    let relative = client.stat("etc/passwd").await.unwrap_err();
    assert_eq!(relative.kind(), Some(ErrorKind::Invalid));
    let dir_read = client.read_file("/").await.err().unwrap();
    assert_eq!(dir_read.kind(), Some(ErrorKind::IsADirectory));
}

#[tokio::test]
async fn a_port_is_waited_for() {
    let (_d, client) = daemon().await;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    assert!(client.wait_port(port, 2_000).await.unwrap().open);
    drop(listener);
    let closed = client.wait_port(port, 100).await.unwrap();
    assert!(!closed.open);
}

#[tokio::test]
async fn a_malformed_exec_stream_closes_the_connection_but_not_the_daemon() {
    let daemon = Arc::new(sandboxd::daemon::Daemon::default());
    let client = connect(&daemon).await;
    let mut execution = client.exec(spec(&["sleep", "35.1"])).await.unwrap();
    assert!(matches!(
        execution.frames.next().await,
        Some(Ok(Frame::Started(_)))
    ));
    // A frame only a daemon sends, on the way in.
    execution.input.send(Frame::Started(1)).await.unwrap();
    until("the connection to close", || !client.is_open()).await;
    until("the command to be killed", || !running_with("35.1")).await;
    let again = connect(&daemon).await;
    let (exit, _, _) = run(&again, spec(&["true"]), None).await;
    assert_eq!(exit.code, 0);
}

/// A tar of `entries`: (path, contents or `None` for a directory, mode), paths taken as they
/// are (climbing ones included), and a symlink `link` to `link_to` when given.
fn tar_of(entries: &[(&str, Option<&[u8]>, u32)], link_to: Option<&str>) -> Bytes {
    let mut b = tar::Builder::new(Vec::new());
    for (path, data, mode) in entries {
        let mut h = tar::Header::new_gnu();
        let name = &mut h.as_gnu_mut().unwrap().name;
        name[..path.len()].copy_from_slice(path.as_bytes());
        h.set_mode(*mode);
        h.set_mtime(1_700_000_000);
        match data {
            Some(d) => {
                h.set_entry_type(tar::EntryType::Regular);
                h.set_size(d.len() as u64);
                h.set_cksum();
                b.append(&h, *d).unwrap();
            }
            None => {
                h.set_entry_type(tar::EntryType::Directory);
                h.set_size(0);
                h.set_cksum();
                b.append(&h, std::io::empty()).unwrap();
            }
        }
    }
    if let Some(target) = link_to {
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(tar::EntryType::Symlink);
        h.set_size(0);
        b.append_link(&mut h, "link", target).unwrap();
    }
    Bytes::from(b.into_inner().unwrap())
}

fn chunks_of(tar: Bytes) -> futures::stream::BoxStream<'static, std::io::Result<Bytes>> {
    let parts: Vec<std::io::Result<Bytes>> = tar
        .chunks(700)
        .map(|c| Ok(Bytes::copy_from_slice(c)))
        .collect();
    futures::stream::iter(parts).boxed()
}

#[tokio::test]
async fn an_archive_is_extracted_in_place_and_cannot_leave_its_directory() {
    use std::os::unix::fs::PermissionsExt;
    let (_d, client) = daemon().await;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().display().to_string();
    let tar = tar_of(
        &[
            ("src", None, 0o755),
            ("src/main.py", Some(b"print('hi')\n"), 0o644),
            ("run.sh", Some(b"#!/bin/sh\n"), 0o755),
        ],
        None,
    );
    let report = client.put_archive(&root, chunks_of(tar)).await.unwrap();
    assert_eq!((report.entries, report.bytes), (3, 22));
    assert_eq!(
        std::fs::read(dir.path().join("src/main.py")).unwrap(),
        b"print('hi')\n"
    );
    let mode = |p: &str| {
        std::fs::metadata(dir.path().join(p))
            .unwrap()
            .permissions()
            .mode()
            & 0o777
    };
    assert_eq!((mode("run.sh"), mode("src/main.py")), (0o755, 0o644));

    // A path that climbs out is refused, and nothing is written beside the directory.
    let inner = dir.path().join("inner");
    std::fs::create_dir(&inner).unwrap();
    let climbing = tar_of(&[("../escaped.txt", Some(b"x"), 0o644)], None);
    let refused = client
        .put_archive(&inner.display().to_string(), chunks_of(climbing))
        .await
        .unwrap_err();
    assert_eq!(refused.kind(), Some(ErrorKind::Invalid), "{refused}");
    assert!(!dir.path().join("escaped.txt").exists());

    // So is writing through a symlink that leads out of it.
    let outside = tempfile::tempdir().unwrap();
    let mut through = tar_of(&[], Some(&outside.path().display().to_string())).to_vec();
    through.truncate(through.len() - 1024); // drop the end-of-archive blocks
    through.extend_from_slice(&tar_of(&[("link/planted.txt", Some(b"x"), 0o644)], None));
    let refused = client
        .put_archive(
            &inner.display().to_string(),
            chunks_of(Bytes::from(through)),
        )
        .await
        .unwrap_err();
    assert_eq!(refused.kind(), Some(ErrorKind::Invalid), "{refused}");
    assert!(!outside.path().join("planted.txt").exists());

    // A missing directory, and something that is not an archive.
    let missing = client
        .put_archive(&format!("{root}/nope"), chunks_of(Bytes::new()))
        .await
        .unwrap_err();
    assert_eq!(missing.kind(), Some(ErrorKind::NotFound));
    let garbage = client
        .put_archive(&root, chunks_of(Bytes::from(vec![7u8; 2048])))
        .await
        .unwrap_err();
    assert_eq!(garbage.kind(), Some(ErrorKind::Invalid), "{garbage}");
}
