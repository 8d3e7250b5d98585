//! Compaction: at 90% of the model's input window (the catalogue's `max_input_tokens`) the
//! loop summarises before its next model call, the model then sees the system prompt, the
//! recent user messages and the summary, the log keeps everything, later turns and parked
//! runs start from the summary, and a view that cannot fit fails the run saying so.
//!
//! The fake model reports the prompt tokens a rule scripts (`usage`), which is how these
//! tests put a step exactly below or above the threshold: the loop counts what the provider
//! reported plus an estimate of what was added since.

use sandbox_agents_fake_model::{FakeModel, ModelEntry, Rule, Script};
use sandbox_agents_testkit::runs::{start_run, types, wait_for_run, TURN};
use sandbox_agents_testkit::{eventually, TestApp};
use serde_json::{json, Value};

/// The model the agents use, listed with a 10,000-token input window (compaction at 9,000).
const MODEL: &str = "small-window";
const WINDOW: u64 = 10_000;

/// What the loop asks the summarising call (the start of its checkpoint prompt).
const CHECKPOINT: &str = "CONTEXT CHECKPOINT";
/// What the summary's message in the compacted view says first.
const COMPACTED: &str = "Earlier turns of this conversation were compacted";
const SUMMARY: &str = "SUMMARY: the user asked to list the files; both listings ran.";

fn script(rules: impl IntoIterator<Item = Rule>, window: u64) -> Script {
    Script::new(rules).model(ModelEntry::new(MODEL).limits(Some(window), None))
}

fn agent(extra: Value) -> Value {
    let mut body = json!({"instructions": "You are a test agent.", "model": MODEL});
    for (k, v) in extra.as_object().unwrap() {
        body[k] = v.clone();
    }
    body
}

