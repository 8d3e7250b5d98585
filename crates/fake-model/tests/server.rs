//! The fake model server, driven over HTTP the way a client would.

use std::time::Duration;

use sandbox_agents_fake_model::{FakeModel, ModelEntry, RecordedRequest, Rule, Script};
use serde_json::{json, Value};

fn chat(user: &str, stream: bool) -> Value {
    json!({
        "model": "fake-model",
        "stream": stream,
        "stream_options": { "include_usage": true },
        "messages": [{ "role": "user", "content": user }],
        "tools": [{ "type": "function", "function": { "name": "shell", "parameters": {} } }],
    })
}

async fn post(fake: &FakeModel, body: &Value) -> reqwest::Response {
    reqwest::Client::new()
        .post(format!("{}/chat/completions", fake.base_url()))
        .bearer_auth("sk-test")
        .json(body)
        .send()
        .await
        .unwrap()
}

/// The `data:` payloads of an SSE body, `[DONE]` included.
async fn sse(response: reqwest::Response) -> Vec<String> {
    assert_eq!(response.status(), 200);
    assert_eq!(
        response.headers()["content-type"].to_str().unwrap(),
        "text/event-stream"
    );
    let text = response.text().await.unwrap();
    text.lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .map(str::to_owned)
        .collect()
}

fn chunks(data: &[String]) -> Vec<Value> {
    assert_eq!(data.last().map(String::as_str), Some("[DONE]"));
    data[..data.len() - 1]
        .iter()
        .map(|d| serde_json::from_str(d).unwrap())
        .collect()
}

#[tokio::test]
async fn a_non_streamed_text_answer_has_message_finish_reason_and_usage() {
    let fake = FakeModel::start(Script::new([Rule::when()
        .last_user_contains("hi")
        .reply_text("Hello there")]));
    let body: Value = post(&fake, &chat("hi!", false)).await.json().await.unwrap();
    assert_eq!(body["object"], "chat.completion");
    assert_eq!(body["choices"][0]["message"]["role"], "assistant");
    assert_eq!(body["choices"][0]["message"]["content"], "Hello there");
    assert_eq!(body["choices"][0]["finish_reason"], "stop");
    let usage = &body["usage"];
    assert_eq!(usage["prompt_tokens"], 1); // "hi!" is 3 characters
    assert_eq!(usage["completion_tokens"], 3); // 11 characters
    assert_eq!(usage["total_tokens"], 4);
}

#[tokio::test]
async fn a_streamed_text_answer_comes_in_several_chunks_then_usage_then_done() {
    let fake = FakeModel::start(Script::new([Rule::always()
        .reply_text("one two three")
        .reasoning("let me think")]));
    let chunks = chunks(&sse(post(&fake, &chat("hi", true)).await).await);
    assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant");
    let delta = |field: &str| -> Vec<String> {
        chunks
            .iter()
            .filter_map(|c| c["choices"][0]["delta"][field].as_str())
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect()
    };
    assert_eq!(delta("content"), ["one ", "two ", "three"]);
    assert_eq!(delta("reasoning_content"), ["let ", "me ", "think"]);
    let finish = &chunks[chunks.len() - 2];
    assert_eq!(finish["choices"][0]["finish_reason"], "stop");
    let usage = chunks.last().unwrap();
    assert_eq!(usage["choices"], json!([]));
    assert!(usage["usage"]["total_tokens"].as_u64().unwrap() > 0);
}

#[tokio::test]
async fn without_include_usage_there_is_no_usage_chunk() {
    let fake = FakeModel::start(Script::new([Rule::always().reply_text("ok")]));
    let mut body = chat("hi", true);
    body.as_object_mut().unwrap().remove("stream_options");
    let chunks = chunks(&sse(post(&fake, &body).await).await);
    assert!(chunks.iter().all(|c| c["choices"] != json!([])));
    assert_eq!(
        chunks.last().unwrap()["choices"][0]["finish_reason"],
        "stop"
    );
}

