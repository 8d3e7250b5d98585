//! Ports: a service on the sandbox's loopback reached through the backend
//! (`SandboxBackend::connect_port`), which is how exposed ports of a sandbox without an
//! address of its own (behind the egress proxy) are served.

use super::{not_applicable, session, text, Harness, Subject};
use sandbox_agents_sandbox::sandboxd::proto::ProcessSpec;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Echoes what each connection sends on 127.0.0.1 (loopback only: no address outside the
/// sandbox reaches it) until its EOF, then writes `bye` and closes it; one at a time (the
/// daemon's wait for the port is a connection too).
const ECHO: &str = "import socket
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(('127.0.0.1', 7000))
s.listen()
while True:
    c, _ = s.accept()
    while True:
        d = c.recv(65536)
        if not d:
            break
        c.sendall(d)
    try:
        c.sendall(b'bye')
    except OSError:
        pass
    c.close()
";

/// Nothing listening is `None` (not an error); with a daemon, a service bound to loopback
/// only answers both ways and sees the caller's half-close.
pub async fn a_service_on_the_sandbox_loopback_is_reached_through_the_backend(
    subject: impl Subject,
) {
    let t = Harness::new(subject).await;
    let sb = t.create(&t.spec(&session())).await;
    match t.backend.connect_port(&sb.id, 7001).await {
        Ok(None) => {}
        Ok(Some(_)) => panic!("a port nothing listens on was connected"),
        // Without a daemon there may be no way in at all; with one, there is.
        Err(e) => assert!(!t.caps().daemon, "the daemon should have answered: {e}"),
    }
    if !t.caps().daemon {
        not_applicable("a service on the loopback", "its sandboxes have no daemon");
        return t.finish().await;
    }
    let daemon = t.backend.daemon(&sb.id).await.expect("the daemon answers");
    let server = daemon
        .start_process(&ProcessSpec {
            argv: vec!["python3".into(), "-c".into(), ECHO.into()],
            cwd: None,
            env: Vec::new(),
        })
        .await
        .unwrap();
    let up = daemon.wait_port(7000, 20_000).await.unwrap();
    if !up.open {
        let detail = daemon.process(&server.id).await.unwrap();
        panic!("the echo server never listened: {}", detail.stderr);
    }
    let mut io = t
        .backend
        .connect_port(&sb.id, 7000)
        .await
        .unwrap()
        .expect("the echo server listens");
    io.write_all(b"ping").await.unwrap();
    let mut back = [0u8; 4];
    io.read_exact(&mut back).await.unwrap();
    assert_eq!(&back, b"ping");
    io.shutdown().await.unwrap();
    let mut rest = Vec::new();
    io.read_to_end(&mut rest).await.unwrap();
    assert_eq!(text(&rest), "bye");
    t.finish().await;
}
