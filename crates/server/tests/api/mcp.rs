//! MCP servers an agent uses (issue 39), against real servers made with the Python `mcp`
//! package (tests/mcp/server.py): the current SDK, speaking the 2026-07-28 revision and
//! taking only requests with a bearer token read from a project secret, and the 1.x SDK,
//! speaking only the earlier revisions (`initialize`, `Mcp-Session-Id`). Their tools are
//! offered as `mcp__<server>__<tool>` and called by the control plane; failures are events
//! and tool errors; approvals apply by name; bad definitions are 422s that change nothing.

use sandbox_agents_fake_model::{FakeModel, Rule, Script};
use sandbox_agents_sandbox::memory::MemoryBackend;
use sandbox_agents_testkit::mcp::{McpServer, Sdk};
use sandbox_agents_testkit::runs::{is_pause, start_run, types, wait_for_terminal};
use sandbox_agents_testkit::TestApp;
use serde_json::{json, Value};

const TOKEN: &str = "mcp-token-only-on-the-control-plane-5d2f";

async fn app_on(fake: &FakeModel, plane: &MemoryBackend, allow_private: bool) -> TestApp {
    TestApp::builder()
        .with_model_proxy(&fake.root_url())
        .with_memory_backend(plane)
        .with_config(move |c| c.mcp_allow_private = allow_private)
        .spawn()
        .await
}

async fn secret(app: &TestApp) {
    let (status, body) = app
        .post_json("/api/secrets", json!({"name": "MCP_TOKEN", "value": TOKEN}))
        .await;
    assert_eq!(status, 201, "{body}");
}

fn tool_names(fake: &FakeModel) -> Vec<String> {
    let last = fake.requests().into_iter().last().expect("a model request");
    last.body["tools"]
        .as_array()
        .map(|ts| {
            ts.iter()
                .map(|t| t["function"]["name"].as_str().unwrap().to_owned())
                .collect()
        })
        .unwrap_or_default()
}

fn of_type<'a>(evs: &'a [Value], ty: &str) -> Vec<&'a Value> {
    evs.iter().filter(|e| e["type"] == ty).collect()
}

#[tokio::test]
async fn an_agent_uses_a_current_and_a_legacy_server_in_one_turn_with_credentials_only_on_the_control_plane(
) {
    let current = McpServer::start(Sdk::Current, Some(TOKEN)).await;
    let legacy = McpServer::start(Sdk::Legacy, None).await;
    let fake = FakeModel::start(Script::new([
        Rule::when()
            .last_message_role("tool")
            .reply_text("Both servers answered."),
        Rule::when()
            .reply_tool_call("mcp__tools__add", json!({"a": 2, "b": 3}))
            .tool_call("mcp__old__add", json!({"a": 4, "b": 5}))
            .tool_call("mcp__tools__authorization", json!({})),
    ]));
    let plane = MemoryBackend::new("mcp");
    let app = app_on(&fake, &plane, true).await;
    secret(&app).await;
    let agent = app
        .create_agent(
            "connected",
            json!({"mcp_servers": [
                {"name": "tools", "url": current.url(),
                 "headers": {"Authorization": {"secret": "MCP_TOKEN", "format": "Bearer {value}"}}},
                {"name": "old", "url": legacy.url(), "allowed_tools": ["add"]},
            ]}),
        )
        .await;
    assert_eq!(
        agent["mcp_servers"][0]["headers"]["Authorization"],
        json!({"secret": "MCP_TOKEN", "format": "Bearer {value}"}),
        "the definition names the secret, never its value"
    );
    let id = app.boot_session(json!({"agent_id": "connected"})).await;
    let run = start_run(&app, &id, "add things", Value::Null).await;
    let evs = wait_for_terminal(&app, &id, &run, |_| true).await;
    assert_eq!(
        evs.last().unwrap()["type"],
        "session.status_idle",
        "{:?}",
        types(&evs)
    );

    let uses = of_type(&evs, "agent.tool_use");
    let servers: Vec<&Value> = uses.iter().map(|e| &e["payload"]["mcp_server"]).collect();
    assert_eq!(servers, [&json!("tools"), &json!("old"), &json!("tools")]);
    let results = of_type(&evs, "agent.tool_result");
    let outputs: Vec<(&Value, &Value)> = results
        .iter()
        .map(|e| (&e["payload"]["mcp_server"], &e["payload"]["output"]))
        .collect();
    // A server that echoes its credentials has them masked before the model or the log
    // reads its answer.
    assert_eq!(
        outputs,
        [
            (&json!("tools"), &json!("5")),
            (&json!("old"), &json!("9")),
            (&json!("tools"), &json!("sent: Bearer ***"))
        ]
    );
    let asked = serde_json::to_string(&fake.requests().iter().map(|r| &r.body).collect::<Vec<_>>())
        .unwrap();
    assert!(!asked.contains(TOKEN), "the token never reaches the model");
    assert!(of_type(&evs, "agent.mcp_server_error").is_empty());

    let mut offered = tool_names(&fake);
    offered.retain(|n| n.starts_with("mcp__"));
    offered.sort();
    assert_eq!(
        offered,
        [
            "mcp__old__add",
            "mcp__tools__add",
            "mcp__tools__authorization",
            "mcp__tools__environment",
            "mcp__tools__fail",
            "mcp__tools__grow",
            "mcp__tools__sleep"
        ],
        "allowed_tools narrows the legacy server to add"
    );
    // What a person sees of the servers: the revision each speaks, and every tool.
    let (status, servers) = app.get_json("/api/agents/connected/mcp-servers").await;
    assert_eq!(status, 200, "{servers}");
    assert_eq!(servers[0]["protocol"], "2026-07-28", "{servers}");
    let legacy_protocol = servers[1]["protocol"].as_str().unwrap_or_default();
    assert!(legacy_protocol.starts_with("2025-"), "{servers}");
    let offered: Vec<(&Value, &Value)> = servers[1]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| (&t["offered_as"], &t["offered"]))
        .collect();
    assert!(offered.contains(&(&json!("mcp__old__add"), &json!(true))));
    assert!(offered.contains(&(&json!("mcp__old__fail"), &json!(false))));
    let log = serde_json::to_string(&app.events(&id).await).unwrap();
    assert!(!log.contains(TOKEN), "the token never reaches the log");
}