#[tokio::test]
async fn several_tool_calls_in_one_step_stream_with_indexes_and_argument_pieces() {
    let fake = FakeModel::start(Script::new([Rule::when()
        .has_tool("shell")
        .reply_tool_call("shell", json!({"command": "ls -la /workspace"}))
        .tool_call_with_id("call_fixed", "read_file", json!({"path": "a.txt"}))
        .usage(100, 20)]));
    let chunks = chunks(&sse(post(&fake, &chat("go", true)).await).await);
    let mut names = Vec::new();
    let mut ids = Vec::new();
    let mut arguments = [String::new(), String::new()];
    for chunk in &chunks {
        for call in chunk["choices"][0]["delta"]["tool_calls"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let index = call["index"].as_u64().unwrap() as usize;
            if let Some(name) = call["function"]["name"].as_str() {
                assert_eq!(call["type"], "function");
                names.push(name.to_owned());
                ids.push(call["id"].as_str().unwrap().to_owned());
            }
            arguments[index] += call["function"]["arguments"].as_str().unwrap();
        }
    }
    assert_eq!(names, ["shell", "read_file"]);
    assert_eq!(ids[1], "call_fixed");
    assert!(ids[0].starts_with("call_"));
    let pieces = chunks
        .iter()
        .filter(|c| c["choices"][0]["delta"]["tool_calls"][0]["index"] == 0)
        .count();
    assert!(pieces > 2, "the arguments come in pieces");
    let args: Value = serde_json::from_str(&arguments[0]).unwrap();
    assert_eq!(args, json!({"command": "ls -la /workspace"}));
    assert_eq!(arguments[1], r#"{"path":"a.txt"}"#);
    assert_eq!(
        chunks[chunks.len() - 2]["choices"][0]["finish_reason"],
        "tool_calls"
    );
    assert_eq!(
        chunks.last().unwrap()["usage"],
        json!({"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120})
    );

    let body: Value = post(&fake, &chat("go", false)).await.json().await.unwrap();
    let calls = &body["choices"][0]["message"]["tool_calls"];
    assert_eq!(calls[0]["function"]["name"], "shell");
    assert_eq!(calls[1]["function"]["arguments"], r#"{"path":"a.txt"}"#);
    assert_eq!(body["choices"][0]["finish_reason"], "tool_calls");
}

#[tokio::test]
async fn a_scripted_error_carries_its_status_message_and_retry_after() {
    let fake = FakeModel::start(Script::new([Rule::always()
        .reply_error(429, "slow down")
        .retry_after(3)]));
    let response = post(&fake, &chat("hi", true)).await;
    assert_eq!(response.status(), 429);
    assert_eq!(response.headers()["retry-after"], "3");
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["message"], "slow down");
}

#[tokio::test]
async fn times_lets_a_rule_fail_twice_then_fall_through() {
    let fake = FakeModel::start(Script::new([
        Rule::always().reply_error(503, "busy").times(2),
        Rule::always().reply_text("finally"),
    ]));
    let mut statuses = Vec::new();
    for _ in 0..3 {
        statuses.push(post(&fake, &chat("hi", false)).await.status().as_u16());
    }
    assert_eq!(statuses, [503, 503, 200]);
    assert_eq!(fake.chat_requests().len(), 3);
}

#[tokio::test]
async fn no_matching_rule_is_a_400_naming_the_last_user_message() {
    let fake = FakeModel::start(Script::new([Rule::when()
        .last_user_contains("hello")
        .reply_text("hi")]));
    let response = post(&fake, &chat("what is the time?", true)).await;
    assert_eq!(response.status(), 400);
    let body: Value = response.json().await.unwrap();
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("no script rule matches"), "{message}");
    assert!(message.contains("what is the time?"), "{message}");
}

#[tokio::test]
async fn turn_and_tool_results_pick_the_rule_for_each_step() {
    let fake = FakeModel::start(Script::new([
        Rule::when()
            .last_message_role("tool")
            .last_tool_result_contains("a.txt")
            .turn(1)
            .reply_text("There is a.txt."),
        Rule::when()
            .turn(0)
            .reply_tool_call("shell", json!({"command": "ls"})),
    ]));
    let mut body = chat("list", false);
    let first: Value = post(&fake, &body).await.json().await.unwrap();
    let message = first["choices"][0]["message"].clone();
    body["messages"].as_array_mut().unwrap().extend([
        message,
        json!({"role": "tool", "tool_call_id": "x", "content": "a.txt"}),
    ]);
    let second: Value = post(&fake, &body).await.json().await.unwrap();
    assert_eq!(
        second["choices"][0]["message"]["content"],
        "There is a.txt."
    );
}

#[tokio::test]
async fn the_script_can_be_replaced_and_requests_inspected_over_http() {
    let fake = FakeModel::start(Script::default());
    let http = reqwest::Client::new();
    let root = fake.root_url();
    let script = json!([{ "when": {"last_user_contains": "ping"}, "reply": {"text": "pong"} }]);
    let put = http
        .put(format!("{root}/_script"))
        .json(&script)
        .send()
        .await
        .unwrap();
    assert_eq!(put.status(), 204);
    let body: Value = post(&fake, &chat("ping", false))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(body["choices"][0]["message"]["content"], "pong");

    let requests: Vec<RecordedRequest> = http
        .get(format!("{root}/_requests"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(requests.len(), 1, "control routes are not recorded");
    assert_eq!(requests[0].method, "POST");
    assert_eq!(requests[0].path, "/v1/chat/completions");
    assert_eq!(requests[0].authorization.as_deref(), Some("Bearer sk-test"));
    assert_eq!(requests[0].body["messages"][0]["content"], "ping");

    let deleted = http
        .delete(format!("{root}/_requests"))
        .send()
        .await
        .unwrap();
    assert_eq!(deleted.status(), 204);
    assert!(fake.requests().is_empty());

    let typo = json!([{ "when": {"last_user_contain": "x"}, "reply": {"text": "y"} }]);
    let bad = http
        .put(format!("{root}/_script"))
        .json(&typo)
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status(), 400);
    let body: Value = bad.json().await.unwrap();
    assert!(body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("last_user_contain"));
}

#[tokio::test]
async fn models_and_model_info_list_the_scripted_models() {
    let fake = FakeModel::start(
        Script::default()
            .model(ModelEntry::new("small").limits(Some(8000), Some(1000)))
            .model(ModelEntry::new("big")),
    );
    let http = reqwest::Client::new();
    let models: Value = http
        .get(format!("{}/models", fake.base_url()))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(models["object"], "list");
    assert_eq!(models["data"][0]["id"], "small");
    assert_eq!(models["data"][1]["object"], "model");
    let info: Value = http
        .get(format!("{}/model/info", fake.root_url()))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(info["data"][0]["model_name"], "small");
    assert_eq!(info["data"][0]["model_info"]["max_input_tokens"], 8000);
    assert_eq!(
        info["data"][1]["model_info"]["max_output_tokens"],
        Value::Null
    );

    fake.set_script(Script::default().without_model_info());
    let off = http
        .get(format!("{}/model/info", fake.root_url()))
        .send()
        .await
        .unwrap();
    assert_eq!(off.status(), 404);
}

#[tokio::test]
async fn a_scripted_disconnect_breaks_the_stream_without_done() {
    let fake = FakeModel::start(Script::new([Rule::always()
        .reply_text("a b c d e f")
        .disconnect_after_chunks(3)]));
    let response = post(&fake, &chat("hi", true)).await;
    assert_eq!(response.status(), 200);
    assert!(
        response.text().await.is_err(),
        "the body must end in an error"
    );
}

#[tokio::test]
async fn the_binary_prints_its_address_and_serves_a_script_file() {
    use tokio::io::AsyncBufReadExt;
    let dir = std::env::temp_dir().join(format!("fake-model-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("script.json");
    let script = json!({"rules": [{"when": {}, "reply": {"text": "from a file"}}]});
    std::fs::write(&path, script.to_string()).unwrap();
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_fake-model"))
        .args(["--script", path.to_str().unwrap(), "--bind", "127.0.0.1:0"])
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut line = String::new();
    tokio::time::timeout(
        Duration::from_secs(30),
        tokio::io::BufReader::new(stdout).read_line(&mut line),
    )
    .await
    .unwrap()
    .unwrap();
    let root = line
        .trim()
        .strip_prefix("listening on ")
        .unwrap()
        .to_owned();
    let body: Value = reqwest::Client::new()
        .post(format!("{root}/v1/chat/completions"))
        .json(&chat("hi", false))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(body["choices"][0]["message"]["content"], "from a file");
    child.kill().await.unwrap();
    let _ = std::fs::remove_dir_all(dir);
}
