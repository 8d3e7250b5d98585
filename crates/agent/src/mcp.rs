//! MCP tools in the loop (issue 39): an agent's `mcp_servers` are listed when its speaker is
//! seated (the connections and their tool lists are kept per session by the process's
//! [`McpHub`]), offered as `mcp__<server>__<tool>`, and called from the control plane.
//!
//! Rules:
//! * a server that cannot be listed becomes an `agent.mcp_server_error` event and its tools
//!   are left out of the step; a `required` one fails the turn instead;
//! * a call that fails on the way (unreachable, timed out) is an `agent.mcp_server_error`
//!   event and a tool error; a result the server marks as an error is a tool error;
//! * a tool the agent's permissions deny is never offered (by its name, or by `mcp__<server>`
//!   for all of a server's); one they `ask` about waits for a person like any other call;
//! * a name already taken (a sandbox or client tool) wins over an MCP tool's.

use crate::finish::Outcome;
use crate::stop::Stop;
use crate::Runs;
use async_trait::async_trait;
use sandbox_agents_credentials::Credentials;
use sandbox_agents_domain::event::{EventType, NewEvent};
use sandbox_agents_domain::mcp::{tool_name, McpServer, McpServerStatus, McpToolStatus};
use sandbox_agents_domain::tools::is_tool_name;
use sandbox_agents_domain::{ProjectId, RunId, SessionId};
use sandbox_agents_errors::ServiceError;
use sandbox_agents_mcp::{McpHub, SandboxStdio, SecretSource, Stdio};
use sandbox_agents_model::{ToolCall, ToolSpec};
use sandbox_agents_sessions::Sessions;
use serde_json::json;
use std::collections::BTreeMap;
use std::sync::Arc;

/// An MCP tool a speaker is offered.
#[derive(Clone, Debug)]
pub(crate) struct McpOffer {
    /// The name the model calls.
    pub name: String,
    pub server: McpServer,
    /// The tool's own name on the server.
    pub tool: String,
}

/// The project's secrets, read for a server's headers.
struct ProjectSecrets(Credentials);

#[async_trait]
impl SecretSource for ProjectSecrets {
    async fn values(
        &self,
        project: ProjectId,
        names: &[String],
    ) -> Result<BTreeMap<String, String>, String> {
        self.0
            .values_by_name(project, names)
            .await
            .map_err(|e| e.to_string())
    }
}

/// Servers run in sessions' sandboxes, over the sandbox daemon's exec streams.
struct SessionSandboxes(Sessions);

#[async_trait]
impl SandboxStdio for SessionSandboxes {
    async fn spawn(
        &self,
        project: ProjectId,
        session: SessionId,
        command: &[String],
        env: &BTreeMap<String, String>,
    ) -> Result<Stdio, String> {
        let started = self
            .0
            .open_stdio(project, session, command, env)
            .await
            .map_err(|e| e.to_string())?;
        let tail = started.stderr;
        Ok(Stdio {
            read: started.stdout,
            write: started.stdin,
            stderr: Arc::new(move || tail.text()),
        })
    }
}

/// The hub of a process whose operator set `allow_private` (`--mcp-allow-private`).
pub fn hub(sessions: Sessions, allow_private: bool) -> Result<Arc<McpHub>, String> {
    McpHub::new(
        allow_private,
        crate::tools::MAX_TOOL_OUTPUT,
        Arc::new(ProjectSecrets(sessions.credentials().clone())),
        Arc::new(SessionSandboxes(sessions)),
    )
    .map(Arc::new)
}

impl Runs {
    /// Gives runs the process's MCP hub (once; later calls are ignored). Without one, runs
    /// make a hub that allows no private address.
    pub fn attach_mcp(&self, hub: Arc<McpHub>) {
        let _ = self.inner.mcp.set(hub);
    }

    /// Checks MCP servers' URLs against the address rules (`--mcp-allow-private`): the 422
    /// of a save. The same rules hold again at every connection.
    pub fn check_mcp_urls(&self, servers: &[McpServer]) -> Result<(), ServiceError> {
        let allow = self.mcp().allow_private();
        for (i, s) in servers.iter().enumerate() {
            if let Some(url) = &s.url {
                if let Err(why) = sandbox_agents_mcp::guard::check_url(url, allow) {
                    return Err(ServiceError::field(
                        &["mcp_servers", &i.to_string(), "url"],
                        why,
                        serde_json::Value::from(url.as_str()),
                    ));
                }
            }
        }
        Ok(())
    }

