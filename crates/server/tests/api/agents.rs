use sandbox_agents_testkit::{TestApp, DEFAULT_MODEL};
use serde_json::{json, Value};

async fn create(app: &TestApp, body: Value) -> reqwest::Response {
    app.http
        .post(app.url("/api/agents"))
        .json(&body)
        .send()
        .await
        .unwrap()
}

async fn create_ok(app: &TestApp, body: Value) -> Value {
    let r = create(app, body).await;
    assert_eq!(r.status(), 201);
    r.json().await.unwrap()
}

async fn patch(app: &TestApp, r: &str, body: Value) -> reqwest::Response {
    app.http
        .patch(app.url(&format!("/api/agents/{r}")))
        .json(&body)
        .send()
        .await
        .unwrap()
}

/// What the published client sends for `agents.create(slug=..., name=...)`.
fn client_create(slug: &str) -> Value {
    json!({"slug": slug, "name": "Analyst", "description": "", "instructions": "", "transport": "proxy",
           "model": null, "reasoning_effort": null, "image": null, "capabilities": null,
           "skills_source": null, "workspace_source": null})
}

#[tokio::test]
async fn a_new_agent_has_version_1_the_default_model_and_empty_lists() {
    let app = TestApp::builder().spawn().await;
    let a = create_ok(&app, client_create("analyst")).await;
    assert_eq!(a["version"], 1);
    assert_eq!(a["model"], DEFAULT_MODEL);
    assert_eq!(a["manifest"], json!({"entries": {}, "environment": {}}));
    for list in [
        "exposed_ports",
        "client_tools",
        "secret_bindings",
        "subagents",
    ] {
        assert_eq!(a[list], json!([]), "{list}");
    }
    assert!(a["archived_at"].is_null());
    assert!(uuid::Uuid::parse_str(a["id"].as_str().unwrap()).is_ok());
}

