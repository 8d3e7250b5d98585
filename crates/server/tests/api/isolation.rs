//! Isolation between projects: project B's key tries every project-scoped endpoint with
//! project A's ids. Everything is a 404 (or, for lists, shows nothing of A), and A's data
//! is byte for byte what it was. Every operation of the OpenAPI document must be classified
//! below, so a new route cannot escape the suite.

use reqwest::Method;
use sandbox_agents_testkit::TestApp;
use serde_json::{json, Value};
use std::collections::BTreeMap;

const TOKEN: &str = "isolation-operator-token-0123456789";

/// What an operation is, for this suite.
enum Kind {
    /// Names one of A's resources in its path: must be a 404.
    Scoped(Value),
    /// Lists project resources: 200 without any of A's ids.
    List,
    /// Creates in the caller's project from a body naming A's resources: must be a 404.
    CreateFromA(Value),
    /// Creates in the caller's project and names nothing of A's: allowed (it lands in B).
    CreateOwn,
    /// Not project-scoped (identity, catalogues, project management, people).
    Unscoped,
}

fn classify(method: &str, path: &str, a: &Ids) -> Kind {
    use Kind::*;
    let unscoped = [
        "/api/health",
        "/api/me",
        "/api/auth",
        "/api/models",
        "/api/backends",
        "/api/projects",
        "/api/users",
        "/api/webhooks/event-types",
        "/api/api-keys",
    ];
    if unscoped
        .iter()
        .any(|p| path == *p || path.starts_with(&format!("{p}/")))
    {
        return Unscoped;
    }
    match (method, path) {
        (
            "GET",
            "/api/agents" | "/api/sessions" | "/api/webhooks" | "/api/secrets" | "/api/git-keys"
            | "/api/skill-bundles" | "/api/usage" | "/api/environments",
        ) => List,
        (
            "POST",
            "/api/agents" | "/api/secrets" | "/api/git-keys" | "/api/skill-bundles"
            | "/api/environments",
        ) => CreateOwn,
        ("POST", "/api/sessions") => CreateFromA(json!({"agent_id": a.agent})),
        ("POST", "/api/webhooks") => CreateFromA(
            json!({"name": "w", "url": "https://example.com/hook", "agent_id": a.agent}),
        ),
        ("PATCH", "/api/agents/{ref}") => Scoped(json!({"version": 1, "name": "stolen"})),
        ("PATCH", "/api/environments/{ref}") => {
            Scoped(json!({"name": "stolen", "config": {"image": "stolen:1"}}))
        }
        ("PATCH", "/api/sessions/{session_id}") => Scoped(json!({"title": "stolen"})),
        ("PATCH", "/api/webhooks/{webhook_id}") => Scoped(json!({"name": "stolen"})),
        ("PUT", "/api/secrets/{secret_id}") => Scoped(json!({"value": "stolen"})),
        ("PUT", "/api/agents/{ref}/memory") => {
            Scoped(json!({"memory": "stolen", "summary": "stolen", "version": 0}))
        }
        ("POST", "/api/sessions/{session_id}/exec") => Scoped(json!({"command": "true"})),
        ("POST", "/api/sessions/{session_id}/processes") => Scoped(json!({"command": "true"})),
        ("POST", "/api/sessions/{session_id}/messages") => {
            Scoped(json!({"prompt": "hi", "max_turns": null}))
        }
        ("POST", "/api/sessions/{session_id}/tool-results") => {
            Scoped(json!({"call_id": "c1", "output": "x"}))
        }
        ("POST", "/api/sessions/{session_id}/snapshots") => Scoped(json!({"label": "x"})),
        ("POST", "/api/sessions/{session_id}/tool-confirmations") => {
            Scoped(json!({"call_id": "c1", "decision": "allow"}))
        }
        ("POST", "/api/agents/{ref}/versions/{version}/restore") => Scoped(json!({"version": 1})),
        ("POST", "/api/agents/{ref}/schedules") => {
            Scoped(json!({"cron": "0 9 * * *", "timezone": "UTC", "message": "stolen"}))
        }
        ("PATCH", "/api/agents/{ref}/schedules/{schedule_id}") => {
            Scoped(json!({"message": "stolen"}))
        }
        ("POST", "/api/git-keys/{key_id}/test") => {
            Scoped(json!({"repo": "o/r", "host": "github.com"}))
        }
        _ => Scoped(Value::Null),
    }
}

