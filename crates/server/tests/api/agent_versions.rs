//! Agent versions: every accepted edit is an immutable version (listed newest first, paged,
//! each whole with who made it and what changed), a restore is a new version under the
//! optimistic lock, and a session runs the version it pinned (its agent's and its
//! subagents', as they were when it pinned) while `"latest"` follows every edit. The fake
//! model tells the versions apart by their instructions (`system_contains`).

use sandbox_agents_fake_model::{FakeModel, Rule, Script};
use sandbox_agents_sandbox::memory::MemoryBackend;
use sandbox_agents_testkit::runs::{start_run, wait_for_run};
use sandbox_agents_testkit::TestApp;
use serde_json::{json, Value};

async fn app(fake: &FakeModel) -> TestApp {
    TestApp::builder()
        .with_model_proxy(&fake.root_url())
        .with_memory_backend(&MemoryBackend::new("agent-versions"))
        .spawn()
        .await
}

/// A model that answers with the version its instructions name.
fn versioned_model() -> FakeModel {
    FakeModel::start(Script::new([
        Rule::when()
            .system_contains("You are v1.")
            .reply_text("answer of v1"),
        Rule::when()
            .system_contains("You are v2.")
            .reply_text("answer of v2"),
        Rule::when()
            .system_contains("You are v3.")
            .reply_text("answer of v3"),
    ]))
}

async fn edit(app: &TestApp, slug: &str, version: i64, body: Value) -> Value {
    let mut body = body;
    body["version"] = json!(version);
    let (status, agent) = app.patch_json(&format!("/api/agents/{slug}"), body).await;
    assert_eq!(status, 200, "{agent}");
    agent
}

/// The final output of one turn of session `id`.
async fn answer(app: &TestApp, id: &str) -> Value {
    let run = start_run(app, id, "who are you?", Value::Null).await;
    let evs = wait_for_run(app, id, &run).await;
    let end = evs.last().expect("a terminal event");
    assert_eq!(end["type"], "session.status_idle", "{end}");
    end["payload"]["final_output"].clone()
}

