//! Environments: CRUD with its refusal rules (each one stores nothing), image builds of
//! their packages on Docker through the extra CA (this network inspects TLS), builds keyed
//! by their configuration (shared, never repeated), failures that name their package
//! manager, sessions that wait for a build and boot its image, and builds a restart
//! interrupted taken over rather than left `building`.

use sandbox_agents_testkit::{eventually, TestApp};
use serde_json::{json, Value};
use std::time::Duration;

/// How long a test waits for an image build (apt and pip over the network).
const BUILD: Duration = Duration::from_secs(300);

/// The host's CA bundle: it holds the inspecting proxy's CA, as an operator's file would.
fn options_with_ca() -> sandbox_agents_testkit::TestAppBuilder<'static> {
    TestApp::builder()
        .with_config(|c| c.extra_ca_certs = Some("/etc/ssl/certs/ca-certificates.crt".into()))
}

async fn send(app: &TestApp, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
    let m = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
    let mut r = app.http.request(m, app.url(path));
    if let Some(b) = body {
        r = r.json(&b);
    }
    let resp = r.send().await.unwrap();
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or(Value::Null))
}

/// Every environment row, build and session link, as text: a refusal changes none of it.
async fn stored(app: &TestApp) -> String {
    let mut out = String::new();
    for table in [
        "environments",
        "environment_builds",
        "environment_sessions",
        "sessions",
    ] {
        let rows: Vec<(String,)> =
            sqlx::query_as(&format!("select t::text from {table} t order by 1"))
                .fetch_all(&app.db)
                .await
                .unwrap();
        out += &format!("{table}: {rows:?}\n");
    }
    out += &format!(
        "agents: {:?}\n",
        sqlx::query_as::<_, (String,)>("select spec::text from agents order by 1")
            .fetch_all(&app.db)
            .await
            .unwrap()
    );
    out
}

/// `status`, with a `detail` (a sentence, or the 422 list), and nothing written.
async fn refused(
    app: &TestApp,
    method: &str,
    path: &str,
    body: Option<Value>,
    status: u16,
) -> Value {
    let before = stored(app).await;
    let (s, b) = send(app, method, path, body.clone()).await;
    assert_eq!(s, status, "{method} {path} {body:?}: {b}");
    assert!(!b["detail"].is_null(), "a detail: {b}");
    assert_eq!(stored(app).await, before, "{method} {path} wrote something");
    b
}

async fn wait_for_build(app: &TestApp, name: &str) -> Value {
    eventually(
        &format!("environment {name}'s build to end"),
        BUILD,
        async || {
            let (_, e) = send(app, "GET", &format!("/api/environments/{name}"), None).await;
            match e["build"]["status"].as_str() {
                Some("building") => Err(e.to_string()),
                _ => Ok(e),
            }
        },
    )
    .await
}

