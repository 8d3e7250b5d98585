//! Tunnels to a port on the sandbox's loopback (`POST /v1/ports/{port}/connect`), with the
//! daemon in-process on one end of a socket pair and the client on the other: bytes both
//! ways at once, half-close each way, a port nothing listens on, and the cap on open tunnels.

use sandboxd::client::{Client, ClientError};
use sandboxd::proto::{ErrorKind, MAX_TUNNELS};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

async fn daemon() -> Client {
    let daemon = Arc::new(sandboxd::daemon::Daemon::default());
    let (ours, theirs) = tokio::net::UnixStream::pair().unwrap();
    tokio::spawn(sandboxd::daemon::serve_connection(daemon, theirs));
    let (client, driver) = Client::handshake(ours).await.unwrap();
    tokio::spawn(driver);
    client
}

/// A server on loopback that echoes every chunk it reads, then, at EOF, writes `bye` and
/// closes: what it sends after the client's half-close shows the other direction still works.
async fn echo_server() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        loop {
            let (mut socket, _) = listener.accept().await.unwrap();
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                loop {
                    match socket.read(&mut buf).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => socket.write_all(&buf[..n]).await.unwrap(),
                    }
                }
                let _ = socket.write_all(b"bye").await;
            });
        }
    });
    port
}

#[tokio::test]
async fn bytes_go_both_ways_and_a_half_close_reaches_the_service() {
    let client = daemon().await;
    let port = echo_server().await;
    let mut tunnel = client.connect_port(port).await.unwrap();
    // Full duplex: each write is answered before the next is sent.
    for word in [&b"ping"[..], b"pong", &[7u8; 100_000]] {
        tunnel.write_all(word).await.unwrap();
        let mut back = vec![0u8; word.len()];
        tunnel.read_exact(&mut back).await.unwrap();
        assert_eq!(back, word);
    }
    // Shutting our side is the service's EOF; its answer after that still arrives, and its
    // close ends what we read.
    tunnel.shutdown().await.unwrap();
    let mut rest = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), tunnel.read_to_end(&mut rest))
        .await
        .expect("the service saw EOF and closed")
        .unwrap();
    assert_eq!(rest, b"bye");
}

#[tokio::test]
async fn a_service_that_closes_first_ends_the_read_side_only() {
    let client = daemon().await;
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let served = tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.unwrap();
        socket.write_all(b"hello").await.unwrap();
        socket.shutdown().await.unwrap();
        // The other direction is still open: what the client sends after our EOF arrives.
        let mut got = Vec::new();
        socket.read_to_end(&mut got).await.unwrap();
        got
    });
    let mut tunnel = client.connect_port(port).await.unwrap();
    let mut greeting = Vec::new();
    tunnel.read_to_end(&mut greeting).await.unwrap();
    assert_eq!(greeting, b"hello");
    tunnel.write_all(b"late").await.unwrap();
    tunnel.shutdown().await.unwrap();
    let got = tokio::time::timeout(Duration::from_secs(10), served)
        .await
        .expect("the client's half-close reached the service")
        .unwrap();
    assert_eq!(got, b"late");
}

#[tokio::test]
async fn a_port_nothing_listens_on_is_not_found_with_the_port_named() {
    let client = daemon().await;
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let refused = client.connect_port(port).await.err().expect("refused");
    assert_eq!(refused.kind(), Some(ErrorKind::NotFound), "{refused}");
    assert!(
        refused
            .to_string()
            .contains(&format!("nothing is listening on port {port}")),
        "{refused}"
    );
    let zero = client.connect_port(0).await.err().expect("port 0 refused");
    assert_eq!(zero.kind(), Some(ErrorKind::Invalid), "{zero}");
}

#[tokio::test]
async fn the_daemons_own_way_out_is_never_a_tunnels_end() {
    let client = daemon().await;
    for port in [3128, 53] {
        let refused = client.connect_port(port).await.err().expect("refused");
        assert_eq!(
            refused.kind(),
            Some(ErrorKind::PermissionDenied),
            "{refused}"
        );
        assert!(refused.to_string().contains("egress proxy"), "{refused}");
    }
}

/// A server that accepts connections and never reads, writes or closes them.
async fn silent_server() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            held.push(socket);
        }
    });
    port
}

#[tokio::test]
async fn tunnels_beyond_the_cap_are_refused_and_other_calls_still_run() {
    let client = daemon().await;
    // A service that never closes: a dropped tunnel is released all the same.
    let port = silent_server().await;
    let mut open = Vec::new();
    for _ in 0..MAX_TUNNELS {
        open.push(client.connect_port(port).await.unwrap());
    }
    let over = client.connect_port(port).await.err().expect("over the cap");
    assert!(
        matches!(&over, ClientError::Daemon(b) if b.kind == ErrorKind::TooLarge),
        "{over}"
    );
    assert!(over.to_string().contains("close one"), "{over}");
    // The connection they share still carries the control plane's other calls.
    client.hello().await.unwrap();
    // A closed tunnel makes room once the daemon has seen it go (its stream reset).
    drop(open.pop());
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut again = loop {
        match client.connect_port(port).await {
            Ok(t) => break t,
            Err(e) if e.kind() == Some(ErrorKind::TooLarge) => {
                assert!(
                    Instant::now() < deadline,
                    "the closed tunnel was never released"
                );
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(e) => panic!("{e}"),
        }
    };
    again.write_all(b"x").await.unwrap();
}