#[tokio::test]
async fn failures_are_tool_errors_and_events_and_a_required_server_fails_the_turn() {
    let current = McpServer::start(Sdk::Current, None).await;
    // A port nothing listens on.
    let gone = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}/mcp", l.local_addr().unwrap())
    };
    let fake = FakeModel::start(Script::new([
        Rule::when().last_message_role("tool").reply_text("noted"),
        Rule::when().reply_tool_call(
            "mcp__tools__fail",
            json!({"message": "the disk is on fire"}),
        ),
    ]));
    let plane = MemoryBackend::new("mcp-failures");
    let app = app_on(&fake, &plane, true).await;
    app.create_agent(
        "lenient",
        json!({"mcp_servers": [
            {"name": "tools", "url": current.url()},
            {"name": "gone", "url": gone},
        ]}),
    )
    .await;
    let id = app.boot_session(json!({"agent_id": "lenient"})).await;
    let run = start_run(&app, &id, "try", Value::Null).await;
    let evs = wait_for_terminal(&app, &id, &run, |_| true).await;
    assert_eq!(
        evs.last().unwrap()["type"],
        "session.status_idle",
        "{:?}",
        types(&evs)
    );
    let errors = of_type(&evs, "agent.mcp_server_error");
    assert_eq!(errors.len(), 1, "{errors:?}");
    let (_, servers) = app.get_json("/api/agents/lenient/mcp-servers").await;
    assert!(servers[1]["error"].as_str().is_some(), "{servers}");
    assert_eq!(servers[1]["tools"], Value::Null);

    assert_eq!(errors[0]["payload"]["mcp_server"], "gone");
    assert_eq!(errors[0]["payload"]["required"], false);
    let result = of_type(&evs, "agent.tool_result")[0];
    let output = result["payload"]["output"].as_str().unwrap();
    assert!(
        output.starts_with("error:") && output.contains("the disk is on fire"),
        "{output}"
    );

    app.create_agent(
        "strict",
        json!({"mcp_servers": [{"name": "gone", "url": gone, "required": true}]}),
    )
    .await;
    let id = app.boot_session(json!({"agent_id": "strict"})).await;
    let run = start_run(&app, &id, "try", Value::Null).await;
    let evs = wait_for_terminal(&app, &id, &run, |_| true).await;
    let end = evs.last().unwrap();
    assert_eq!(end["type"], "session.status_error", "{:?}", types(&evs));
    assert!(
        end["payload"]["error"]
            .as_str()
            .unwrap_or_default()
            .contains("required MCP server 'gone'"),
        "{end}"
    );
}

