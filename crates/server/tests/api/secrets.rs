//! Secrets: write-only values that reach a sandbox's environment at boot and nothing else.

use sandbox_agents_testkit::TestApp;
use serde_json::{json, Value};
use std::time::Duration;

const BOOT: Duration = Duration::from_secs(60);

async fn call(
    app: &TestApp,
    method: reqwest::Method,
    path: &str,
    body: Option<Value>,
) -> (u16, String) {
    let mut req = app.http.request(method, app.url(path));
    if let Some(b) = body {
        req = req.json(&b);
    }
    let r = req.send().await.expect("request");
    (r.status().as_u16(), r.text().await.unwrap_or_default())
}

async fn create_secret(app: &TestApp, name: &str, value: &str) -> Value {
    let (status, body) = call(
        app,
        reqwest::Method::POST,
        "/api/secrets",
        Some(json!({"name": name, "value": value, "description": "d"})),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    assert!(!body.contains(value), "the value came back: {body}");
    serde_json::from_str(&body).unwrap()
}

fn session_body(agent: &str, bindings: Value) -> Value {
    json!({"agent_id": agent, "title": "t", "model": null, "instructions": null, "manifest": null,
           "from_snapshot_id": null, "environment_id": null, "prompt": null,
           "secret_bindings": bindings})
}

/// Stops and starts a session, and waits until it runs again (a new boot).
async fn reboot(app: &TestApp, id: &str) {
    for action in ["stop", "start"] {
        let (status, body) = call(
            app,
            reqwest::Method::POST,
            &format!("/api/sessions/{id}/{action}"),
            None,
        )
        .await;
        assert!(status == 200 || status == 202, "{action}: {status} {body}");
    }
    app.wait_for_status(id, "running", BOOT).await;
}

/// Everything the database holds, as text, to look for a plaintext in.
async fn database_text(app: &TestApp) -> String {
    let mut all = String::new();
    for table in [
        "secrets",
        "sessions",
        "agents",
        "events",
        "runs",
        "tool_calls",
        "webhook_deliveries",
    ] {
        let rows: Vec<(String,)> = sqlx::query_as(&format!("select t::text from {table} t"))
            .fetch_all(&app.db)
            .await
            .unwrap();
        for (r,) in rows {
            all.push_str(&r);
        }
    }
    all
}

fn docker_inspect(what: &str) -> String {
    let out = std::process::Command::new("docker")
        .args(["inspect", what])
        .output()
        .expect("docker inspect");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[tokio::test]
async fn a_secret_reaches_the_sandbox_environment_and_no_interface_shows_it() {
    let app = TestApp::builder().spawn().await;
    let agent_value = "agent-secret-Zq81";
    let session_value = "session-secret-Kx42";
    create_secret(&app, "AGENT_TOKEN", agent_value).await;
    create_secret(&app, "SESSION_TOKEN", session_value).await;
    app.create_agent(
        "sec",
        json!({"manifest": {"entries": {}, "environment": {"PLAIN": "p", "SHARED": "from-manifest"}},
               "secret_bindings": [{"secret": "AGENT_TOKEN", "env": "A_TOKEN"},
                                   {"secret": "AGENT_TOKEN", "env": "OVERRIDDEN"},
                                   {"secret": "AGENT_TOKEN", "env": "SHARED"}]}),
    )
    .await;
    // The session's binding wins over the agent's for the same variable.
    let id = app
        .boot_session(session_body(
            "sec",
            json!([{"secret": "SESSION_TOKEN", "env": "OVERRIDDEN"}]),
        ))
        .await;
    let (code, out, _) = app
        .exec(
            &id,
            "printf '%s|%s|%s|%s' \"$A_TOKEN\" \"$OVERRIDDEN\" \"$SHARED\" \"$PLAIN\"",
        )
        .await;
    assert_eq!(code, 0);
    assert_eq!(
        out,
        format!("{agent_value}|{session_value}|{agent_value}|p")
    );

    // Boots record the use.
    let listed: Vec<Value> = serde_json::from_str(
        &call(&app, reqwest::Method::GET, "/api/secrets", None)
            .await
            .1,
    )
    .unwrap();
    assert_eq!(listed.len(), 2);
    assert!(
        listed.iter().all(|s| !s["last_used_at"].is_null()),
        "{listed:?}"
    );

    // Not in any response, the event log, the database, or the container's configuration.
    let session = app.session(&id).await;
    let container = session["container_id"].as_str().map(str::to_owned);
    for path in [
        "/api/secrets".to_owned(),
        "/api/secrets/AGENT_TOKEN".to_owned(),
        "/api/agents/sec".to_owned(),
        format!("/api/sessions/{id}"),
        format!("/api/sessions/{id}/events?limit=1000"),
        "/api/sessions".to_owned(),
    ] {
        let (status, body) = call(&app, reqwest::Method::GET, &path, None).await;
        assert_eq!(status, 200, "{path}: {body}");
        for v in [agent_value, session_value] {
            assert!(!body.contains(v), "{path} shows a secret: {body}");
        }
    }
    let stored = database_text(&app).await;
    for v in [agent_value, session_value] {
        assert!(!stored.contains(v), "the database holds a plaintext");
    }
    let container = match container {
        Some(c) => c,
        None => {
            let (c,): (String,) =
                sqlx::query_as("select sandbox_id from sessions where id = $1::uuid")
                    .bind(&id)
                    .fetch_one(&app.db)
                    .await
                    .unwrap();
            c
        }
    };
    let inspected = docker_inspect(&container);
    for v in [agent_value, session_value] {
        assert!(!inspected.contains(v), "docker inspect shows a secret");
    }

    // A snapshot's image does not carry them either, and another server process (same
    // deployment key) runs commands with them.
    let (status, body) = call(
        &app,
        reqwest::Method::POST,
        &format!("/api/sessions/{id}/snapshots"),
        Some(json!({"name": "s"})),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let snapshot: Value = serde_json::from_str(&body).unwrap();
    let (image,): (String,) = sqlx::query_as("select image from snapshots where id = $1::uuid")
        .bind(snapshot["id"].as_str().unwrap())
        .fetch_one(&app.db)
        .await
        .unwrap();
    let inspected = docker_inspect(&image);
    assert!(!inspected.contains(agent_value) && !inspected.contains(session_value));
    let other = TestApp::builder()
        .with_db(app.db.clone(), app.db_options.clone())
        .spawn()
        .await;
    let (_, out, _) = other.exec(&id, "printf %s \"$A_TOKEN\"").await;
    assert_eq!(out, agent_value);
}

#[tokio::test]
async fn a_rotation_reaches_the_next_boot_and_not_the_running_sandbox() {
    let app = TestApp::builder().spawn().await;
    let s = create_secret(&app, "ROTATING", "first-value").await;
    app.create_agent(
        "rot",
        json!({"secret_bindings": [{"secret": "ROTATING", "env": "R"}]}),
    )
    .await;
    let id = app.boot_session(session_body("rot", json!([]))).await;
    let sid = s["id"].as_str().unwrap();
    let (status, body) = call(
        &app,
        reqwest::Method::PUT,
        &format!("/api/secrets/{sid}"),
        Some(json!({"value": "second-value"})),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let rotated: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(rotated["description"], "d", "absent fields are unchanged");
    assert_ne!(rotated["updated_at"], s["updated_at"]);
    assert_eq!(app.exec(&id, "printf %s \"$R\"").await.1, "first-value");

    reboot(&app, &id).await;
    assert_eq!(app.exec(&id, "printf %s \"$R\"").await.1, "second-value");

    // A description-only update keeps the value.
    let (status, _) = call(
        &app,
        reqwest::Method::PUT,
        "/api/secrets/ROTATING",
        Some(json!({"description": "new"})),
    )
    .await;
    assert_eq!(status, 200);
    reboot(&app, &id).await;
    assert_eq!(app.exec(&id, "printf %s \"$R\"").await.1, "second-value");
}

#[tokio::test]
async fn a_bound_secret_cannot_be_deleted_and_a_missing_one_refuses_the_session() {
    let app = TestApp::builder().spawn().await;
    let s = create_secret(&app, "BOUND", "v-bound").await;
    let sid = s["id"].as_str().unwrap().to_owned();
    app.create_agent("plain", json!({})).await;
    app.create_agent(
        "binder",
        json!({"secret_bindings": [{"secret": "BOUND", "env": "B"}]}),
    )
    .await;

    let (status, body) = call(
        &app,
        reqwest::Method::DELETE,
        &format!("/api/secrets/{sid}"),
        None,
    )
    .await;
    assert_eq!(status, 409, "{body}");
    assert!(body.contains("agent binder"), "{body}");

    // A session binding it holds it too, until the session is deleted.
    let (status, body) = call(
        &app,
        reqwest::Method::PATCH,
        "/api/agents/binder",
        Some(json!({"secret_bindings": [], "version": 1})),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let session = app
        .create_session(session_body(
            "plain",
            json!([{"secret": "BOUND", "env": "B"}]),
        ))
        .await;
    let session_id = session["id"].as_str().unwrap();
    let (status, body) = call(&app, reqwest::Method::DELETE, "/api/secrets/BOUND", None).await;
    assert_eq!(status, 409, "{body}");
    assert!(body.contains(session_id), "{body}");
    let (status, _) = call(
        &app,
        reqwest::Method::DELETE,
        &format!("/api/sessions/{session_id}"),
        None,
    )
    .await;
    assert_eq!(status, 204);
    let (status, body) = call(
        &app,
        reqwest::Method::DELETE,
        &format!("/api/secrets/{sid}"),
        None,
    )
    .await;
    assert_eq!(status, 204, "{body}");
    let (status, _) = call(
        &app,
        reqwest::Method::GET,
        &format!("/api/secrets/{sid}"),
        None,
    )
    .await;
    assert_eq!(status, 404);

    // Binding a secret that does not exist: 422 at session create, and no session.
    let before: (i64,) = sqlx::query_as("select count(*) from sessions")
        .fetch_one(&app.db)
        .await
        .unwrap();
    let r = app
        .http
        .post(app.url("/api/sessions"))
        .json(&session_body(
            "plain",
            json!([{"secret": "NOPE", "env": "N"}]),
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 422);
    let detail = r.text().await.unwrap();
    assert!(detail.contains("NOPE"), "{detail}");
    let after: (i64,) = sqlx::query_as("select count(*) from sessions")
        .fetch_one(&app.db)
        .await
        .unwrap();
    assert_eq!(before, after);
}

#[tokio::test]
async fn bad_secret_bodies_are_refused_without_echoing_the_value() {
    let app = TestApp::builder().spawn().await;
    create_secret(&app, "TAKEN", "v1-taken").await;
    let cases = [
        (json!({"name": "TAKEN", "value": "other-value"}), 409),
        (json!({"name": "has-dash", "value": "dash-value"}), 422),
        (json!({"name": "OK1", "value": ""}), 422),
        (json!({"name": "OK2", "value": "nul\u{0}hidden-value"}), 422),
        (json!({"name": "OK3", "value": 987654321}), 422),
        (json!({"name": "OK4", "value": ["listed-value"]}), 422),
        (json!({"name": "OK5"}), 422),
        (json!({"name": "OK6", "value": null}), 422),
    ];
    for (body, want) in cases {
        let (status, text) = call(
            &app,
            reqwest::Method::POST,
            "/api/secrets",
            Some(body.clone()),
        )
        .await;
        assert_eq!(status, want, "{body}: {text}");
        for hidden in [
            "other-value",
            "dash-value",
            "hidden-value",
            "987654321",
            "listed-value",
        ] {
            assert!(!text.contains(hidden), "{body} echoed: {text}");
        }
    }
    for (body, want) in [
        (json!({"value": null}), 422),
        (json!({"description": null}), 422),
        (json!({"value": ["x-value"]}), 422),
        (json!({}), 200),
    ] {
        let (status, text) = call(
            &app,
            reqwest::Method::PUT,
            "/api/secrets/TAKEN",
            Some(body.clone()),
        )
        .await;
        assert_eq!(status, want, "{body}: {text}");
        assert!(!text.contains("x-value"));
    }
    let (status, _) = call(
        &app,
        reqwest::Method::PUT,
        "/api/secrets/MISSING",
        Some(json!({"value": "v"})),
    )
    .await;
    assert_eq!(status, 404);
    let listed: Vec<Value> = serde_json::from_str(
        &call(&app, reqwest::Method::GET, "/api/secrets", None)
            .await
            .1,
    )
    .unwrap();
    assert_eq!(listed.len(), 1, "nothing else was created: {listed:?}");

    // A name may look like an id without hyphens: it is found by name all the same.
    let hexlike = "DEADBEEFDEADBEEFDEADBEEFDEADBEEF";
    create_secret(&app, hexlike, "hex-named").await;
    let (status, body) = call(
        &app,
        reqwest::Method::GET,
        &format!("/api/secrets/{hexlike}"),
        None,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains(hexlike));
}

#[tokio::test]
async fn a_secret_a_command_prints_reaches_neither_the_model_nor_the_log() {
    use sandbox_agents_fake_model::{FakeModel, Rule, Script};
    let value = "printed-secret-Qw93";
    let fake = FakeModel::start(Script::new([
        Rule::when()
            .last_tool_result_contains("exit code: 0")
            .reply_text("done"),
        Rule::when().last_user_contains("print").reply_tool_call(
            "shell",
            json!({"command": "echo \"token=$TOKEN\"; echo \"$TOKEN\" > t.txt"}),
        ),
    ]));
    let app = sandbox_agents_testkit::TestApp::builder()
        .with_model_proxy(&fake.root_url())
        .spawn()
        .await;
    create_secret(&app, "PRINTED", value).await;
    app.create_agent(
        "printer",
        json!({"secret_bindings": [{"secret": "PRINTED", "env": "TOKEN"}]}),
    )
    .await;
    let id = app.boot_session(session_body("printer", json!([]))).await;
    let run =
        sandbox_agents_testkit::runs::start_run(&app, &id, "print the token", Value::Null).await;
    let evs = sandbox_agents_testkit::runs::wait_for_run(&app, &id, &run).await;
    let result = evs
        .iter()
        .find(|e| e["type"] == "agent.tool_result")
        .expect("a tool result");
    assert_eq!(
        result["payload"]["output"].as_str().unwrap(),
        "exit code: 0\nstdout:\ntoken=***\n\n"
    );
    // The command itself had the value, and the model's next request did not.
    assert_eq!(app.exec(&id, "cat t.txt").await.1, format!("{value}\n"));
    let requests = fake.chat_requests();
    assert!(requests.len() >= 2);
    for r in requests {
        assert!(
            !r.body.to_string().contains(value),
            "the model saw the secret"
        );
    }
    assert!(!database_text(&app).await.contains(value));
}
