//! Port previews: `GET …/ports/{port}` and the `/preview/{token}/` proxy, on real sandboxes.

use sandbox_agents_testkit::{eventually, TestApp};
use serde_json::{json, Value};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const BOOT: Duration = Duration::from_secs(60);

/// Echoes a POST body, and reports what the proxy told it in headers.
const ECHO_PY: &str = r#"import http.server
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get('Content-Length') or 0))
        self.send_response(200)
        self.send_header('Content-Length', str(len(body)))
        for h in ('Host', 'X-Forwarded-Prefix', 'Authorization', 'Cookie'):
            self.send_header('X-Seen-' + h, self.headers.get(h, '-'))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
http.server.ThreadingHTTPServer(('', 8081), H).serve_forever()
"#;

/// A WebSocket server from the standard library on `port` (every address, loopback
/// included): the handshake, then it echoes one short text frame.
pub(crate) fn ws_echo_server(port: u16) -> String {
    format!(
        r#"import socket, hashlib, base64
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(('', {port}))
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
"#
    )
}

/// A WebSocket handshake through the preview at `ws_url` (retried until the server in the
/// sandbox answers it), then one masked text frame echoed back: what the proxy must carry
/// both ways after the upgrade.
pub(crate) async fn websocket_echoes_through(app: &TestApp, ws_url: &str) {
    let path = format!("{}ws", ws_url.strip_prefix(&app.preview_base).unwrap());
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

async fn session_of(app: &TestApp, agent: &str) -> String {
    let s = app
        .create_session(
            json!({"agent_id": agent, "title": "t", "model": null, "instructions": null,
            "manifest": null, "from_snapshot_id": null, "environment_id": null, "prompt": null}),
        )
        .await;
    s["id"].as_str().unwrap().to_owned()
}

async fn preview(app: &TestApp, id: &str, port: u16) -> reqwest::Response {
    app.http
        .get(app.url(&format!("/api/sessions/{id}/ports/{port}")))
        .send()
        .await
        .unwrap()
}

pub(crate) async fn preview_url(app: &TestApp, id: &str, port: u16) -> String {
    let r = preview(app, id, port).await;
    assert_eq!(r.status(), 200);
    let p: Value = r.json().await.unwrap();
    assert_eq!(p["port"], port);
    p["url"].as_str().unwrap().to_owned()
}

/// GETs `url` until it answers 200 with `body` (the server in the sandbox takes a moment).
async fn wait_for_body(app: &TestApp, url: &str, body: &str) {
    eventually(
        &format!("{url} to answer {body:?}"),
        Duration::from_secs(20),
        async || {
            let r = app.http.get(url).send().await.unwrap();
            let status = r.status();
            let text = r.text().await.unwrap();
            if status == 200 && text == body {
                Ok(())
            } else {
                Err(format!("{status}: {text}"))
            }
        },
    )
    .await
}

async fn detail(r: reqwest::Response) -> (u16, String) {
    let status = r.status().as_u16();
    let v: Value = r.json().await.unwrap();
    (status, v["detail"].as_str().unwrap_or_default().to_owned())
}

/// The token in a preview URL, split into (session, port, mac).
fn token_parts(url: &str) -> (String, String, String) {
    let token = url.trim_end_matches('/').rsplit('/').next().unwrap();
    let p: Vec<&str> = token.split('-').collect();
    assert_eq!(p.len(), 3, "{token}");
    (p[0].into(), p[1].into(), p[2].into())
}

#[tokio::test]
async fn a_preview_url_reaches_the_exposed_port_of_its_own_session_only() {
    let app = TestApp::builder().spawn().await;
    app.create_agent("previewer", json!({"exposed_ports": [8080, 8081, 8082]}))
        .await;
    let (a, b) = (
        session_of(&app, "previewer").await,
        session_of(&app, "previewer").await,
    );
    app.wait_for_status(&a, "running", BOOT).await;
    app.wait_for_status(&b, "running", BOOT).await;

    // Not exposed, unknown session.
    assert_eq!(
        detail(preview(&app, &a, 9999).await).await,
        (404, "port 9999 is not exposed".into())
    );
    let nobody = uuid::Uuid::now_v7();
    assert_eq!(preview(&app, &nobody.to_string(), 8080).await.status(), 404);

    // Nothing listens yet: 502, and the request still counts as use of the session.
    sqlx::query("update sessions set last_used_at = now() - interval '1 hour' where id = $1::uuid")
        .bind(&a)
        .execute(&app.db)
        .await
        .unwrap();
    let url = preview_url(&app, &a, 8080).await;
    assert!(
        url.starts_with(&format!("{}/preview/", app.preview_base)),
        "{url}"
    );
    assert!(url.ends_with('/'), "{url}");
    assert_eq!(
        detail(app.http.get(&url).send().await.unwrap()).await,
        (
            502,
            "nothing is listening on port 8080 in the sandbox".into()
        )
    );
    let (recent,): (bool,) = sqlx::query_as(
        "select last_used_at > now() - interval '1 minute' from sessions where id = $1::uuid",
    )
    .bind(&a)
    .fetch_one(&app.db)
    .await
    .unwrap();
    assert!(recent, "a proxied request touches last_used_at");

    let serve = |text: &str| {
        format!("cd /workspace && echo {text} > index.html && mkdir -p sub && echo deep > sub/page.txt \
                 && nohup python3 -m http.server 8080 >/dev/null 2>&1 &")
    };
    assert_eq!(app.exec(&a, &serve("hello")).await.0, 0);
    assert_eq!(app.exec(&b, &serve("other")).await.0, 0);
    wait_for_body(&app, &url, "hello\n").await;
    wait_for_body(&app, &format!("{url}sub/page.txt?x=1&y=%20"), "deep\n").await;
    let url_b = preview_url(&app, &b, 8080).await;
    wait_for_body(&app, &url_b, "other\n").await;
    assert_ne!(url, url_b);

    // Redirects stay under the preview prefix; the bare token URL gains its slash.
    let no_redirects = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let prefix = url
        .strip_prefix(&app.preview_base)
        .unwrap()
        .trim_end_matches('/');
    let r = no_redirects
        .get(format!("{url}sub?x=1"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 301);
    assert_eq!(
        r.headers()["location"],
        format!("{prefix}/sub/?x=1").as_str()
    );
    let r = no_redirects
        .get(url.trim_end_matches('/'))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 308);
    assert_eq!(r.headers()["location"], format!("{prefix}/").as_str());

    // Tampered tokens: one character of the MAC, another port, another session.
    let (session, port, mac) = token_parts(&url);
    let (session_b, _, _) = token_parts(&url_b);
    let flipped = format!(
        "{}{}",
        &mac[..mac.len() - 1],
        if mac.ends_with('0') { '1' } else { '0' }
    );
    for token in [
        format!("{session}-{port}-{flipped}"),
        format!("{session}-8081-{mac}"),
        format!("{session_b}-{port}-{mac}"),
        format!("{session}-{port}-{}", mac.to_uppercase()),
        format!("{session}-{port}"),
        "nonsense".into(),
    ] {
        let r = app
            .http
            .get(format!("{}/preview/{token}/", app.preview_base))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 404, "{token}");
    }

    // Bodies go through, both ways; the sandbox never sees the control plane's credentials.
    let write_and_run = |name: &str, src: &str| {
        format!("cat > /tmp/{name} <<'EOF'\n{src}EOF\nnohup python3 /tmp/{name} >/dev/null 2>&1 &")
    };
    assert_eq!(app.exec(&a, &write_and_run("echo.py", ECHO_PY)).await.0, 0);
    let echo = preview_url(&app, &a, 8081).await;
    let payload: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
    let r = eventually(
        "the echo server in the sandbox to answer",
        Duration::from_secs(20),
        async || {
            let r = app
                .http
                .post(format!("{echo}upload?mode=echo"))
                .header("authorization", "Bearer ak_secret")
                .header("cookie", "ory_kratos_session=secret; theme=dark")
                .body(payload.clone())
                .send()
                .await
                .unwrap();
            if r.status() == 200 {
                Ok(r)
            } else {
                Err(r.status().to_string())
            }
        },
    )
    .await;
    assert_eq!(r.status(), 200);
    let (_, _, mac_8081) = token_parts(&echo);
    let seen = |h: &str| {
        r.headers()[format!("x-seen-{h}").as_str()]
            .to_str()
            .unwrap()
            .to_owned()
    };
    assert_eq!(seen("host"), "localhost:8081");
    assert_eq!(
        seen("x-forwarded-prefix"),
        format!("/preview/{session}-8081-{mac_8081}")
    );
    assert_eq!(seen("authorization"), "-");
    assert_eq!(seen("cookie"), "theme=dark");
    assert_eq!(r.bytes().await.unwrap().as_ref(), payload.as_slice());

    // WebSockets: the handshake and frames go through the proxy.
    assert_eq!(
        app.exec(&a, &write_and_run("ws.py", &ws_echo_server(8082)))
            .await
            .0,
        0
    );
    websocket_echoes_through(&app, &preview_url(&app, &a, 8082).await).await;

    // A stopped session's preview is refused, and so is a new URL for it.
    let r = app
        .http
        .post(app.url(&format!("/api/sessions/{a}/stop")))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let (status, text) = detail(app.http.get(&url).send().await.unwrap()).await;
    assert_eq!(status, 409);
    assert!(text.starts_with("session is not running"), "{text}");
    let (status, text) = detail(preview(&app, &a, 8080).await).await;
    assert_eq!(status, 409);
    assert!(text.starts_with("session is not running"), "{text}");

    for id in [&a, &b] {
        app.http
            .delete(app.url(&format!("/api/sessions/{id}")))
            .send()
            .await
            .unwrap();
    }
    // A deleted session's preview is gone.
    assert_eq!(app.http.get(&url_b).send().await.unwrap().status(), 404);
}

#[test]
fn the_preview_key_is_made_once_kept_private_and_never_printed() {
    use sandbox_agents_api::preview::PreviewKey;
    use sandbox_agents_domain::SessionId;
    use std::os::unix::fs::PermissionsExt;
    let dir = std::env::temp_dir().join(format!("sa-preview-{}", uuid::Uuid::new_v4().simple()));
    let path = dir.join("preview.key");
    let first = PreviewKey::load_or_create(&path).unwrap();
    let again = PreviewKey::load_or_create(&path).unwrap();
    let meta = std::fs::metadata(&path).unwrap();
    assert_eq!((meta.len(), meta.permissions().mode() & 0o777), (32, 0o600));
    let id = SessionId(uuid::Uuid::new_v4());
    let token = first.token(id, 8080);
    assert_eq!(again.token(id, 8080), token, "a restart keeps the key");
    assert_eq!(
        again.verify(&token).map(|(s, p)| (s.0, p)),
        Some((id.0, 8080))
    );
    assert!(PreviewKey::random().verify(&token).is_none());
    assert!(PreviewKey::new("too short").is_err());
    assert_eq!(format!("{first:?}"), "PreviewKey(***)");
    std::fs::remove_dir_all(dir).unwrap();
}
