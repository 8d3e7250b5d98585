//! Calls with credentials: a bearer token or API key and a project, API keys, and people who
//! sign in with a password and act through their session cookie.

use crate::TestApp;
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

/// A request with an optional bearer credential and `X-Project`.
pub async fn call(
    app: &TestApp,
    method: Method,
    path: &str,
    bearer: Option<&str>,
    project: Option<&str>,
    body: Option<Value>,
) -> (StatusCode, Value) {
    let mut r = app.http.request(method, app.url(path));
    if let Some(b) = bearer {
        r = r.bearer_auth(b);
    }
    if let Some(p) = project {
        r = r.header("x-project", p);
    }
    if let Some(b) = body {
        r = r.json(&b);
    }
    let resp = r.send().await.expect("request");
    let status = resp.status();
    let text = resp.text().await.unwrap_or_default();
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

pub async fn make_key(app: &TestApp, bearer: &str, project: Option<&str>, name: &str) -> Value {
    let (s, k) = call(
        app,
        Method::POST,
        "/api/api-keys",
        Some(bearer),
        project,
        Some(json!({"name": name, "description": "", "expires_at": null})),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{k}");
    k
}

/// `POST /api/auth/login`, as the sign-in page does.
pub async fn login(app: &TestApp, email: &str, password: &str) -> reqwest::Response {
    app.http
        .post(app.url("/api/auth/login"))
        .json(&json!({"email": email, "password": password}))
        .send()
        .await
        .unwrap()
}

/// A person made by the operator `token` (an operator when `operator`), who set a password
/// with their recovery code and so is signed in; returns their session cookie's value.
pub async fn signed_in_person(app: &TestApp, token: &str, email: &str, operator: bool) -> String {
    let (s, user) = call(
        app,
        Method::POST,
        "/api/users",
        Some(token),
        None,
        Some(json!({"email": email, "name": email, "password": null, "operator": operator})),
    )
    .await;
    assert_eq!(s, 201, "{user}");
    let r = app
        .http
        .post(app.url("/api/auth/recovery"))
        .json(&json!({"code": user["recovery_code"], "password": "a long enough password"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 204);
    session_from(&r)
}

/// The session token from a `Set-Cookie` answer.
pub fn session_from(r: &reqwest::Response) -> String {
    let c = r.headers()["set-cookie"].to_str().unwrap();
    assert!(c.contains("HttpOnly") && c.contains("SameSite=Lax"), "{c}");
    c.split(';')
        .next()
        .unwrap()
        .strip_prefix("sa_session=")
        .unwrap()
        .to_owned()
}

pub async fn as_person(
    app: &TestApp,
    method: Method,
    path: &str,
    session: &str,
    body: Option<Value>,
) -> (StatusCode, Value) {
    let mut r = app
        .http
        .request(method, app.url(path))
        .header("cookie", format!("sa_session={session}"))
        // What the web UI sends with a cookie session: changes need it.
        .header("x-requested-with", "sandbox-agents");
    if let Some(b) = body {
        r = r.json(&b);
    }
    let resp = r.send().await.unwrap();
    let status = resp.status();
    (status, resp.json().await.unwrap_or(Value::Null))
}
