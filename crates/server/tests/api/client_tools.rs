//! Client tools: ordinary calls held open until answered or timed out, deferrable
//! calls that park the run in the database, answers from another server process, interrupts
//! of parked runs, and the 404s for calls nothing waits on.

use sandbox_agents_fake_model::{FakeModel, Rule, Script};
use sandbox_agents_testkit::runs::{
    is_pause, send, start_run, test_agent, types, wait_for_run, wait_for_terminal, TURN,
};
use sandbox_agents_testkit::{eventually, TestApp};
use serde_json::{json, Value};

/// Polls the log until an event matches; returns it.
async fn wait_for_event(app: &TestApp, id: &str, what: impl Fn(&Value) -> bool) -> Value {
    eventually(&format!("such an event in {id}"), TURN, async || {
        app.events(id).await.into_iter().find(&what)
    })
    .await
}

async fn answer(app: &TestApp, id: &str, body: Value) -> reqwest::StatusCode {
    app.http
        .post(app.url(&format!("/api/sessions/{id}/tool-results")))
        .json(&body)
        .send()
        .await
        .unwrap()
        .status()
}

async fn pending(app: &TestApp, id: &str) -> Vec<Value> {
    let r = app
        .http
        .get(app.url(&format!("/api/sessions/{id}/tool-calls")))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    r.json().await.unwrap()
}

/// A running session of a new agent made from `agent` (merged over a minimal body).
async fn session_of(app: &TestApp, slug: &str, agent: Value) -> String {
    app.create_agent(slug, agent).await;
    let s = app.create_session(json!({"agent_id": slug})).await;
    let id = s["id"].as_str().unwrap().to_owned();
    app.wait_for_status(&id, "running", sandbox_agents_testkit::BOOT)
        .await;
    id
}

fn call_event(e: &Value) -> bool {
    e["type"] == "agent.client_tool_call"
}

fn lookup_tool() -> Value {
    json!({"name": "lookup", "description": "Look a customer up.",
           "parameters": {"type": "object", "properties": {"id": {"type": "string"}}}})
}

fn approve_tool() -> Value {
    json!({"name": "approve", "description": "Ask a person.", "deferrable": true})
}

#[tokio::test]
async fn an_ordinary_call_waits_for_its_answer_which_the_model_then_reads() {
    let fake = FakeModel::start(Script::new([
        Rule::when()
            .last_tool_result_contains("Ada Lovelace")
            .reply_text("The customer is Ada."),
        Rule::when()
            .last_user_contains("who")
            .reply_tool_call("lookup", json!({"id": "42"})),
    ]));
    let app = TestApp::builder()
        .with_model_proxy(&fake.root_url())
        .spawn()
        .await;
    let id = session_of(&app, "desk", json!({"client_tools": [lookup_tool()]})).await;

    let run = start_run(&app, &id, "who is 42?", Value::Null).await;
    let call = wait_for_event(&app, &id, call_event).await;
    assert_eq!(call["run_id"], run);
    assert_eq!(call["payload"]["tool"], "lookup");
    assert_eq!(call["payload"]["deferrable"], false);
    let args = call["payload"]["arguments"]
        .as_str()
        .expect("a JSON string");
    assert_eq!(
        serde_json::from_str::<Value>(args).unwrap(),
        json!({"id": "42"})
    );
    let call_id = call["payload"]["call_id"].as_str().unwrap().to_owned();

    // The session waits on it, and says so; it takes no other message meanwhile.
    let waiting = pending(&app, &id).await;
    assert_eq!(waiting.len(), 1);
    assert_eq!(waiting[0]["call_id"], call_id);
    assert_eq!(waiting[0]["seq"], call["seq"]);
    assert_eq!(waiting[0]["deferrable"], false);
    assert_eq!(waiting[0]["run_id"], run);
    assert_eq!(
        send(&app, &id, json!({"prompt": "hi", "max_turns": null}))
            .await
            .status(),
        409
    );

    // Unknown ids are 404; the answer goes through once, the second time is 404.
    assert_eq!(
        answer(&app, &id, json!({"call_id": "nope", "output": "x"})).await,
        404
    );
    let ok = answer(
        &app,
        &id,
        json!({"call_id": call_id, "output": "Ada Lovelace"}),
    )
    .await;
    assert!(ok.is_success(), "{ok}");
    assert_eq!(
        answer(&app, &id, json!({"call_id": call_id, "output": "again"})).await,
        404
    );

    let evs = wait_for_run(&app, &id, &run).await;
    assert_eq!(
        types(&evs),
        [
            "user.message",
            "agent.client_tool_call",
            "agent.client_tool_result",
            "agent.message",
            "session.status_idle"
        ]
    );
    let result = &evs[2]["payload"];
    assert_eq!(result["call_id"], call_id);
    assert_eq!(result["output"], "Ada Lovelace");
    assert_eq!(result["is_error"], false);
    assert_eq!(evs[4]["payload"]["final_output"], "The customer is Ada.");
    assert!(pending(&app, &id).await.is_empty());
    // The model got the answer as the call's tool message.
    let last = fake.chat_requests().last().unwrap().body.clone();
    let msgs = last["messages"].as_array().unwrap();
    let tool = msgs.iter().find(|m| m["role"] == "tool").unwrap();
    assert_eq!(tool["tool_call_id"], call_id);
    assert_eq!(tool["content"], "Ada Lovelace");
}