#[tokio::test]
async fn every_refusal_says_why_and_stores_nothing() {
    let app = TestApp::builder().spawn().await;
    let (s, env) = send(
        &app,
        "POST",
        "/api/environments",
        Some(json!({"name": "base", "description": ""})),
    )
    .await;
    assert_eq!(s, 201, "{env}");
    assert_eq!(
        env["build"],
        json!({"status": "none", "image": null, "error": null})
    );
    assert_eq!(env["config"]["networking"], json!({"type": "unrestricted"}));

    for (body, status) in [
        (json!({"name": "base", "description": ""}), 409),
        (json!({"name": "x", "config": {"backend": "e2b"}}), 400),
        (
            json!({"name": "x", "config": {"networking": {"type": "limited"}}}),
            400,
        ),
        (
            json!({"name": "x", "config": {"networking": {"type": "open"}}}),
            422,
        ),
        (
            json!({"name": "x", "config": {"packages": {"pip": ["six; rm -rf /"]}}}),
            422,
        ),
        (
            json!({"name": "x", "config": {"packages": {"apt": null}}}),
            422,
        ),
        (json!({"name": "x", "config": null}), 422),
        (json!({"name": "x", "metadata": {"n": 1}}), 422),
        (json!({"name": "  "}), 422),
        (json!({"name": "a/b"}), 422),
    ] {
        refused(&app, "POST", "/api/environments", Some(body), status).await;
    }
    let (s, _) = send(
        &app,
        "POST",
        "/api/environments",
        Some(json!({"name": "other"})),
    )
    .await;
    assert_eq!(s, 201);
    for (body, status) in [
        (json!({"name": "other"}), 409),
        (json!({"name": null}), 422),
        (json!({"metadata": null}), 422),
        (json!({"config": {"networking": {"type": "limited"}}}), 400),
        (json!({"config": {"backend": "k8s"}}), 400),
    ] {
        refused(&app, "PATCH", "/api/environments/base", Some(body), status).await;
    }
    refused(&app, "GET", "/api/environments/nope", None, 404).await;
    refused(
        &app,
        "PATCH",
        "/api/environments/nope",
        Some(json!({})),
        404,
    )
    .await;
    refused(&app, "DELETE", "/api/environments/nope", None, 404).await;

    // An agent's default must be an environment of the project.
    let b = refused(
        &app,
        "POST",
        "/api/agents",
        Some(json!({"slug": "a", "name": "a", "environment_id": "nope"})),
        422,
    )
    .await;
    assert!(b.to_string().contains("no environment 'nope'"), "{b}");
    let agent = app
        .create_agent("a", json!({"environment_id": "base"}))
        .await;
    assert_eq!(
        agent["environment_id"], env["id"],
        "stored by id, named by name"
    );
    let b = refused(&app, "DELETE", "/api/environments/base", None, 409).await;
    assert!(b["detail"].as_str().unwrap().contains("agent(s) a"), "{b}");

    // Sessions: an unknown environment is a 404, an archived one a 409.
    refused(
        &app,
        "POST",
        "/api/sessions",
        Some(json!({"agent_id": "a", "environment_id": "nope"})),
        404,
    )
    .await;
    let (s, archived) = send(&app, "POST", "/api/environments/other/archive", None).await;
    assert_eq!(s, 200);
    assert!(archived["archived_at"].is_string());
    let b = refused(
        &app,
        "POST",
        "/api/sessions",
        Some(json!({"agent_id": "a", "environment_id": "other"})),
        409,
    )
    .await;
    assert!(b["detail"].as_str().unwrap().contains("archived"), "{b}");
    // Archived is read-only, and archiving again changes nothing.
    refused(
        &app,
        "PATCH",
        "/api/environments/other",
        Some(json!({"description": "x"})),
        409,
    )
    .await;
    let (_, again) = send(&app, "POST", "/api/environments/other/archive", None).await;
    assert_eq!(again["archived_at"], archived["archived_at"]);

    // A session that ran in an environment keeps it from being deleted.
    let session = app.create_session(json!({"agent_id": "a"})).await;
    let id = session["id"].as_str().unwrap();
    let b = refused(
        &app,
        "DELETE",
        &format!("/api/environments/{}", env["id"].as_str().unwrap()),
        None,
        409,
    )
    .await;
    assert!(b["detail"].as_str().unwrap().contains("agent"), "{b}");
    let (s, _) = send(
        &app,
        "PATCH",
        "/api/agents/a",
        Some(json!({"version": 1, "environment_id": null})),
    )
    .await;
    assert_eq!(s, 200);
    let b = refused(&app, "DELETE", "/api/environments/base", None, 409).await;
    assert!(b["detail"].as_str().unwrap().contains("session"), "{b}");
    app.wait_for_status(id, "running", sandbox_agents_testkit::BOOT)
        .await;
    // The session says which environment it was created in (its agent's, here), by id and
    // name; one created after the agent dropped its default has none.
    let (s, detail) = send(&app, "GET", &format!("/api/sessions/{id}"), None).await;
    assert_eq!(s, 200);
    assert_eq!(detail["environment_id"], env["id"]);
    assert_eq!(detail["environment_name"], "base");
    let plain = app.create_session(json!({"agent_id": "a"})).await;
    let (_, detail) = send(
        &app,
        "GET",
        &format!("/api/sessions/{}", plain["id"].as_str().unwrap()),
        None,
    )
    .await;
    assert!(detail["environment_id"].is_null(), "{detail}");
    assert!(detail["environment_name"].is_null(), "{detail}");
    // A page of the list says it too, each session its own; so does every session a
    // lifecycle call answers with.
    assert_eq!(plain["environment_id"], Value::Null, "{plain}");
    let (s, page) = send(&app, "GET", "/api/sessions", None).await;
    assert_eq!(s, 200);
    let rows = page.as_array().unwrap();
    assert_eq!(rows.len(), 2, "{page}");
    for row in rows {
        let expected = if row["id"] == plain["id"] {
            (Value::Null, Value::Null)
        } else {
            (env["id"].clone(), json!("base"))
        };
        assert_eq!(
            (
                row["environment_id"].clone(),
                row["environment_name"].clone()
            ),
            expected,
            "{row}"
        );
    }
    let (s, stopped) = send(
        &app,
        "POST",
        &format!("/api/sessions/{id}/stop"),
        Some(json!({})),
    )
    .await;
    assert_eq!(s, 200, "{stopped}");
    assert_eq!(stopped["environment_name"], "base", "{stopped}");
    // The list filtered by environment (id or name) holds its sessions only, and says how
    // many; an unknown environment has none.
    let env_id = env["id"].as_str().unwrap();
    for r in ["base", env_id] {
        let res = app
            .http
            .get(app.url(&format!("/api/sessions?environment_id={r}")))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 200);
        assert_eq!(res.headers()["x-total-count"], "1");
        let rows: Vec<Value> = res.json().await.unwrap();
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0]["id"], id);
    }
    let (s, none) = send(&app, "GET", "/api/sessions?environment_id=nope", None).await;
    assert_eq!((s, none), (200, json!([])));
}

