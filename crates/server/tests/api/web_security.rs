//! What a hostile web page can make a browser send, and what it gets: rebound host names,
//! cross-site state changes (simple requests that need no preflight), cookie sessions without
//! the CSRF header, and the security headers on every page of ours.

use reqwest::{Method, StatusCode};
use sandbox_agents_testkit::auth::{call, signed_in_person};
use sandbox_agents_testkit::TestApp;
use serde_json::{json, Value};

const TOKEN: &str = "web-security-token-0123456789abcdef";

async fn agent_count(app: &TestApp) -> usize {
    let r = app.http.get(app.url("/api/agents")).send().await.unwrap();
    assert_eq!(r.status(), 200);
    r.json::<Vec<Value>>().await.unwrap().len()
}

async fn detail(r: reqwest::Response) -> (StatusCode, String) {
    let status = r.status();
    let v: Value = r.json().await.unwrap_or(Value::Null);
    (status, v["detail"].as_str().unwrap_or_default().to_owned())
}

const AGENT: &str = r#"{"slug": "planted", "name": "Planted by a web page"}"#;

#[tokio::test]
async fn a_rebound_host_name_reads_nothing_and_changes_nothing() {
    let app = TestApp::builder().spawn().await;
    for host in [
        "evil.example",
        "evil.example:8000",
        "localhost.evil.example",
    ] {
        let r = app
            .http
            .get(app.url("/api/agents"))
            .header("host", host)
            .send()
            .await
            .unwrap();
        let (status, text) = detail(r).await;
        assert_eq!(status, StatusCode::MISDIRECTED_REQUEST, "{host}");
        assert!(text.contains("--allowed-hosts"), "{text}");
        let r = app
            .http
            .post(app.url("/api/agents"))
            .header("host", host)
            .header("content-type", "application/json")
            .body(AGENT)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::MISDIRECTED_REQUEST, "{host}");
    }
    assert_eq!(agent_count(&app).await, 0);
    // The names this server is reached by still work.
    let port = app.base.rsplit(':').next().unwrap();
    for host in [
        format!("localhost:{port}"),
        format!("127.0.0.1:{port}"),
        "ui.localhost".into(),
    ] {
        let r = app
            .http
            .get(app.url("/api/agents"))
            .header("host", &host)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "{host}");
    }
    // Previews' listener checks its hosts too.
    let r = app
        .http
        .get(format!("{}/preview/x/", app.preview_base))
        .header("host", "evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::MISDIRECTED_REQUEST);
}

