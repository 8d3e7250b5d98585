//! Approvals: an agent's permissions. A tool it asks about parks the run (`requires_action`,
//! the call in `call_ids`, its `agent.tool_use` marked `awaiting_approval`) until a person
//! decides with `POST tool-confirmations`, from any server process; allowed, the call runs
//! as the run continues, denied, the model reads the denial. A shell command a prefix vouches
//! for runs without asking; a denied tool is never offered. Bad input changes nothing.

use sandbox_agents_fake_model::{FakeModel, Rule, Script};
use sandbox_agents_sandbox::memory::MemoryBackend;
use sandbox_agents_testkit::runs::{
    is_pause, start_run, types, wait_for_terminal as run_events, TURN,
};
use sandbox_agents_testkit::{eventually, TestApp};
use serde_json::{json, Value};

async fn confirm(app: &TestApp, id: &str, body: Value) -> (u16, Value) {
    app.post_json(&format!("/api/sessions/{id}/tool-confirmations"), body)
        .await
}

/// A model that runs `echo <word>` and then says what the shell answered.
fn shell_model(word: &str) -> FakeModel {
    FakeModel::start(Script::new([
        Rule::when()
            .last_message_role("tool")
            .last_tool_result_contains("denied")
            .reply_text("I was not allowed."),
        Rule::when()
            .last_message_role("tool")
            .reply_text("The shell said its piece."),
        Rule::when().reply_tool_call("shell", json!({"command": format!("echo {word}")})),
    ]))
}

async fn app_on(fake: &FakeModel, plane: &MemoryBackend) -> TestApp {
    TestApp::builder()
        .with_model_proxy(&fake.root_url())
        .with_memory_backend(plane)
        .spawn()
        .await
}

#[tokio::test]
async fn an_ask_tool_waits_for_a_person_and_runs_once_allowed_even_by_another_process() {
    let fake = shell_model("approved-output");
    let plane = MemoryBackend::new("approvals");
    let app = app_on(&fake, &plane).await;
    app.create_agent(
        "careful",
        json!({"permissions": {"shell": {"mode": "ask"}}}),
    )
    .await;
    let id = app.boot_session(json!({"agent_id": "careful"})).await;
    let run = start_run(&app, &id, "go", Value::Null).await;

    let evs = run_events(&app, &id, &run, is_pause).await;
    let pause = evs.last().unwrap();
    assert_eq!(pause["payload"]["run_status"], "running");
    let asked = evs
        .iter()
        .find(|e| e["type"] == "agent.tool_use")
        .expect("the call");
    assert_eq!(asked["payload"]["awaiting_approval"], true);
    assert_eq!(asked["payload"]["tool"], "shell");
    let call_id = asked["payload"]["call_id"].as_str().unwrap().to_owned();
    assert_eq!(pause["payload"]["call_ids"], json!([call_id]));
    assert!(
        !evs.iter().any(|e| e["type"] == "agent.tool_result"),
        "nothing ran: {:?}",
        types(&evs)
    );
    let (_, waiting) = app
        .get_json(&format!("/api/sessions/{id}/tool-confirmations"))
        .await;
    assert_eq!(waiting.as_array().unwrap().len(), 1, "{waiting}");
    assert_eq!(waiting[0]["call_id"], call_id);
    assert_eq!(waiting[0]["kind"], "sandbox");
    assert_eq!(waiting[0]["arguments"], asked["payload"]["arguments"]);
    let (_, client_calls) = app
        .get_json(&format!("/api/sessions/{id}/tool-calls"))
        .await;
    assert_eq!(client_calls, json!([]), "not the caller's to answer");
    let (status, body) = app
        .post_json(
            &format!("/api/sessions/{id}/tool-results"),
            json!({"call_id": call_id, "output": "forged"}),
        )
        .await;
    assert_eq!(status, 409, "{body}");
    assert!(body["detail"]
        .as_str()
        .unwrap()
        .contains("tool-confirmations"));

    // The decision reaches another server process; the first one is gone.
    app.shutdown.cancel();
    let other = TestApp::builder()
        .with_db(app.db.clone(), app.db_options.clone())
        .with_model_proxy(&fake.root_url())
        .with_memory_backend(&plane)
        .spawn()
        .await;
    let (status, body) = confirm(
        &other,
        &id,
        json!({"call_id": call_id, "decision": "allow"}),
    )
    .await;
    assert_eq!(status, 204, "{body}");
    let evs = run_events(&other, &id, &run, |e| !is_pause(e)).await;
    let end = evs.last().unwrap();
    assert_eq!(end["type"], "session.status_idle", "{end}");
    assert_eq!(end["payload"]["run_status"], "completed");
    assert_eq!(end["payload"]["final_output"], "The shell said its piece.");
    let decided = evs
        .iter()
        .find(|e| e["type"] == "agent.tool_confirmation")
        .expect("the decision's event");
    assert_eq!(decided["payload"]["decision"], "allow");
    assert_eq!(decided["payload"]["call_id"], call_id);
    assert_eq!(decided["payload"]["by"]["kind"], "open");
    let result = evs
        .iter()
        .find(|e| e["type"] == "agent.tool_result" && e["payload"]["call_id"] == call_id)
        .expect("the call ran");
    assert!(result["payload"]["output"]
        .as_str()
        .unwrap()
        .contains("approved-output"));
    assert!(decided["seq"].as_i64() < result["seq"].as_i64());

    // Decided once: a second decision, or one for a call that never waited, changes nothing.
    for body in [
        json!({"call_id": call_id, "decision": "deny"}),
        json!({"call_id": "no-such-call", "decision": "allow"}),
    ] {
        let (status, got) = confirm(&other, &id, body).await;
        assert_eq!(status, 409, "{got}");
    }
    let after = other.events(&id).await;
    assert_eq!(
        after
            .iter()
            .filter(|e| e["type"] == "agent.tool_confirmation")
            .count(),
        1
    );
}