#[tokio::test]
async fn environments_are_named_by_id_or_name_and_patches_replace_config_and_metadata() {
    let app = TestApp::builder().spawn().await;
    let (s, env) = send(
        &app,
        "POST",
        "/api/environments",
        Some(
            json!({"name": "py", "description": "d", "metadata": {"a": "1", "b": "2"},
                    "config": {"image": "python:3.12-slim"}}),
        ),
    )
    .await;
    assert_eq!(s, 201, "{env}");
    let id = env["id"].as_str().unwrap();
    assert_eq!(env["config"]["packages"]["pip"], json!([]));
    let (_, by_name) = send(&app, "GET", "/api/environments/py", None).await;
    let (_, by_id) = send(&app, "GET", &format!("/api/environments/{id}"), None).await;
    assert_eq!(by_name, by_id);

    // metadata and config are replaced whole; what is left out goes.
    let (s, patched) = send(
        &app,
        "PATCH",
        "/api/environments/py",
        Some(json!({"metadata": {"c": "3"}, "config": {"backend": "docker"}, "name": "py2"})),
    )
    .await;
    assert_eq!(s, 200, "{patched}");
    assert_eq!(patched["metadata"], json!({"c": "3"}));
    assert_eq!(
        patched["config"]["image"],
        Value::Null,
        "the old image is gone with the old config"
    );
    assert_eq!(patched["config"]["backend"], "docker");
    assert_eq!(patched["description"], "d", "left out, left alone");
    assert_eq!(patched["name"], "py2");

    let (_, listed) = send(&app, "GET", "/api/environments", None).await;
    assert_eq!(listed.as_array().unwrap().len(), 1);
    send(&app, "POST", "/api/environments/py2/archive", None).await;
    let (_, listed) = send(
        &app,
        "GET",
        "/api/environments?include_archived=false",
        None,
    )
    .await;
    assert_eq!(listed, json!([]));
    let (_, listed) = send(&app, "GET", "/api/environments?include_archived=true", None).await;
    assert_eq!(listed[0]["id"], id);
    let (s, _) = send(&app, "DELETE", &format!("/api/environments/{id}"), None).await;
    assert_eq!(s, 204);
    let (s, _) = send(&app, "GET", "/api/environments/py2", None).await;
    assert_eq!(s, 404);
}