    /// What the control plane finds of `servers` now: each remote one connected to and
    /// listed (together), each sandboxed one as declared.
    pub async fn probe_mcp(
        &self,
        project: ProjectId,
        servers: &[McpServer],
    ) -> Vec<McpServerStatus> {
        futures::future::join_all(servers.iter().map(|s| async move {
            let mut status = McpServerStatus {
                name: s.name.clone(),
                kind: if s.url.is_some() { "remote" } else { "sandbox" }.into(),
                url: s.url.clone(),
                required: s.required,
                protocol: None,
                tools: None,
                error: None,
            };
            if s.url.is_none() {
                return status;
            }
            match self.mcp().probe(project, s).await {
                Ok((protocol, tools)) => {
                    status.protocol = Some(protocol);
                    status.tools = Some(
                        tools
                            .into_iter()
                            .map(|t| McpToolStatus {
                                offered_as: tool_name(&s.name, &t.tool),
                                offered: s.allows(&t.tool),
                                name: t.tool,
                                description: t.description,
                            })
                            .collect(),
                    );
                }
                Err(e) => status.error = Some(e),
            }
            status
        }))
        .await
    }

    pub(crate) fn mcp(&self) -> &Arc<McpHub> {
        self.inner.mcp.get_or_init(|| {
            hub(self.inner.sessions.clone(), false).expect("the MCP HTTP client builds")
        })
    }

    /// The MCP tools `servers` offer a speaker of session `id` (those `taken` names or the
    /// permissions' `denied` leave out), and their specs. Unreachable servers are evented;
    /// a required one stops the turn.
    pub(crate) async fn mcp_offers(
        &self,
        project: ProjectId,
        id: SessionId,
        run: RunId,
        servers: &[McpServer],
        taken: &[ToolSpec],
        denied: impl Fn(&str) -> bool,
    ) -> Result<(Vec<McpOffer>, Vec<ToolSpec>), Stop> {
        if servers.is_empty() {
            return Ok((Vec::new(), Vec::new()));
        }
        let listing = self.mcp().list(project, id, servers).await;
        if !listing.failures.is_empty() {
            let batch: Vec<NewEvent> = listing
                .failures
                .iter()
                .map(|f| {
                    NewEvent::new(
                        EventType::AgentMcpServerError,
                        Some(run),
                        json!({"mcp_server": f.server, "error": f.error, "required": f.required}),
                    )
                })
                .collect();
            self.append_step(id, run, &batch).await?;
            if let Some(f) = listing.failures.iter().find(|f| f.required) {
                return Err(Stop::Outcome(Outcome::Failed(format!(
                    "the required MCP server '{}' is unavailable: {}",
                    f.server, f.error
                ))));
            }
        }
        let mut offers: Vec<McpOffer> = Vec::new();
        let mut specs = Vec::new();
        for t in listing.tools {
            let name = tool_name(&t.server, &t.tool);
            let free =
                !taken.iter().any(|s| s.name == name) && !offers.iter().any(|o| o.name == name);
            if !is_tool_name(&name) || !free || denied(&name) {
                if !is_tool_name(&name) || !free {
                    tracing::warn!(tool = %name, "an MCP tool's name is too long, not a name models take, or taken; it is not offered");
                }
                continue;
            }
            let Some(server) = servers.iter().find(|s| s.name == t.server) else {
                continue;
            };
            specs.push(ToolSpec {
                name: name.clone(),
                description: t.description,
                parameters: t.parameters,
            });
            offers.push(McpOffer {
                name,
                server: server.clone(),
                tool: t.tool,
            });
        }
        Ok((offers, specs))
    }

    /// Runs one MCP call: the model's answer (a failure is a tool error), and the error to
    /// event when the server could not be reached.
    pub(crate) async fn mcp_call(
        &self,
        project: ProjectId,
        id: SessionId,
        offer: &McpOffer,
        c: &ToolCall,
    ) -> (String, Option<String>) {
        let started = std::time::Instant::now();
        let answer = self
            .mcp()
            .call(project, id, &offer.server, &offer.tool, &c.arguments)
            .await;
        metrics::histogram!("sandbox_agents_mcp_call_duration_seconds", "outcome" => match &answer {
            Ok(a) if a.is_error => "tool_error",
            Ok(_) => "answered",
            Err(_) => "failed",
        })
        .record(started.elapsed());
        // A server in the sandbox sees the session's bound secrets, and a remote one may
        // echo what it was sent: their values never reach the model or the log.
        let secrets = self
            .inner
            .sessions
            .credentials()
            .secret_values(project, id)
            .await;
        let mask = |t: String| sandbox_agents_credentials::secrets::mask(t, &secrets);
        match answer {
            Ok(a) if a.is_error => (mask(format!("error: {}", a.text)), None),
            Ok(a) => (mask(a.text), None),
            Err(error) => {
                let error = mask(error);
                (
                    format!(
                        "error: the MCP server '{}' could not be reached: {error}",
                        offer.server.name
                    ),
                    Some(error),
                )
            }
        }
    }
}
