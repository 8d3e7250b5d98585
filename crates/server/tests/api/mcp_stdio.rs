//! MCP servers run inside the sandbox (issue 39), on Docker: the Python `mcp` package is
//! installed by an environment's pip packages and tests/mcp/server.py is a file of the
//! agent's manifest, started with `--stdio` and spoken to through the sandbox daemon's exec
//! streams. One turn uses it beside a remote server whose token stays on the control plane;
//! a server that cannot start says why (its stderr); a session narrows its agent's servers.

use sandbox_agents_fake_model::{FakeModel, Rule, Script};
use sandbox_agents_testkit::mcp::{McpServer, Sdk};
use sandbox_agents_testkit::runs::{start_run, types, wait_for_terminal};
use sandbox_agents_testkit::{eventually, TestApp};
use serde_json::{json, Value};
use std::time::Duration;

const TOKEN: &str = "mcp-token-for-the-remote-server-only-8c1e";
/// A secret bound to the session: the sandboxed server sees it, the model and the log never.
const BOUND: &str = "bound-secret-value-seen-only-in-the-sandbox-41d7";
/// How long the environment's image build may take (pip over the network).
const BUILD: Duration = Duration::from_secs(300);

fn of_type<'a>(evs: &'a [Value], ty: &str) -> Vec<&'a Value> {
    evs.iter().filter(|e| e["type"] == ty).collect()
}

