//! Credentials and tenancy: open mode, the shared token, API keys
//! (bound and unbound, revoked, expired), project resolution and isolation between projects.

use reqwest::{Method, StatusCode};
use sandbox_agents_testkit::auth::{as_person, call, login, make_key, session_from};
use sandbox_agents_testkit::{eventually, TestApp};
use serde_json::{json, Value};
use std::time::Duration;

const TOKEN: &str = "operator-token-for-tests-0123456789";

/// `POST /api/projects` with the operator token.
async fn create_project(app: &TestApp, body: Value) -> (StatusCode, Value) {
    call(
        app,
        Method::POST,
        "/api/projects",
        Some(TOKEN),
        None,
        Some(body),
    )
    .await
}

#[tokio::test]
async fn open_mode_lasts_until_the_first_key_and_that_key_can_manage_keys() {
    let app = TestApp::builder().spawn().await;
    let (s, me) = call(&app, Method::GET, "/api/me", None, None, None).await;
    assert_eq!(s, 200);
    assert_eq!(me["auth_required"], false);
    assert_eq!(me["operator"], true, "in open mode everyone operates");
    assert_eq!(
        call(&app, Method::GET, "/api/agents", None, None, None)
            .await
            .0,
        200
    );

    let key = make_key(&app, "ignored-in-open-mode", None, "bootstrap").await;
    let secret = key["key"].as_str().unwrap();
    assert!(secret.starts_with("ak_"));
    assert_eq!(key["prefix"], &secret[..11]);
    assert_eq!(
        key["project_id"],
        json!("00000000-0000-7000-8000-000000000001")
    );

    // Closed now: no credential is 401, with the challenge; the key works.
    let r = app.http.get(app.url("/api/agents")).send().await.unwrap();
    assert_eq!(r.status(), 401);
    assert_eq!(r.headers()["www-authenticate"], "Bearer");
    assert!(r.json::<Value>().await.unwrap()["detail"].is_string());
    let (_, me) = call(&app, Method::GET, "/api/me", None, None, None).await;
    assert_eq!(
        (me["auth_required"].as_bool(), me["authenticated"].as_bool()),
        (Some(true), Some(false))
    );
    assert_eq!(
        call(&app, Method::GET, "/api/health", None, None, None)
            .await
            .0,
        200
    );
    assert_eq!(
        call(&app, Method::GET, "/api/agents", Some(secret), None, None)
            .await
            .0,
        200
    );
    let (_, me) = call(&app, Method::GET, "/api/me", Some(secret), None, None).await;
    assert_eq!(me["kind"], "api_key");
    assert_eq!(me["label"], "bootstrap");
    assert_eq!(me["subject"], key["id"]);
    // The stored row has a hash, never the key.
    let (hash,): (Vec<u8>,) = sqlx::query_as("select hash from api_keys where id = $1::uuid")
        .bind(key["id"].as_str().unwrap())
        .fetch_one(&app.db)
        .await
        .unwrap();
    assert_eq!(hash.len(), 32);
    assert_ne!(hash, secret.as_bytes());
}

