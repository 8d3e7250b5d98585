//! MCP calls (issue 39): what the control plane adds to a call of a remote MCP server's tool
//! beyond the server's own time. "Ours" is `McpHub::call`, as a run's tool round makes it:
//! the session's cached connection looked up, the arguments parsed, the call with its
//! timeout, the result turned into the model's bounded text. "Raw" is the same `tools/call`
//! through `rmcp`'s client on a connection of its own, no hub. Both call `add` of the same
//! real server (tests/mcp/server.py, the Python SDK) over loopback. The events a run writes
//! around a call are those of every tool call (the runs part measures them).

use super::{interleaved, log, Args};
use crate::report::{Part, Row};
use async_trait::async_trait;
use sandbox_agents_domain::mcp::McpServer;
use sandbox_agents_domain::{ProjectId, SessionId};
use sandbox_agents_mcp::{McpHub, SecretSource};
use sandbox_agents_testkit::mcp::{McpServer as PythonServer, Sdk};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

struct NoSecrets;

#[async_trait]
impl SecretSource for NoSecrets {
    async fn values(
        &self,
        _project: ProjectId,
        _names: &[String],
    ) -> Result<BTreeMap<String, String>, String> {
        Ok(BTreeMap::new())
    }
}

pub async fn part(args: &Args) -> anyhow::Result<Part> {
    let python = PythonServer::start(Sdk::Current, None).await;
    let server: McpServer = serde_json::from_value(serde_json::json!({
        "name": "calc", "url": python.url(),
    }))?;
    let hub = McpHub::new(
        true,
        32 * 1024,
        Arc::new(NoSecrets),
        Arc::new(sandbox_agents_mcp::NoSandboxes),
    )
    .map_err(anyhow::Error::msg)?;
    let http = sandbox_agents_mcp::guard::http_client(true).map_err(anyhow::Error::msg)?;
    let raw = sandbox_agents_mcp::remote::connect(
        &http,
        python.url(),
        Default::default(),
        true,
        Default::default(),
    )
    .await
    .map_err(anyhow::Error::msg)?;
    let (project, session) = (
        ProjectId(uuid::Uuid::new_v4()),
        SessionId(uuid::Uuid::new_v4()),
    );
    log(format!(
        "MCP calls: {} + {} iterations × 2 variants",
        args.warmup, args.iterations
    ));
    let mut rows = vec![
        Row::new(
            "ours: an MCP tool call from a run",
            "McpHub::call: the session's connection, the arguments parsed, the call, the result as the model's text",
        ),
        Row::new(
            "raw: rmcp's tools/call",
            "the same call of the same server on a connection of its own",
        ),
    ];
    let (hub, server, raw) = (&hub, &server, &raw);
    interleaved(args, &mut rows, |v| async move {
        let t0 = Instant::now();
        match v {
            0 => {
                let a = hub
                    .call(project, session, server, "add", r#"{"a": 2, "b": 3}"#)
                    .await
                    .map_err(anyhow::Error::msg)?;
                anyhow::ensure!(a.text == "5", "the hub's answer: {}", a.text);
            }
            _ => {
                let args = serde_json::json!({"a": 2, "b": 3});
                let r = raw
                    .peer()
                    .call_tool(
                        rmcp::model::CallToolRequestParams::new("add")
                            .with_arguments(args.as_object().cloned().unwrap_or_default()),
                    )
                    .await?;
                anyhow::ensure!(!r.content.is_empty(), "an empty answer");
            }
        }
        Ok(t0.elapsed())
    })
    .await?;
    let p50 = |r: &Row| crate::report::stats(&r.samples).p50;
    let extra = p50(&rows[0]) - p50(&rows[1]);
    Ok(Part {
        title: "MCP calls",
        notes: format!(
            "What the control plane adds to an MCP tool call beyond the server's own time (p50): **{extra:+.3} ms** ({:.3} ms against {:.3} ms raw; the aim: under 2 ms).\n",
            p50(&rows[0]),
            p50(&rows[1])
        ),
        rows,
    })
}
