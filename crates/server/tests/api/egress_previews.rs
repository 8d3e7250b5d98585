//! Exposed ports and previews of a sandbox behind the egress proxy (issue 36): it has no
//! network but loopback and publishes nothing, so its ports are reached through its daemon
//! (a tunnel to the port on the sandbox's loopback), HTTP and WebSocket alike.

use crate::egress::{app, builder, docker, TestNetwork};
use sandbox_agents_testkit::{eventually, TestApp};
use serde_json::{json, Value};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A WebSocket server from the standard library, on loopback only: the handshake, then it
/// echoes one short text frame.
const WS_PY: &str = r#"import socket, hashlib, base64
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(('127.0.0.1', 8001))
s.listen()
while True:
    c, _ = s.accept()
    head = b''
    while b'\r\n\r\n' not in head:
        got = c.recv(4096)
        if not got:
            break
        head += got
    keys = [l.split(b':', 1)[1].strip() for l in head.split(b'\r\n') if l.lower().startswith(b'sec-websocket-key:')]
    if not keys:
        c.close()
        continue
    accept = base64.b64encode(hashlib.sha1(keys[0] + b'258EAFA5-E914-47DA-95CA-C5AB0DC85B11').digest())
    c.sendall(b'HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ' + accept + b'\r\n\r\n')
    frame = c.recv(2 + 4 + 125)
    n, mask = frame[1] & 127, frame[2:6]
    text = bytes(b ^ mask[i % 4] for i, b in enumerate(frame[6:6 + n]))
    c.sendall(bytes([0x81, n]) + text)
    c.recv(1)
    c.close()
"#;

/// The preview URL of `port` (`GET /api/sessions/{id}/ports/{port}`).
async fn preview_url(app: &TestApp, id: &str, port: u16) -> String {
    let (status, p) = app
        .get_json(&format!("/api/sessions/{id}/ports/{port}"))
        .await;
    assert_eq!(status, 200, "{p}");
    p["url"].as_str().unwrap().to_owned()
}

/// GETs `url` until it answers 200; its body.
async fn body_of(app: &TestApp, url: &str) -> String {
    eventually(
        &format!("{url} to answer 200"),
        Duration::from_secs(20),
        async || {
            let r = app.http.get(url).send().await.unwrap();
            let status = r.status();
            let text = r.text().await.unwrap();
            if status == 200 {
                Ok(text)
            } else {
                Err(format!("{status}: {text}"))
            }
        },
    )
    .await
}