#[tokio::test]
async fn an_ask_on_an_mcp_tool_waits_for_a_person() {
    let current = McpServer::start(Sdk::Current, None).await;
    let fake = FakeModel::start(Script::new([
        Rule::when().last_message_role("tool").reply_text("added"),
        Rule::when().reply_tool_call("mcp__tools__add", json!({"a": 20, "b": 22})),
    ]));
    let plane = MemoryBackend::new("mcp-ask");
    let app = app_on(&fake, &plane, true).await;
    app.create_agent(
        "asking",
        json!({
            "mcp_servers": [{"name": "tools", "url": current.url()}],
            "permissions": {"mcp__tools__add": {"mode": "ask"}, "mcp__tools__fail": {"mode": "deny"}},
        }),
    )
    .await;
    let id = app.boot_session(json!({"agent_id": "asking"})).await;
    let run = start_run(&app, &id, "add", Value::Null).await;
    let evs = wait_for_terminal(&app, &id, &run, is_pause).await;
    let asked = of_type(&evs, "agent.tool_use")[0];
    assert_eq!(asked["payload"]["awaiting_approval"], true);
    assert_eq!(asked["payload"]["mcp_server"], "tools");
    assert!(!tool_names(&fake).contains(&"mcp__tools__fail".to_owned()));
    let call_id = asked["payload"]["call_id"].as_str().unwrap();
    let (status, body) = app
        .post_json(
            &format!("/api/sessions/{id}/tool-confirmations"),
            json!({"call_id": call_id, "decision": "allow"}),
        )
        .await;
    assert_eq!(status, 204, "{body}");
    let evs = wait_for_terminal(&app, &id, &run, |e| !is_pause(e)).await;
    let result = of_type(&evs, "agent.tool_result")[0];
    assert_eq!(result["payload"]["output"], "42");
    assert_eq!(result["payload"]["mcp_server"], "tools");
}

#[tokio::test]
async fn bad_mcp_servers_are_422s_naming_the_field() {
    let fake = FakeModel::start(Script::new([Rule::when().reply_text("hi")]));
    let plane = MemoryBackend::new("mcp-bad");
    let app = app_on(&fake, &plane, false).await;
    let create = |servers: Value, extra: Value| {
        let mut body = json!({"slug": "bad", "name": "bad", "mcp_servers": servers});
        for (k, v) in extra.as_object().unwrap() {
            body[k] = v.clone();
        }
        body
    };
    let cases = [
        (
            create(
                json!([{"name": "a", "url": "https://example.com/mcp", "command": ["x"]}]),
                json!({}),
            ),
            json!(["body", "mcp_servers", "0"]),
        ),
        (
            create(
                json!([{"name": "in", "url": "http://127.0.0.1:9/mcp"}]),
                json!({}),
            ),
            json!(["body", "mcp_servers", "0", "url"]),
        ),
        (
            create(
                json!([{"name": "m", "url": "http://169.254.169.254/mcp"}]),
                json!({}),
            ),
            json!(["body", "mcp_servers", "0", "url"]),
        ),
        (
            create(
                json!([{"name": "s", "url": "https://example.com/mcp",
                        "headers": {"Authorization": {"secret": "NOPE", "format": "Bearer {value}"}}}]),
                json!({}),
            ),
            json!(["body", "mcp_servers", "0", "headers"]),
        ),
        (
            create(
                json!([{"name": "s", "url": "https://example.com/mcp"}]),
                json!({"permissions": {"mcp__other__x": {"mode": "ask"}}}),
            ),
            json!(["body", "permissions", "mcp__other__x"]),
        ),
    ];
    for (body, loc) in cases {
        let (status, answer) = app.post_json("/api/agents", body.clone()).await;
        assert_eq!(status, 422, "{body} -> {answer}");
        assert_eq!(answer["detail"][0]["loc"], loc, "{answer}");
    }
    let (_, list) = app.get_json("/api/agents").await;
    assert!(
        !serde_json::to_string(&list).unwrap().contains("\"bad\""),
        "nothing was saved: {list}"
    );

    // A session narrows its agent's servers: a name twice, or one the agent lacks, is a 422
    // that creates nothing; `[]` keeps none, and is kept as it is.
    app.create_agent(
        "narrow",
        json!({"mcp_servers": [{"name": "one", "url": "https://example.com/mcp"}]}),
    )
    .await;
    for (names, at, says) in [
        (json!(["one", "one"]), "1", "named twice"),
        (
            json!(["two"]),
            "0",
            "has no MCP server named 'two' (it has: one)",
        ),
    ] {
        let (status, answer) = app
            .post_json(
                "/api/sessions",
                json!({"agent_id": "narrow", "mcp_servers": names}),
            )
            .await;
        assert_eq!(status, 422, "{answer}");
        assert_eq!(
            answer["detail"][0]["loc"],
            json!(["body", "mcp_servers", at])
        );
        assert!(
            answer["detail"][0]["msg"].as_str().unwrap().contains(says),
            "{answer}"
        );
    }
    let (_, sessions) = app.get_json("/api/sessions").await;
    assert_eq!(sessions, json!([]), "nothing was created");
    let (status, none) = app
        .post_json(
            "/api/sessions",
            json!({"agent_id": "narrow", "mcp_servers": []}),
        )
        .await;
    assert_eq!(status, 202, "{none}");
    assert_eq!(none["mcp_servers"], json!([]));
}