#[tokio::test]
async fn pages_of_other_origins_cannot_change_state_in_open_mode() {
    let app = TestApp::builder().spawn().await;
    // What `fetch(url, {method: "POST", mode: "no-cors", body})` sends from another site:
    // text/plain needs no preflight.
    let r = app
        .http
        .post(app.url("/api/agents"))
        .header("origin", "https://evil.example")
        .header("content-type", "text/plain;charset=UTF-8")
        .header("sec-fetch-site", "cross-site")
        .body(AGENT)
        .send()
        .await
        .unwrap();
    let (status, text) = detail(r).await;
    assert_eq!(status, 403);
    assert!(text.starts_with("cross-site request refused"), "{text}");
    // The same body from a client that sends no Origin but the wrong type: 415.
    let r = app
        .http
        .post(app.url("/api/agents"))
        .header("content-type", "text/plain")
        .body(AGENT)
        .send()
        .await
        .unwrap();
    let (status, text) = detail(r).await;
    assert_eq!(status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    assert!(text.contains("application/json"), "{text}");
    let r = app
        .http
        .post(app.url("/api/agents"))
        .body(AGENT)
        .send()
        .await
        .unwrap();
    assert_eq!(
        r.status(),
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        "no type at all"
    );
    // A page of a sandbox's preview is same-site with the API (same host, other port).
    for (origin, site) in [
        (app.preview_base.as_str(), Some("same-site")),
        ("null", None),
        ("http://127.0.0.1:1", None),
    ] {
        let mut req = app
            .http
            .post(app.url("/api/agents"))
            .header("origin", origin)
            .header("content-type", "application/json")
            .body(AGENT);
        if let Some(site) = site {
            req = req.header("sec-fetch-site", site);
        }
        assert_eq!(req.send().await.unwrap().status(), 403, "{origin}");
    }
    // Sec-Fetch-Site alone is enough to refuse.
    let r = app
        .http
        .post(app.url("/api/agents"))
        .header("sec-fetch-site", "cross-site")
        .header("content-type", "application/json")
        .body(AGENT)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    assert_eq!(agent_count(&app).await, 0, "nothing was created");

    // Body-less POSTs (a form's submit) are refused the same way.
    let agent = app.create_agent("target", json!({})).await;
    let id = agent["id"].as_str().unwrap();
    let r = app
        .http
        .post(app.url(&format!("/api/agents/{id}/archive")))
        .header("origin", "https://evil.example")
        .header("content-type", "application/x-www-form-urlencoded")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    let a: Value = app
        .http
        .get(app.url(&format!("/api/agents/{id}")))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(a["archived_at"].is_null(), "{a}");

    // Our own pages' requests pass.
    let r = app
        .http
        .post(app.url("/api/agents"))
        .header("origin", &app.base)
        .header("sec-fetch-site", "same-origin")
        .header("content-type", "application/json")
        .body(AGENT)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    // Reads are not refused (another origin cannot read the answer without CORS, which this
    // server never grants).
    let r = app
        .http
        .get(app.url("/api/agents"))
        .header("origin", "https://evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert!(r.headers().get("access-control-allow-origin").is_none());
    // What a browser marks as another site's subresource (an <img>, a no-cors fetch, a
    // beacon) is refused before it costs anything; following a link is not.
    let read = |mode: &'static str| {
        app.http
            .get(app.url("/api/agents"))
            .header("sec-fetch-site", "cross-site")
            .header("sec-fetch-mode", mode)
            .send()
    };
    assert_eq!(read("no-cors").await.unwrap().status(), 403);
    assert_eq!(read("cors").await.unwrap().status(), 403);
    assert_eq!(read("navigate").await.unwrap().status(), 200);
}

#[tokio::test]
async fn a_cookie_session_changes_state_only_with_the_csrf_header() {
    let app = TestApp::builder().with_token(TOKEN).spawn().await;
    let cookie = format!(
        "sa_session={}",
        signed_in_person(&app, TOKEN, "grace@example.com", false).await
    );
    let patch = |csrf: bool| {
        let mut r = app
            .http
            .patch(app.url("/api/me/profile"))
            .header("cookie", &cookie)
            .json(&json!({"name": "Changed"}));
        if csrf {
            r = r.header("x-requested-with", "sandbox-agents");
        }
        r.send()
    };
    let (status, text) = detail(patch(false).await.unwrap()).await;
    assert_eq!(status, 403);
    assert!(
        text.contains("X-Requested-With") || text.contains("x-requested-with"),
        "{text}"
    );
    let profile = |app: &TestApp| {
        app.http
            .get(app.url("/api/me/profile"))
            .header("cookie", &cookie)
            .send()
    };
    let p: Value = profile(&app).await.unwrap().json().await.unwrap();
    assert_eq!(
        p["name"], "grace@example.com",
        "a read needs no header, and nothing changed"
    );
    assert_eq!(patch(true).await.unwrap().status(), 200);
    let p: Value = profile(&app).await.unwrap().json().await.unwrap();
    assert_eq!(p["name"], "Changed");
    // Signing out is a change too.
    let r = app
        .http
        .post(app.url("/api/auth/logout"))
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    // A bearer credential needs no such header: no browser sends one by itself.
    let (s, _) = call(
        &app,
        Method::POST,
        "/api/agents",
        Some(TOKEN),
        None,
        Some(json!({"slug": "by-token", "name": "t"})),
    )
    .await;
    assert_eq!(s, 201);
}

#[tokio::test]
async fn every_page_we_serve_carries_the_security_headers_and_no_inline_script() {
    let app = TestApp::builder().spawn().await;
    for path in ["/login", "/logout", "/recovery", "/settings", "/docs"] {
        let r = app.http.get(app.url(path)).send().await.unwrap();
        assert_eq!(r.status(), 200, "{path}");
        let h = r.headers().clone();
        let csp = h["content-security-policy"].to_str().unwrap().to_owned();
        assert!(csp.contains("frame-ancestors 'none'"), "{path}: {csp}");
        let script_src = csp
            .split(';')
            .map(str::trim)
            .find(|d| d.starts_with("script-src"))
            .unwrap_or_else(|| panic!("{path}: no script-src in {csp}"));
        assert!(
            !script_src.contains("unsafe-inline") && !script_src.contains("unsafe-eval"),
            "{csp}"
        );
        assert_eq!(h["x-content-type-options"], "nosniff", "{path}");
        assert_eq!(h["referrer-policy"], "no-referrer", "{path}");
        let body = r.text().await.unwrap();
        if path != "/docs" {
            // A page whose script failed must not turn the form into a GET with the password
            // in the URL.
            assert!(body.contains(r#"method="post""#), "{path}: {body}");
        }
        // Every <script> names its source: the policy would block an inline one.
        for tag in body.split("<script").skip(1) {
            let open = tag.split('>').next().unwrap();
            assert!(
                open.contains("src="),
                "{path} has an inline script: <script{open}>"
            );
            assert!(
                tag[open.len() + 1..].starts_with("</script>"),
                "{path}: inline code"
            );
        }
    }
    let js = app
        .http
        .get(app.url("/_account/account.js"))
        .send()
        .await
        .unwrap();
    assert_eq!(js.status(), 200);
    assert!(js.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/javascript"));
    let js = js.text().await.unwrap();
    assert!(js.contains("x-requested-with"));
    assert!(
        js.contains("['email', 'code']") && !js.contains("querySelector"),
        "only the email and the code are filled from the query: {js}"
    );
    // JSON answers are no documents either.
    let r = app.http.get(app.url("/api/health")).send().await.unwrap();
    assert_eq!(r.headers()["x-content-type-options"], "nosniff");
    assert!(r.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .contains("default-src 'none'"));
}

#[tokio::test]
async fn allowed_hosts_add_names_the_server_answers_for() {
    use sandbox_agents_testkit::TestApp;
    let app = TestApp::builder()
        .with_config(|c| c.allowed_hosts = vec!["agents.internal".into(), ".corp.example".into()])
        .spawn()
        .await;
    let status = |host: &'static str| {
        app.http
            .get(app.url("/api/agents"))
            .header("host", host)
            .send()
    };
    for ok in ["agents.internal", "ui.corp.example:8443", "corp.example"] {
        assert_eq!(status(ok).await.unwrap().status(), 200, "{ok}");
    }
    for bad in ["agents.internal.evil.example", "evilcorp.example"] {
        assert_eq!(
            status(bad).await.unwrap().status(),
            StatusCode::MISDIRECTED_REQUEST,
            "{bad}"
        );
    }
}