#[tokio::test]
async fn the_shared_token_is_an_operator_and_keys_are_revoked_and_expire() {
    let app = TestApp::builder().with_token(TOKEN).spawn().await;
    assert_eq!(
        call(&app, Method::GET, "/api/agents", None, None, None)
            .await
            .0,
        401
    );
    assert_eq!(
        call(&app, Method::GET, "/api/agents", Some("wrong"), None, None)
            .await
            .0,
        401
    );
    assert_eq!(
        call(
            &app,
            Method::GET,
            "/api/auth/check",
            Some("wrong"),
            None,
            None
        )
        .await
        .0,
        401
    );
    assert_eq!(
        call(
            &app,
            Method::GET,
            "/api/auth/check",
            Some(TOKEN),
            None,
            None
        )
        .await
        .0,
        200
    );
    let (_, me) = call(&app, Method::GET, "/api/me", Some(TOKEN), None, None).await;
    assert_eq!(
        (me["kind"].as_str(), me["authenticated"].as_bool()),
        (Some("token"), Some(true))
    );

    let key = make_key(&app, TOKEN, None, "ci").await;
    let secret = key["key"].as_str().unwrap();
    // A key is not an operator where the token exists.
    assert_eq!(
        call(&app, Method::GET, "/api/api-keys", Some(secret), None, None)
            .await
            .0,
        403
    );
    assert_eq!(
        call(
            &app,
            Method::POST,
            "/api/projects",
            Some(secret),
            None,
            Some(json!({"name": "x", "slug": "", "description": ""}))
        )
        .await
        .0,
        403
    );
    // Using it records last_used_at, in the background.
    assert_eq!(
        call(&app, Method::GET, "/api/agents", Some(secret), None, None)
            .await
            .0,
        200
    );
    eventually(
        "last_used_at to be set",
        Duration::from_secs(10),
        async || {
            let (_, keys) = call(&app, Method::GET, "/api/api-keys", Some(TOKEN), None, None).await;
            let listed = keys
                .as_array()
                .unwrap()
                .iter()
                .find(|k| k["id"] == key["id"])
                .unwrap()
                .clone();
            assert!(listed.get("key").is_none(), "a list never shows a key");
            (!listed["last_used_at"].is_null()).then_some(())
        },
    )
    .await;
    // Revoked: refused at once, still listed; revoking again is harmless.
    let path = format!("/api/api-keys/{}/revoke", key["id"].as_str().unwrap());
    let (s, revoked) = call(&app, Method::POST, &path, Some(TOKEN), None, None).await;
    assert_eq!(s, 200);
    assert!(revoked["revoked_at"].is_string());
    let (_, again) = call(&app, Method::POST, &path, Some(TOKEN), None, None).await;
    assert_eq!(again["revoked_at"], revoked["revoked_at"]);
    assert_eq!(
        call(&app, Method::GET, "/api/agents", Some(secret), None, None)
            .await
            .0,
        401
    );

    // Expired: refused; a naive expiry is UTC; a bad one is a 422.
    let (s, old) = call(
        &app,
        Method::POST,
        "/api/api-keys",
        Some(TOKEN),
        None,
        Some(json!({"name": "old", "description": "", "expires_at": "2001-01-01T00:00:00"})),
    )
    .await;
    assert_eq!(s, 201);
    assert_eq!(old["expires_at"], "2001-01-01T00:00:00Z");
    assert_eq!(
        call(
            &app,
            Method::GET,
            "/api/agents",
            old["key"].as_str(),
            None,
            None
        )
        .await
        .0,
        401
    );
    let (s, err) = call(
        &app,
        Method::POST,
        "/api/api-keys",
        Some(TOKEN),
        None,
        Some(json!({"name": "bad", "description": "", "expires_at": "soon"})),
    )
    .await;
    assert_eq!(s, 422);
    assert_eq!(err["detail"][0]["loc"], json!(["body", "expires_at"]));

    // Deleted: gone from the list.
    let (s, _) = call(
        &app,
        Method::DELETE,
        &format!("/api/api-keys/{}", key["id"].as_str().unwrap()),
        Some(TOKEN),
        None,
        None,
    )
    .await;
    assert_eq!(s, 204);
    let (_, keys) = call(&app, Method::GET, "/api/api-keys", Some(TOKEN), None, None).await;
    assert!(!keys
        .as_array()
        .unwrap()
        .iter()
        .any(|k| k["id"] == key["id"]));
}