/// A server spoken to over stdio (as one run in a sandbox is, there through the daemon's exec
/// stream: tests/api/mcp_stdio.rs) speaks the current revision when it can and falls back to
/// `initialize` when it cannot: the 1.x SDK over stdio knows no `server/discover`.
#[tokio::test]
async fn stdio_servers_of_both_sdks_are_spoken_to() {
    use sandbox_agents_mcp::{sandboxed, Stdio};
    use std::sync::Arc;
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/mcp/server.py");
    for (sdk, revision) in [(Sdk::Current, "2026-07-28"), (Sdk::Legacy, "2025-")] {
        let mut child = tokio::process::Command::new(sandbox_agents_testkit::mcp::python(sdk))
            .arg(&script)
            .arg("--stdio")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let stdio = Stdio {
            read: Box::new(child.stdout.take().unwrap()),
            write: Box::new(child.stdin.take().unwrap()),
            stderr: Arc::new(String::new),
        };
        let service = sandboxed::connect(stdio, Default::default())
            .await
            .unwrap_or_else(|e| panic!("{sdk:?}: {e}"));
        let protocol = service
            .peer()
            .peer_info()
            .unwrap()
            .protocol_version
            .to_string();
        assert!(protocol.starts_with(revision), "{sdk:?} spoke {protocol}");
        let tools = service.peer().list_all_tools().await.unwrap();
        assert!(tools.iter().any(|t| t.name == "add"), "{sdk:?}: {tools:?}");
        let _ = service.cancel().await;
    }
}

/// Commands as children of the test, where the sandbox's daemon starts them in production.
struct Children;

#[async_trait::async_trait]
impl sandbox_agents_mcp::SandboxStdio for Children {
    async fn spawn(
        &self,
        _: sandbox_agents_domain::ProjectId,
        _: sandbox_agents_domain::SessionId,
        command: &[String],
        env: &std::collections::BTreeMap<String, String>,
    ) -> Result<sandbox_agents_mcp::Stdio, String> {
        let mut child = tokio::process::Command::new(&command[0])
            .args(&command[1..])
            .envs(env)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .map_err(|e| e.to_string())?;
        let (read, write) = (child.stdout.take().unwrap(), child.stdin.take().unwrap());
        // The child ends when its stdin closes (the connection dropped); reaped meanwhile.
        tokio::spawn(async move { child.wait().await });
        Ok(sandbox_agents_mcp::Stdio {
            read: Box::new(read),
            write: Box::new(write),
            stderr: std::sync::Arc::new(String::new),
        })
    }
}

struct NoSecrets;

#[async_trait::async_trait]
impl sandbox_agents_mcp::SecretSource for NoSecrets {
    async fn values(
        &self,
        _: sandbox_agents_domain::ProjectId,
        _: &[String],
    ) -> Result<std::collections::BTreeMap<String, String>, String> {
        Ok(Default::default())
    }
}

/// A server that says its tool list changed is listed again at once, not after the list's
/// 5-minute age bound: the 1.x SDK sends `notifications/tools/list_changed` to its session.
#[tokio::test]
async fn a_tool_list_changed_notification_refreshes_the_list() {
    use sandbox_agents_domain::{ProjectId, SessionId};
    use std::sync::Arc;
    let hub =
        sandbox_agents_mcp::McpHub::new(true, 32 * 1024, Arc::new(NoSecrets), Arc::new(Children))
            .unwrap();
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/mcp/server.py");
    let server: sandbox_agents_domain::mcp::McpServer = serde_json::from_value(json!({
        "name": "local",
        "command": [sandbox_agents_testkit::mcp::python(Sdk::Legacy), script, "--stdio"],
    }))
    .unwrap();
    let (project, session) = (
        ProjectId(uuid::Uuid::new_v4()),
        SessionId(uuid::Uuid::new_v4()),
    );
    let names = async || -> Vec<String> {
        let listing = hub
            .list(project, session, std::slice::from_ref(&server))
            .await;
        assert!(listing.failures.is_empty(), "{:?}", listing.failures);
        listing.tools.into_iter().map(|t| t.tool).collect()
    };
    assert!(!names().await.contains(&"sprout".to_owned()));
    let answer = hub
        .call(project, session, &server, "grow", r#"{"name": "sprout"}"#)
        .await
        .unwrap();
    assert_eq!(answer.text, "added sprout");
    sandbox_agents_testkit::eventually(
        "the new tool to be listed",
        std::time::Duration::from_secs(10),
        async || {
            let now = names().await;
            if now.contains(&"sprout".to_owned()) {
                Ok(())
            } else {
                Err(format!("{now:?}"))
            }
        },
    )
    .await;
}