#[tokio::test]
async fn packages_are_built_into_an_image_that_a_waiting_session_boots_and_uses() {
    let app = options_with_ca().spawn().await;
    app.create_agent("a", json!({})).await;
    let packages = json!({"apt": ["jq"], "pip": ["six"]});
    let (s, env) = send(
        &app,
        "POST",
        "/api/environments",
        Some(json!({"name": "tools", "config": {"packages": packages}})),
    )
    .await;
    assert_eq!(s, 201, "{env}");
    assert_eq!(env["build"]["status"], "building");
    // A session created while the image builds waits for it, and is not refused.
    let session = app
        .create_session(json!({"agent_id": "a", "environment_id": "tools"}))
        .await;
    let id = session["id"].as_str().unwrap().to_owned();
    let built = wait_for_build(&app, "tools").await;
    assert_eq!(built["build"]["status"], "ready", "{built}");
    let image = built["build"]["image"].as_str().unwrap().to_owned();
    assert!(image.starts_with("sandbox-agents-env:"), "{image}");
    app.wait_for_status(&id, "running", BUILD).await;
    let (code, out, err) = app
        .exec(
            &id,
            "echo '{\"ok\": 1}' | jq .ok && python3 -c 'import six; print(six.__name__)'",
        )
        .await;
    assert_eq!((code, out.as_str()), (0, "1\nsix\n"), "{err}");

    // The log is kept, Dockerfile first.
    let r = app
        .http
        .get(app.url("/api/environments/tools/build-log"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert!(r.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/plain"));
    let log = r.text().await.unwrap();
    assert!(
        log.contains("apt-get install -y --no-install-recommends 'jq'"),
        "{log}"
    );
    assert!(log.contains("Successfully"), "{log}");

    // The same configuration elsewhere shares the image at once; an edit that leaves the
    // configuration alone builds nothing.
    let (s, twin) = send(
        &app,
        "POST",
        "/api/environments",
        Some(json!({"name": "twin", "config": {"packages": packages}})),
    )
    .await;
    assert_eq!(s, 201);
    assert_eq!(twin["build"]["status"], "ready", "{twin}");
    assert_eq!(twin["build"]["image"], image.as_str());
    let (_, edited) = send(
        &app,
        "PATCH",
        "/api/environments/tools",
        Some(json!({"description": "edited", "config": built["config"]})),
    )
    .await;
    assert_eq!(edited["build"]["status"], "ready");
    app.environments.idle().await;
    let (attempts,): (i32,) = sqlx::query_as("select attempts from environment_builds")
        .fetch_one(&app.db)
        .await
        .unwrap();
    assert_eq!(attempts, 1, "built once");

    // A new configuration builds its own image; the old one stays while a session needs it.
    let (s, _) = send(
        &app,
        "PATCH",
        "/api/environments/twin",
        Some(json!({"config": {}})),
    )
    .await;
    assert_eq!(s, 200);
    let (s, _) = send(&app, "DELETE", "/api/environments/twin", None).await;
    assert_eq!(s, 204);
    app.environments.idle().await;
    app.environments.collect_unused().await.unwrap();
    assert!(app.sessions.backend().image_exists(&image).await.unwrap());
    let (s, _) = send(&app, "DELETE", &format!("/api/sessions/{id}"), None).await;
    assert_eq!(s, 204);
    let (s, _) = send(
        &app,
        "PATCH",
        "/api/environments/tools",
        Some(json!({"config": {}})),
    )
    .await;
    assert_eq!(s, 200);
    app.environments.idle().await;
    app.environments.collect_unused().await.unwrap();
    // The session's delete started a garbage pass of its own, which may hold the queued
    // image while it removes it.
    eventually("the image nothing needs to be removed", BUILD, async || {
        app.sessions.collect_garbage().await.unwrap();
        (!app.sessions.backend().image_exists(&image).await.unwrap()).then_some(())
    })
    .await;
}

#[tokio::test]
async fn a_failed_build_names_its_package_manager_and_fails_its_sessions() {
    let app = options_with_ca().spawn().await;
    app.create_agent("a", json!({})).await;
    let (s, _) = send(
        &app,
        "POST",
        "/api/environments",
        Some(json!({"name": "no-npm", "config": {"packages": {"npm": ["express@4.18.0"]}}})),
    )
    .await;
    assert_eq!(s, 201);
    let session = app
        .create_session(json!({"agent_id": "a", "environment_id": "no-npm"}))
        .await;
    let failed = wait_for_build(&app, "no-npm").await;
    assert_eq!(failed["build"]["status"], "failed", "{failed}");
    let error = failed["build"]["error"].as_str().unwrap();
    assert!(
        error.starts_with("npm: ") && error.contains("has no npm"),
        "{error}"
    );
    let s = app
        .wait_for_status(session["id"].as_str().unwrap(), "error", BUILD)
        .await;
    // Saving the same configuration again tries the build again (and it fails again).
    let (s2, again) = send(
        &app,
        "PATCH",
        "/api/environments/no-npm",
        Some(json!({"config": failed["config"]})),
    )
    .await;
    assert_eq!(s2, 200, "{again}");
    assert_eq!(again["build"]["status"], "building");
    assert_eq!(
        wait_for_build(&app, "no-npm").await["build"]["status"],
        "failed"
    );
    assert!(s["error"].as_str().unwrap().contains("has no npm"), "{s}");

    let (_, env) = send(
        &app,
        "POST",
        "/api/environments",
        Some(json!({"name": "bad-pip", "config": {"packages": {"pip": ["sandbox-agents-no-such-package-0"]}}})),
    )
    .await;
    assert_eq!(env["build"]["status"], "building");
    let failed = wait_for_build(&app, "bad-pip").await;
    let error = failed["build"]["error"].as_str().unwrap();
    assert!(error.starts_with("pip failed (exit code 1): "), "{error}");
    assert!(
        error.contains("sandbox-agents-no-such-package-0"),
        "{error}"
    );
}

#[tokio::test]
async fn a_build_interrupted_by_a_restart_is_taken_over_not_left_building() {
    let first = options_with_ca().spawn().await;
    // A pip step no earlier build has cached (any idna satisfies it), so the build is still
    // running when the process stops.
    let fresh = format!(
        "idna>=2.0.{}",
        uuid::Uuid::new_v4().as_u128() % 1_000_000_000
    );
    let (s, env) = send(
        &first,
        "POST",
        "/api/environments",
        Some(json!({"name": "resumed", "config": {"packages": {"apt": ["tree"], "pip": [fresh]}}})),
    )
    .await;
    assert_eq!(s, 201);
    assert_eq!(env["build"]["status"], "building");
    eventually("the build to start", BUILD, async || {
        let (n,): (i32,) = sqlx::query_as("select attempts from environment_builds")
            .fetch_one(&first.db)
            .await
            .unwrap();
        (n == 1).then_some(())
    })
    .await;
    // The process stops mid-build (its builds end with it, their locks with their
    // connections): the row is left `building`, and nobody holds it.
    first.shutdown.cancel();
    first.environments.idle().await;
    let (status,): (String,) = sqlx::query_as("select status from environment_builds")
        .fetch_one(&first.db)
        .await
        .unwrap();
    assert_eq!(status, "building");
    // The next process takes it over (as `App::start_workers` does at start).
    let second = options_with_ca()
        .with_db(first.db.clone(), first.db_options.clone())
        .spawn()
        .await;
    assert_eq!(second.environments.resume_builds().await.unwrap(), 1);
    let done = wait_for_build(&second, "resumed").await;
    assert_eq!(done["build"]["status"], "ready", "{done}");
    let (attempts,): (i32,) = sqlx::query_as("select attempts from environment_builds")
        .fetch_one(&second.db)
        .await
        .unwrap();
    assert_eq!(
        attempts, 2,
        "the interrupted attempt and the one that finished"
    );
    drop(first);
}

#[tokio::test]
async fn a_project_with_environments_agents_and_sessions_in_them_can_be_deleted() {
    let app = TestApp::builder().spawn().await;
    let call = |method: reqwest::Method, path: &str, body: Value| {
        let r = app
            .http
            .request(method, app.url(path))
            .header("x-project", "envs")
            .json(&body);
        async move {
            let r = r.send().await.unwrap();
            (
                r.status().as_u16(),
                r.json::<Value>().await.unwrap_or(Value::Null),
            )
        }
    };
    let (s, _) = call(
        reqwest::Method::POST,
        "/api/projects",
        json!({"name": "Envs", "slug": "envs"}),
    )
    .await;
    assert_eq!(s, 201);
    let (s, env) = call(
        reqwest::Method::POST,
        "/api/environments",
        json!({"name": "e"}),
    )
    .await;
    assert_eq!(s, 201, "{env}");
    let (s, _) = call(
        reqwest::Method::POST,
        "/api/agents",
        json!({"slug": "a", "name": "a", "environment_id": "e"}),
    )
    .await;
    assert_eq!(s, 201);
    let (s, session) = call(
        reqwest::Method::POST,
        "/api/sessions",
        json!({"agent_id": "a"}),
    )
    .await;
    assert_eq!(s, 202, "{session}");
    let id = session["id"].as_str().unwrap().to_owned();
    eventually(
        "the session to boot",
        sandbox_agents_testkit::BOOT,
        async || {
            let (_, s) = call(
                reqwest::Method::GET,
                &format!("/api/sessions/{id}"),
                Value::Null,
            )
            .await;
            (s["status"] == "running").then_some(())
        },
    )
    .await;
    let (s, _) = call(
        reqwest::Method::POST,
        &format!("/api/sessions/{id}/stop"),
        json!({}),
    )
    .await;
    assert_eq!(s, 200);
    let (s, b) = call(reqwest::Method::DELETE, "/api/projects/envs", Value::Null).await;
    assert_eq!(s, 204, "{b}");
    let (left,): (i64,) = sqlx::query_as("select count(*) from environments")
        .fetch_one(&app.db)
        .await
        .unwrap();
    assert_eq!(left, 0);
}

#[tokio::test]
async fn builds_beyond_the_bound_wait_their_turn() {
    let app = options_with_ca()
        .with_config(|c| c.max_concurrent_builds = 1)
        .spawn()
        .await;
    for name in ["one", "two"] {
        // Steps no earlier build has cached, so each takes a while.
        let fresh = format!(
            "six>=1.0.{}",
            uuid::Uuid::new_v4().as_u128() % 1_000_000_000
        );
        let (s, _) = send(
            &app,
            "POST",
            "/api/environments",
            Some(json!({"name": name, "config": {"packages": {"pip": [fresh]}}})),
        )
        .await;
        assert_eq!(s, 201);
    }
    // A build counts its attempt once it holds a permit: with one permit, never two at once.
    eventually("both builds to end", BUILD, async || {
        let rows: Vec<(String, i32)> =
            sqlx::query_as("select status, attempts from environment_builds")
                .fetch_all(&app.db)
                .await
                .unwrap();
        let running = rows
            .iter()
            .filter(|(s, a)| s == "building" && *a > 0)
            .count();
        assert!(running <= 1, "two builds ran at once: {rows:?}");
        if rows.iter().all(|(s, _)| s == "ready") {
            Ok(())
        } else {
            Err(format!("{rows:?}"))
        }
    })
    .await;
}