#[tokio::test]
async fn projects_resolve_by_header_or_key_and_never_leak_across() {
    let app = TestApp::builder().with_token(TOKEN).spawn().await;
    let (s, alpha) = create_project(
        &app,
        json!({"name": "Alpha Team", "slug": "", "description": "first"}),
    )
    .await;
    assert_eq!(s, 201, "{alpha}");
    assert_eq!(alpha["slug"], "alpha-team");
    assert_eq!(alpha["role"], Value::Null);
    let (_, beta) = create_project(
        &app,
        json!({"name": "Alpha Team", "slug": "", "description": ""}),
    )
    .await;
    assert_eq!(beta["slug"], "alpha-team-2", "a derived slug gets a suffix");
    let (s, _) = create_project(
        &app,
        json!({"name": "Dup", "slug": "alpha-team", "description": ""}),
    )
    .await;
    assert_eq!(s, 409);

    // Three projects now: the token must name one.
    let (s, err) = call(&app, Method::GET, "/api/agents", Some(TOKEN), None, None).await;
    assert_eq!(s, 400);
    assert!(err["detail"].as_str().unwrap().contains("X-Project"));
    assert_eq!(
        call(
            &app,
            Method::GET,
            "/api/agents",
            Some(TOKEN),
            Some("nope"),
            None
        )
        .await
        .0,
        404
    );

    let a_key = make_key(&app, TOKEN, Some("alpha-team"), "a").await;
    let b_key = make_key(&app, TOKEN, Some(beta["id"].as_str().unwrap()), "b").await;
    assert_eq!(a_key["project_id"], alpha["id"]);
    let (a, b) = (
        a_key["key"].as_str().unwrap(),
        b_key["key"].as_str().unwrap(),
    );

    // A bound key needs no header; it reaches only its project.
    let (s, agent) = call(
        &app,
        Method::POST,
        "/api/agents",
        Some(a),
        None,
        Some(json!({"slug": "secret-agent", "name": "S"})),
    )
    .await;
    assert_eq!(s, 201, "{agent}");
    let id = agent["id"].as_str().unwrap();
    for path in [
        format!("/api/agents/{id}"),
        "/api/agents/secret-agent".to_owned(),
    ] {
        assert_eq!(
            call(&app, Method::GET, &path, Some(a), None, None).await.0,
            200
        );
        assert_eq!(
            call(&app, Method::GET, &path, Some(b), None, None).await.0,
            404
        );
        assert_eq!(
            call(&app, Method::GET, &path, Some(b), Some("alpha-team"), None)
                .await
                .0,
            404
        );
        let (s, _) = call(&app, Method::DELETE, &path, Some(b), None, None).await;
        assert_eq!(s, 404);
    }
    let (_, listed) = call(&app, Method::GET, "/api/agents", Some(b), None, None).await;
    assert_eq!(listed, json!([]));
    let (_, listed) = call(
        &app,
        Method::GET,
        "/api/agents",
        Some(TOKEN),
        Some("alpha-team"),
        None,
    )
    .await;
    assert_eq!(listed.as_array().unwrap().len(), 1);
    // Projects: each key sees its own only.
    let (_, seen) = call(&app, Method::GET, "/api/projects", Some(b), None, None).await;
    assert_eq!(
        seen.as_array()
            .unwrap()
            .iter()
            .map(|p| p["slug"].clone())
            .collect::<Vec<_>>(),
        vec![json!("alpha-team-2")]
    );
    assert_eq!(
        call(
            &app,
            Method::GET,
            "/api/projects/alpha-team",
            Some(b),
            None,
            None
        )
        .await
        .0,
        404
    );
    assert_eq!(
        call(
            &app,
            Method::GET,
            "/api/projects/alpha-team",
            Some(a),
            None,
            None
        )
        .await
        .0,
        200
    );

    // Operators edit and delete; the slug stays; deletion takes the project's agents along.
    let (s, edited) = call(
        &app,
        Method::PATCH,
        "/api/projects/alpha-team",
        Some(TOKEN),
        None,
        Some(json!({"name": "Alpha"})),
    )
    .await;
    assert_eq!(s, 200);
    assert_eq!(
        (
            edited["name"].as_str(),
            edited["slug"].as_str(),
            edited["description"].as_str()
        ),
        (Some("Alpha"), Some("alpha-team"), Some("first"))
    );
    assert_eq!(
        call(
            &app,
            Method::DELETE,
            "/api/projects/alpha-team",
            Some(a),
            None,
            None
        )
        .await
        .0,
        403
    );
    assert_eq!(
        call(
            &app,
            Method::DELETE,
            "/api/projects/alpha-team",
            Some(TOKEN),
            None,
            None
        )
        .await
        .0,
        204
    );
    let (n,): (i64,) = sqlx::query_as("select count(*) from agents where id = $1::uuid")
        .bind(id)
        .fetch_one(&app.db)
        .await
        .unwrap();
    assert_eq!(n, 0);
    // The key bound to it went with it.
    assert_eq!(
        call(&app, Method::GET, "/api/agents", Some(a), None, None)
            .await
            .0,
        401
    );
}

