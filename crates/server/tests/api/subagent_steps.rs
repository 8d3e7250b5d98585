//! The subagent step limit, an agent's `subagent_max_steps`: validated (1 to 100, a 422 with
//! a `detail` outside), 10 when unset, stored, returned and PATCHable, and the limit a
//! subagent it calls as a tool stops at.

use sandbox_agents_fake_model::{FakeModel, Rule, Script};
use sandbox_agents_testkit::runs::{start_run, wait_for_run};
use sandbox_agents_testkit::TestApp;
use serde_json::{json, Value};

#[tokio::test]
async fn the_subagent_step_limit_is_validated_defaulted_stored_and_patchable() {
    let app = TestApp::builder().spawn().await;
    let created = app.create_agent("plain", json!({})).await;
    assert_eq!(created["subagent_max_steps"], 10, "the default, resolved");

    for bad in [json!(0), json!(101), json!(-3), json!("ten")] {
        let r = app
            .http
            .post(app.url("/api/agents"))
            .json(&json!({"slug": "bad", "name": "bad", "subagent_max_steps": bad}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 422, "{bad}");
        let body: Value = r.json().await.unwrap();
        assert!(
            body["detail"].is_array() || body["detail"].is_string(),
            "{body}"
        );
        if bad.is_number() {
            assert!(body.to_string().contains("1 to 100"), "{body}");
        }
    }

    let set = app
        .create_agent("lead", json!({"subagent_max_steps": 3}))
        .await;
    assert_eq!(set["subagent_max_steps"], 3);
    let read: Value = app
        .http
        .get(app.url("/api/agents/lead"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(read["subagent_max_steps"], 3, "stored");

    let patch = |body: Value| {
        let app = &app;
        async move {
            app.http
                .patch(app.url("/api/agents/lead"))
                .json(&body)
                .send()
                .await
                .unwrap()
        }
    };
    let r = patch(json!({"version": 1, "subagent_max_steps": 100})).await;
    assert_eq!(r.status(), 200);
    assert_eq!(r.json::<Value>().await.unwrap()["subagent_max_steps"], 100);
    let r = patch(json!({"version": 2, "subagent_max_steps": 101})).await;
    assert_eq!(r.status(), 422);
    assert!(r.text().await.unwrap().contains("subagent_max_steps"));
    let r = patch(json!({"version": 2, "subagent_max_steps": null})).await;
    assert_eq!(r.status(), 200);
    assert_eq!(
        r.json::<Value>().await.unwrap()["subagent_max_steps"],
        10,
        "null goes back to the default"
    );
}

#[tokio::test]
async fn a_subagent_stops_at_its_callers_step_limit() {
    // The worker never answers: every step calls a tool again, until its limit.
    let fake = FakeModel::start(Script::new([
        Rule::when()
            .system_contains("You are the worker.")
            .reply_tool_call("shell", json!({"command": "true"})),
        Rule::when()
            .system_contains("You are the lead.")
            .last_tool_result_contains("limit of 3 steps")
            .reply_text("The worker gave up."),
        Rule::when()
            .system_contains("You are the lead.")
            .reply_tool_call("worker", json!({"input": "work forever"})),
    ]));
    let app = TestApp::builder()
        .with_model_proxy(&fake.root_url())
        .spawn()
        .await;
    // The worker's own setting is not what bounds it: its caller's is.
    app.create_agent(
        "worker",
        json!({"instructions": "You are the worker.", "subagent_max_steps": 50}),
    )
    .await;
    let id = app
        .running_session(
            "lead",
            json!({"instructions": "You are the lead.", "subagents": [{"agent": "worker"}],
                   "subagent_max_steps": 3}),
        )
        .await;
    let run = start_run(&app, &id, "go", Value::Null).await;
    let evs = wait_for_run(&app, &id, &run).await;
    let end = evs.last().unwrap();
    assert_eq!(
        end["payload"]["final_output"], "The worker gave up.",
        "{evs:?}"
    );
    let result = evs
        .iter()
        .find(|e| e["type"] == "agent.tool_result" && e["payload"]["tool"] == "worker")
        .unwrap();
    assert!(
        result["payload"]["output"]
            .as_str()
            .unwrap()
            .contains("reached its limit of 3 steps"),
        "{result}"
    );
    let worker_calls = fake
        .chat_requests()
        .into_iter()
        .filter(|r| {
            r.body["messages"][0]["content"]
                .as_str()
                .is_some_and(|s| s.contains("You are the worker."))
        })
        .count();
    assert_eq!(worker_calls, 3);
    assert_eq!(end["payload"]["usage"]["by_agent"]["worker"]["requests"], 3);
}
