//! Sessions in a named project (`X-Project`): created, waited for, stopped, their events.

use crate::{eventually, TestApp, BOOT};
use serde_json::{json, Value};

/// A request in `project` (its slug), as (status, JSON).
pub async fn call(
    app: &TestApp,
    method: reqwest::Method,
    project: &str,
    path: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let mut r = app
        .http
        .request(method, app.url(path))
        .header("x-project", project);
    if let Some(b) = body {
        r = r.json(&b);
    }
    let r = r.send().await.unwrap();
    (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
}

pub async fn create(app: &TestApp, project: &str, agent: &str) -> String {
    let (s, b) = call(
        app,
        reqwest::Method::POST,
        project,
        "/api/sessions",
        Some(json!({"agent_id": agent})),
    )
    .await;
    assert_eq!(s, 202, "{b}");
    b["id"].as_str().unwrap().to_owned()
}

/// `GET /api/sessions/{id}` in `project`, which must answer 200.
pub async fn status(app: &TestApp, project: &str, id: &str) -> Value {
    let (s, b) = call(
        app,
        reqwest::Method::GET,
        project,
        &format!("/api/sessions/{id}"),
        None,
    )
    .await;
    assert_eq!(s, 200, "{b}");
    b
}

pub async fn wait_running(app: &TestApp, project: &str, id: &str) {
    eventually(&format!("{id} to run"), BOOT, async || {
        let s = status(app, project, id).await;
        assert_ne!(s["status"], "error", "{s}");
        (s["status"] == "running").then_some(())
    })
    .await;
}

pub async fn events(app: &TestApp, project: &str, id: &str) -> Vec<Value> {
    let (s, b) = call(
        app,
        reqwest::Method::GET,
        project,
        &format!("/api/sessions/{id}/events?limit=1000"),
        None,
    )
    .await;
    assert_eq!(s, 200, "{b}");
    b.as_array().cloned().expect("a list of events")
}

/// Waits until `id` has said it is queued; returns that event's payload.
pub async fn queued(app: &TestApp, project: &str, id: &str) -> Value {
    eventually(&format!("{id} to be queued"), BOOT, async || {
        events(app, project, id)
            .await
            .into_iter()
            .find(|e| e["type"] == "session.queued")
            .map(|e| e["payload"].clone())
    })
    .await
}

/// `POST /api/sessions/{id}/{action}` (`stop`, `interrupt`) in `project`, which must answer 200.
pub async fn act(app: &TestApp, project: &str, id: &str, action: &str) {
    let (s, b) = call(
        app,
        reqwest::Method::POST,
        project,
        &format!("/api/sessions/{id}/{action}"),
        Some(json!({})),
    )
    .await;
    assert_eq!(s, 200, "{action}: {b}");
}

pub async fn stop(app: &TestApp, project: &str, id: &str) {
    act(app, project, id, "stop").await;
}

pub async fn project(app: &TestApp, name: &str) -> String {
    let (s, b) = call(
        app,
        reqwest::Method::POST,
        "default",
        "/api/projects",
        Some(json!({"name": name})),
    )
    .await;
    assert_eq!(s, 201, "{b}");
    let slug = b["slug"].as_str().unwrap().to_owned();
    let (s, b) = call(
        app,
        reqwest::Method::POST,
        &slug,
        "/api/agents",
        Some(json!({"slug": "a", "name": "a"})),
    )
    .await;
    assert_eq!(s, 201, "{b}");
    slug
}
