//! A sandbox's files through the API.

use crate::TestApp;

/// `GET …/files/content` of `path`.
pub async fn content(app: &TestApp, id: &str, path: &str) -> reqwest::Response {
    app.http
        .get(app.url(&format!("/api/sessions/{id}/files/content")))
        .header("Accept", "application/json")
        .query(&[("path", path)])
        .send()
        .await
        .unwrap()
}

/// The bytes of `path`, which must be served as a file.
pub async fn content_ok(app: &TestApp, id: &str, path: &str) -> Vec<u8> {
    let r = content(app, id, path).await;
    assert_eq!(r.status(), 200, "content {path}");
    assert_eq!(r.headers()["content-type"], "application/octet-stream");
    r.bytes().await.unwrap().to_vec()
}