#[tokio::test]
async fn a_project_whose_session_has_a_sandbox_cannot_be_deleted() {
    let app = TestApp::builder().with_token(TOKEN).spawn().await;
    let (_, p) = create_project(
        &app,
        json!({"name": "Busy", "slug": "busy", "description": ""}),
    )
    .await;
    let agent = app.seed_agent("worker").await;
    let sid = app.seed_session(agent.id).await;
    sqlx::query("update agents set project_id = $1::uuid where id = $2")
        .bind(p["id"].as_str().unwrap())
        .bind(agent.id.0)
        .execute(&app.db)
        .await
        .unwrap();
    sqlx::query("update sessions set project_id = $1::uuid, status = 'running', sandbox_id = 'c1' where id = $2")
        .bind(p["id"].as_str().unwrap())
        .bind(sid.0)
        .execute(&app.db)
        .await
        .unwrap();
    let (s, err) = call(
        &app,
        Method::DELETE,
        "/api/projects/busy",
        Some(TOKEN),
        None,
        None,
    )
    .await;
    assert_eq!(s, 409, "{err}");
    assert_eq!(
        call(
            &app,
            Method::GET,
            "/api/projects/busy",
            Some(TOKEN),
            None,
            None
        )
        .await
        .0,
        200
    );
    sqlx::query("update sessions set status = 'stopped', sandbox_id = null where id = $1")
        .bind(sid.0)
        .execute(&app.db)
        .await
        .unwrap();
    assert_eq!(
        call(
            &app,
            Method::DELETE,
            "/api/projects/busy",
            Some(TOKEN),
            None,
            None
        )
        .await
        .0,
        204
    );
}

#[tokio::test]
async fn a_credential_over_its_rate_gets_429_and_nothing_is_done() {
    use sandbox_agents_api::auth::{Auth, RateLimit};
    let auth = Auth::new(Some(TOKEN)).with_rate_limit(Some(RateLimit {
        per_minute: 1,
        burst: 3,
    }));
    let app = sandbox_agents_testkit::TestApp::builder()
        .with_auth(auth)
        .spawn()
        .await;
    let mut statuses = Vec::new();
    for i in 0..4 {
        let r = app
            .http
            .post(app.url("/api/agents"))
            .bearer_auth(TOKEN)
            .json(&json!({"slug": format!("a{i}"), "name": "A"}))
            .send()
            .await
            .unwrap();
        statuses.push(r.status().as_u16());
        if r.status() == 429 {
            let wait: u64 = r.headers()["retry-after"]
                .to_str()
                .unwrap()
                .parse()
                .unwrap();
            assert!(wait >= 1, "{wait}");
            assert!(r.json::<Value>().await.unwrap()["detail"].is_string());
        }
    }
    assert_eq!(statuses, [201, 201, 201, 429]);
    let (n,): (i64,) = sqlx::query_as("select count(*) from agents")
        .fetch_one(&app.db)
        .await
        .unwrap();
    assert_eq!(n, 3, "the refused request created nothing");
    // Health is never limited; other callers have budgets of their own.
    assert_eq!(
        call(&app, Method::GET, "/api/health", None, None, None)
            .await
            .0,
        200
    );
    assert_eq!(
        call(&app, Method::GET, "/api/agents", None, None, None)
            .await
            .0,
        401
    );
}

