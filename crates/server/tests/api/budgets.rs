//! Session budgets: checked before every model call, a turn that reaches one stops with
//! `stop_reason: "budget_reached"` (completed, not failed) within one call of the limit, and
//! raising it lets the next message go on. Against a scripted model that reports known costs.

use sandbox_agents_fake_model::{FakeModel, Rule, Script};
use sandbox_agents_sandbox::memory::MemoryBackend;
use sandbox_agents_testkit::runs::{start_run, types, wait_for_run};
use sandbox_agents_testkit::TestApp;
use serde_json::{json, Value};

/// A model that never stops calling the shell, each call reported at $0.10.
fn looping_model() -> FakeModel {
    FakeModel::start(Script::new([Rule::always()
        .reply_tool_call("shell", json!({"command": "echo again"}))
        .usage_costing(100, 10, 0.1)]))
}

async fn app(fake: &FakeModel) -> TestApp {
    TestApp::builder()
        .with_model_proxy(&fake.root_url())
        .with_memory_backend(&MemoryBackend::new("budget-tests"))
        .spawn()
        .await
}

/// The run's terminal event.
fn end(evs: &[Value]) -> &Value {
    evs.last().expect("a terminal event")
}

async fn patch(app: &TestApp, id: &str, body: Value) -> (u16, Value) {
    let r = app
        .http
        .patch(app.url(&format!("/api/sessions/{id}")))
        .json(&body)
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.json().await.unwrap())
}

#[tokio::test]
async fn a_looping_agent_stops_at_its_cost_budget_within_one_call_and_goes_on_when_raised() {
    let fake = looping_model();
    let app = app(&fake).await;
    app.create_agent("looper", json!({"instructions": "loop"}))
        .await;
    let s = app
        .create_session(json!({"agent_id": "looper", "budget": {"max_cost_usd": 0.35}}))
        .await;
    assert_eq!(s["budget"], json!({"max_cost_usd": 0.35}), "{s}");
    let id = s["id"].as_str().unwrap().to_owned();
    app.wait_for_status(&id, "running", sandbox_agents_testkit::BOOT)
        .await;

    // Calls start at $0, 0.1, 0.2 and 0.3; at $0.4 the next one would pass the limit.
    let run = start_run(&app, &id, "go", json!(50)).await;
    let evs = wait_for_run(&app, &id, &run).await;
    let last = end(&evs);
    assert_eq!(last["type"], "session.status_idle", "{last}");
    let p = &last["payload"];
    assert_eq!(p["stop_reason"], "budget_reached");
    assert_eq!(
        p["run_status"], "completed",
        "a limit reached is not a failure"
    );
    assert_eq!(p["usage"]["requests"], 4, "{p}");
    assert_eq!(p["budget"]["limit"], "max_cost_usd");
    assert!((p["budget"]["used"].as_f64().unwrap() - 0.4).abs() < 1e-9);
    assert!(p.get("error").is_none(), "{p}");
    let reached: Vec<&Value> = evs
        .iter()
        .filter(|e| e["type"] == "session.budget_reached")
        .collect();
    assert_eq!(reached.len(), 1, "{:?}", types(&evs));
    assert_eq!(reached[0]["payload"]["max"], 0.35);
    assert_eq!(
        reached[0]["payload"]["budget"],
        json!({"max_cost_usd": 0.35})
    );
    let chats = fake.chat_requests().len();
    assert_eq!(chats, 4, "no call after the limit");

    // Without a raise, the next message stops before any call.
    let run = start_run(&app, &id, "more", json!(50)).await;
    let evs = wait_for_run(&app, &id, &run).await;
    assert_eq!(end(&evs)["payload"]["stop_reason"], "budget_reached");
    assert_eq!(end(&evs)["payload"]["usage"]["requests"], 0);
    assert_eq!(fake.chat_requests().len(), chats);

    // Raised, the next message goes on where the turn stopped: two more calls (at $0.4 and
    // 0.5), and the conversation still ends in answered calls the model accepts.
    let (status, s) = patch(&app, &id, json!({"budget": {"max_cost_usd": 0.55}})).await;
    assert_eq!(status, 200, "{s}");
    assert_eq!(s["budget"]["max_cost_usd"], 0.55);
    let run = start_run(&app, &id, "go on", json!(50)).await;
    let evs = wait_for_run(&app, &id, &run).await;
    assert_eq!(end(&evs)["payload"]["stop_reason"], "budget_reached");
    assert_eq!(end(&evs)["payload"]["usage"]["requests"], 2);
    let session = app.session(&id).await;
    assert!(
        (session["usage"]["cost_usd"].as_f64().unwrap() - 0.6).abs() < 1e-9,
        "{session}"
    );

    // Removed, the model's own end (here the run's step limit) ends the turn again.
    let (status, s) = patch(&app, &id, json!({"budget": null})).await;
    assert_eq!((status, &s["budget"]), (200, &Value::Null), "{s}");
    let run = start_run(&app, &id, "once more", json!(1)).await;
    let evs = wait_for_run(&app, &id, &run).await;
    assert_eq!(end(&evs)["payload"]["stop_reason"], "max_turns");
}

