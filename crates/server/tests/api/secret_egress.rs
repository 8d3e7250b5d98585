//! Secrets bound for egress (`inject`, `placeholder`, issue 36): their 422s, how a binding
//! reads back, and what a boot makes of them: a placeholder (never the secret) in the
//! sandbox's environment, and sealed credentials that give the egress proxy the secret. The
//! proxy applying them to HTTPS requests is `egress_credentials.rs`.

use sandbox_agents_sandbox::memory::MemoryBackend;
use sandbox_agents_store::sessions::network_layers_by_sandbox;
use sandbox_agents_testkit::{TestApp, BOOT};
use serde_json::{json, Value};

const SECRET: &str = "egress-secret-Wq73";

async fn app_with_secret(app: &TestApp) {
    let (status, body) = app
        .post_json(
            "/api/secrets",
            json!({"name": "GH", "value": SECRET, "description": "d"}),
        )
        .await;
    assert_eq!(status, 201, "{body}");
}

/// The one 422's `loc` without `body`, and its message.
async fn refused(app: &TestApp, binding: Value) -> (String, String) {
    let (status, body) = app
        .post_json(
            "/api/agents",
            json!({"slug": "bad", "name": "bad", "secret_bindings": [binding]}),
        )
        .await;
    assert_eq!(status, 422, "{binding}: {body}");
    let errors = body["detail"].as_array().expect("a list of errors");
    assert_eq!(errors.len(), 1, "{binding}: {body}");
    let loc: Vec<String> = errors[0]["loc"].as_array().unwrap()[1..]
        .iter()
        .map(|p| p.as_str().map_or(p.to_string(), str::to_owned))
        .collect();
    (loc.join("."), errors[0]["msg"].as_str().unwrap().to_owned())
}

#[tokio::test]
async fn each_bad_egress_binding_is_a_422_at_its_field() {
    let plane = MemoryBackend::new("secret-egress-tests");
    let app = TestApp::builder().with_memory_backend(&plane).spawn().await;
    let inject = |fields: Value| {
        let mut i = json!({"host": "api.test", "header": "Authorization"});
        for (k, v) in fields.as_object().unwrap() {
            i[k] = v.clone();
        }
        json!({"secret": "GH", "inject": i})
    };
    let placeholder = |p: Value| json!({"secret": "GH", "placeholder": p});
    for (binding, at, says) in [
        (
            inject(json!({"format": "Bearer"})),
            "inject.format",
            "{value}",
        ),
        (
            inject(json!({"format": "{value}{value}"})),
            "inject.format",
            "exactly once",
        ),
        (
            inject(json!({"header": "Host"})),
            "inject.header",
            "hop-by-hop",
        ),
        (
            inject(json!({"header": "Transfer-Encoding"})),
            "inject.header",
            "hop-by-hop",
        ),
        (
            inject(json!({"header": "Bad Header"})),
            "inject.header",
            "not a header name",
        ),
        (
            inject(json!({"host": "https://api.test"})),
            "inject.host",
            "host name",
        ),
        (
            inject(json!({"host": "*.api.test"})),
            "inject.host",
            "host name",
        ),
        (
            json!({"secret": "GH", "env": "GH", "inject": {"host": "api.test", "header": "X"}}),
            "env",
            "leave env out",
        ),
        (
            placeholder(json!({"env": "1GH", "hosts": ["api.test"]})),
            "placeholder.env",
            "environment variable",
        ),
        (
            placeholder(json!({"env": "GH", "hosts": []})),
            "placeholder.hosts",
            "1 to 16",
        ),
        (
            placeholder(
                json!({"env": "GH", "hosts": (0..17).map(|i| format!("h{i}.test")).collect::<Vec<_>>()}),
            ),
            "placeholder.hosts",
            "1 to 16",
        ),
        (
            placeholder(json!({"env": "GH", "hosts": ["api.test", "api.test:443"]})),
            "placeholder.hosts.1",
            "host name",
        ),
        (
            json!({"secret": "GH", "env": "OTHER", "placeholder": {"env": "GH", "hosts": ["api.test"]}}),
            "env",
            "placeholder.env",
        ),
        (
            json!({"secret": "GH", "inject": {"host": "api.test", "header": "X"},
                   "placeholder": {"env": "GH", "hosts": ["api.test"]}}),
            "",
            "not both",
        ),
    ] {
        let (loc, msg) = refused(&app, binding.clone()).await;
        let want = if at.is_empty() {
            "secret_bindings.0".to_owned()
        } else {
            format!("secret_bindings.0.{at}")
        };
        assert_eq!(loc, want, "{binding}: {msg}");
        assert!(msg.contains(says), "{binding}: {msg}");
    }
    // A session's own bindings are checked the same way.
    app.create_agent("plain", json!({})).await;
    let (status, body) = app
        .post_json(
            "/api/sessions",
            json!({"agent_id": "plain", "secret_bindings": [inject(json!({"format": "x"}))]}),
        )
        .await;
    assert_eq!(status, 422, "{body}");
    assert_eq!(
        body["detail"][0]["loc"],
        json!(["body", "secret_bindings", "0", "inject", "format"])
    );
    app.stop().await;
}