#[tokio::test]
async fn a_person_is_invited_sets_a_password_signs_in_and_works_in_their_projects() {
    let app = TestApp::builder().with_token(TOKEN).spawn().await;
    let (s, user) = call(
        &app,
        Method::POST,
        "/api/users",
        Some(TOKEN),
        None,
        Some(json!({"email": "Ada@Example.com", "name": "Ada", "password": null})),
    )
    .await;
    assert_eq!(s, 201, "{user}");
    let code = user["recovery_code"].as_str().unwrap().to_owned();
    assert!(user["recovery_url"]
        .as_str()
        .unwrap()
        .ends_with(&format!("/recovery?code={code}")));
    let (s, _) = call(
        &app,
        Method::POST,
        "/api/users",
        Some(TOKEN),
        None,
        Some(json!({"email": "ada@example.com", "name": "", "password": null})),
    )
    .await;
    assert_eq!(s, 409, "emails are unique whatever their case");

    // No password yet: signing in fails like any wrong password.
    assert_eq!(
        login(&app, "ada@example.com", "whatever-it-is")
            .await
            .status(),
        401
    );
    // The recovery code sets a password once, and signs in.
    let (s, _) = call(
        &app,
        Method::POST,
        "/api/auth/recovery",
        None,
        None,
        Some(json!({"code": code, "password": "short"})),
    )
    .await;
    assert_eq!(s, 422);
    let r = app
        .http
        .post(app.url("/api/auth/recovery"))
        .json(&json!({"code": code, "password": "a long enough password"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 204);
    let session = session_from(&r);
    let (s, _) = call(
        &app,
        Method::POST,
        "/api/auth/recovery",
        None,
        None,
        Some(json!({"code": code, "password": "another long password"})),
    )
    .await;
    assert_eq!(s, 400, "a recovery code works once");
    let (hash,): (String,) =
        sqlx::query_as("select password_hash from people where lower(email) = 'ada@example.com'")
            .fetch_one(&app.db)
            .await
            .unwrap();
    assert!(hash.starts_with("$argon2id$"));

    let (_, me) = as_person(&app, Method::GET, "/api/me", &session, None).await;
    assert_eq!(
        (me["kind"].as_str(), me["label"].as_str()),
        (Some("user"), Some("Ada@Example.com"))
    );
    assert!(me["login_url"].as_str().unwrap().ends_with("/login"));
    // In no project yet: project-scoped routes say so; users are an operator's business.
    let (s, err) = as_person(&app, Method::GET, "/api/agents", &session, None).await;
    assert_eq!(s, 409, "{err}");
    assert_eq!(
        as_person(&app, Method::GET, "/api/users", &session, None)
            .await
            .0,
        403
    );

    // A member of one project needs no header; the profile lists it with the role.
    let (s, m) = call(
        &app,
        Method::POST,
        "/api/projects/default/members",
        Some(TOKEN),
        None,
        Some(json!({"email": "ADA@example.com", "role": "member"})),
    )
    .await;
    assert_eq!(s, 201, "{m}");
    assert_eq!(
        (m["label"].as_str(), m["subject"].as_str()),
        (Some("Ada@Example.com"), user["id"].as_str())
    );
    assert_eq!(
        as_person(&app, Method::GET, "/api/agents", &session, None)
            .await
            .0,
        200
    );
    let (_, profile) = as_person(&app, Method::GET, "/api/me/profile", &session, None).await;
    assert_eq!(
        profile["projects"],
        json!([{"id": "00000000-0000-7000-8000-000000000001", "slug": "default", "name": "Default", "role": "member"}])
    );
    let (s, profile) = as_person(
        &app,
        Method::PATCH,
        "/api/me/profile",
        &session,
        Some(json!({"name": "Ada L."})),
    )
    .await;
    assert_eq!(
        (s.as_u16(), profile["name"].as_str()),
        (200, Some("Ada L."))
    );
    // Members do not change projects; a project a person creates is theirs to run.
    assert_eq!(
        as_person(
            &app,
            Method::DELETE,
            "/api/projects/default",
            &session,
            None
        )
        .await
        .0,
        403
    );
    let (s, mine) = as_person(
        &app,
        Method::POST,
        "/api/projects",
        &session,
        Some(json!({"name": "Ada's lab", "slug": "", "description": ""})),
    )
    .await;
    assert_eq!((s.as_u16(), mine["role"].as_str()), (201, Some("admin")));
    let (s, err) = as_person(&app, Method::GET, "/api/agents", &session, None).await;
    assert_eq!(s, 400, "two projects now: name one ({err})");
    let (_, members) = as_person(
        &app,
        Method::GET,
        &format!("/api/projects/{}/members", mine["slug"].as_str().unwrap()),
        &session,
        None,
    )
    .await;
    let me_member = members[0]["id"].as_str().unwrap().to_owned();
    let (s, _) = as_person(
        &app,
        Method::DELETE,
        &format!(
            "/api/projects/{}/members/{me_member}",
            mine["slug"].as_str().unwrap()
        ),
        &session,
        None,
    )
    .await;
    assert_eq!(s, 409, "the last admin stays");
    let (s, _) = as_person(
        &app,
        Method::POST,
        &format!("/api/projects/{}/members", mine["slug"].as_str().unwrap()),
        &session,
        Some(json!({"email": "nobody@example.com", "role": "member"})),
    )
    .await;
    assert_eq!(s, 404);
    let (s, _) = as_person(
        &app,
        Method::POST,
        &format!("/api/projects/{}/members", mine["slug"].as_str().unwrap()),
        &session,
        Some(json!({"email": "ada@example.com", "role": "owner"})),
    )
    .await;
    assert_eq!(s, 422);
    // A conflict names the values in conflict, not only the field.
    let (s, err) = as_person(
        &app,
        Method::POST,
        &format!("/api/projects/{}/members", mine["slug"].as_str().unwrap()),
        &session,
        Some(json!({"email": "ada@example.com", "role": "member"})),
    )
    .await;
    assert_eq!(s, 409, "{err}");
    assert_eq!(
        err["detail"],
        "'ada@example.com' is a member of this project already"
    );

    // Credentials are not people.
    assert_eq!(
        call(
            &app,
            Method::GET,
            "/api/me/profile",
            Some(TOKEN),
            None,
            None
        )
        .await
        .0,
        409
    );
    // Signing out ends the session.
    let r = app
        .http
        .post(app.url("/api/auth/logout"))
        .header("cookie", format!("sa_session={session}"))
        .header("x-requested-with", "sandbox-agents")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 204);
    assert!(r.headers()["set-cookie"]
        .to_str()
        .unwrap()
        .contains("Max-Age=0"));
    assert_eq!(
        as_person(&app, Method::GET, "/api/agents", &session, None)
            .await
            .0,
        401
    );
    // And the password signs in again.
    let r = login(&app, "ada@example.com", "a long enough password").await;
    assert_eq!(r.status(), 204);
    // An operator can delete the account; its sessions go with it.
    let s2 = session_from(&r);
    let (s, _) = call(
        &app,
        Method::DELETE,
        &format!("/api/users/{}", user["id"].as_str().unwrap()),
        Some(TOKEN),
        None,
        None,
    )
    .await;
    assert_eq!(s, 204);
    assert_eq!(
        as_person(&app, Method::GET, "/api/me/profile", &s2, None)
            .await
            .0,
        401
    );
}

#[tokio::test]
async fn guessing_passwords_is_slowed_per_account() {
    let app = TestApp::builder().with_token(TOKEN).spawn().await;
    call(
        &app,
        Method::POST,
        "/api/users",
        Some(TOKEN),
        None,
        Some(json!({"email": "grace@example.com", "name": "", "password": "the real password"})),
    )
    .await;
    let mut statuses = Vec::new();
    for i in 0..11 {
        let r = login(&app, "grace@example.com", &format!("guess {i}")).await;
        if r.status() == 429 {
            assert!(r.headers().contains_key("retry-after"));
        }
        statuses.push(r.status().as_u16());
    }
    assert_eq!(statuses[..10], [401; 10]);
    assert_eq!(statuses[10], 429);
    // Even the right password waits now: nothing is checked while limited.
    let r = login(&app, "grace@example.com", "the real password").await;
    assert_eq!(r.status(), 429);
}