#[tokio::test]
async fn the_agent_s_budget_is_copied_at_create_and_turns_and_tokens_count_over_the_session() {
    let fake = looping_model();
    let app = app(&fake).await;
    let agent = app
        .create_agent(
            "capped",
            json!({"instructions": "loop", "budget": {"max_turns": 3}}),
        )
        .await;
    assert_eq!(agent["budget"], json!({"max_turns": 3}), "{agent}");
    let none = app.create_agent("uncapped", json!({"budget": {}})).await;
    assert_eq!(none["budget"], Value::Null, "`{{}}` is no budget: {none}");
    let s = app.create_session(json!({"agent_id": "capped"})).await;
    assert_eq!(s["budget"], json!({"max_turns": 3}));
    let own = app
        .create_session(json!({"agent_id": "capped", "budget": {}}))
        .await;
    assert_eq!(own["budget"], Value::Null, "`{{}}` sets none: {own}");
    let tokens = app
        .create_session(json!({"agent_id": "capped", "budget": {"max_total_tokens": 250}}))
        .await;

    let id = s["id"].as_str().unwrap().to_owned();
    app.wait_for_status(&id, "running", sandbox_agents_testkit::BOOT)
        .await;
    // Two steps in the first turn (its own step limit), then one more in the next: three.
    let run = start_run(&app, &id, "go", json!(2)).await;
    let evs = wait_for_run(&app, &id, &run).await;
    assert_eq!(end(&evs)["payload"]["stop_reason"], "max_turns");
    let run = start_run(&app, &id, "go", json!(50)).await;
    let evs = wait_for_run(&app, &id, &run).await;
    let p = &end(&evs)["payload"];
    assert_eq!(p["stop_reason"], "budget_reached", "{p}");
    assert_eq!(
        (&p["budget"]["limit"], &p["turns"]),
        (&json!("max_turns"), &json!(1))
    );

    // 110 tokens a call: calls at 0, 110 and 220 tokens, then 330 ≥ 250.
    let id = tokens["id"].as_str().unwrap().to_owned();
    app.wait_for_status(&id, "running", sandbox_agents_testkit::BOOT)
        .await;
    let run = start_run(&app, &id, "go", json!(50)).await;
    let evs = wait_for_run(&app, &id, &run).await;
    let p = &end(&evs)["payload"];
    assert_eq!(p["budget"]["limit"], "max_total_tokens", "{p}");
    assert_eq!(p["usage"]["total_tokens"], 330);
}

#[tokio::test]
async fn a_bad_budget_is_a_422_that_names_the_field_and_changes_nothing() {
    let fake = looping_model();
    let app = app(&fake).await;
    app.create_agent("a", json!({"instructions": ""})).await;
    for (body, loc) in [
        (
            json!({"max_cost_usd": -1}),
            json!(["body", "budget", "max_cost_usd"]),
        ),
        (
            json!({"max_turns": "ten"}),
            json!(["body", "budget", "max_turns"]),
        ),
        (json!({"max_dollars": 1}), json!(["body", "budget"])),
        // An object, never the fields as an array (the API fuzz sent this).
        (json!([null, null]), json!(["body", "budget"])),
        (
            json!({"max_cost_usd": 5000000}),
            json!(["body", "budget", "max_cost_usd"]),
        ),
        (
            json!({"max_sandbox_seconds": 99999999}),
            json!(["body", "budget", "max_sandbox_seconds"]),
        ),
    ] {
        let r = app
            .http
            .post(app.url("/api/sessions"))
            .json(&json!({"agent_id": "a", "budget": body}))
            .send()
            .await
            .unwrap();
        let status = r.status().as_u16();
        let v: Value = r.json().await.unwrap();
        assert_eq!(status, 422, "{body}: {v}");
        let locs: Vec<&Value> = v["detail"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| &e["loc"])
            .collect();
        assert!(
            locs.iter()
                .any(|l| l.as_array().unwrap().starts_with(loc.as_array().unwrap())),
            "{body}: {v}"
        );
    }
    let r = app
        .http
        .post(app.url("/api/agents"))
        .json(&json!({"slug": "b", "name": "b", "budget": {"max_sandbox_seconds": -5}}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 422);

    let s = app
        .create_session(json!({"agent_id": "a", "budget": {"max_turns": 4}}))
        .await;
    let id = s["id"].as_str().unwrap();
    let (status, v) = patch(&app, id, json!({"budget": [null, null]})).await;
    assert_eq!(status, 422, "{v}");
    let (status, v) = patch(&app, id, json!({"budget": {"max_turns": -1}})).await;
    assert_eq!(status, 422, "{v}");
    assert_eq!(
        v["detail"][0]["loc"],
        json!(["body", "budget", "max_turns"])
    );
    assert_eq!(
        app.session(id).await["budget"],
        json!({"max_turns": 4}),
        "nothing changed"
    );
}