#[tokio::test]
async fn egress_bindings_read_back_with_the_env_the_published_client_requires() {
    let plane = MemoryBackend::new("secret-egress-tests");
    let app = TestApp::builder().with_memory_backend(&plane).spawn().await;
    app_with_secret(&app).await;
    let agent = app
        .create_agent(
            "bound",
            json!({"secret_bindings": [
                {"secret": "GH", "placeholder": {"env": "GH_TOKEN", "hosts": ["api.test"]}},
                {"secret": "GH", "env": "", "inject": {"host": "api.test", "header": "Authorization",
                                                      "format": "Bearer {value}"}},
                {"secret": "GH", "inject": {"host": "other.test", "header": "X-Key"}},
                {"secret": "GH", "env": "PLAIN"}]}),
        )
        .await;
    let (_, read) = app.get_json("/api/agents/bound").await;
    for shown in [&agent, &read] {
        let b = &shown["secret_bindings"];
        assert_eq!(b[0]["env"], "GH_TOKEN", "{shown}");
        assert_eq!(b[0]["placeholder"]["hosts"], json!(["api.test"]));
        assert_eq!(b[1]["env"], "", "{shown}");
        assert_eq!(b[1]["inject"]["format"], "Bearer {value}");
        assert_eq!(b[2]["env"], "");
        assert_eq!(b[2]["inject"]["format"], "{value}", "the default format");
        assert_eq!(
            b[3],
            json!({"secret": "GH", "env": "PLAIN"}),
            "an env binding as before"
        );
    }
    app.stop().await;
}

#[tokio::test]
async fn without_the_egress_proxy_a_boot_refuses_egress_bindings_and_says_why() {
    let plane = sandbox_agents_sandbox::MemoryBackend::new("egress-none");
    let app = TestApp::builder().with_memory_backend(&plane).spawn().await;
    app_with_secret(&app).await;
    app.create_agent(
        "egress-off",
        json!({"secret_bindings": [
            {"secret": "GH", "placeholder": {"env": "GH_TOKEN", "hosts": ["api.test"]}}]}),
    )
    .await;
    let created = app.create_session(json!({"agent_id": "egress-off"})).await;
    let id = created["id"].as_str().unwrap().to_owned();
    let failed = app.wait_for_status(&id, "error", BOOT).await;
    let error = failed["error"].as_str().unwrap_or_default();
    assert!(error.contains("--egress-proxy"), "{failed}");
    app.stop().await;
}

#[tokio::test]
async fn a_boot_gives_the_sandbox_a_placeholder_and_the_proxy_the_secret() {
    let net = super::egress::TestNetwork::start("secret-egress").await;
    let app = super::egress::app(&net).await;
    app_with_secret(&app).await;
    app.create_agent(
        "egress",
        json!({"secret_bindings": [
            {"secret": "GH", "inject": {"host": "API.test", "header": "Authorization",
                                       "format": "Bearer {value}"}},
            {"secret": "GH", "env": "GH_TOKEN"}]}),
    )
    .await;
    // The session's placeholder binding wins over the agent's variable of the same name.
    let id = app
        .boot_session(json!({"agent_id": "egress", "secret_bindings": [
            {"secret": "GH", "placeholder": {"env": "GH_TOKEN", "hosts": ["api.test", "uploads.test"]}}]}))
        .await;
    let (code, out, _) = app.exec(&id, "printf '%s|' \"$GH_TOKEN\"; env").await;
    assert_eq!(code, 0);
    let held = out.split('|').next().unwrap().to_owned();
    assert!(held.starts_with("sa-ph-") && held.len() == 6 + 32, "{held}");
    assert!(!out.contains(SECRET), "the sandbox holds the secret: {out}");

    // What the proxy reads for the sandbox opens to the secret, for the bound hosts only.
    let session = app.session(&id).await;
    let sandbox = session["container_id"].as_str().unwrap().to_owned();
    let proxy_view = || async {
        let found = network_layers_by_sandbox(&app.db, &sandbox)
            .await
            .unwrap()
            .expect("the session holds the sandbox");
        assert_eq!(found.session.to_string(), id);
        let sealed = found.credentials.expect("sealed credentials");
        assert!(!sealed.windows(SECRET.len()).any(|w| w == SECRET.as_bytes()));
        app.sessions
            .credentials()
            .open_egress(found.session, &sealed)
            .unwrap()
    };
    let credentials = serde_json::to_value(proxy_view().await).unwrap();
    assert_eq!(
        credentials,
        json!([
            {"hosts": ["api.test", "uploads.test"], "kind": "swap", "placeholder": held,
             "value": SECRET},
            {"hosts": ["api.test"], "kind": "inject", "header": "Authorization",
             "value": format!("Bearer {SECRET}")},
        ])
    );

    // Another boot of the session holds the same placeholder; a stop clears the credentials.
    app.stop_session(&id).await;
    app.wait_for_status(&id, "stopped", BOOT).await;
    let (cleared,): (bool,) =
        sqlx::query_as("select egress_credentials is null from sessions where id = $1::uuid")
            .bind(&id)
            .fetch_one(&app.db)
            .await
            .unwrap();
    assert!(cleared, "a stopped session keeps no credentials");
    app.start_session(&id).await;
    app.wait_for_status(&id, "running", BOOT).await;
    let (_, again, _) = app.exec(&id, "printf %s \"$GH_TOKEN\"").await;
    assert_eq!(again, held);
    app.stop().await;
}