#[tokio::test]
async fn a_denial_reaches_the_model_as_the_tools_error_with_the_persons_message() {
    let fake = shell_model("never");
    let plane = MemoryBackend::new("approvals-deny");
    let app = app_on(&fake, &plane).await;
    app.create_agent(
        "careful",
        json!({"permissions": {"shell": {"mode": "ask"}}}),
    )
    .await;
    let id = app.boot_session(json!({"agent_id": "careful"})).await;
    let run = start_run(&app, &id, "go", Value::Null).await;
    let evs = run_events(&app, &id, &run, is_pause).await;
    let call_id = evs.last().unwrap()["payload"]["call_ids"][0]
        .as_str()
        .unwrap()
        .to_owned();
    for (body, want) in [
        (json!({"call_id": call_id, "decision": "maybe"}), 422),
        (json!({"call_id": call_id}), 422),
        (
            json!({"call_id": call_id, "decision": "deny", "extra": 1}),
            422,
        ),
        (
            json!({"call_id": call_id, "decision": "deny", "message": "x".repeat(4001)}),
            422,
        ),
    ] {
        let (status, got) = confirm(&app, &id, body.clone()).await;
        assert_eq!(status, want, "{body}: {got}");
    }
    let (_, waiting) = app
        .get_json(&format!("/api/sessions/{id}/tool-confirmations"))
        .await;
    assert_eq!(
        waiting.as_array().unwrap().len(),
        1,
        "a refused body decides nothing"
    );

    let (status, _) = confirm(
        &app,
        &id,
        json!({"call_id": call_id, "decision": "deny", "message": "not on production"}),
    )
    .await;
    assert_eq!(status, 204);
    let evs = run_events(&app, &id, &run, |e| !is_pause(e)).await;
    assert_eq!(
        evs.last().unwrap()["payload"]["final_output"],
        "I was not allowed."
    );
    // The call never ran: its result is the denial, as the model read it.
    let results: Vec<&Value> = evs
        .iter()
        .filter(|e| e["type"] == "agent.tool_result")
        .collect();
    assert_eq!(results.len(), 1, "{:?}", types(&evs));
    assert_eq!(
        results[0]["payload"]["output"],
        "error: a person denied this call: not on production"
    );
    let asked = fake
        .chat_requests()
        .into_iter()
        .map(|r| r.body.to_string())
        .find(|b| b.contains("denied"))
        .expect("the model got the denial");
    assert!(
        asked.contains("a person denied this call: not on production"),
        "{asked}"
    );
}

#[tokio::test]
async fn a_prefix_lets_plain_commands_through_and_a_denied_tool_is_never_offered() {
    let fake = FakeModel::start(Script::new([
        Rule::when().last_message_role("tool").reply_text("listed"),
        Rule::when().reply_tool_call("shell", json!({"command": "ls -la"})),
    ]));
    let plane = MemoryBackend::new("approvals-prefix");
    let app = app_on(&fake, &plane).await;
    app.create_agent(
        "careful",
        json!({"permissions": {
            "shell": {"mode": "ask", "allow_prefixes": ["ls", "cat "]},
            "write_file": {"mode": "deny"},
        }}),
    )
    .await;
    let id = app.boot_session(json!({"agent_id": "careful"})).await;
    let run = start_run(&app, &id, "go", Value::Null).await;
    let evs = run_events(&app, &id, &run, |_| true).await;
    assert_eq!(
        evs.last().unwrap()["payload"]["final_output"],
        "listed",
        "{:?}",
        types(&evs)
    );
    assert!(!evs.iter().any(is_pause));
    let offered: Vec<String> = fake.chat_requests()[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap().to_owned())
        .collect();
    assert!(offered.contains(&"shell".to_owned()) && offered.contains(&"read_file".to_owned()));
    assert!(!offered.contains(&"write_file".to_owned()), "{offered:?}");
}

