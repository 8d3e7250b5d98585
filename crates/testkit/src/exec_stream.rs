//! `POST /api/sessions/{id}/exec` asking for an event stream.

use crate::TestApp;
use serde_json::Value;

/// `POST …/exec` asking for the stream.
pub async fn streamed(app: &TestApp, id: &str, body: Value) -> reqwest::Response {
    app.http
        .post(app.url(&format!("/api/sessions/{id}/exec")))
        .header("accept", "text/event-stream")
        .json(&body)
        .send()
        .await
        .unwrap()
}
