//! Previews on an origin of their own, and none of the control plane's credentials crossing
//! into the sandbox: a server inside a real sandbox reports every header it receives.

use reqwest::Method;
use sandbox_agents_testkit::auth::{call, signed_in_person};
use sandbox_agents_testkit::{eventually, TestApp, BOOT};
use serde_json::{json, Value};
use std::time::Duration;

const TOKEN: &str = "preview-origin-token-0123456789abcdef";

/// Answers every request with the headers it received, as JSON, and tries to plant a cookie
/// in the control plane's namespace next to one of its own.
const HEADERS_PY: &str = r#"import http.server, json
class H(http.server.BaseHTTPRequestHandler):
    def answer(self):
        body = json.dumps({k.lower(): v for k, v in self.headers.items()}).encode()
        self.send_response(200)
        self.send_header('Content-Type', 'application/json')
        self.send_header('Content-Length', str(len(body)))
        self.send_header('Set-Cookie', 'sa_session=planted; Path=/')
        self.send_header('Set-Cookie', 'app_pref=1; Path=/')
        self.end_headers()
        self.wfile.write(body)
    do_GET = do_POST = answer
    def log_message(self, *a):
        pass
http.server.ThreadingHTTPServer(('', 8090), H).serve_forever()
"#;

async fn running_echo(app: &TestApp) -> String {
    let (s, _) = call(
        app,
        Method::POST,
        "/api/agents",
        Some(TOKEN),
        None,
        Some(json!({"slug": "echo", "name": "echo", "exposed_ports": [8090]})),
    )
    .await;
    assert_eq!(s, 201);
    let (s, session) = call(
        app,
        Method::POST,
        "/api/sessions",
        Some(TOKEN),
        None,
        Some(json!({"agent_id": "echo", "title": "t"})),
    )
    .await;
    assert_eq!(s, 202, "{session}");
    let id = session["id"].as_str().unwrap().to_owned();
    eventually("the echo session to run", BOOT, async || {
        let (_, s) = call(
            app,
            Method::GET,
            &format!("/api/sessions/{id}"),
            Some(TOKEN),
            None,
            None,
        )
        .await;
        assert_ne!(s["status"], "error", "{s}");
        (s["status"] == "running").then_some(())
    })
    .await;
    let cmd = format!(
        "cat > /tmp/h.py <<'EOF'\n{HEADERS_PY}EOF\nnohup python3 /tmp/h.py >/dev/null 2>&1 &"
    );
    let (s, out) = call(
        app,
        Method::POST,
        &format!("/api/sessions/{id}/exec"),
        Some(TOKEN),
        None,
        Some(json!({"command": cmd, "timeout": 30})),
    )
    .await;
    assert_eq!(
        (s.as_u16(), out["exit_code"].as_i64()),
        (200, Some(0)),
        "{out}"
    );
    id
}

async fn preview_url(app: &TestApp, id: &str) -> String {
    let (s, p) = call(
        app,
        Method::GET,
        &format!("/api/sessions/{id}/ports/8090"),
        Some(TOKEN),
        None,
        None,
    )
    .await;
    assert_eq!(s, 200, "{p}");
    p["url"].as_str().unwrap().to_owned()
}

/// A real browser session cookie and a real API key of this deployment.
async fn our_credentials(app: &TestApp) -> (String, String) {
    let cookie = signed_in_person(app, TOKEN, "op@example.com", true).await;
    let (s, key) = call(
        app,
        Method::POST,
        "/api/api-keys",
        Some(TOKEN),
        None,
        Some(json!({"name": "k"})),
    )
    .await;
    assert_eq!(s, 201, "{key}");
    (cookie, key["key"].as_str().unwrap().to_owned())
}

/// GETs `url` with `client` until the sandbox's server answers; returns what it saw and the
/// answer's `Set-Cookie` headers.
async fn seen(
    client: &reqwest::Client,
    url: &str,
    headers: &[(&str, String)],
) -> (Value, Vec<String>) {
    eventually(
        &format!("{url} to answer"),
        Duration::from_secs(20),
        async || {
            let mut req = client.get(url);
            for (k, v) in headers {
                req = req.header(*k, v);
            }
            let r = req.send().await.unwrap();
            if r.status() != 200 {
                return None;
            }
            let cookies = r
                .headers()
                .get_all("set-cookie")
                .iter()
                .map(|v| v.to_str().unwrap().to_owned())
                .collect();
            Some((r.json().await.unwrap(), cookies))
        },
    )
    .await
}

fn assert_nothing_of_ours(seen: &Value, cookies: &[String], secrets: &[&str]) {
    let text = seen.to_string();
    for s in secrets {
        assert!(
            !text.contains(s),
            "the sandbox saw one of our credentials: {text}"
        );
    }
    assert!(seen.get("authorization").is_none(), "{seen}");
    assert_eq!(seen["cookie"], "theme=dark", "{seen}");
    assert_eq!(
        cookies,
        ["app_pref=1; Path=/"],
        "no cookie of ours is planted"
    );
}

