//! The control plane as an MCP server (`/mcp`, issue 39), driven by clients nobody here wrote:
//! the Python `mcp` package's client runs a whole session (tests/mcp/drive.py), and `rmcp`'s
//! client lists and calls tools. `/mcp` takes the same credentials as `/api`, and each tool's
//! errors carry the REST endpoint's `detail`.

use sandbox_agents_fake_model::{FakeModel, Rule, Script};
use sandbox_agents_sandbox::memory::MemoryBackend;
use sandbox_agents_testkit::mcp::{python, Sdk};
use sandbox_agents_testkit::TestApp;
use serde_json::{json, Value};
use std::collections::HashMap;

const TOKEN: &str = "mcp-server-test-token";

async fn app(fake: &FakeModel, plane: &MemoryBackend) -> TestApp {
    let app = TestApp::builder()
        .with_model_proxy(&fake.root_url())
        .with_memory_backend(plane)
        .with_token(TOKEN)
        .spawn()
        .await;
    let r = reqwest::Client::new()
        .post(app.url("/api/agents"))
        .bearer_auth(TOKEN)
        .json(&json!({"slug": "helper", "name": "Helper"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201, "{}", r.text().await.unwrap());
    app
}

#[tokio::test]
async fn the_python_sdks_client_drives_a_whole_session_through_mcp() {
    let fake = FakeModel::start(Script::new([
        Rule::when().reply_text("Hello from the agent.")
    ]));
    let plane = MemoryBackend::new("mcp-server");
    let app = app(&fake, &plane).await;
    let out = tokio::process::Command::new(python(Sdk::Current))
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/mcp/drive.py"
        ))
        .args([app.url("/mcp").as_str(), TOKEN, "helper"])
        .output()
        .await
        .expect("running tests/mcp/drive.py");
    assert!(
        out.status.success(),
        "drive.py failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let seen: Value = serde_json::from_slice(&out.stdout).expect("drive.py prints JSON");
    assert_eq!(
        seen["tools"],
        json!([
            "answer_approval",
            "answer_tool_call",
            "create_session",
            "list_agents",
            "list_files",
            "read_events",
            "read_file",
            "send_message",
            "stop_session"
        ])
    );
    assert_eq!(seen["agents"], json!(["helper"]));
    assert_eq!(seen["reply"], "Hello from the agent.", "{seen}");
    assert_eq!(seen["end"]["run_status"], "completed", "{seen}");
    let progress: Vec<&str> = seen["progress"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        progress.contains(&"agent.message") && progress.last() == Some(&"session.status_idle"),
        "each event of the turn is a progress notification: {progress:?}"
    );
    assert_eq!(seen["bad"]["is_error"], true, "{seen}");
    assert_eq!(seen["bad"]["structured"]["status"], 404, "{seen}");
    assert!(
        seen["bad"]["text"]
            .as_str()
            .unwrap()
            .contains("no-such-agent"),
        "the REST detail: {seen}"
    );
    let types: Vec<&str> = seen["event_types"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(types.contains(&"user.message") && types.contains(&"agent.message"));
    assert_eq!(seen["stopped"], true);
}

#[tokio::test]
async fn rmcps_client_lists_and_calls_tools_and_mcp_takes_the_apis_credentials() {
    let fake = FakeModel::start(Script::new([Rule::when().reply_text("hi")]));
    let plane = MemoryBackend::new("mcp-server-rmcp");
    let app = app(&fake, &plane).await;

    // Without a credential, /mcp is refused as /api is.
    let r = reqwest::Client::new()
        .post(app.url("/mcp"))
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    let body: Value = r.json().await.unwrap();
    assert!(body["detail"].is_string(), "{body}");

    // A rebound host name, or a page of another site, is refused before any credential is
    // looked at, as on /api.
    let rpc = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"});
    let r = reqwest::Client::new()
        .post(app.url("/mcp"))
        .bearer_auth(TOKEN)
        .header("host", "evil.example")
        .json(&rpc)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 421);
    let r = reqwest::Client::new()
        .post(app.url("/mcp"))
        .bearer_auth(TOKEN)
        .header("origin", "https://evil.example")
        .header("sec-fetch-site", "cross-site")
        .header("content-type", "text/plain;charset=UTF-8")
        .body(rpc.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);

    let http = sandbox_agents_mcp::guard::http_client(true).unwrap();
    let mut headers = HashMap::new();
    headers.insert(
        http::header::AUTHORIZATION,
        http::HeaderValue::from_str(&format!("Bearer {TOKEN}")).unwrap(),
    );
    let client = sandbox_agents_mcp::remote::connect(
        &http,
        &app.url("/mcp"),
        headers,
        true,
        Default::default(),
    )
    .await
    .expect("rmcp's client connects to /mcp");
    let tools = client.peer().list_all_tools().await.unwrap();
    assert_eq!(tools.len(), 9);
    let listed = client
        .peer()
        .call_tool(rmcp::model::CallToolRequestParams::new("list_agents"))
        .await
        .unwrap();
    let text = serde_json::to_value(&listed.content[0]).unwrap();
    assert!(
        text["text"].as_str().unwrap().contains("\"helper\""),
        "{text}"
    );
    let bad = client
        .peer()
        .call_tool(
            rmcp::model::CallToolRequestParams::new("answer_approval").with_arguments(
                json!({"session_id": "00000000-0000-0000-0000-000000000000", "call_id": "c", "decision": "maybe"})
                    .as_object()
                    .unwrap()
                    .clone(),
            ),
        )
        .await
        .unwrap();
    assert_eq!(bad.is_error, Some(true));
    let status = &bad.structured_content.as_ref().unwrap()["status"];
    assert!(status == 422 || status == 404, "{bad:?}");
}
