use sandbox_agents_testkit::TestApp;
use serde_json::Value;

#[tokio::test]
async fn health_checks_the_database() {
    let app = TestApp::builder().spawn().await;
    let r = app.http.get(app.url("/api/health")).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["status"], "ok");
    app.db.close().await;
    let r = app.http.get(app.url("/api/health")).send().await.unwrap();
    assert_eq!(r.status(), 503);
    assert!(r.headers().contains_key("retry-after"));
    assert!(r.json::<Value>().await.unwrap()["detail"].is_string());
}

#[tokio::test]
async fn me_reports_open_mode_and_auth_check_accepts_anyone() {
    let app = TestApp::builder().spawn().await;
    let me: Value = app
        .http
        .get(app.url("/api/me"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(me["auth_required"], false);
    assert_eq!(me["authenticated"], false);
    let r = app
        .http
        .get(app.url("/api/auth/check"))
        .header("authorization", "Bearer whatever")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert!(r.json::<Value>().await.unwrap().is_object());
}

#[tokio::test]
async fn backends_list_the_default_first() {
    let app = TestApp::builder().spawn().await;
    let b: Value = app
        .http
        .get(app.url("/api/backends"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(b[0]["name"], "docker");
    assert_eq!(b[0]["default"], true);
    // What the configured backend declares, not a constant: this one's sandboxes get the
    // daemon (the testkit's sandboxd).
    assert_eq!(
        b[0]["capabilities"],
        serde_json::json!({
            "snapshots": "image",
            "image_builds": true,
            "daemon": true,
            "warm_pool": true,
            "disk_measurement": true,
            "isolation": true,
        })
    );
}

#[tokio::test]
async fn unknown_routes_and_methods_answer_json_like_fastapi() {
    let app = TestApp::builder().spawn().await;
    let r = app.http.get(app.url("/api/nope")).send().await.unwrap();
    assert_eq!(r.status(), 404);
    assert_eq!(
        r.json::<Value>().await.unwrap(),
        serde_json::json!({"detail": "Not Found"})
    );
    let r = app.http.put(app.url("/api/agents")).send().await.unwrap();
    assert_eq!(r.status(), 405);
    assert_eq!(
        r.json::<Value>().await.unwrap(),
        serde_json::json!({"detail": "Method Not Allowed"})
    );
}

#[tokio::test]
async fn x_project_is_ignored_where_not_scoped_and_resolved_where_it_is() {
    let app = TestApp::builder().spawn().await;
    let r = app
        .http
        .get(app.url("/api/health"))
        .header("x-project", "whatever")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let r = app
        .http
        .get(app.url("/api/agents"))
        .header("x-project", "default")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let r = app
        .http
        .get(app.url("/api/agents"))
        .header("x-project", "someone-elses")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    assert!(r.json::<Value>().await.unwrap()["detail"]
        .as_str()
        .unwrap()
        .contains("someone-elses"));
}

#[tokio::test]
async fn every_response_carries_a_request_id() {
    let app = TestApp::builder().spawn().await;
    let r = app.http.get(app.url("/api/health")).send().await.unwrap();
    assert!(!r.headers()["x-request-id"].is_empty());
    let r = app
        .http
        .get(app.url("/api/health"))
        .header("x-request-id", "abc-123")
        .send()
        .await
        .unwrap();
    assert_eq!(r.headers()["x-request-id"], "abc-123");
}

#[tokio::test]
async fn malformed_json_is_a_422_with_a_list_of_errors() {
    let app = TestApp::builder().spawn().await;
    let r = app
        .http
        .post(app.url("/api/agents"))
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 422);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["detail"][0]["type"], "json_invalid");
    let r = app.http.post(app.url("/api/agents")).send().await.unwrap();
    assert_eq!(r.status(), 422);
    assert_eq!(
        r.json::<Value>().await.unwrap()["detail"][0]["type"],
        "missing"
    );
}

#[tokio::test]
async fn oversized_bodies_are_refused_with_413() {
    let app = TestApp::builder().spawn().await;
    let big = "x".repeat(sandbox_agents_api::JSON_BODY_LIMIT + 1);
    let body = serde_json::json!({"slug": "big", "name": "big", "instructions": big});
    let r = app
        .http
        .post(app.url("/api/agents"))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 413);
    assert!(r.json::<Value>().await.unwrap()["detail"].is_string());
}

#[tokio::test]
async fn each_route_takes_bodies_up_to_its_own_limit() {
    use sandbox_agents_api::limits::SMALL_BODY_LIMIT;
    let app = TestApp::builder().spawn().await;
    let padding = "x".repeat(SMALL_BODY_LIMIT);
    // A small-body route refuses what an agent definition may carry, declared or streamed.
    let body = serde_json::json!({"name": "N", "url": "https://example.com/h", "pad": padding});
    let r = app
        .http
        .post(app.url("/api/webhooks"))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 413);
    let detail = r.json::<Value>().await.unwrap()["detail"].clone();
    assert!(detail.as_str().unwrap().contains("at most"), "{detail}");
    let bytes = serde_json::to_vec(&body).unwrap();
    let chunks: Vec<Result<Vec<u8>, std::io::Error>> =
        bytes.chunks(8192).map(|c| Ok(c.to_vec())).collect();
    let r = app
        .http
        .post(app.url("/api/webhooks"))
        .header("content-type", "application/json")
        .body(reqwest::Body::wrap_stream(futures::stream::iter(chunks)))
        .send()
        .await
        .unwrap();
    assert_eq!(
        r.status(),
        413,
        "a body without a declared length is cut too"
    );
    let listed: Value = app
        .http
        .get(app.url("/api/webhooks"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(listed, serde_json::json!([]), "nothing was created");
    // The same size is fine where manifests go.
    let r = app
        .http
        .post(app.url("/api/agents"))
        .json(&serde_json::json!({"slug": "roomy", "name": "roomy", "instructions": padding}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
}

/// One raw HTTP/1.1 exchange on a fresh connection: the response head (lowercased), and
/// whether the server closed the connection after it.
async fn exchange(app: &sandbox_agents_testkit::TestApp, request: String) -> (String, bool) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let addr = app.base.trim_start_matches("http://");
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(request.replace("{host}", addr).as_bytes())
        .await
        .unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let closed = loop {
        let read = tokio::time::timeout(std::time::Duration::from_secs(2), s.read(&mut buf)).await;
        match read {
            Ok(Ok(0)) => break true,
            Ok(Ok(n)) => got.extend_from_slice(&buf[..n]),
            Ok(Err(_)) => break true,
            // Still open after the answer: kept alive.
            Err(_) => break false,
        }
    };
    let text = String::from_utf8_lossy(&got).to_lowercase();
    let head = text.split("\r\n\r\n").next().unwrap_or("").to_owned();
    (head, closed)
}

#[tokio::test]
async fn a_refusal_before_the_body_is_read_closes_the_connection_and_says_so() {
    let app = TestApp::builder().spawn().await;
    // A body the server refuses unread (an upload to a session that does not exist): the
    // client is told not to reuse the connection, so its next request cannot meet a socket
    // that is closing.
    let body = "--b\r\ncontent-disposition: form-data; name=\"file\"; filename=\"x\"\r\n\r\n"
        .to_owned()
        + &"x".repeat(200_000)
        + "\r\n--b--\r\n";
    let (head, closed) = exchange(
        &app,
        format!(
            "POST /api/sessions/01a2347b-d27a-717c-ba3d-c07aa52a5a44/files?path=..%2Fx HTTP/1.1\r\nhost: {{host}}\r\ncontent-type: multipart/form-data; boundary=b\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        ),
    )
    .await;
    assert!(head.starts_with("http/1.1 4"), "{head}");
    assert!(head.contains("connection: close"), "{head}");
    assert!(closed);
    // A body read to its end leaves the connection open for the next request.
    let body = r#"{"slug": "kept-alive", "name": "k"}"#;
    let (head, closed) = exchange(
        &app,
        format!(
            "POST /api/agents HTTP/1.1\r\nhost: {{host}}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        ),
    )
    .await;
    assert!(head.starts_with("http/1.1 201"), "{head}");
    assert!(!head.contains("connection: close"), "{head}");
    assert!(!closed);
}
