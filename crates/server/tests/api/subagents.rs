//! Subagents: called as tools (a nested frame in the same sandbox, its events marked with
//! `payload.subagent`, its usage split `by_agent`, interrupt reaching it, deferrable calls
//! from inside it parking the run), handed the conversation (`agent.handoff`, the next prompt
//! going to the holder across a restart, handing back), the depth limit and the cycle
//! refusal. The fake model tells agents apart by their instructions (`system_contains`).

use sandbox_agents_fake_model::{FakeModel, Rule, Script};
use sandbox_agents_testkit::runs::{is_terminal, start_run, wait_for_run, TURN};
use sandbox_agents_testkit::{eventually, TestApp};
use serde_json::{json, Value};

fn agent(instructions: &str, subagents: Value) -> Value {
    json!({"instructions": instructions, "subagents": subagents})
}

/// The system prompt of a recorded request.
fn system_of(r: &Value) -> String {
    r["messages"][0]["content"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

fn tool_names(r: &Value) -> Vec<String> {
    r["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t.pointer("/function/name").and_then(Value::as_str))
        .map(str::to_owned)
        .collect()
}

fn requests_of(fake: &FakeModel, who: &str) -> Vec<Value> {
    fake.chat_requests()
        .into_iter()
        .map(|r| r.body)
        .filter(|b| system_of(b).contains(who))
        .collect()
}

#[tokio::test]
async fn a_tool_subagent_runs_in_the_same_sandbox_its_events_are_marked_and_its_usage_split() {
    let fake = FakeModel::start(Script::new([
        Rule::when()
            .system_contains("You are the helper.")
            .last_message_role("tool")
            .reply_text("helper found 42"),
        Rule::when()
            .system_contains("You are the helper.")
            .reply_tool_call("shell", json!({"command": "echo from-helper > helper.txt"})),
        Rule::when()
            .system_contains("You are the lead.")
            .last_tool_result_contains("helper found 42")
            .reply_text("The answer is 42."),
        Rule::when()
            .system_contains("You are the lead.")
            .reply_tool_call("helper", json!({"input": "find the number"})),
    ]));
    let app = TestApp::builder()
        .with_model_proxy(&fake.root_url())
        .spawn()
        .await;
    app.create_agent(
        "helper",
        json!({"instructions": "You are the helper.", "description": "Finds numbers."}),
    )
    .await;
    let id = app
        .running_session(
            "lead",
            agent("You are the lead.", json!([{"agent": "helper"}])),
        )
        .await;
    let run = start_run(&app, &id, "what is the number?", Value::Null).await;
    let evs = wait_for_run(&app, &id, &run).await;

    assert_eq!(evs.iter().filter(|e| is_terminal(e)).count(), 1, "{evs:?}");
    let end = evs.last().unwrap();
    assert_eq!(end["type"], "session.status_idle", "{end}");
    assert_eq!(end["payload"]["final_output"], "The answer is 42.");
    // The lead's call, the helper's steps (marked), the result the lead got, in order.
    let call = evs
        .iter()
        .find(|e| e["type"] == "agent.tool_use" && e["payload"]["tool"] == "helper")
        .expect("the lead's call");
    assert!(call["payload"].get("subagent").is_none());
    let call_id = call["payload"]["call_id"].as_str().unwrap();
    let marked: Vec<&Value> = evs
        .iter()
        .filter(|e| e["payload"]["subagent"].is_object())
        .collect();
    let kinds: Vec<&str> = marked.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        ["agent.tool_use", "agent.tool_result", "agent.message"],
        "{marked:?}"
    );
    for e in &marked {
        assert_eq!(
            e["payload"]["subagent"],
            json!({"agent": "helper", "call_id": call_id})
        );
        assert_eq!(e["run_id"], run);
    }
    let result = evs
        .iter()
        .find(|e| e["type"] == "agent.tool_result" && e["payload"]["call_id"] == call_id)
        .unwrap();
    assert_eq!(result["payload"]["output"], "helper found 42");
    assert!(result["seq"].as_i64() > marked.last().unwrap()["seq"].as_i64());

    // The same container: the helper's file is in the session's workspace.
    let (code, out, _) = app.exec(&id, "cat helper.txt").await;
    assert_eq!((code, out.trim()), (0, "from-helper"));

    // The helper saw only its task, under its own instructions, offered its own tools.
    let first = &requests_of(&fake, "You are the helper.")[0];
    let msgs = first["messages"].as_array().unwrap();
    assert_eq!(msgs.len(), 2, "{msgs:?}");
    assert_eq!(msgs[1]["content"], "find the number");
    assert!(tool_names(first).contains(&"shell".to_owned()));
    let lead = &requests_of(&fake, "You are the lead.")[0];
    let helper_tool = lead["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["function"]["name"] == "helper")
        .expect("the helper is offered as a tool");
    assert_eq!(helper_tool["function"]["description"], "Finds numbers.");

    // Usage: four model calls, two by each agent.
    let usage = &end["payload"]["usage"];
    assert_eq!(usage["requests"], 4);
    assert_eq!(usage["by_agent"]["lead"]["requests"], 2);
    assert_eq!(usage["by_agent"]["helper"]["requests"], 2);
    // The turn counts the lead's steps.
    assert_eq!(end["payload"]["turns"], 2);
}

#[tokio::test]
async fn interrupting_a_run_stops_the_subagent_in_flight() {
    let fake = FakeModel::start(Script::new([
        Rule::when()
            .system_contains("You are slow.")
            .reply_text("too late")
            .delay_ms(30_000),
        Rule::when()
            .system_contains("You delegate.")
            .last_message_role("tool")
            .reply_text("unexpected"),
        Rule::when()
            .system_contains("You delegate.")
            .reply_tool_call("slow", json!({"input": "take your time"})),
    ]));
    let app = TestApp::builder()
        .with_model_proxy(&fake.root_url())
        .spawn()
        .await;
    app.create_agent("slow", json!({"instructions": "You are slow."}))
        .await;
    let id = app
        .running_session("boss", agent("You delegate.", json!([{"agent": "slow"}])))
        .await;
    let run = start_run(&app, &id, "go", Value::Null).await;
    eventually("the subagent's model call", TURN, async || {
        (!requests_of(&fake, "You are slow.").is_empty()).then_some(())
    })
    .await;
    app.interrupt(&id).await;
    // The cancelled terminal event is committed before the interrupt returns.
    let evs: Vec<Value> = app
        .events(&id)
        .await
        .into_iter()
        .filter(|e| e["run_id"] == run)
        .collect();
    let end = evs.last().unwrap();
    assert_eq!(end["payload"]["stop_reason"], "cancelled", "{evs:?}");
    assert_eq!(evs.iter().filter(|e| is_terminal(e)).count(), 1);
    assert!(!evs.iter().any(|e| e["payload"]["text"] == "too late"));
    // The session takes the next message.
    let s = app.session(&id).await;
    assert_eq!(s["activity"], "idle");
    assert_eq!(s["runs"][0]["status"], "cancelled");
}

#[tokio::test]
async fn a_deferrable_call_inside_a_subagent_parks_the_run_and_its_answer_goes_back_up() {
    let fake = FakeModel::start(Script::new([
        Rule::when()
            .system_contains("You ask people.")
            .last_tool_result_contains("yes, ship it")
            .reply_text("the person said ship it"),
        Rule::when()
            .system_contains("You ask people.")
            .reply_tool_call("ask_person", json!({"question": "ship?"})),
        Rule::when()
            .system_contains("You coordinate.")
            .last_tool_result_contains("ship it")
            .reply_text("Shipping."),
        Rule::when()
            .system_contains("You coordinate.")
            .reply_tool_call("asker", json!({"input": "ask whether to ship"})),
    ]));
    let app = TestApp::builder()
        .with_model_proxy(&fake.root_url())
        .spawn()
        .await;
    app.create_agent(
        "asker",
        json!({"instructions": "You ask people.", "client_tools": [{
            "name": "ask_person", "description": "Ask a person.", "deferrable": true,
            "parameters": {"type": "object", "properties": {"question": {"type": "string"}}}
        }]}),
    )
    .await;
    let id = app
        .running_session(
            "coord",
            agent("You coordinate.", json!([{"agent": "asker"}])),
        )
        .await;
    let run = start_run(&app, &id, "should we ship?", Value::Null).await;
    let pause = wait_for_run(&app, &id, &run).await.pop().unwrap();
    assert_eq!(
        pause["payload"]["stop_reason"], "requires_action",
        "{pause}"
    );
    let call_id = pause["payload"]["call_ids"][0].as_str().unwrap().to_owned();
    let call = app
        .events(&id)
        .await
        .into_iter()
        .find(|e| e["type"] == "agent.client_tool_call")
        .unwrap();
    assert_eq!(call["payload"]["call_id"], call_id);
    assert_eq!(call["payload"]["subagent"]["agent"], "asker");
    assert_eq!(call["run_id"], run);

    // Answered from another server process: the subagent continues, then the parent.
    app.shutdown.cancel();
    let other = TestApp::builder()
        .with_db(app.db.clone(), app.db_options.clone())
        .with_model_proxy(&fake.root_url())
        .spawn()
        .await;
    let r = other
        .http
        .post(other.url(&format!("/api/sessions/{id}/tool-results")))
        .json(&json!({"call_id": call_id, "output": "yes, ship it"}))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success());
    let evs = eventually("the run to finish", TURN, async || {
        let evs: Vec<Value> = other
            .events(&id)
            .await
            .into_iter()
            .filter(|e| e["run_id"] == run)
            .collect();
        let done = evs.last().is_some_and(|e| {
            e["type"] == "session.status_idle" && e["payload"]["stop_reason"] != "requires_action"
        });
        if done {
            Ok(evs)
        } else {
            Err(format!("{evs:?}"))
        }
    })
    .await;
    let end = evs.last().unwrap();
    assert_eq!(end["payload"]["final_output"], "Shipping.", "{evs:?}");
    assert_eq!(evs.iter().filter(|e| is_terminal(e)).count(), 2);
    // The answer written when the client answered is the subagent's, like its call.
    let answered = evs
        .iter()
        .find(|e| e["type"] == "agent.client_tool_result")
        .unwrap();
    assert_eq!(answered["payload"]["call_id"], call_id);
    assert_eq!(
        answered["payload"]["subagent"], call["payload"]["subagent"],
        "{answered}"
    );
    let result = evs
        .iter()
        .find(|e| e["type"] == "agent.tool_result" && e["payload"]["tool"] == "asker")
        .unwrap();
    assert_eq!(result["payload"]["output"], "the person said ship it");
    assert_eq!(end["payload"]["usage"]["by_agent"]["asker"]["requests"], 2);
    assert_eq!(end["payload"]["usage"]["by_agent"]["coord"]["requests"], 2);
}

async fn prompt(app: &TestApp, id: &str, text: &str) -> Value {
    let run = start_run(app, id, text, Value::Null).await;
    wait_for_run(app, id, &run).await.pop().unwrap()
}

#[tokio::test]
async fn a_handoff_moves_the_conversation_which_survives_a_restart_and_can_be_handed_back() {
    let fake = FakeModel::start(Script::new([
        Rule::when()
            .system_contains("You are billing.")
            .last_user_contains("back to triage")
            .last_message_role("user")
            .reply_tool_call("transfer_to_triage", json!({})),
        Rule::when()
            .system_contains("You are billing.")
            .reply_text("billing here"),
        Rule::when()
            .system_contains("You are triage.")
            .last_user_contains("refund")
            .last_message_role("user")
            .reply_tool_call("transfer_to_billing", json!({}))
            .tool_call("transfer_to_billing", json!({})),
        Rule::when()
            .system_contains("You are triage.")
            .reply_text("triage here"),
    ]));
    let app = TestApp::builder()
        .with_model_proxy(&fake.root_url())
        .spawn()
        .await;
    app.create_agent(
        "billing",
        json!({"instructions": "You are billing.", "description": "Refunds and invoices."}),
    )
    .await;
    let id = app
        .running_session(
            "triage",
            agent(
                "You are triage.",
                json!([{"agent": "billing", "mode": "handoff"}]),
            ),
        )
        .await;
    let end = prompt(&app, &id, "I want a refund").await;
    assert_eq!(end["payload"]["final_output"], "billing here", "{end}");
    let evs = app.events(&id).await;
    let handoffs: Vec<&Value> = evs
        .iter()
        .filter(|e| e["type"] == "agent.handoff")
        .collect();
    // Two handoffs in one step: only the first is honoured.
    assert_eq!(handoffs.len(), 1, "{evs:?}");
    assert_eq!(
        handoffs[0]["payload"],
        json!({"from": "triage", "to": "billing"})
    );
    assert_eq!(handoffs[0]["run_id"], end["run_id"]);
    // Billing saw the whole conversation under its own instructions, and the answers.
    let billing = requests_of(&fake, "You are billing.");
    let seen = billing[0]["messages"].as_array().unwrap();
    assert!(seen.iter().any(|m| m["content"] == "I want a refund"));
    let answers: Vec<&str> = seen
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap())
        .collect();
    assert_eq!(answers.len(), 2);
    assert!(answers[1].starts_with("Ignored"), "{answers:?}");
    assert!(tool_names(&billing[0]).contains(&"transfer_to_triage".to_owned()));
    assert_eq!(app.session(&id).await["conversation_agent"], "billing");

    // The next prompt goes to billing, even from a restarted server.
    app.shutdown.cancel();
    let other = TestApp::builder()
        .with_db(app.db.clone(), app.db_options.clone())
        .with_model_proxy(&fake.root_url())
        .spawn()
        .await;
    let end = prompt(&other, &id, "and my invoice?").await;
    assert_eq!(end["payload"]["final_output"], "billing here", "{end}");
    assert_eq!(
        end["payload"]["usage"]["by_agent"]["billing"]["requests"],
        1
    );

    // Billing hands back; triage answers, and holds the conversation from then on.
    let end = prompt(&other, &id, "back to triage please").await;
    assert_eq!(end["payload"]["final_output"], "triage here", "{end}");
    let back = other
        .events(&id)
        .await
        .into_iter()
        .rfind(|e| e["type"] == "agent.handoff")
        .unwrap();
    assert_eq!(back["payload"], json!({"from": "billing", "to": "triage"}));
    assert_eq!(other.session(&id).await["conversation_agent"], "triage");
    let end = prompt(&other, &id, "thanks").await;
    assert_eq!(end["payload"]["final_output"], "triage here");
}

#[tokio::test]
async fn subagents_of_subagents_stop_at_the_depth_limit() {
    // a → b → c → d → e, each calling the next when it is offered, else answering.
    let mut rules = Vec::new();
    let chain = ["a", "b", "c", "d", "e"];
    for (i, who) in chain.iter().enumerate() {
        let me = format!("You are agent {who}.");
        rules.push(
            Rule::when()
                .system_contains(me.clone())
                .last_message_role("tool")
                .reply_text(format!("{who} got it")),
        );
        if let Some(next) = chain.get(i + 1) {
            rules.push(
                Rule::when()
                    .system_contains(me.clone())
                    .has_tool(*next)
                    .reply_tool_call(*next, json!({"input": "go deeper"})),
            );
        }
        rules.push(
            Rule::when()
                .system_contains(me)
                .reply_text(format!("{who} is the deepest")),
        );
    }
    let fake = FakeModel::start(Script::new(rules));
    let app = TestApp::builder()
        .with_model_proxy(&fake.root_url())
        .spawn()
        .await;
    for (i, who) in chain.iter().enumerate().skip(1).rev() {
        let subs = chain
            .get(i + 1)
            .map(|n| json!([{"agent": n}]))
            .unwrap_or(json!([]));
        app.create_agent(who, agent(&format!("You are agent {who}."), subs))
            .await;
    }
    let id = app
        .running_session("a", agent("You are agent a.", json!([{"agent": "b"}])))
        .await;
    let end = prompt(&app, &id, "start").await;
    assert_eq!(end["payload"]["final_output"], "a got it", "{end}");
    // d is three below a: it is not offered e, and e is never called.
    let d = requests_of(&fake, "You are agent d.");
    assert!(!d.is_empty());
    assert!(
        !tool_names(&d[0]).contains(&"e".to_owned()),
        "{:?}",
        tool_names(&d[0])
    );
    assert!(requests_of(&fake, "You are agent e.").is_empty());
    let evs = app.events(&id).await;
    let results: Vec<&str> = evs
        .iter()
        .filter(|e| e["type"] == "agent.tool_result")
        .map(|e| e["payload"]["output"].as_str().unwrap())
        .collect();
    assert_eq!(results, ["d is the deepest", "c got it", "b got it"]);
    assert_eq!(end["payload"]["usage"]["by_agent"]["d"]["requests"], 1);
}

#[tokio::test]
async fn a_cycle_of_subagents_is_refused_and_changes_nothing() {
    let fake = FakeModel::start(Script::new([]));
    let app = TestApp::builder()
        .with_model_proxy(&fake.root_url())
        .spawn()
        .await;
    app.create_agent("c", json!({})).await;
    app.create_agent("b", json!({"subagents": [{"agent": "c"}]}))
        .await;
    app.create_agent(
        "a",
        json!({"subagents": [{"agent": "b", "mode": "handoff"}]}),
    )
    .await;
    let c = app
        .http
        .get(app.url("/api/agents/c"))
        .send()
        .await
        .unwrap()
        .json::<Value>()
        .await
        .unwrap();
    let r = app
        .http
        .patch(app.url("/api/agents/c"))
        .json(&json!({"version": c["version"], "subagents": [{"agent": "a"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 422);
    let body: Value = r.json().await.unwrap();
    let detail = body["detail"].to_string();
    assert!(
        detail.contains("c \u{2192} a \u{2192} b \u{2192} c"),
        "{detail}"
    );
    let after = app
        .http
        .get(app.url("/api/agents/c"))
        .send()
        .await
        .unwrap()
        .json::<Value>()
        .await
        .unwrap();
    assert_eq!(after["version"], c["version"]);
    assert_eq!(after["subagents"], json!([]));
    // A new agent may not close a cycle either, and one that closes none is fine.
    let r = app
        .http
        .post(app.url("/api/agents"))
        .json(&json!({"slug": "d", "name": "d", "subagents": [{"agent": "a"}, {"agent": "c"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201, "{}", r.text().await.unwrap());
}

#[tokio::test]
async fn each_agent_reasons_with_its_own_effort_and_reasoning_becomes_thinking_events() {
    let fake = FakeModel::start(Script::new([
        Rule::when()
            .system_contains("You think deeply.")
            .reply_text("deep answer")
            .reasoning("weighing the options"),
        Rule::when()
            .system_contains("You think fast.")
            .last_message_role("tool")
            .reply_text("fast answer")
            .reasoning("that was quick"),
        Rule::when()
            .system_contains("You think fast.")
            .reply_tool_call("deep", json!({"input": "think"})),
    ]));
    let app = TestApp::builder()
        .with_model_proxy(&fake.root_url())
        .spawn()
        .await;
    app.create_agent(
        "deep",
        json!({"instructions": "You think deeply.", "reasoning_effort": "high"}),
    )
    .await;
    let mut fast = agent("You think fast.", json!([{"agent": "deep"}]));
    fast["reasoning_effort"] = json!("low");
    let id = app.running_session("fast", fast).await;
    let end = prompt(&app, &id, "decide").await;
    assert_eq!(end["payload"]["final_output"], "fast answer");
    assert_eq!(
        requests_of(&fake, "You think fast.")[0]["reasoning_effort"],
        "low"
    );
    assert_eq!(
        requests_of(&fake, "You think deeply.")[0]["reasoning_effort"],
        "high"
    );
    let thinking: Vec<(Value, Value)> = app
        .events(&id)
        .await
        .into_iter()
        .filter(|e| e["type"] == "agent.thinking")
        .map(|e| {
            (
                e["payload"]["text"].clone(),
                e["payload"]["subagent"]["agent"].clone(),
            )
        })
        .collect();
    assert_eq!(
        thinking,
        [
            (json!("weighing the options"), json!("deep")),
            (json!("that was quick"), Value::Null)
        ]
    );
}