struct Ids {
    agent: String,
    schedule: String,
    session: String,
    snapshot: String,
    webhook: Option<String>,
    secret: String,
    git_key: String,
    bundle: String,
    environment: String,
}

impl Ids {
    fn fill(&self, path: &str) -> String {
        let r = if path.starts_with("/api/environments/") {
            &self.environment
        } else {
            &self.agent
        };
        path.replace("{ref}", r)
            .replace("{session_id}", &self.session)
            .replace("{snapshot_id}", &self.snapshot)
            .replace(
                "{webhook_id}",
                self.webhook
                    .as_deref()
                    .unwrap_or("00000000-0000-7000-8000-00000000dead"),
            )
            .replace("{secret_id}", &self.secret)
            // Only git keys are project-scoped among the `{key_id}` routes (API keys are not).
            .replace("{key_id}", &self.git_key)
            .replace("{delivery_id}", "00000000-0000-7000-8000-00000000beef")
            .replace("{port}", "8080")
            .replace("{slug}", &self.bundle)
            .replace("{schedule_id}", &self.schedule)
            .replace("{version}", "1")
            // Routes with a required query (files) get it; the others ignore it.
            + "?path=notes.md"
    }
}

/// Everything project A has, as text, to compare before and after.
async fn fingerprint(app: &TestApp, project: &str) -> String {
    let mut out = String::new();
    for (table, filter) in [
        ("agents", "project_id = $1::uuid"),
        ("sessions", "project_id = $1::uuid"),
        ("snapshots", "project_id = $1::uuid"),
        (
            "events",
            "session_id in (select id from sessions where project_id = $1::uuid)",
        ),
        (
            "runs",
            "session_id in (select id from sessions where project_id = $1::uuid)",
        ),
        ("api_keys", "project_id = $1::uuid"),
        ("secrets", "project_id = $1::uuid"),
        ("git_keys", "project_id = $1::uuid"),
        ("skill_bundles", "project_id = $1::uuid"),
        ("environments", "project_id = $1::uuid"),
        ("schedules", "project_id = $1::uuid"),
        (
            "skill_bundle_versions",
            "bundle_id in (select id from skill_bundles where project_id = $1::uuid)",
        ),
    ] {
        let rows: Vec<(String,)> = sqlx::query_as(&format!(
            "select t::text from {table} t where {filter} order by 1"
        ))
        .bind(project)
        .fetch_all(&app.db)
        .await
        .unwrap();
        out += &format!("{table}: {rows:?}\n");
    }
    out
}

async fn call(app: &TestApp, method: &str, path: &str, key: &str, body: &Value) -> (u16, Value) {
    let m = Method::from_bytes(method.as_bytes()).unwrap();
    let mut r = app.http.request(m, app.url(path)).bearer_auth(key);
    if method == "POST" && path.contains("/files?") {
        let part = reqwest::multipart::Part::bytes(b"hello".to_vec()).file_name("notes.md");
        r = r.multipart(reqwest::multipart::Form::new().part("file", part));
    } else if !body.is_null() {
        r = r.json(body);
    } else if method == "POST" || method == "PATCH" {
        r = r.json(&json!({}));
    }
    let resp = r.send().await.unwrap();
    let status = resp.status().as_u16();
    // Event streams would stay open: a 404 has a body, a 200 stream is dropped here.
    let body = if resp
        .headers()
        .get("content-type")
        .is_some_and(|c| c.to_str().unwrap_or("").starts_with("text/event-stream"))
    {
        Value::Null
    } else {
        resp.json().await.unwrap_or(Value::Null)
    };
    (status, body)
}

