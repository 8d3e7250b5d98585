//! Inputs at the edges, each one the API fuzz (`scripts/test-api-fuzz`) found answered with a
//! 500 or wrongly accepted: refused with a 4xx that names the field and changes nothing, or
//! kept exactly.

use sandbox_agents_testkit::TestApp;
use serde_json::{json, Value};

async fn send(app: &TestApp, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
    let mut req = app.http.request(method.parse().unwrap(), app.url(path));
    if let Some(body) = body {
        req = req.json(&body);
    }
    let r = req.send().await.unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

async fn count(app: &TestApp, table: &str) -> i64 {
    let sql = match table {
        "projects" => "select count(*) from projects",
        "agents" => "select count(*) from agents",
        "secrets" => "select count(*) from secrets",
        other => panic!("no count for {other}"),
    };
    sqlx::query_scalar(sql).fetch_one(&app.db).await.unwrap()
}

#[tokio::test]
async fn a_nul_character_in_a_body_is_a_422_naming_the_field_and_changes_nothing() {
    let app = TestApp::builder().spawn().await;
    let projects = count(&app, "projects").await;
    let (status, r) = send(
        &app,
        "POST",
        "/api/projects",
        Some(json!({"name": "a\u{0}b"})),
    )
    .await;
    assert_eq!(status, 422, "{r}");
    assert_eq!(r["detail"][0]["type"], "string_nul");
    assert_eq!(r["detail"][0]["loc"], json!(["body", "name"]));
    assert!(
        r["detail"][0].get("input").is_none(),
        "the value is not echoed: {r}"
    );
    assert_eq!(count(&app, "projects").await, projects);

    // Deep in a document stored as jsonb, as a key too, and in a write-only secret.
    let agent = app.seed_agent("edges").await;
    let session = app.seed_session(agent.id).await;
    let path = format!("/api/sessions/{session}");
    let (status, r) = send(
        &app,
        "PATCH",
        &path,
        Some(json!({"metadata": {"k\u{0}": "v"}})),
    )
    .await;
    assert_eq!(status, 422, "{r}");
    assert_eq!(r["detail"][0]["loc"], json!(["body", "metadata", "k\u{0}"]));
    let (status, r) = send(
        &app,
        "POST",
        "/api/secrets",
        Some(json!({"name": "TOKEN", "value": "se\u{0}cret"})),
    )
    .await;
    assert_eq!(status, 422, "{r}");
    assert!(!r.to_string().contains("se\\u0000cret"), "{r}");
    assert_eq!(count(&app, "secrets").await, 0);
    assert_eq!(
        app.session(&session.to_string()).await["metadata"],
        json!({})
    );
}

#[tokio::test]
async fn a_nul_character_in_the_url_is_a_404_or_a_422_never_a_500() {
    let app = TestApp::builder().spawn().await;
    for path in [
        "/api/agents/a%00b",
        "/api/agents/a%00b/memory",
        "/api/projects/p%00",
        "/api/environments/e%00",
        "/api/skill-bundles/b%00",
    ] {
        let (status, r) = send(&app, "GET", path, None).await;
        assert_eq!(status, 404, "{path}: {r}");
        assert!(r["detail"].as_str().unwrap().contains("NUL"), "{path}: {r}");
    }
    let (status, r) = send(&app, "GET", "/api/sessions?agent_id=a%00", None).await;
    assert_eq!(status, 422, "{r}");
    assert_eq!(r["detail"][0]["loc"], json!(["query", "agent_id"]));
}

#[tokio::test]
async fn an_array_is_not_a_body_even_where_every_field_is_optional() {
    let app = TestApp::builder().spawn().await;
    let agent = app.seed_agent("edges").await;
    let session = app.seed_session(agent.id).await;
    // serde fills a struct from an array, field by field: `[]` was an empty edit (200).
    let (status, r) = send(
        &app,
        "PATCH",
        &format!("/api/sessions/{session}"),
        Some(json!([])),
    )
    .await;
    assert_eq!(status, 422, "{r}");
    assert_eq!(r["detail"][0]["loc"], json!(["body"]));
    // ... and `["a", "b"]` an agent with slug "a" and name "b".
    let agents = count(&app, "agents").await;
    let (status, r) = send(&app, "POST", "/api/agents", Some(json!(["a", "b"]))).await;
    assert_eq!(status, 422, "{r}");
    assert_eq!(count(&app, "agents").await, agents);
}

#[tokio::test]
async fn numbers_at_the_edges_of_a_double_come_back_from_the_database_exactly() {
    let app = TestApp::builder().spawn().await;
    let agent = app.seed_agent("edges").await;
    let session = app.seed_session(agent.id).await;
    let path = format!("/api/sessions/{session}");
    // PostgreSQL gives jsonb numbers back as plain decimals (f64::MAX as 309 digits), which
    // the default parser read past f64::MAX (every read of the session was a 500 after this
    // PATCH), or a unit off in the last place.
    let metadata =
        json!({"max": f64::MAX, "near": 3.4819636776883114e291, "tiny": 5e-324, "min": f64::MIN});
    let (status, r) = send(&app, "PATCH", &path, Some(json!({"metadata": metadata}))).await;
    assert_eq!(status, 200, "{r}");
    let (status, r) = send(&app, "GET", &path, None).await;
    assert_eq!(status, 200, "{r}");
    assert_eq!(r["metadata"], metadata);
    let (status, _) = send(&app, "DELETE", &path, None).await;
    assert_eq!(status, 204);
}

#[tokio::test]
async fn a_pinned_bundle_version_past_int4_is_a_422() {
    let app = TestApp::builder().spawn().await;
    let agents = count(&app, "agents").await;
    let body = json!({"slug": "pinned", "name": "Pinned",
        "skills_source": {"kind": "bundle", "bundle": "tools", "version": 2_147_483_648_u64}});
    let (status, r) = send(&app, "POST", "/api/agents", Some(body)).await;
    assert_eq!(status, 422, "{r}");
    assert_eq!(
        r["detail"][0]["loc"],
        json!(["body", "skills_source", "version"])
    );
    assert_eq!(count(&app, "agents").await, agents);
}

#[tokio::test]
async fn a_last_event_id_that_is_not_a_seq_is_a_422() {
    let app = TestApp::builder().spawn().await;
    let agent = app.seed_agent("edges").await;
    let session = app.seed_session(agent.id).await;
    let url = app.url(&format!("/api/sessions/{session}/events/stream"));
    let open = async |id: &str| {
        let r = app
            .http
            .get(&url)
            .header("last-event-id", id)
            .send()
            .await
            .unwrap();
        let status = r.status().as_u16();
        let body = if status == 200 {
            Value::Null
        } else {
            r.json().await.unwrap()
        };
        (status, body)
    };
    // It was ignored, and the stream replayed from the start.
    for id in ["__main__", "", "1.5"] {
        let (status, body) = open(id).await;
        assert_eq!(status, 422, "Last-Event-ID {id:?}: {body}");
        assert_eq!(body["detail"][0]["loc"], json!(["header", "Last-Event-ID"]));
    }
    for id in ["0", " 12 "] {
        assert_eq!(open(id).await.0, 200, "Last-Event-ID {id:?}");
    }
}