#[tokio::test]
async fn previews_have_their_own_origin_and_get_none_of_our_credentials() {
    let app = TestApp::builder()
        .with_auth(sandbox_agents_api::auth::Auth::new(Some(TOKEN)))
        .spawn()
        .await;
    let (cookie, key) = our_credentials(&app).await;
    let id = running_echo(&app).await;
    let url = preview_url(&app, &id).await;
    assert!(
        url.starts_with(&format!("{}/preview/", app.preview_base)),
        "{url}"
    );
    assert_ne!(app.preview_base, app.base);

    for auth in [
        format!("Bearer {TOKEN}"),
        format!("Bearer {key}"),
        "Bearer ak_made_up".into(),
    ] {
        let (s, cookies) = seen(
            &app.http,
            &url,
            &[
                ("authorization", auth),
                (
                    "cookie",
                    format!("sa_session={cookie}; theme=dark; ory_kratos_session=k"),
                ),
            ],
        )
        .await;
        assert_nothing_of_ours(&s, &cookies, &[TOKEN, &key, &cookie, "ak_made_up"]);
    }

    // Nor does a page that skips the proxy: the sandbox's port is published on a loopback
    // address that is another host (and site) to a browser than the API's, so the session
    // cookie a browser holds for the API is never sent to it.
    let (container,): (String,) =
        sqlx::query_as("select sandbox_id from sessions where id = $1::uuid")
            .bind(&id)
            .fetch_one(&app.db)
            .await
            .unwrap();
    let published = app
        .sessions
        .backend()
        .inspect(&container)
        .await
        .unwrap()
        .unwrap()
        .ports[&8090];
    let api_host: std::net::SocketAddr = app.base.strip_prefix("http://").unwrap().parse().unwrap();
    assert!(published.ip().is_loopback(), "{published}");
    assert_ne!(
        published.ip(),
        api_host.ip(),
        "the sandbox's port shares the API's host"
    );

    // The API's listener serves no previews, and the preview listener no API.
    let path = url.strip_prefix(&app.preview_base).unwrap();
    let r = app.http.get(app.url(path)).send().await.unwrap();
    assert_eq!(r.status(), 404);
    let r = app
        .http
        .get(format!("{}/api/agents", app.preview_base))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    // A service worker on the shared path origin would see every other preview: refused.
    let r = app
        .http
        .get(format!("{url}sw.js"))
        .header("service-worker", "script")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    assert_eq!(
        r.headers()["x-content-type-options"],
        "nosniff",
        "our own answers carry our headers"
    );

    // Our credentials are no authority for a preview: a bad token stays a 404 with them.
    let bad = url.replace("/preview/", "/preview/0");
    let r = app
        .http
        .get(&bad)
        .bearer_auth(TOKEN)
        .header("cookie", format!("sa_session={cookie}"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
}

#[tokio::test]
async fn a_preview_domain_gives_each_session_and_port_an_origin_of_its_own() {
    let app = TestApp::builder()
        .with_auth(sandbox_agents_api::auth::Auth::new(Some(TOKEN)))
        .with_config(|c| c.preview_domain = Some("http://preview.localhost".into()))
        .spawn()
        .await;
    let id = running_echo(&app).await;
    let url = preview_url(&app, &id).await;
    let simple = uuid::Uuid::parse_str(&id).unwrap().simple().to_string();
    let host = url
        .strip_prefix("http://")
        .and_then(|u| u.strip_suffix("/"))
        .unwrap()
        .to_owned();
    assert!(host.starts_with(&format!("8090-{simple}-")), "{url}");
    assert!(host.ends_with(".preview.localhost"), "{url}");
    assert!(host.split('.').next().unwrap().len() <= 63, "{url}");

    // Resolve the preview's name to the preview listener, as wildcard DNS would.
    let addr: std::net::SocketAddr = app
        .preview_base
        .strip_prefix("http://")
        .unwrap()
        .parse()
        .unwrap();
    let client = reqwest::Client::builder()
        .resolve(&host, addr)
        .build()
        .unwrap();
    let (s, cookies) = seen(
        &client,
        &format!("{url}deep/path?q=1"),
        &[
            ("authorization", format!("Bearer {TOKEN}")),
            ("cookie", "sa_session=x; theme=dark".into()),
        ],
    )
    .await;
    assert_nothing_of_ours(&s, &cookies, &[TOKEN]);
    assert_eq!(s["host"], "localhost:8090");
    assert!(s.get("x-forwarded-prefix").is_none(), "{s}");

    // Another port's or session's label is not this one's: the MAC binds both.
    let tampered = host.replacen("8090-", "8091-", 1);
    let client = reqwest::Client::builder()
        .resolve(&tampered, addr)
        .build()
        .unwrap();
    let r = client
        .get(format!("http://{tampered}/"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    // With a preview domain, the shared path origin is not served at all.
    let path_url = format!(
        "{}/preview/{}/",
        app.preview_base,
        url.trim_start_matches("http://").split('.').next().unwrap()
    );
    assert_eq!(app.http.get(&path_url).send().await.unwrap().status(), 404);
    // Names outside the preview domain are refused.
    let r = app
        .http
        .get(format!("{}/", app.preview_base))
        .header("host", "8090-x.evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), reqwest::StatusCode::MISDIRECTED_REQUEST);
}