async fn versions(app: &TestApp, path: &str) -> (Vec<Value>, i64) {
    let r = app.http.get(app.url(path)).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let total = r.headers()["x-total-count"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    (r.json().await.unwrap(), total)
}

#[tokio::test]
async fn every_edit_is_a_version_on_record_with_its_author_and_the_fields_it_changed() {
    let fake = versioned_model();
    let app = app(&fake).await;
    app.create_agent("writer", json!({"instructions": "You are v1."}))
        .await;
    edit(&app, "writer", 1, json!({"instructions": "You are v2."})).await;
    edit(
        &app,
        "writer",
        2,
        json!({"model": "other-model", "description": "d"}),
    )
    .await;

    let (all, total) = versions(&app, "/api/agents/writer/versions").await;
    assert_eq!(total, 3);
    let numbers: Vec<i64> = all.iter().map(|v| v["version"].as_i64().unwrap()).collect();
    assert_eq!(numbers, [3, 2, 1], "newest first");
    assert_eq!(all[0]["changed"], json!(["description", "model"]));
    assert_eq!(all[1]["changed"], json!(["instructions"]));
    assert_eq!(all[2]["changed"], json!([]));
    for v in &all {
        // The test server runs without auth: every caller is the open operator.
        assert_eq!(
            v["changed_by"],
            json!({"kind": "open", "id": null, "name": null})
        );
        assert!(v["restored_from"].is_null());
        assert!(v.get("agent").is_none(), "the list is summaries: {v}");
    }
    let (page, total) = versions(&app, "/api/agents/writer/versions?limit=1&offset=1").await;
    assert_eq!(total, 3);
    assert_eq!(page.len(), 1);
    assert_eq!(page[0]["version"], 2);

    // One version whole: the definition as it was, whichever way the agent is named.
    let (_, current) = app.get_json("/api/agents/writer").await;
    let id = current["id"].as_str().unwrap();
    let (status, one) = app.get_json(&format!("/api/agents/{id}/versions/1")).await;
    assert_eq!(status, 200, "{one}");
    assert_eq!(one["version"], 1);
    assert_eq!(one["agent"]["version"], 1);
    assert_eq!(one["agent"]["instructions"], "You are v1.");
    assert_eq!(one["agent"]["description"], "");
    assert_eq!(one["agent"]["updated_at"], one["created_at"]);
    assert_eq!(current["instructions"], "You are v2.");
    assert_eq!(current["model"], "other-model");

    for (path, status) in [
        ("/api/agents/writer/versions/4", 404),
        ("/api/agents/writer/versions/0", 404),
        ("/api/agents/writer/versions/first", 404),
        ("/api/agents/nobody/versions", 404),
        ("/api/agents/writer/versions?limit=0", 422),
        ("/api/agents/writer/versions?offset=-1", 422),
    ] {
        let (got, body) = app.get_json(path).await;
        assert_eq!(got, status, "{path}: {body}");
        assert!(
            body["detail"].is_string() || body["detail"].is_array(),
            "{path}: {body}"
        );
    }
    let (_, missing) = app.get_json("/api/agents/writer/versions/4").await;
    assert_eq!(
        missing["detail"],
        "agent 'writer' has no version '4' (its versions are 1 to 3)"
    );
}

#[tokio::test]
async fn a_restore_is_a_new_version_with_the_old_fields_under_the_optimistic_lock() {
    let fake = versioned_model();
    let app = app(&fake).await;
    app.create_agent("writer", json!({"instructions": "You are v1."}))
        .await;
    edit(
        &app,
        "writer",
        1,
        json!({"instructions": "You are v2.", "exposed_ports": [8080]}),
    )
    .await;

    // A stale lock changes nothing.
    let (status, body) = app
        .post_json(
            "/api/agents/writer/versions/1/restore",
            json!({"version": 1}),
        )
        .await;
    assert_eq!(status, 409, "{body}");
    assert!(
        body["detail"]
            .as_str()
            .unwrap()
            .contains("version 1 is stale"),
        "{body}"
    );
    let (_, total) = versions(&app, "/api/agents/writer/versions").await;
    assert_eq!(total, 2);
    for (path, body, want) in [
        (
            "/api/agents/writer/versions/9/restore",
            json!({"version": 2}),
            404,
        ),
        ("/api/agents/writer/versions/1/restore", json!({}), 422),
        (
            "/api/agents/writer/versions/1/restore",
            json!({"version": "2"}),
            422,
        ),
        (
            "/api/agents/writer/versions/1/restore",
            json!({"version": 2, "x": 1}),
            422,
        ),
    ] {
        let (status, got) = app.post_json(path, body.clone()).await;
        assert_eq!(status, want, "{path} {body}: {got}");
    }
    let (_, total) = versions(&app, "/api/agents/writer/versions").await;
    assert_eq!(total, 2, "a refused restore writes no version");

    let (status, restored) = app
        .post_json(
            "/api/agents/writer/versions/1/restore",
            json!({"version": 2}),
        )
        .await;
    assert_eq!(status, 200, "{restored}");
    assert_eq!(restored["version"], 3);
    assert_eq!(restored["instructions"], "You are v1.");
    assert_eq!(restored["exposed_ports"], json!([]));
    let (all, _) = versions(&app, "/api/agents/writer/versions").await;
    assert_eq!(all[0]["version"], 3);
    assert_eq!(all[0]["restored_from"], 1);
    assert_eq!(all[0]["changed"], json!(["exposed_ports", "instructions"]));
}

#[tokio::test]
async fn a_restore_of_a_version_whose_subagent_is_gone_is_refused_and_changes_nothing() {
    let fake = versioned_model();
    let app = app(&fake).await;
    app.create_agent("helper", json!({"instructions": "You are v1."}))
        .await;
    app.create_agent(
        "lead",
        json!({"instructions": "You are v1.", "subagents": [{"agent": "helper"}]}),
    )
    .await;
    edit(&app, "lead", 1, json!({"subagents": []})).await;
    let r = app
        .http
        .delete(app.url("/api/agents/helper"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 204);
    let (status, body) = app
        .post_json("/api/agents/lead/versions/1/restore", json!({"version": 2}))
        .await;
    assert_eq!(status, 422, "{body}");
    assert_eq!(
        body["detail"][0]["loc"],
        json!(["body", "subagents", 0, "agent"])
    );
    let (_, total) = versions(&app, "/api/agents/lead/versions").await;
    assert_eq!(total, 2);
}

#[tokio::test]
async fn a_pinned_session_runs_its_version_whatever_edits_follow_and_latest_follows_them() {
    let fake = versioned_model();
    let app = app(&fake).await;
    app.create_agent("writer", json!({"instructions": "You are v1."}))
        .await;
    let pinned = app.create_session(json!({"agent_id": "writer"})).await;
    assert_eq!(
        pinned["agent_version"], 1,
        "the current version, pinned by default"
    );
    let latest = app
        .create_session(json!({"agent_id": "writer", "agent_version": "latest"}))
        .await;
    assert_eq!(latest["agent_version"], "latest");
    let (pinned, latest) = (
        pinned["id"].as_str().unwrap().to_owned(),
        latest["id"].as_str().unwrap().to_owned(),
    );
    for id in [&pinned, &latest] {
        app.wait_for_status(id, "running", sandbox_agents_testkit::BOOT)
            .await;
    }
    assert_eq!(answer(&app, &pinned).await, "answer of v1");

    edit(&app, "writer", 1, json!({"instructions": "You are v2."})).await;
    assert_eq!(
        answer(&app, &pinned).await,
        "answer of v1",
        "an edit changes no pinned turn"
    );
    assert_eq!(answer(&app, &latest).await, "answer of v2");

    // An older version, pinned on purpose after the edit; the session says which.
    let old = app
        .boot_session(json!({"agent_id": "writer", "agent_version": 1}))
        .await;
    let (_, s) = app.get_json(&format!("/api/sessions/{old}")).await;
    assert_eq!(s["agent_version"], 1);
    assert_eq!(answer(&app, &old).await, "answer of v1");
    let (_, created) = app
        .get_json(&format!("/api/sessions/{old}/events?limit=1"))
        .await;
    assert_eq!(created[0]["type"], "session.created", "{created}");
    assert_eq!(created[0]["payload"]["agent_version"], 1, "{created}");
}

#[tokio::test]
async fn a_version_a_session_cannot_pin_is_a_422_that_names_agent_version_and_creates_nothing() {
    let fake = versioned_model();
    let app = app(&fake).await;
    app.create_agent("writer", json!({"instructions": "You are v1."}))
        .await;
    for bad in [
        json!(2),
        json!(0),
        json!(-1),
        json!(1.5),
        json!("newest"),
        json!("1"),
        json!([1]),
    ] {
        let r = app
            .http
            .post(app.url("/api/sessions"))
            .json(&json!({"agent_id": "writer", "agent_version": bad}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 422, "{bad}");
        let body: Value = r.json().await.unwrap();
        let loc = body["detail"][0]["loc"].as_array().unwrap();
        assert_eq!(loc.last().unwrap(), "agent_version", "{bad}: {body}");
    }
    let (_, body) = app
        .post_json(
            "/api/sessions",
            json!({"agent_id": "writer", "agent_version": 2}),
        )
        .await;
    assert_eq!(
        body["detail"][0]["msg"],
        "agent 'writer' has no version 2 (its versions are 1 to 1)"
    );
    let (_, sessions) = app.get_json("/api/sessions").await;
    assert_eq!(sessions, json!([]), "nothing was created");
}

#[tokio::test]
async fn subagents_run_at_the_versions_they_had_when_their_parents_session_pinned() {
    let fake = FakeModel::start(Script::new([
        Rule::when()
            .system_contains("You are the lead.")
            .last_message_role("tool")
            .reply_text("lead done"),
        Rule::when()
            .system_contains("You are the lead.")
            .reply_tool_call("helper", json!({"input": "help"})),
        Rule::when()
            .system_contains("You are helper v1.")
            .reply_text("help of v1"),
        Rule::when()
            .system_contains("You are helper v2.")
            .reply_text("help of v2"),
    ]));
    let app = app(&fake).await;
    app.create_agent("helper", json!({"instructions": "You are helper v1."}))
        .await;
    app.create_agent(
        "lead",
        json!({"instructions": "You are the lead.", "subagents": [{"agent": "helper"}]}),
    )
    .await;
    let pinned = app.boot_session(json!({"agent_id": "lead"})).await;
    let latest = app
        .boot_session(json!({"agent_id": "lead", "agent_version": "latest"}))
        .await;
    edit(
        &app,
        "helper",
        1,
        json!({"instructions": "You are helper v2."}),
    )
    .await;

    let helper_said = |evs: &[Value]| -> Vec<Value> {
        evs.iter()
            .filter(|e| e["type"] == "agent.tool_result" && e["payload"]["tool"] == "helper")
            .map(|e| e["payload"]["output"].clone())
            .collect()
    };
    for (id, want) in [(&pinned, "help of v1"), (&latest, "help of v2")] {
        let run = start_run(&app, id, "go", Value::Null).await;
        let evs = wait_for_run(&app, id, &run).await;
        let said = helper_said(&evs);
        assert_eq!(said.len(), 1, "{evs:?}");
        assert!(said[0].to_string().contains(want), "{id}: {said:?}");
    }

    // The helper's pinned version must stay: it cannot be deleted under the session.
    let r = app
        .http
        .delete(app.url("/api/agents/helper"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 409);
    let body: Value = r.json().await.unwrap();
    assert!(
        body["detail"]
            .as_str()
            .unwrap()
            .contains("subagent in 1 session"),
        "{body}"
    );
}

#[tokio::test]
async fn a_patch_moves_a_session_to_another_version_or_to_latest_from_its_next_turn() {
    let fake = versioned_model();
    let app = app(&fake).await;
    app.create_agent("writer", json!({"instructions": "You are v1."}))
        .await;
    let id = app.boot_session(json!({"agent_id": "writer"})).await;
    edit(&app, "writer", 1, json!({"instructions": "You are v2."})).await;
    edit(&app, "writer", 2, json!({"instructions": "You are v3."})).await;
    assert_eq!(answer(&app, &id).await, "answer of v1");

    let path = format!("/api/sessions/{id}");
    let (status, s) = app.patch_json(&path, json!({"agent_version": 2})).await;
    assert_eq!(status, 200, "{s}");
    assert_eq!(s["agent_version"], 2);
    let (_, detail) = app.get_json(&path).await;
    assert_eq!(
        detail["agent"]["version"], 2,
        "the detail shows the version it runs"
    );
    assert_eq!(detail["agent"]["instructions"], "You are v2.");
    assert_eq!(answer(&app, &id).await, "answer of v2");

    let (_, s) = app
        .patch_json(&path, json!({"agent_version": "latest"}))
        .await;
    assert_eq!(s["agent_version"], "latest");
    assert_eq!(answer(&app, &id).await, "answer of v3");

    for bad in [json!(null), json!(4), json!("v1"), json!(0)] {
        let (status, body) = app
            .patch_json(&path, json!({"agent_version": bad, "title": "changed"}))
            .await;
        assert_eq!(status, 422, "{bad}: {body}");
        let loc = body["detail"][0]["loc"].as_array().unwrap();
        assert_eq!(loc.last().unwrap(), "agent_version", "{bad}: {body}");
    }
    let (_, s) = app.get_json(&path).await;
    assert_eq!(
        s["agent_version"], "latest",
        "a refused patch changes nothing"
    );
    assert_eq!(s["title"], "", "nor the title sent with it");
}