#[tokio::test]
async fn a_sandbox_behind_the_proxy_serves_its_exposed_ports_through_previews() {
    let net = TestNetwork::start("previews").await;
    let app = app(&net).await;
    let id = app
        .running_session("egress-previews", json!({"exposed_ports": [8000, 8001]}))
        .await;
    // Booted with its ports exposed, yet confined: no network, nothing published.
    let (_, s) = app.get_json(&format!("/api/sessions/{id}")).await;
    let container = s["container_id"].as_str().unwrap().to_owned();
    assert_eq!(
        docker(&["inspect", "-f", "{{.HostConfig.NetworkMode}}", &container]),
        "none"
    );
    assert_eq!(docker(&["port", &container]), "");

    // Nothing listens yet: the same answer as for a published port.
    let url = preview_url(&app, &id, 8000).await;
    let r = app.http.get(&url).send().await.unwrap();
    assert_eq!(r.status(), 502);
    let v: Value = r.json().await.unwrap();
    assert_eq!(
        v["detail"],
        "nothing is listening on port 8000 in the sandbox"
    );

    let serve = "mkdir -p /workspace/site && cd /workspace/site && echo hi > hello.txt \
                 && yes abcdefgh | head -c 1000000 > big.txt \
                 && nohup python3 -m http.server 8000 >/dev/null 2>&1 &";
    assert_eq!(app.exec(&id, serve).await.0, 0);
    let listing = body_of(&app, &url).await;
    assert!(listing.contains("Directory listing"), "{listing}");
    assert!(listing.contains("hello.txt"), "{listing}");
    assert_eq!(body_of(&app, &format!("{url}hello.txt")).await, "hi\n");
    // A body larger than any window or buffer on the way streams whole.
    let big = body_of(&app, &format!("{url}big.txt?x=1")).await;
    assert_eq!(big.len(), 1_000_000);
    assert!(big.starts_with("abcdefgh\nabcdefgh\n"));

    // WebSockets: the upgrade and frames go through the tunnel too.
    let script =
        format!("cat > /tmp/ws.py <<'EOF'\n{WS_PY}EOF\nnohup python3 /tmp/ws.py >/dev/null 2>&1 &");
    assert_eq!(app.exec(&id, &script).await.0, 0);
    let ws = preview_url(&app, &id, 8001).await;
    let path = format!("{}ws", ws.strip_prefix(&app.preview_base).unwrap());
    let addr = app.preview_base.strip_prefix("http://").unwrap().to_owned();
    let (mut sock, head) = eventually(
        "the WebSocket handshake through the preview",
        Duration::from_secs(20),
        async || {
            let mut sock = tokio::net::TcpStream::connect(&addr).await.unwrap();
            let req = format!(
                "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: Upgrade\r\n\
                 Upgrade: websocket\r\nSec-WebSocket-Version: 13\r\n\
                 Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"
            );
            sock.write_all(req.as_bytes()).await.unwrap();
            let mut head = Vec::new();
            while !head.ends_with(b"\r\n\r\n") {
                let mut byte = [0u8; 1];
                if sock.read(&mut byte).await.unwrap() == 0 {
                    break;
                }
                head.push(byte[0]);
            }
            let head = String::from_utf8(head).unwrap();
            if head.starts_with("HTTP/1.1 101") {
                Ok((sock, head))
            } else {
                Err(format!("no WebSocket handshake: {head}"))
            }
        },
    )
    .await;
    assert!(
        head.to_ascii_lowercase()
            .contains("sec-websocket-accept: s3pplmbitxaq9kygzzhzrbk+xoo="),
        "{head}"
    );
    let mask = [1u8, 2, 3, 4];
    let mut frame = vec![0x81, 0x80 | 5];
    frame.extend_from_slice(&mask);
    frame.extend(b"hello".iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
    sock.write_all(&frame).await.unwrap();
    let mut echoed = [0u8; 7];
    tokio::time::timeout(Duration::from_secs(10), sock.read_exact(&mut echoed))
        .await
        .expect("the echo arrived in time")
        .unwrap();
    assert_eq!(&echoed, b"\x81\x05hello");
}

#[tokio::test]
async fn behind_the_proxy_a_session_with_exposed_ports_boots_from_the_warm_pool() {
    let net = TestNetwork::start("previews-pool").await;
    let app = builder(&net).with_pool(1).with_pool_worker().spawn().await;
    let waiting: String = eventually("a pooled sandbox", Duration::from_secs(90), async || {
        sqlx::query_scalar::<_, String>(
            "select sandbox_id from sandbox_pool where sandbox_id is not null",
        )
        .fetch_optional(&app.db)
        .await
        .unwrap()
        .ok_or_else(|| "none yet".to_owned())
    })
    .await;
    let id = app
        .running_session("egress-pooled-ports", json!({"exposed_ports": [8000]}))
        .await;
    // Its ports need nothing published, so the pooled sandbox serves the session.
    let (_, s) = app.get_json(&format!("/api/sessions/{id}")).await;
    assert_eq!(s["container_id"], waiting.as_str(), "{s}");
    let serve = "mkdir -p /workspace/p && cd /workspace/p && echo pooled > a.txt \
                 && nohup python3 -m http.server 8000 >/dev/null 2>&1 &";
    assert_eq!(app.exec(&id, serve).await.0, 0);
    let url = preview_url(&app, &id, 8000).await;
    assert_eq!(body_of(&app, &format!("{url}a.txt")).await, "pooled\n");
}