#[tokio::test]
async fn permissions_must_name_what_the_agent_has_and_bad_ones_change_nothing() {
    let fake = shell_model("x");
    let app = app_on(&fake, &MemoryBackend::new("approvals-422")).await;
    app.create_agent("helper", json!({})).await;
    for (permissions, loc) in [
        (
            json!({"python": {"mode": "ask"}}),
            json!(["body", "permissions", "python"]),
        ),
        (
            json!({"nobody": {"mode": "deny"}}),
            json!(["body", "permissions", "nobody"]),
        ),
        (
            json!({"shell": {"mode": "sometimes"}}),
            json!(["body", "permissions", "shell", "mode"]),
        ),
        (
            json!({"read_file": {"mode": "ask", "allow_prefixes": ["ls"]}}),
            json!(["body", "permissions", "read_file", "allow_prefixes"]),
        ),
        (
            json!({"shell": {"mode": "allow", "allow_prefixes": ["ls"]}}),
            json!(["body", "permissions", "shell", "allow_prefixes"]),
        ),
    ] {
        let (status, body) = app
            .post_json(
                "/api/agents",
                json!({"slug": "bad", "name": "bad", "permissions": permissions}),
            )
            .await;
        assert_eq!(status, 422, "{permissions}: {body}");
        let locs: Vec<&Value> = body["detail"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| &d["loc"])
            .collect();
        assert!(
            locs.iter()
                .any(|l| l.as_array().unwrap().starts_with(loc.as_array().unwrap())),
            "{permissions}: {body}"
        );
    }
    let (status, _) = app.get_json("/api/agents/bad").await;
    assert_eq!(status, 404, "nothing was created");

    // Subagents by slug (a handoff never waits), client tools by name.
    let (status, body) = app
        .post_json(
            "/api/agents",
            json!({"slug": "lead", "name": "lead",
                   "subagents": [{"agent": "helper"}],
                   "client_tools": [{"name": "approve", "description": "d", "parameters": {"type": "object"}}],
                   "permissions": {"helper": {"mode": "ask"}, "approve": {"mode": "ask"}, "filesystem": {"mode": "deny"}}}),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["permissions"]["helper"], json!({"mode": "ask"}));
    let (status, body) = app
        .patch_json(
            "/api/agents/lead",
            json!({"version": 1, "subagents": [{"agent": "helper", "mode": "handoff"}]}),
        )
        .await;
    assert_eq!(status, 422, "{body}");
    assert_eq!(
        body["detail"][0]["loc"],
        json!(["body", "permissions", "helper"])
    );
    let (_, lead) = app.get_json("/api/agents/lead").await;
    assert_eq!(lead["version"], 1);
}