#[tokio::test]
async fn a_key_of_one_project_reaches_nothing_of_another() {
    let app = TestApp::builder().with_token(TOKEN).spawn().await;
    let op = |m: &str, p: &str, b: Value, project: Option<&str>| {
        let m = Method::from_bytes(m.as_bytes()).unwrap();
        let mut r = app.http.request(m, app.url(p)).bearer_auth(TOKEN).json(&b);
        if let Some(pr) = project {
            r = r.header("x-project", pr);
        }
        async move { r.send().await.unwrap().json::<Value>().await.unwrap() }
    };
    let a = op(
        "POST",
        "/api/projects",
        json!({"name": "A", "slug": "proj-a", "description": ""}),
        None,
    )
    .await;
    op(
        "POST",
        "/api/projects",
        json!({"name": "B", "slug": "proj-b", "description": ""}),
        None,
    )
    .await;
    let key_a = op(
        "POST",
        "/api/api-keys",
        json!({"name": "a", "description": "", "expires_at": null}),
        Some("proj-a"),
    )
    .await;
    let key_b = op(
        "POST",
        "/api/api-keys",
        json!({"name": "b", "description": "", "expires_at": null}),
        Some("proj-b"),
    )
    .await;
    let (key_a, key_b) = (
        key_a["key"].as_str().unwrap().to_owned(),
        key_b["key"].as_str().unwrap().to_owned(),
    );

    // A's resources: an agent, a session (a seeded row with a log), a snapshot, a webhook.
    let (s, agent) = call(
        &app,
        "POST",
        "/api/agents",
        &key_a,
        &json!({"slug": "a-agent", "name": "A"}),
    )
    .await;
    assert_eq!(s, 201, "{agent}");
    let project_a = a["id"].as_str().unwrap().to_owned();
    let agent_id = agent["id"].as_str().unwrap().to_owned();
    let sid = app
        .seed_session(sandbox_agents_domain::AgentId(
            uuid::Uuid::parse_str(&agent_id).unwrap(),
        ))
        .await;
    sqlx::query("update sessions set project_id = $1::uuid where id = $2")
        .bind(&project_a)
        .bind(sid.0)
        .execute(&app.db)
        .await
        .unwrap();
    app.append_messages(sid, 1, 3).await;
    let snapshot = uuid::Uuid::now_v7();
    sqlx::query("insert into snapshots (id, project_id, session_id, label, archive, size_bytes) values ($1, $2::uuid, $3, 'a', 'blob', 1)")
        .bind(snapshot)
        .bind(&project_a)
        .bind(sid.0)
        .execute(&app.db)
        .await
        .unwrap();
    let (s, hook) = call(
        &app,
        "POST",
        "/api/webhooks",
        &key_a,
        &json!({"name": "a", "url": "https://example.com/a"}),
    )
    .await;
    let webhook = (s == 201).then(|| hook["id"].as_str().unwrap().to_owned());
    let (s, secret) = call(
        &app,
        "POST",
        "/api/secrets",
        &key_a,
        &json!({"name": "A_SECRET", "value": "a-secret-value"}),
    )
    .await;
    assert_eq!(s, 201, "{secret}");
    let (s, git_key) = call(&app, "POST", "/api/git-keys", &key_a, &json!({"name": "a"})).await;
    assert_eq!(s, 201, "{git_key}");
    let (s, bundle) = call(
        &app,
        "POST",
        "/api/skill-bundles",
        &key_a,
        &json!({"slug": "a-bundle"}),
    )
    .await;
    assert_eq!(s, 201, "{bundle}");
    let r = app
        .http
        .post(app.url("/api/skill-bundles/a-bundle/versions"))
        .bearer_auth(&key_a)
        .multipart(
            reqwest::multipart::Form::new().part(
                "file",
                reqwest::multipart::Part::bytes(
                    sandbox_agents_testkit::skill_bundles::skills_tree("a"),
                )
                .file_name("bundle.tar"),
            ),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let (s, environment) = call(
        &app,
        "POST",
        "/api/environments",
        &key_a,
        &json!({"name": "a-env", "description": "", "metadata": {"team": "a"}}),
    )
    .await;
    assert_eq!(s, 201, "{environment}");
    let (s, schedule) = call(
        &app,
        "POST",
        &format!("/api/agents/{agent_id}/schedules"),
        &key_a,
        &json!({"cron": "0 9 * * *", "timezone": "UTC", "message": "m", "paused": true}),
    )
    .await;
    assert_eq!(s, 201, "{schedule}");
    let ids = Ids {
        schedule: schedule["id"].as_str().unwrap().to_owned(),
        environment: environment["id"].as_str().unwrap().to_owned(),
        agent: agent_id.clone(),
        session: sid.to_string(),
        snapshot: snapshot.to_string(),
        webhook,
        secret: secret["id"].as_str().unwrap().to_owned(),
        git_key: git_key["id"].as_str().unwrap().to_owned(),
        bundle: bundle["id"].as_str().unwrap().to_owned(),
    };
    let a_ids = [
        ids.agent.clone(),
        ids.session.clone(),
        ids.snapshot.clone(),
        ids.secret.clone(),
        ids.git_key.clone(),
        ids.bundle.clone(),
        ids.environment.clone(),
    ];
    let before = fingerprint(&app, &project_a).await;

    let doc: Value = serde_json::to_value(sandbox_agents_api::openapi()).unwrap();
    let mut checked = BTreeMap::new();
    for (path, ops) in doc["paths"].as_object().unwrap() {
        for method in ops.as_object().unwrap().keys() {
            let method = method.to_uppercase();
            let kind = classify(&method, path, &ids);
            let url = ids.fill(path);
            let verdict = match kind {
                Kind::Unscoped | Kind::CreateOwn => continue,
                Kind::Scoped(body) => {
                    let (s, b) = call(&app, &method, &url, &key_b, &body).await;
                    assert_eq!(s, 404, "{method} {url} with B's key: {b}");
                    // And naming A's project does not help.
                    let m = Method::from_bytes(method.as_bytes()).unwrap();
                    let s = app
                        .http
                        .request(m, app.url(&url))
                        .bearer_auth(&key_b)
                        .header("x-project", "proj-a")
                        .json(&json!({}))
                        .send()
                        .await
                        .unwrap()
                        .status();
                    assert_eq!(s, 404, "{method} {url} with B's key and X-Project: A");
                    "404"
                }
                Kind::List => {
                    let (s, b) = call(&app, &method, &url, &key_b, &Value::Null).await;
                    assert_eq!(s, 200, "{method} {url}: {b}");
                    let text = b.to_string();
                    assert!(
                        a_ids.iter().all(|id| !text.contains(id.as_str())),
                        "{method} {url} leaks: {text}"
                    );
                    "200, nothing of A"
                }
                Kind::CreateFromA(body) => {
                    let (s, b) = call(&app, &method, &url, &key_b, &body).await;
                    assert!(s == 404 || s == 422, "{method} {url} with A's ids: {s} {b}");
                    "refused"
                }
            };
            checked.insert(format!("{method} {path}"), verdict);
        }
    }
    assert!(
        checked.len() >= 25,
        "too few operations were tried: {checked:?}"
    );
    assert_eq!(
        fingerprint(&app, &project_a).await,
        before,
        "project A changed"
    );
    // Secrets are bound by name, and a name resolves only in the caller's project: B neither
    // reads A's secret by name nor gets a session bound to it.
    let (s, _) = call(&app, "GET", "/api/secrets/A_SECRET", &key_b, &Value::Null).await;
    assert_eq!(s, 404);
    let (s, b) = call(
        &app,
        "POST",
        "/api/agents",
        &key_b,
        &json!({"slug": "thief", "name": "T",
                "secret_bindings": [{"secret": "A_SECRET", "env": "STOLEN"}]}),
    )
    .await;
    assert_eq!(s, 201, "{b}");
    let (s, b) = call(
        &app,
        "POST",
        "/api/sessions",
        &key_b,
        &json!({"agent_id": "thief"}),
    )
    .await;
    assert_eq!(s, 422, "a session bound to another project's secret: {b}");
    // Environments resolve in the caller's project too, by id and by name.
    for env in [ids.environment.as_str(), "a-env"] {
        let (s, b) = call(
            &app,
            "POST",
            "/api/agents",
            &key_b,
            &json!({"slug": "env-thief", "name": "T", "environment_id": env}),
        )
        .await;
        assert_eq!(
            s, 422,
            "an agent defaulting to another project's environment: {b}"
        );
        let (s, b) = call(
            &app,
            "POST",
            "/api/sessions",
            &key_b,
            &json!({"agent_id": "thief", "environment_id": env, "secret_bindings": []}),
        )
        .await;
        assert!(
            s == 404 || s == 422,
            "a session in another project's environment: {s} {b}"
        );
    }
    // A's own key still sees everything of A.
    let (s, _) = call(
        &app,
        "GET",
        &format!("/api/sessions/{}", ids.session),
        &key_a,
        &Value::Null,
    )
    .await;
    assert_eq!(s, 200);
}
