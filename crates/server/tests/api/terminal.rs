//! `GET /api/sessions/{id}/terminal` over a real WebSocket into a real sandbox: a shell on a
//! pseudo-terminal that takes input and resizes, ends with its exit, dies with its socket,
//! closes when the session stops, and refuses what it must (other origins, plain GETs, no
//! credential, sizes out of bounds).

use futures::{SinkExt, StreamExt};
use sandbox_agents_testkit::{eventually, TestApp};
use serde_json::{json, Value};
use std::time::Duration;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::Message;

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

fn ws_url(app: &TestApp, id: &str, query: &str) -> String {
    format!(
        "{}/api/sessions/{id}/terminal{query}",
        app.base.replacen("http://", "ws://", 1)
    )
}

async fn connect(app: &TestApp, id: &str, query: &str) -> Socket {
    let (socket, response) = tokio_tungstenite::connect_async(ws_url(app, id, query))
        .await
        .expect("the terminal opens");
    assert_eq!(response.status(), 101);
    socket
}

/// The handshake's refusal: its status and `detail`.
async fn refused(request: impl IntoClientRequest + Unpin) -> (u16, String) {
    match tokio_tungstenite::connect_async(request).await {
        Ok(_) => panic!("the terminal opened"),
        Err(tokio_tungstenite::tungstenite::Error::Http(r)) => {
            let body: Value = serde_json::from_slice(r.body().as_deref().unwrap_or_default())
                .expect("a JSON error");
            (
                r.status().as_u16(),
                body["detail"].as_str().unwrap_or_default().to_owned(),
            )
        }
        Err(e) => panic!("not an HTTP refusal: {e}"),
    }
}

/// Reads output until it contains `needle`; the text read so far.
async fn read_until(socket: &mut Socket, needle: &str) -> String {
    let mut seen = String::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while !seen.contains(needle) {
        let message = tokio::time::timeout_at(deadline, socket.next())
            .await
            .unwrap_or_else(|_| panic!("no {needle:?} in the terminal's output: {seen:?}"))
            .expect("the socket stays open")
            .expect("a message");
        if let Message::Binary(b) = message {
            seen.push_str(&String::from_utf8_lossy(&b));
        }
    }
    seen
}

async fn send(socket: &mut Socket, text: &str) {
    socket
        .send(Message::Binary(text.as_bytes().to_vec().into()))
        .await
        .unwrap();
}

/// The messages after the output: the exit's JSON (if any) and the close.
async fn ending(socket: &mut Socket) -> (Option<Value>, Option<(CloseCode, String)>) {
    let mut exit = None;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let next = tokio::time::timeout_at(deadline, socket.next())
            .await
            .expect("the terminal closes");
        match next {
            Some(Ok(Message::Text(t))) => exit = Some(serde_json::from_str(t.as_str()).unwrap()),
            Some(Ok(Message::Close(frame))) => {
                return (exit, frame.map(|f| (f.code, f.reason.to_string())))
            }
            Some(Ok(_)) => {}
            Some(Err(e)) => panic!("the socket failed instead of closing: {e}"),
            None => return (exit, None),
        }
    }
}

#[tokio::test]
async fn a_terminal_runs_a_shell_that_resizes_and_ends_with_its_exit() {
    let app = TestApp::builder().spawn().await;
    let id = app
        .running_session(
            "term",
            json!({"manifest": {"environment": {"GREETING": "hi-there"}}}),
        )
        .await;
    let mut socket = connect(&app, &id, "?rows=30&cols=100").await;
    send(&mut socket, "stty size; echo \"$GREETING $TERM $PWD\"\r").await;
    let out = read_until(&mut socket, "hi-there xterm-256color /workspace").await;
    assert!(out.contains("30 100"), "the size asked for: {out:?}");

    // Text messages: a resize, and input as JSON.
    socket
        .send(Message::Text(
            json!({"type": "resize", "rows": 40, "cols": 120})
                .to_string()
                .into(),
        ))
        .await
        .unwrap();
    socket
        .send(Message::Text(
            json!({"type": "input", "data": "stty size\r"})
                .to_string()
                .into(),
        ))
        .await
        .unwrap();
    read_until(&mut socket, "40 120").await;

    send(&mut socket, "exit 3\r").await;
    let (exit, close) = ending(&mut socket).await;
    let exit = exit.expect("an exit message");
    assert_eq!(
        (exit["type"].as_str(), exit["exit_code"].as_i64()),
        (Some("exit"), Some(3))
    );
    assert_eq!(close.map(|c| c.0), Some(CloseCode::Normal));

    // A bad message closes the socket with a policy violation, and says why.
    let mut socket = connect(&app, &id, "").await;
    socket
        .send(Message::Text("{\"type\":\"dance\"}".into()))
        .await
        .unwrap();
    let (_, close) = ending(&mut socket).await;
    let (code, reason) = close.expect("a close frame");
    assert_eq!(code, CloseCode::Policy);
    assert!(reason.contains("input or resize"), "{reason}");
    app.delete_session(&id).await;
}

