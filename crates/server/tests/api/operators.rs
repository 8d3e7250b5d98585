//! Operator people: the first person made while the deployment is open is one, operators make
//! others operators, and without a shared token the last one cannot be demoted or deleted.

use reqwest::{Method, StatusCode};
use sandbox_agents_testkit::auth::{as_person, call, login, session_from};
use sandbox_agents_testkit::TestApp;
use serde_json::{json, Value};

/// Makes an account with a password (as `session`'s person, or in open mode) and signs it in.
async fn person(app: &TestApp, by: Option<&str>, email: &str, operator: bool) -> (String, String) {
    let body = json!({"email": email, "name": "", "password": "a long enough password", "operator": operator});
    let (s, user) = match by {
        Some(session) => as_person(app, Method::POST, "/api/users", session, Some(body)).await,
        None => call(app, Method::POST, "/api/users", None, None, Some(body)).await,
    };
    assert_eq!(s, StatusCode::CREATED, "{user}");
    let r = login(app, email, "a long enough password").await;
    assert_eq!(r.status(), 204);
    (user["id"].as_str().unwrap().to_owned(), session_from(&r))
}

#[tokio::test]
async fn the_first_person_operates_the_deployment_and_operators_cannot_all_go() {
    let app = TestApp::builder().spawn().await;
    // Made in open mode: an operator, though the body did not ask.
    let (first, s1) = person(&app, None, "first@example.com", false).await;
    let (s, me) = as_person(&app, Method::GET, "/api/users", &s1, None).await;
    assert_eq!(s, StatusCode::OK, "{me}");
    assert_eq!(me[0]["operator"], true);

    // The deployment is closed now: an anonymous caller cannot make people.
    let (s, _) = call(
        &app,
        Method::POST,
        "/api/users",
        None,
        None,
        Some(json!({"email": "x@example.com", "name": "", "password": null})),
    )
    .await;
    assert_eq!(s, StatusCode::UNAUTHORIZED);

    // A plain person is refused operator actions.
    let (second, s2) = person(&app, Some(&s1), "second@example.com", false).await;
    let (s, _) = as_person(&app, Method::GET, "/api/users", &s2, None).await;
    assert_eq!(s, StatusCode::FORBIDDEN);
    // `/api/me` says so beforehand, for a UI that hides what would be refused.
    let operator = async |session: Option<&str>| match session {
        Some(s) => as_person(&app, Method::GET, "/api/me", s, None).await.1["operator"].clone(),
        None => call(&app, Method::GET, "/api/me", None, None, None).await.1["operator"].clone(),
    };
    assert_eq!(operator(Some(&s1)).await, true);
    assert_eq!(operator(Some(&s2)).await, false);
    assert_eq!(operator(None).await, false);

    // The only operator cannot stop being one, nor be deleted.
    let demote = json!({"operator": false});
    let (s, b) = as_person(
        &app,
        Method::PATCH,
        &format!("/api/users/{first}"),
        &s1,
        Some(demote.clone()),
    )
    .await;
    assert_eq!(s, StatusCode::CONFLICT, "{b}");
    let (s, _) = as_person(
        &app,
        Method::DELETE,
        &format!("/api/users/{first}"),
        &s1,
        None,
    )
    .await;
    assert_eq!(s, StatusCode::CONFLICT);

    // Once there is another, it can.
    let (s, b) = as_person(
        &app,
        Method::PATCH,
        &format!("/api/users/{second}"),
        &s1,
        Some(json!({"operator": true, "name": "Second"})),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{b}");
    assert_eq!(
        (b["operator"].clone(), b["name"].clone()),
        (Value::Bool(true), json!("Second"))
    );
    let (s, b) = as_person(
        &app,
        Method::PATCH,
        &format!("/api/users/{first}"),
        &s2,
        Some(demote),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{b}");
    let (s, _) = as_person(&app, Method::GET, "/api/users", &s1, None).await;
    assert_eq!(
        s,
        StatusCode::FORBIDDEN,
        "a demoted person is no longer an operator"
    );
    let (s, b) = as_person(
        &app,
        Method::PATCH,
        &format!("/api/users/{second}"),
        &s2,
        Some(json!({"operator": null})),
    )
    .await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{b}");
    let (s, _) = as_person(
        &app,
        Method::PATCH,
        "/api/users/not-a-user",
        &s2,
        Some(json!({})),
    )
    .await;
    assert_eq!(s, StatusCode::NOT_FOUND);
}