#[tokio::test]
async fn an_unanswered_ordinary_call_times_out_and_a_late_answer_is_404() {
    let fake = FakeModel::start(Script::new([
        Rule::when()
            .last_tool_result_contains("did not answer")
            .reply_text("The client was silent."),
        Rule::when()
            .last_user_contains("ask")
            .reply_tool_call("ping_page", json!({})),
    ]));
    let app = TestApp::builder()
        .with_model_proxy(&fake.root_url())
        .spawn()
        .await;
    let id = app.running_session("quiet", test_agent()).await;
    let body = json!({"prompt": "ask the page", "max_turns": null,
                      "client_tools": [{"name": "ping_page", "timeout_seconds": 1}]});
    let r = send(&app, &id, body).await;
    assert_eq!(r.status(), 202);
    let run = r.json::<Value>().await.unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let evs = wait_for_run(&app, &id, &run).await;
    let result = evs
        .iter()
        .find(|e| e["type"] == "agent.client_tool_result")
        .expect("a result was written for the timed-out call");
    assert_eq!(result["payload"]["is_error"], true);
    assert_eq!(result["payload"]["timed_out"], true);
    assert_eq!(
        result["payload"]["output"],
        "The client did not answer within 1 seconds."
    );
    assert_eq!(
        evs.last().unwrap()["payload"]["final_output"],
        "The client was silent."
    );
    let call_id = result["payload"]["call_id"].as_str().unwrap();
    assert_eq!(
        answer(&app, &id, json!({"call_id": call_id, "output": "late"})).await,
        404
    );
}

