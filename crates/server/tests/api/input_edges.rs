//! Inputs at the edges, each one the API fuzz (`scripts/test-api-fuzz`) found answered with a
//! 500 or wrongly accepted: refused with a 4xx that names the field and changes nothing, or
//! kept exactly.

use sandbox_agents_testkit::{spawn_app, TestApp};
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

#[tokio::test]
async fn numbers_at_the_edges_of_a_double_come_back_from_the_database_exactly() {
    let app = spawn_app().await;
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