#[tokio::test]
async fn a_closed_socket_kills_its_shell_and_a_stop_closes_the_socket() {
    let app = TestApp::builder().spawn().await;
    let id = app.running_session("term-stop", json!({})).await;
    let mut socket = connect(&app, &id, "").await;
    send(&mut socket, "sleep 3603 & echo started-$((1+1))\r").await;
    read_until(&mut socket, "started-2").await;
    drop(socket);
    eventually(
        "the shell's tree killed",
        Duration::from_secs(20),
        async || {
            let (_, out, _) = app.exec(&id, "pgrep -f 'sleep 3603$' | wc -l").await;
            (out.trim() == "0").then_some(())
        },
    )
    .await;

    let mut socket = connect(&app, &id, "").await;
    send(&mut socket, "echo ready-$((2+2))\r").await;
    read_until(&mut socket, "ready-4").await;
    app.stop_session(&id).await;
    let (exit, close) = ending(&mut socket).await;
    assert_eq!(exit, None, "the shell did not exit: its sandbox went away");
    let (code, reason) = close.expect("a close frame");
    assert_eq!(code, CloseCode::Away, "{reason}");
    app.wait_for_status(&id, "stopped", Duration::from_secs(60))
        .await;
    let (status, detail) = refused(ws_url(&app, &id, "")).await;
    assert_eq!(status, 409, "{detail}");
    app.delete_session(&id).await;
}

#[tokio::test]
async fn a_terminal_refuses_other_origins_plain_requests_and_bad_sizes() {
    let app = TestApp::builder().spawn().await;
    let id = app.running_session("term-refuse", json!({})).await;

    // A page of another site cannot open one with the user's cookie.
    let mut request = ws_url(&app, &id, "").into_client_request().unwrap();
    request
        .headers_mut()
        .insert("origin", "https://evil.example".parse().unwrap());
    let (status, detail) = refused(request).await;
    assert_eq!(status, 403, "{detail}");
    assert!(detail.contains("evil.example"), "{detail}");

    let (status, detail) = refused(ws_url(&app, &id, "?rows=0")).await;
    assert_eq!(status, 422, "{detail}");
    let (status, detail) = refused(ws_url(&app, &id, "?cols=5000")).await;
    assert_eq!(status, 422, "{detail}");
    let (status, _) = refused(ws_url(&app, "sess_nope", "")).await;
    assert_eq!(status, 404);
    let r = app
        .http
        .get(app.url(&format!("/api/sessions/{id}/terminal")))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    let body: Value = r.json().await.unwrap();
    assert!(
        body["detail"].as_str().unwrap().contains("WebSocket"),
        "{body}"
    );
    // None of these started a shell.
    let (_, out, _) = app.exec(&id, "pgrep -fx 'bash -i' | wc -l").await;
    assert_eq!(out.trim(), "0");

    // This server's own pages can open one.
    let mut request = ws_url(&app, &id, "").into_client_request().unwrap();
    request
        .headers_mut()
        .insert("origin", app.base.parse().unwrap());
    let (mut socket, _) = tokio_tungstenite::connect_async(request).await.unwrap();
    send(&mut socket, "echo same-$((3+4))\r").await;
    read_until(&mut socket, "same-7").await;
    let (_, out, _) = app.exec(&id, "pgrep -fx 'bash -i' | wc -l").await;
    assert_eq!(out.trim(), "1");
    socket.close(None).await.unwrap();
    app.delete_session(&id).await;
}

#[tokio::test]
async fn a_terminal_needs_a_credential_like_every_route() {
    let token = "terminal-operator-token-0123456789";
    let app = TestApp::builder().with_token(token).spawn().await;
    let session = "sess_nope";
    let (status, _) = refused(ws_url(&app, session, "")).await;
    assert_eq!(status, 401);
    let mut request = ws_url(&app, session, "").into_client_request().unwrap();
    request
        .headers_mut()
        .insert("authorization", format!("Bearer {token}").parse().unwrap());
    let (status, _) = refused(request).await;
    assert_eq!(status, 404, "past the credential, to the session");
}
