//! A running shell tool's output streamed live (`agent.tool_output_delta`) on a real sandbox:
//! to streams that ask for it, as the command writes, with the sandbox's secrets masked, never
//! stored and never sent to streams that did not ask (the published client's).

use sandbox_agents_fake_model::{FakeModel, Rule, Script};
use sandbox_agents_testkit::runs::{is_terminal, start_run, test_agent, wait_for_run, TURN};
use sandbox_agents_testkit::sse::SseReader;
use sandbox_agents_testkit::TestApp;
use serde_json::{json, Value};

const SECRET: &str = "tok-streamed-0123456789";

async fn stream(app: &TestApp, id: &str, query: &str) -> SseReader {
    let cursor = app.events(id).await.last().unwrap()["seq"]
        .as_i64()
        .unwrap();
    let r = app
        .http
        .get(app.url(&format!(
            "/api/sessions/{id}/events/stream?after={cursor}{query}"
        )))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    SseReader::new(r)
}

#[tokio::test]
async fn a_shell_tools_output_streams_while_it_runs_masked_and_only_to_who_asks() {
    let fake = FakeModel::start(Script::new([
        Rule::when()
            .last_tool_result_contains("exit code: 0")
            .reply_text("built"),
        Rule::when().last_user_contains("build").reply_tool_call(
            "shell",
            json!({"command": "echo \"step-1 $TOKEN\"; while [ ! -e /tmp/go ]; do sleep 0.05; done; echo step-2 >&2"}),
        ),
    ]));
    let app = TestApp::builder()
        .with_model_proxy(&fake.root_url())
        .spawn()
        .await;
    let r = app
        .http
        .post(app.url("/api/secrets"))
        .json(&json!({"name": "STREAM_TOKEN", "value": SECRET}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    app.create_agent("builder", test_agent()).await;
    let id = app
        .boot_session(json!({"agent_id": "builder", "title": "t",
            "secret_bindings": [{"secret": "STREAM_TOKEN", "env": "TOKEN"}]}))
        .await;
    let mut watching = stream(&app, &id, "&tool_output=true").await;
    let mut plain = stream(&app, &id, "").await;

    let run = start_run(&app, &id, "build it", Value::Null).await;
    let mut call_id = None;
    let first = loop {
        let e = watching
            .next_event(TURN)
            .await
            .expect("the stream goes on")
            .json();
        assert!(
            !is_terminal(&e),
            "the run ended before its tool's output: {e}"
        );
        if e["type"] == "agent.tool_use" {
            call_id = Some(e["payload"]["call_id"].clone());
        }
        if e["type"] == "agent.tool_output_delta" {
            break e;
        }
    };
    // The command is still waiting for /tmp/go: this came while it ran.
    assert_eq!(first["seq"], 0);
    assert_eq!(first["run_id"], run);
    assert_eq!(Some(&first["payload"]["call_id"]), call_id.as_ref());
    assert_eq!(first["payload"]["tool"], "shell");
    assert_eq!(first["payload"]["stream"], "stdout");
    assert_eq!(
        first["payload"]["text"], "step-1 ***\n",
        "masked as the result is"
    );
    let (code, _, _) = app.exec(&id, "touch /tmp/go").await;
    assert_eq!(code, 0);
    let mut stderr = String::new();
    loop {
        let e = watching
            .next_event(TURN)
            .await
            .expect("the stream goes on")
            .json();
        if e["type"] == "agent.tool_output_delta" && e["payload"]["stream"] == "stderr" {
            stderr.push_str(e["payload"]["text"].as_str().unwrap());
        }
        if is_terminal(&e) {
            break;
        }
    }
    assert_eq!(stderr, "step-2\n");

    // A stream that did not ask saw the turn without them.
    let mut seen = Vec::new();
    loop {
        let e = plain
            .next_event(TURN)
            .await
            .expect("the stream goes on")
            .json();
        seen.push(e["type"].as_str().unwrap().to_owned());
        if is_terminal(&e) {
            break;
        }
    }
    assert!(seen.iter().any(|t| t == "agent.tool_result"), "{seen:?}");
    assert!(
        !seen.iter().any(|t| t == "agent.tool_output_delta"),
        "{seen:?}"
    );
    // Nor are they stored.
    let evs = wait_for_run(&app, &id, &run).await;
    assert!(!evs.iter().any(|e| e["type"] == "agent.tool_output_delta"));
    let text = serde_json::to_string(&evs).unwrap();
    assert!(!text.contains(SECRET), "the secret reached the log");
    app.delete_session(&id).await;
}