#[tokio::test]
async fn a_turn_tool_may_not_shadow_a_builtin_and_bad_declarations_are_422() {
    let fake = FakeModel::start(Script::new([Rule::always().reply_text("ok")]));
    let app = TestApp::builder()
        .with_model_proxy(&fake.root_url())
        .spawn()
        .await;
    let id = app.running_session("strict", test_agent()).await;
    for tools in [
        json!([{"name": "shell"}]),
        json!([{"name": "a", "deferrable": true, "timeout_seconds": 5}]),
        json!([{"name": "a", "timeout_seconds": 3601}]),
        json!([{"name": "a"}, {"name": "a"}]),
    ] {
        let r = send(
            &app,
            &id,
            json!({"prompt": "x", "max_turns": null, "client_tools": tools}),
        )
        .await;
        assert_eq!(r.status(), 422, "{tools}");
        let body: Value = r.json().await.unwrap();
        assert_eq!(body["detail"][0]["loc"][1], "client_tools", "{body}");
    }
    // Nothing was started.
    assert_eq!(app.session(&id).await["runs"], json!([]));
    let r = app
        .http
        .post(app.url("/api/agents"))
        .json(&json!({"slug": "clash", "name": "Clash", "client_tools": [{"name": "read_file"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 422);
}

#[tokio::test]
async fn a_deferrable_call_parks_the_run_and_an_answer_from_another_server_continues_it() {
    let script = Script::new([
        Rule::when()
            .last_tool_result_contains("approved by Grace")
            .reply_text("Refund issued."),
        Rule::when()
            .last_user_contains("refund")
            .reply_tool_call("lookup", json!({"id": "7"}))
            .tool_call("approve", json!({"amount": 10})),
        Rule::when()
            .last_tool_result_contains("customer 7")
            .reply_text("unexpected: the model was asked before the approval"),
    ]);
    let fake = FakeModel::start(script);
    let app = TestApp::builder()
        .with_model_proxy(&fake.root_url())
        .spawn()
        .await;
    let id = session_of(
        &app,
        "refunds",
        json!({"client_tools": [lookup_tool(), approve_tool()]}),
    )
    .await;
    let run = start_run(&app, &id, "refund customer 7", Value::Null).await;

    // Two calls in one step: the ordinary one is answered first, then the run parks
    // on the deferrable one alone.
    let calls: Vec<Value> = eventually("both tool calls", TURN, async || {
        let c: Vec<Value> = app
            .events(&id)
            .await
            .into_iter()
            .filter(call_event)
            .collect();
        if c.len() == 2 {
            Ok(c)
        } else {
            Err(format!("{c:?}"))
        }
    })
    .await;
    let lookup = calls
        .iter()
        .find(|c| c["payload"]["tool"] == "lookup")
        .unwrap();
    let approve = calls
        .iter()
        .find(|c| c["payload"]["tool"] == "approve")
        .unwrap();
    assert_eq!(approve["payload"]["deferrable"], true);
    let approve_id = approve["payload"]["call_id"].as_str().unwrap().to_owned();
    assert_eq!(pending(&app, &id).await.len(), 2);
    let lookup_id = lookup["payload"]["call_id"].as_str().unwrap();
    assert!(answer(
        &app,
        &id,
        json!({"call_id": lookup_id, "output": "customer 7"})
    )
    .await
    .is_success());

    let pause = wait_for_event(&app, &id, is_pause).await;
    assert_eq!(pause["run_id"], run);
    assert_eq!(pause["payload"]["call_ids"], json!([approve_id]));
    assert_eq!(pause["payload"]["run_status"], "running");
    assert_eq!(pause["payload"]["turns"], 1);
    assert!(pause["payload"]["usage"]["requests"].as_u64().unwrap() >= 1);
    let s = app.session(&id).await;
    assert_eq!(s["activity"], "idle");
    assert_eq!(s["runs"][0]["status"], "running");
    let waiting = pending(&app, &id).await;
    assert_eq!(waiting.len(), 1);
    assert_eq!(waiting[0]["call_id"], approve_id);
    assert_eq!(waiting[0]["deferrable"], true);
    // A parked session takes no new message: answer or interrupt it first.
    let r = send(&app, &id, json!({"prompt": "hello?", "max_turns": null})).await;
    assert_eq!(r.status(), 409);
    assert!(r.text().await.unwrap().contains("tool-calls"));

    // The answer comes to another server process (the first one is gone): same run goes on.
    app.shutdown.cancel();
    let other = TestApp::builder()
        .with_db(app.db.clone(), app.db_options.clone())
        .with_model_proxy(&fake.root_url())
        .spawn()
        .await;
    assert!(answer(
        &other,
        &id,
        json!({"call_id": approve_id, "output": "approved by Grace"})
    )
    .await
    .is_success());
    let evs = eventually("the run to continue", TURN, async || {
        let evs: Vec<Value> = other
            .events(&id)
            .await
            .into_iter()
            .filter(|e| e["run_id"] == run)
            .collect();
        if evs
            .last()
            .is_some_and(|e| e["type"] == "session.status_idle" && !is_pause(e))
        {
            Ok(evs)
        } else {
            Err(format!("{evs:?}"))
        }
    })
    .await;
    let end = evs.last().unwrap();
    assert_eq!(end["payload"]["final_output"], "Refund issued.");
    assert_eq!(end["payload"]["run_status"], "completed");
    assert_eq!(end["payload"]["turns"], 2);
    assert!(end["seq"].as_i64() > pause["seq"].as_i64());
    let s = other.session(&id).await;
    assert_eq!(s["runs"][0]["status"], "completed");
    assert_eq!(s["activity"], "idle");
    assert!(pending(&other, &id).await.is_empty());
}

/// Waits for the run's last event to be a terminal event other than a pause.
async fn wait_for_end(app: &TestApp, id: &str, run: &str) -> Vec<Value> {
    wait_for_terminal(app, id, run, |e| !is_pause(e)).await
}

#[tokio::test]
async fn interrupting_a_parked_run_cancels_it_and_its_calls() {
    let fake = FakeModel::start(Script::new([
        Rule::when()
            .last_user_contains("next")
            .reply_text("Fresh start."),
        Rule::when()
            .last_user_contains("approve")
            .reply_tool_call("approve", json!({})),
    ]));
    let app = TestApp::builder()
        .with_model_proxy(&fake.root_url())
        .spawn()
        .await;
    let id = session_of(&app, "asker", json!({"client_tools": [approve_tool()]})).await;
    let run = start_run(&app, &id, "approve it", Value::Null).await;
    let pause = wait_for_event(&app, &id, is_pause).await;
    let call_id = pause["payload"]["call_ids"][0].as_str().unwrap().to_owned();

    app.interrupt(&id).await;
    // The cancelled end is in the log before the answer to the interrupt.
    let evs = wait_for_end(&app, &id, &run).await;
    let end = evs.last().unwrap();
    assert_eq!(end["payload"]["stop_reason"], "cancelled");
    assert_eq!(end["payload"]["run_status"], "cancelled");
    assert!(pending(&app, &id).await.is_empty());
    assert_eq!(
        answer(&app, &id, json!({"call_id": call_id, "output": "yes"})).await,
        404
    );
    assert_eq!(app.session(&id).await["runs"][0]["status"], "cancelled");

    // The session takes the next message; the history stays well formed for the model.
    let run2 = start_run(&app, &id, "next", Value::Null).await;
    let evs = wait_for_end(&app, &id, &run2).await;
    assert_eq!(
        evs.last().unwrap()["payload"]["final_output"],
        "Fresh start."
    );
    let last = fake.chat_requests().last().unwrap().body.clone();
    let roles: Vec<&str> = last["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["user", "assistant", "tool", "user"]);
}

#[tokio::test]
async fn an_answer_before_the_pause_is_kept_and_the_run_goes_on() {
    // The deferrable call is written with the step, then a slow sandbox tool runs: the
    // answer lands before the run would park.
    let fake = FakeModel::start(Script::new([
        Rule::when()
            .last_tool_result_contains("early yes")
            .reply_text("Approved early."),
        Rule::when()
            .last_user_contains("go")
            .reply_tool_call("approve", json!({}))
            .tool_call("shell", json!({"command": "sleep 5; echo slept"})),
    ]));
    let app = TestApp::builder()
        .with_model_proxy(&fake.root_url())
        .spawn()
        .await;
    let id = session_of(&app, "eager", json!({"client_tools": [approve_tool()]})).await;
    let run = start_run(&app, &id, "go", Value::Null).await;
    let call = wait_for_event(&app, &id, call_event).await;
    let call_id = call["payload"]["call_id"].as_str().unwrap();
    assert!(answer(
        &app,
        &id,
        json!({"call_id": call_id, "output": "early yes"})
    )
    .await
    .is_success());
    let evs = wait_for_end(&app, &id, &run).await;
    assert!(!evs.iter().any(is_pause), "{evs:?}");
    assert_eq!(
        evs.last().unwrap()["payload"]["final_output"],
        "Approved early."
    );
}

#[tokio::test]
async fn a_parked_session_may_sleep_and_the_answer_wakes_it_to_continue() {
    let fake = FakeModel::start(Script::new([
        Rule::when()
            .last_tool_result_contains("go ahead")
            .reply_tool_call("shell", json!({"command": "cat note.txt"})),
        Rule::when()
            .last_tool_result_contains("written before the nap")
            .reply_text("Continued after waking."),
        Rule::when()
            .last_user_contains("ask")
            .reply_tool_call("approve", json!({})),
    ]));
    let app = TestApp::builder()
        .with_model_proxy(&fake.root_url())
        .spawn()
        .await;
    let id = session_of(
        &app,
        "sleepy",
        json!({"client_tools": [approve_tool()], "idle_ttl_seconds": 60}),
    )
    .await;
    app.exec(&id, "echo written before the nap > note.txt")
        .await;
    let run = start_run(&app, &id, "ask first", Value::Null).await;
    let pause = wait_for_event(&app, &id, is_pause).await;

    // Unused for longer than its TTL: the parked session's sandbox is released.
    sqlx::query(
        "update sessions set last_used_at = now() - interval '2 minutes' where id = $1::uuid",
    )
    .bind(&id)
    .execute(&app.db)
    .await
    .unwrap();
    assert_eq!(app.sessions.release_idle().await.unwrap(), 1);
    let s = app.session(&id).await;
    assert_eq!(
        (s["status"].as_str(), s["stopped_reason"].as_str()),
        (Some("stopped"), Some("idle"))
    );
    assert_eq!(s["runs"][0]["status"], "running");

    let call_id = pause["payload"]["call_ids"][0].as_str().unwrap();
    assert!(
        answer(&app, &id, json!({"call_id": call_id, "output": "go ahead"}))
            .await
            .is_success()
    );
    let evs = wait_for_end(&app, &id, &run).await;
    assert_eq!(
        evs.last().unwrap()["payload"]["final_output"],
        "Continued after waking."
    );
    let s = app.session(&id).await;
    assert_eq!(s["status"], "running");
    let all = app.events(&id).await;
    let woke = all
        .iter()
        .rposition(|e| e["type"] == "session.status_running")
        .unwrap();
    let answered = all
        .iter()
        .position(|e| e["type"] == "agent.client_tool_result")
        .unwrap();
    assert!(
        woke > answered,
        "the answer woke the sandbox: {:?}",
        types(&all)
    );
}