/// The one call a pause waits on, once the run pauses.
async fn paused_call(app: &TestApp, id: &str, run: &str) -> String {
    let evs = run_events(app, id, run, is_pause).await;
    let ids = evs.last().unwrap()["payload"]["call_ids"].clone();
    assert_eq!(ids.as_array().unwrap().len(), 1, "{ids}");
    ids[0].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn an_asked_subagent_runs_once_allowed_and_a_subagents_own_ask_parks_the_run() {
    let fake = FakeModel::start(Script::new([
        Rule::when()
            .system_contains("You are the helper.")
            .last_message_role("tool")
            .reply_text("helper ran echo"),
        Rule::when()
            .system_contains("You are the helper.")
            .reply_tool_call("shell", json!({"command": "echo from-helper"})),
        Rule::when()
            .system_contains("You are the lead.")
            .last_message_role("tool")
            .reply_text("lead done"),
        Rule::when()
            .system_contains("You are the lead.")
            .reply_tool_call("helper", json!({"input": "echo something"})),
    ]));
    let plane = MemoryBackend::new("approvals-subagents");
    let app = app_on(&fake, &plane).await;
    app.create_agent(
        "helper",
        json!({"instructions": "You are the helper.", "permissions": {"shell": {"mode": "ask"}}}),
    )
    .await;
    app.create_agent(
        "lead",
        json!({"instructions": "You are the lead.", "subagents": [{"agent": "helper"}],
               "permissions": {"helper": {"mode": "ask"}}}),
    )
    .await;
    let id = app.boot_session(json!({"agent_id": "lead"})).await;
    let run = start_run(&app, &id, "go", Value::Null).await;

    // First the lead's call of the helper waits; allowed, the helper runs and its own shell
    // call waits in turn (the run parks on a call inside the subagent).
    let first = paused_call(&app, &id, &run).await;
    let (_, waiting) = app
        .get_json(&format!("/api/sessions/{id}/tool-confirmations"))
        .await;
    assert_eq!(waiting[0]["kind"], "subagent");
    assert_eq!(
        confirm(&app, &id, json!({"call_id": first, "decision": "allow"}))
            .await
            .0,
        204
    );
    let second = eventually("the helper's call to wait", TURN, async || {
        let evs = app.events(&id).await;
        let pauses: Vec<&Value> = evs.iter().filter(|e| is_pause(e)).collect();
        match pauses.as_slice() {
            [_, p] => Ok(p["payload"]["call_ids"][0].as_str().unwrap().to_owned()),
            _ => Err(format!("{:?}", types(&evs))),
        }
    })
    .await;
    assert_ne!(first, second);
    let (_, waiting) = app
        .get_json(&format!("/api/sessions/{id}/tool-confirmations"))
        .await;
    assert_eq!(waiting[0]["kind"], "sandbox");
    assert_eq!(waiting[0]["subagent"]["agent"], "helper", "{waiting}");
    assert_eq!(
        confirm(&app, &id, json!({"call_id": second, "decision": "allow"}))
            .await
            .0,
        204
    );

    let evs = run_events(&app, &id, &run, |e| !is_pause(e)).await;
    let end = evs.last().unwrap();
    assert_eq!(
        end["payload"]["final_output"],
        "lead done",
        "{:?}",
        types(&evs)
    );
    let results: Vec<&Value> = evs
        .iter()
        .filter(|e| e["type"] == "agent.tool_result")
        .collect();
    assert_eq!(
        results.len(),
        2,
        "the helper's shell call, then the helper's answer"
    );
    assert!(results[0]["payload"]["output"]
        .as_str()
        .unwrap()
        .contains("from-helper"));
    assert_eq!(results[0]["payload"]["subagent"]["agent"], "helper");
    assert_eq!(results[1]["payload"]["call_id"], first);
    assert_eq!(results[1]["payload"]["output"], "helper ran echo");
}

#[tokio::test]
async fn an_asked_client_call_goes_to_the_caller_once_allowed() {
    let fake = FakeModel::start(Script::new([
        Rule::when()
            .last_tool_result_contains("refunded")
            .reply_text("Refund done."),
        Rule::when().reply_tool_call("refund", json!({"amount": 10})),
    ]));
    let app = app_on(&fake, &MemoryBackend::new("approvals-client")).await;
    app.create_agent(
        "desk",
        json!({"client_tools": [{"name": "refund", "description": "Refunds.", "parameters": {"type": "object"}}],
               "permissions": {"refund": {"mode": "ask"}}}),
    )
    .await;
    let id = app.boot_session(json!({"agent_id": "desk"})).await;
    let run = start_run(&app, &id, "refund it", Value::Null).await;
    let call = paused_call(&app, &id, &run).await;
    let evs = app.events(&id).await;
    assert!(
        !evs.iter().any(|e| e["type"] == "agent.client_tool_call"),
        "the caller is not asked before the person decides"
    );
    let (_, waiting) = app
        .get_json(&format!("/api/sessions/{id}/tool-confirmations"))
        .await;
    assert_eq!(waiting[0]["kind"], "client");
    assert_eq!(
        confirm(&app, &id, json!({"call_id": call, "decision": "allow"}))
            .await
            .0,
        204
    );

    // Allowed, it is the caller's: a deferrable call with its event, listed, answered.
    let evs = app.events(&id).await;
    let to_caller = evs
        .iter()
        .find(|e| e["type"] == "agent.client_tool_call")
        .expect("the call goes to the caller");
    assert_eq!(to_caller["payload"]["call_id"], call);
    assert_eq!(to_caller["payload"]["deferrable"], true);
    let (_, pending) = app
        .get_json(&format!("/api/sessions/{id}/tool-calls"))
        .await;
    assert_eq!(pending[0]["call_id"], call, "{pending}");
    let (_, waiting) = app
        .get_json(&format!("/api/sessions/{id}/tool-confirmations"))
        .await;
    assert_eq!(waiting, json!([]));
    let (status, body) = app
        .post_json(
            &format!("/api/sessions/{id}/tool-results"),
            json!({"call_id": call, "output": "refunded 10"}),
        )
        .await;
    assert_eq!(status, 204, "{body}");
    let evs = run_events(&app, &id, &run, |e| !is_pause(e)).await;
    assert_eq!(
        evs.last().unwrap()["payload"]["final_output"],
        "Refund done."
    );
}