fn offered(fake: &FakeModel) -> Vec<String> {
    let last = fake.requests().into_iter().last().expect("a model request");
    let mut names: Vec<String> = last.body["tools"]
        .as_array()
        .map(|ts| {
            ts.iter()
                .map(|t| t["function"]["name"].as_str().unwrap().to_owned())
                .filter(|n| n.starts_with("mcp__"))
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

#[tokio::test]
async fn an_agent_uses_a_remote_and_a_sandboxed_server_in_one_turn() {
    let remote = McpServer::start(Sdk::Current, Some(TOKEN)).await;
    let fake = FakeModel::start(Script::new([
        Rule::when()
            .last_message_role("tool")
            .reply_text("Both servers answered."),
        Rule::when()
            .reply_tool_call("mcp__remote__add", json!({"a": 2, "b": 3}))
            .tool_call("mcp__local__environment", json!({"name": "GREETING"}))
            .tool_call("mcp__local__environment", json!({"name": "MCP_TOKEN"}))
            .tool_call("mcp__local__add", json!({"a": 40, "b": 2}))
            .tool_call("mcp__local__environment", json!({"name": "BOUND"})),
    ]));
    // This network inspects TLS: pip in the image build trusts the host's CAs.
    let app = TestApp::builder()
        .with_model_proxy(&fake.root_url())
        .with_config(|c| {
            c.mcp_allow_private = true;
            c.extra_ca_certs = Some("/etc/ssl/certs/ca-certificates.crt".into());
        })
        .spawn()
        .await;
    for (name, value) in [("MCP_TOKEN", TOKEN), ("BOUND_SECRET", BOUND)] {
        let (status, body) = app
            .post_json("/api/secrets", json!({"name": name, "value": value}))
            .await;
        assert_eq!(status, 201, "{body}");
    }
    let (status, env) = app
        .post_json(
            "/api/environments",
            json!({"name": "mcp-sdk", "config": {"packages": {"pip": ["mcp==2.3.0"]}}}),
        )
        .await;
    assert_eq!(status, 201, "{env}");
    let server_py = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/mcp/server.py"),
    )
    .unwrap();
    app.create_agent(
        "both",
        json!({
            "environment_id": "mcp-sdk",
            "secret_bindings": [{"secret": "BOUND_SECRET", "env": "BOUND"}],
            "manifest": {"entries": {"server.py": {"kind": "file", "content": server_py}}},
            "mcp_servers": [
                {"name": "remote", "url": remote.url(),
                 "headers": {"Authorization": {"secret": "MCP_TOKEN", "format": "Bearer {value}"}}},
                {"name": "local", "command": ["python3", "server.py", "--stdio"],
                 "env": {"GREETING": "hello from the agent"}},
                {"name": "broken", "command": ["python3", "-c",
                 "import sys; sys.stderr.write('this server cannot start\\n'); sys.exit(3)"]},
            ],
        }),
    )
    .await;
    eventually("the environment's image", BUILD, async || {
        let (_, e) = app.get_json("/api/environments/mcp-sdk").await;
        match e["build"]["status"].as_str() {
            Some("ready") => Ok(()),
            Some("building") => Err(e.to_string()),
            _ => panic!("the build failed: {e}"),
        }
    })
    .await;

    let id = app.boot_session(json!({"agent_id": "both"})).await;
    let run = start_run(&app, &id, "use both", Value::Null).await;
    let evs = wait_for_terminal(&app, &id, &run, |_| true).await;
    assert_eq!(
        evs.last().unwrap()["type"],
        "session.status_idle",
        "a server that cannot start fails no turn unless required: {:?}",
        types(&evs)
    );
    let results: Vec<(&Value, &Value)> = of_type(&evs, "agent.tool_result")
        .iter()
        .map(|e| (&e["payload"]["mcp_server"], &e["payload"]["output"]))
        .collect();
    assert_eq!(
        results,
        [
            (&json!("remote"), &json!("5")),
            (
                &json!("local"),
                &json!("cwd=/workspace GREETING=hello from the agent")
            ),
            (&json!("local"), &json!("cwd=/workspace MCP_TOKEN=")),
            (&json!("local"), &json!("42")),
            (&json!("local"), &json!("cwd=/workspace BOUND=***")),
        ],
        "the sandboxed server runs in the workspace with its env, the remote server's token \
         never enters the sandbox, and a secret bound to the session reaches the server but \
         not the model"
    );
    let errors = of_type(&evs, "agent.mcp_server_error");
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(errors[0]["payload"]["mcp_server"], "broken");
    let said = errors[0]["payload"]["error"].as_str().unwrap();
    assert!(
        said.contains("this server cannot start") && said.contains("exited with code 3"),
        "the error says what the server wrote to stderr, and how it ended: {said}"
    );
    assert_eq!(
        offered(&fake),
        [
            "mcp__local__add",
            "mcp__local__environment",
            "mcp__local__fail",
            "mcp__local__grow",
            "mcp__local__sleep",
            "mcp__remote__add",
            "mcp__remote__authorization",
            "mcp__remote__environment",
            "mcp__remote__fail",
            "mcp__remote__grow",
            "mcp__remote__sleep",
        ]
    );
    let log = serde_json::to_string(&app.events(&id).await).unwrap();
    assert!(!log.contains(TOKEN), "the token never reaches the log");
    assert!(!log.contains(BOUND), "nor the bound secret");

    // A session narrows its agent's servers by name; a name the agent lacks is a 422 that
    // creates nothing.
    let (status, body) = app
        .post_json(
            "/api/sessions",
            json!({"agent_id": "both", "mcp_servers": ["local", "nope"]}),
        )
        .await;
    assert_eq!(status, 422, "{body}");
    assert_eq!(
        body["detail"][0]["loc"],
        json!(["body", "mcp_servers", "1"])
    );
    let (_, listed) = app.get_json("/api/sessions").await;
    assert_eq!(listed.as_array().map(Vec::len), Some(1), "{listed}");

    let narrowed = app
        .boot_session(json!({"agent_id": "both", "mcp_servers": ["local"]}))
        .await;
    let (_, session) = app.get_json(&format!("/api/sessions/{narrowed}")).await;
    assert_eq!(session["mcp_servers"], json!(["local"]));
    let run = start_run(&app, &narrowed, "only the local one", Value::Null).await;
    let evs = wait_for_terminal(&app, &narrowed, &run, |_| true).await;
    assert_eq!(
        evs.last().unwrap()["type"],
        "session.status_idle",
        "{:?}",
        types(&evs)
    );
    assert!(
        of_type(&evs, "agent.mcp_server_error").is_empty(),
        "the broken server is not this session's"
    );
    assert_eq!(
        offered(&fake),
        [
            "mcp__local__add",
            "mcp__local__environment",
            "mcp__local__fail",
            "mcp__local__grow",
            "mcp__local__sleep",
        ]
    );
}