#[tokio::test]
async fn agents_are_found_by_id_and_by_slug() {
    let app = TestApp::builder().spawn().await;
    let a = create_ok(&app, client_create("finder")).await;
    for r in [a["id"].as_str().unwrap(), "finder"] {
        let got: Value = app
            .http
            .get(app.url(&format!("/api/agents/{r}")))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(got["id"], a["id"]);
    }
    let r = app
        .http
        .get(app.url("/api/agents/nobody"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    assert!(r.json::<Value>().await.unwrap()["detail"]
        .as_str()
        .unwrap()
        .contains("nobody"));
}

#[tokio::test]
async fn a_duplicate_slug_is_a_409() {
    let app = TestApp::builder().spawn().await;
    create_ok(&app, client_create("twin")).await;
    let r = create(&app, client_create("twin")).await;
    assert_eq!(r.status(), 409);
}

#[tokio::test]
async fn a_stale_version_is_a_409_and_changes_nothing() {
    let app = TestApp::builder().spawn().await;
    create_ok(&app, client_create("locked")).await;
    let r = patch(&app, "locked", json!({"version": 1, "name": "First"})).await;
    assert_eq!(r.status(), 200);
    assert_eq!(r.json::<Value>().await.unwrap()["version"], 2);
    let r = patch(&app, "locked", json!({"version": 1, "name": "Second"})).await;
    assert_eq!(r.status(), 409);
    let detail = r.json::<Value>().await.unwrap()["detail"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        detail.contains("version 1 is stale") && detail.contains("current is 2"),
        "{detail}"
    );
    let a: Value = app
        .http
        .get(app.url("/api/agents/locked"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(a["name"], "First");
    assert_eq!(a["version"], 2);
}

#[tokio::test]
async fn concurrent_edits_at_the_same_version_let_exactly_one_win() {
    let app = TestApp::builder().spawn().await;
    create_ok(&app, client_create("race")).await;
    let edits = (0..8).map(|i| patch(&app, "race", json!({"version": 1, "name": format!("n{i}")})));
    let statuses: Vec<u16> = futures::future::join_all(edits)
        .await
        .iter()
        .map(|r| r.status().as_u16())
        .collect();
    assert_eq!(
        statuses.iter().filter(|s| **s == 200).count(),
        1,
        "{statuses:?}"
    );
    assert_eq!(
        statuses.iter().filter(|s| **s == 409).count(),
        7,
        "{statuses:?}"
    );
}

#[tokio::test]
async fn null_clears_and_absent_keeps() {
    let app = TestApp::builder().spawn().await;
    let mut body = client_create("clearable");
    body["model"] = json!("gpt-x");
    body["image"] = json!("img:1");
    body["client_tools"] = json!([{"name": "ask", "deferrable": true}]);
    create_ok(&app, body).await;
    let r = patch(
        &app,
        "clearable",
        json!({"version": 1, "image": null, "model": null, "client_tools": null}),
    )
    .await;
    assert_eq!(r.status(), 200);
    let a: Value = r.json().await.unwrap();
    assert!(a["image"].is_null());
    assert_eq!(
        a["model"], DEFAULT_MODEL,
        "null puts the agent back on the default, shown resolved"
    );
    assert_eq!(a["client_tools"], json!([]));
    assert_eq!(a["name"], "Analyst", "absent fields are unchanged");
    for field in ["name", "manifest", "exposed_ports", "transport"] {
        let r = patch(&app, "clearable", json!({"version": 2, field: null})).await;
        assert_eq!(r.status(), 422, "{field}: null is refused");
        let body: Value = r.json().await.unwrap();
        assert_eq!(body["detail"][0]["loc"], json!(["body", field]));
    }
}

#[tokio::test]
async fn archived_agents_leave_the_listing_but_stay_readable() {
    let app = TestApp::builder().spawn().await;
    create_ok(&app, client_create("keep")).await;
    create_ok(&app, client_create("shelve")).await;
    let r = app
        .http
        .post(app.url("/api/agents/shelve/archive"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let a: Value = r.json().await.unwrap();
    assert!(a["archived_at"].is_string());
    assert_eq!(a["version"], 1, "archiving is not a definition edit");
    let slugs = |v: Value| {
        v.as_array()
            .unwrap()
            .iter()
            .map(|a| a["slug"].as_str().unwrap().to_owned())
            .collect::<Vec<_>>()
    };
    let listed = app
        .http
        .get(app.url("/api/agents?include_archived=false"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(slugs(listed), ["keep"]);
    let listed = app
        .http
        .get(app.url("/api/agents?include_archived=true"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(slugs(listed), ["keep", "shelve"]);
    assert_eq!(
        app.http
            .get(app.url("/api/agents/shelve"))
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    let a: Value = app
        .http
        .post(app.url("/api/agents/shelve/unarchive"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(a["archived_at"].is_null());
}

#[tokio::test]
async fn deleting_an_agent_a_session_references_is_a_409() {
    let app = TestApp::builder().spawn().await;
    let used = app.seed_agent("used").await;
    app.seed_session(used.id).await;
    let r = app
        .http
        .delete(app.url("/api/agents/used"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 409);
    assert!(r.json::<Value>().await.unwrap()["detail"]
        .as_str()
        .unwrap()
        .contains("archive"));
    create_ok(&app, client_create("unused")).await;
    assert_eq!(
        app.http
            .delete(app.url("/api/agents/unused"))
            .send()
            .await
            .unwrap()
            .status(),
        204
    );
    assert_eq!(
        app.http
            .get(app.url("/api/agents/unused"))
            .send()
            .await
            .unwrap()
            .status(),
        404
    );
}

#[tokio::test]
async fn unknown_literals_are_422_with_the_field_located() {
    let app = TestApp::builder().spawn().await;
    let cases = [
        (
            json!({"transport": "carrier-pigeon"}),
            vec!["body", "transport"],
        ),
        (
            json!({"reasoning_effort": "extreme"}),
            vec!["body", "reasoning_effort"],
        ),
        (
            json!({"capabilities": ["shell", "teleport"]}),
            vec!["body", "capabilities", "1"],
        ),
        (json!({"slug": "Bad Slug"}), vec!["body", "slug"]),
        (json!({"manifest": null}), vec!["body", "manifest"]),
        (
            json!({"client_tools": [{"name": "ask", "deferrable": true, "timeout_seconds": 5}]}),
            vec!["body", "client_tools", "0", "timeout_seconds"],
        ),
        (
            json!({"manifest": {"entries": {"../escape": {"kind": "file", "content": "x"}}}}),
            vec!["body", "manifest", "entries", "../escape"],
        ),
        (
            json!({"subagents": [{"agent": "ghost"}]}),
            vec!["body", "subagents", "0", "agent"],
        ),
    ];
    for (patch_in, loc) in cases {
        let mut body = client_create("literal");
        for (k, v) in patch_in.as_object().unwrap() {
            body[k] = v.clone();
        }
        let r = create(&app, body.clone()).await;
        assert_eq!(r.status(), 422, "{body}");
        let err: Value = r.json().await.unwrap();
        let got: Vec<String> = err["detail"][0]["loc"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.to_string().trim_matches('"').to_owned())
            .collect();
        assert_eq!(got, loc, "{err}");
        assert!(err["detail"][0]["msg"].is_string());
    }
    let r = create(
        &app,
        json!({"slug": "x", "name": "x", "manifest": {"entries": {"a": {"kind": "rocket"}}}}),
    )
    .await;
    assert_eq!(r.status(), 422, "an unknown manifest entry kind is refused");
    let listed: Value = app
        .http
        .get(app.url("/api/agents?include_archived=true"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(listed, json!([]), "nothing was created");
}

#[tokio::test]
async fn full_dumps_and_minimal_dicts_both_round_trip() {
    let app = TestApp::builder().spawn().await;
    let mut body = client_create("full");
    body["manifest"] = json!({"entries": {
        "brief.md": {"kind": "file", "content": "# Northwind"},
        "output": {"kind": "dir"},
        "repo": {"kind": "git_repo", "repo": "o/r", "ref": "main", "host": "github.com", "subpath": null}
    }});
    body["client_tools"] = json!([{"name": "open_account", "description": "Read", "parameters": {"type": "object"}},
                                  {"name": "ask_user", "deferrable": true}]);
    body["exposed_ports"] = json!([8080, 3000, 8080]);
    body["secret_bindings"] = json!([{"secret": "gh", "env": "GH_TOKEN"}]);
    body["capabilities"] = json!(["shell", "filesystem"]);
    body["skills_source"] = json!({"kind": "bundle", "bundle": "runtime"});
    let a = create_ok(&app, body).await;
    assert_eq!(
        a["manifest"]["entries"]["brief.md"],
        json!({"kind": "file", "content": "# Northwind"})
    );
    assert_eq!(a["manifest"]["entries"]["output"], json!({"kind": "dir"}));
    assert_eq!(a["exposed_ports"], json!([3000, 8080]));
    assert_eq!(a["client_tools"][1]["deferrable"], true);
    assert_eq!(a["client_tools"][0]["timeout_seconds"], Value::Null);
    assert_eq!(
        a["skills_source"],
        json!({"kind": "bundle", "bundle": "runtime", "version": "latest", "subpath": null, "lazy": true})
    );
    let again: Value = app
        .http
        .get(app.url("/api/agents/full"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(again, a);
}

#[tokio::test]
async fn the_slug_cannot_be_changed() {
    let app = TestApp::builder().spawn().await;
    create_ok(&app, client_create("fixed")).await;
    let r = patch(&app, "fixed", json!({"version": 1, "slug": "moved"})).await;
    assert_eq!(r.status(), 422);
    let r = patch(
        &app,
        "fixed",
        json!({"version": 1, "slug": "fixed", "name": "same slug is fine"}),
    )
    .await;
    assert_eq!(r.status(), 200);
}

#[tokio::test]
async fn a_patch_without_version_is_a_422() {
    let app = TestApp::builder().spawn().await;
    create_ok(&app, client_create("nover")).await;
    let r = patch(&app, "nover", json!({"name": "x"})).await;
    assert_eq!(r.status(), 422);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["detail"][0]["loc"], json!(["body", "version"]));
    assert_eq!(body["detail"][0]["type"], "missing");
}

/// A server whose backend offers no runtime class to choose (Docker) refuses an agent naming
/// one, at its field, saying how an operator offers them; a malformed name is refused too.
#[tokio::test]
async fn a_runtime_class_the_server_does_not_offer_is_a_422_at_its_field() {
    let app = TestApp::builder().spawn().await;
    let (_, backends) = app.get_json("/api/backends").await;
    assert_eq!(backends[0]["runtime_classes"], json!([]), "{backends}");
    for (name, wanted) in [
        ("gvisor", "--kubernetes-runtime-classes"),
        ("GVisor", "lowercase letters"),
    ] {
        let mut body = client_create("rc");
        body["runtime_class"] = json!(name);
        let (code, v) = app.post_json("/api/agents", body).await;
        assert_eq!(code, 422, "{v}");
        assert_eq!(
            v["detail"][0]["loc"],
            json!(["body", "runtime_class"]),
            "{v}"
        );
        let msg = v["detail"][0]["msg"].as_str().unwrap();
        assert!(msg.contains(wanted), "{msg}");
    }
    let (code, _) = app.get_json("/api/agents/rc").await;
    assert_eq!(code, 404, "nothing was made");
}