/// Every message text of a recorded chat request, with its role.
fn messages(req: &Value) -> Vec<(String, String)> {
    req["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["role"].as_str().unwrap().to_owned(),
                m["content"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

fn roles(req: &Value) -> Vec<String> {
    messages(req).into_iter().map(|(r, _)| r).collect()
}

/// Whether any part of the request (message texts and tool calls) mentions `text`.
fn mentions(req: &Value, text: &str) -> bool {
    req["messages"].to_string().contains(text)
}

fn compaction_events(evs: &[Value]) -> Vec<&Value> {
    evs.iter()
        .filter(|e| e["type"] == "agent.compaction")
        .collect()
}

async fn failed_run(app: &TestApp, id: &str, prompt: &str) -> Value {
    let run = start_run(app, id, prompt, Value::Null).await;
    let evs = wait_for_run(app, id, &run).await;
    let end = evs.last().unwrap().clone();
    assert_eq!(end["type"], "session.status_error", "{evs:?}");
    assert_eq!(end["payload"]["run_status"], "failed");
    end
}

#[tokio::test]
async fn compaction_starts_at_the_threshold_and_the_model_then_sees_recent_user_messages_and_the_summary(
) {
    let fake = FakeModel::start(script(
        [
            Rule::when()
                .last_user_contains(CHECKPOINT)
                .reply_text(SUMMARY),
            Rule::when()
                .last_user_contains("what next")
                .reply_text("Next: the report."),
            Rule::when()
                .last_user_contains(COMPACTED)
                .reply_text("All done after compaction."),
            // 8,800 reported tokens plus the step added stay below 9,000; 9,000 does not.
            Rule::when()
                .last_tool_result_contains("first")
                .reply_tool_call("shell", json!({"command": "echo second"}))
                .usage(9_000, 5),
            Rule::when()
                .last_user_contains("list the files")
                .reply_tool_call("shell", json!({"command": "echo first"}))
                .usage(8_800, 5),
        ],
        WINDOW,
    ));
    let app = TestApp::builder()
        .with_model_proxy(&fake.root_url())
        .spawn()
        .await;
    let id = app.running_session("compacting", agent(json!({}))).await;

    let run = start_run(&app, &id, "list the files", Value::Null).await;
    let evs = wait_for_run(&app, &id, &run).await;
    assert_eq!(
        types(&evs),
        [
            "user.message",
            "agent.tool_use",
            "agent.tool_result",
            "agent.tool_use",
            "agent.tool_result",
            "agent.compaction",
            "agent.message",
            "session.status_idle"
        ],
        "{evs:?}"
    );
    let c = &evs[5]["payload"];
    let before = c["tokens_before"].as_u64().unwrap();
    let after = c["tokens_after"].as_u64().unwrap();
    assert!((9_000..9_200).contains(&before), "{c}");
    assert!(after < before / 2, "{c}");
    assert_eq!(c["window"], WINDOW);
    assert_eq!(c["summary"], SUMMARY);
    assert_eq!(c["summary_chars"], SUMMARY.chars().count());
    // The prompt and both steps with their results.
    assert_eq!(c["messages_covered"], 5);
    let end = &evs[7]["payload"];
    assert_eq!(end["final_output"], "All done after compaction.");
    assert_eq!(end["turns"], 3);
    assert_eq!(end["usage"]["requests"], 4, "the summary is a request too");

    let reqs: Vec<Value> = fake.chat_requests().into_iter().map(|r| r.body).collect();
    assert_eq!(reqs.len(), 4);
    // Below the threshold nothing was summarised: the second step saw the whole turn.
    assert_eq!(roles(&reqs[1]), ["system", "user", "assistant", "tool"]);
    // The summarising call: the whole view, then the checkpoint prompt, with the tools.
    assert_eq!(
        roles(&reqs[2]),
        [
            "system",
            "user",
            "assistant",
            "tool",
            "assistant",
            "tool",
            "user"
        ]
    );
    let prompt = &messages(&reqs[2])[6].1;
    for asked in [
        CHECKPOINT,
        "goal",
        "decisions",
        "Constraints",
        "remaining steps",
        "file paths",
        "ids",
    ] {
        assert!(prompt.contains(asked), "{asked}: {prompt}");
    }
    assert_eq!(reqs[2]["model"], MODEL);
    assert!(reqs[2]["tools"].as_array().is_some_and(|t| !t.is_empty()));
    // The next step: the system prompt, the user's message and the summary, nothing older.
    let seen = messages(&reqs[3]);
    assert_eq!(roles(&reqs[3]), ["system", "user", "user"]);
    assert_eq!(seen[0].1, "You are a test agent.");
    assert_eq!(seen[1].1, "list the files");
    assert!(seen[2].1.starts_with(COMPACTED) && seen[2].1.ends_with(SUMMARY));
    assert!(!mentions(&reqs[3], "echo first") && !mentions(&reqs[3], "echo second"));

    // The log keeps everything the model no longer sees.
    let all = app.events(&id).await;
    let tool_uses: Vec<&Value> = all
        .iter()
        .filter(|e| e["type"] == "agent.tool_use")
        .collect();
    assert_eq!(tool_uses.len(), 2);
    assert!(tool_uses[0]["payload"]["arguments"]
        .as_str()
        .unwrap()
        .contains("echo first"));

    // A later turn starts from the summary: the covered history stays out, what came after
    // the compaction (the final answer) is there.
    fake.clear_requests();
    let run2 = start_run(&app, &id, "what next?", Value::Null).await;
    let evs2 = wait_for_run(&app, &id, &run2).await;
    assert_eq!(
        evs2.last().unwrap()["payload"]["final_output"],
        "Next: the report."
    );
    assert!(compaction_events(&evs2).is_empty(), "{evs2:?}");
    let req = &fake.chat_requests()[0].body;
    let seen = messages(req);
    assert_eq!(roles(req), ["system", "user", "user", "assistant", "user"]);
    assert_eq!(seen[1].1, "list the files");
    assert!(seen[2].1.ends_with(SUMMARY));
    assert_eq!(seen[3].1, "All done after compaction.");
    assert_eq!(seen[4].1, "what next?");
    assert!(!mentions(req, "echo first"));
}

#[tokio::test]
async fn a_parked_run_that_compacted_continues_from_the_summary() {
    let fake = FakeModel::start(script(
        [
            Rule::when()
                .last_user_contains(CHECKPOINT)
                .reply_text(SUMMARY),
            Rule::when()
                .last_tool_result_contains("approved by Grace")
                .reply_text("Deployed."),
            Rule::when()
                .last_user_contains(COMPACTED)
                .reply_tool_call("approve", json!({})),
            Rule::when()
                .last_user_contains("deploy")
                .reply_tool_call("shell", json!({"command": "echo first"}))
                .usage(9_500, 5),
        ],
        WINDOW,
    ));
    let app = TestApp::builder()
        .with_model_proxy(&fake.root_url())
        .spawn()
        .await;
    let id = app
        .running_session(
            "approver",
            agent(json!({"client_tools": [
                {"name": "approve", "description": "Ask a person.", "deferrable": true}
            ]})),
        )
        .await;
    let run = start_run(&app, &id, "deploy it", Value::Null).await;
    let call = eventually("the run to park", TURN, async || {
        let evs = app.events(&id).await;
        let parked = evs.iter().any(|e| {
            e["type"] == "session.status_idle" && e["payload"]["stop_reason"] == "requires_action"
        });
        let call = evs
            .iter()
            .find(|e| e["type"] == "agent.client_tool_call")
            .cloned();
        call.filter(|_| parked)
    })
    .await;
    let r = app
        .http
        .post(app.url(&format!("/api/sessions/{id}/tool-results")))
        .json(&json!({"call_id": call["payload"]["call_id"], "output": "approved by Grace"}))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "{}", r.status());
    // The pause is a terminal event too: wait for the run's end after it.
    let evs = eventually("the continued run to end", TURN, async || {
        let mine: Vec<Value> = app
            .events(&id)
            .await
            .into_iter()
            .filter(|e| e["run_id"] == run)
            .collect();
        let ended = mine.last().is_some_and(|e| {
            e["type"] == "session.status_idle" && e["payload"]["run_status"] == "completed"
        });
        if ended {
            Ok(mine)
        } else {
            Err(format!("{mine:?}"))
        }
    })
    .await;
    assert_eq!(evs.last().unwrap()["payload"]["final_output"], "Deployed.");
    assert_eq!(compaction_events(&evs).len(), 1);

    // The continued run saw the summary and what followed it, not the covered steps.
    let last = &fake.chat_requests().last().unwrap().body.clone();
    assert_eq!(roles(last), ["system", "user", "user", "assistant", "tool"]);
    let seen = messages(last);
    assert!(seen[2].1.ends_with(SUMMARY));
    assert_eq!(seen[4].1, "approved by Grace");
    assert!(!mentions(last, "echo first"));
}

#[tokio::test]
async fn a_conversation_that_cannot_be_compacted_below_the_window_fails_naming_the_sizes() {
    let fake = FakeModel::start(script([Rule::always().reply_text("unreachable")], 1_000));
    let app = TestApp::builder()
        .with_model_proxy(&fake.root_url())
        .spawn()
        .await;
    // No sandbox tools: the prompt alone decides the size.
    let id = app
        .running_session("tight", agent(json!({"capabilities": ["compaction"]})))
        .await;
    let huge = format!("summarise this: {}", "x".repeat(8_000));
    let end = failed_run(&app, &id, &huge).await;
    let error = end["payload"]["error"].as_str().unwrap();
    assert!(
        error.contains(&format!("input window of model '{MODEL}' (1000 tokens)")),
        "{error}"
    );
    // 8,016 bytes of prompt, about four a token.
    assert!(
        error.contains("the newest user message about 2004"),
        "{error}"
    );
    assert!(
        fake.chat_requests().is_empty(),
        "no request the provider would refuse"
    );
    assert!(compaction_events(&app.events(&id).await).is_empty());
}

#[tokio::test]
async fn an_agent_without_the_capability_never_compacts_and_fails_clearly_over_the_window() {
    let fake = FakeModel::start(script(
        [
            Rule::when()
                .last_user_contains(CHECKPOINT)
                .reply_text(SUMMARY),
            Rule::always().reply_text("fits"),
        ],
        2_000,
    ));
    let app = TestApp::builder()
        .with_model_proxy(&fake.root_url())
        .spawn()
        .await;
    let id = app
        .running_session("plain", agent(json!({"capabilities": []})))
        .await;
    // Over 90% but under the window: it goes to the model whole.
    let near = "y".repeat(4 * 1_850);
    let run = start_run(&app, &id, &near, Value::Null).await;
    let evs = wait_for_run(&app, &id, &run).await;
    assert_eq!(evs.last().unwrap()["payload"]["final_output"], "fits");
    assert_eq!(fake.chat_requests().len(), 1);

    fake.clear_requests();
    let more = format!("and one more: {}", "z".repeat(800));
    let end = failed_run(&app, &id, &more).await;
    let error = end["payload"]["error"].as_str().unwrap();
    assert!(error.contains("(2000 tokens)"), "{error}");
    assert!(
        error.contains("does not compact it") && error.contains("'compaction'"),
        "{error}"
    );
    assert!(fake.chat_requests().is_empty());
    assert!(compaction_events(&app.events(&id).await).is_empty());
}
