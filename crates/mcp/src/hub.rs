//! The connections of this process to the MCP servers of running sessions, and their tool
//! lists.
//!
//! Invariants:
//! * a connection belongs to one session and one server definition (keyed by the session and
//!   a fingerprint of the server's JSON), so an edit, a version pin or a subagent with a
//!   server of the same name gets a connection of its own;
//! * a tool list is listed once per connection and kept until the server says it changed
//!   (`notifications/tools/list_changed`) or [`TOOLS_TTL`] passes (servers of the current
//!   revision send that notification only to subscribers);
//! * a call that fails on the transport drops the connection, so the next one reconnects;
//!   a connect that fails is answered from memory for [`RETRY_AFTER`];
//! * header values are read from secrets only when connecting, and never logged or evented:
//!   what a server answers or fails with is masked with the secret values its headers carry
//!   (a server may echo what it was sent), before anyone reads it;
//! * no lock is held across a network call but the connection's own slot (one connect per
//!   server at a time).

use crate::content;
use crate::remote::{self, Service};
use crate::sandboxed::{self, SandboxStdio};
use async_trait::async_trait;
use rmcp::model::CallToolRequestParams;
use sandbox_agents_domain::mcp::{McpHeader, McpServer};
use sandbox_agents_domain::secret::mask as hide_secrets;
use sandbox_agents_domain::{ProjectId, SessionId};
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a listed set of tools is trusted without a change notification.
pub const TOOLS_TTL: Duration = Duration::from_secs(300);
/// A connection unused this long is closed.
pub const IDLE: Duration = Duration::from_secs(15 * 60);
/// Most tools taken from one server.
pub const MAX_TOOLS: usize = 128;
/// Most tools read from one server's list, and most pages read for it: a server (a sandboxed
/// one is untrusted) that keeps handing out cursors or tools is cut off there instead of
/// growing this process's memory (each page is bounded by the transport's message limit).
pub const MAX_LISTED: usize = 1024;
const MAX_TOOL_PAGES: usize = 8;

/// Reads the project's secrets a server's headers name.
#[async_trait]
pub trait SecretSource: Send + Sync {
    /// The values of these secrets of the project; a missing one is an error naming it.
    async fn values(
        &self,
        project: ProjectId,
        names: &[String],
    ) -> Result<BTreeMap<String, String>, String>;
}

/// A tool of an MCP server, as the model is offered it.
#[derive(Clone, Debug, PartialEq)]
pub struct McpTool {
    /// The server's name in the agent.
    pub server: String,
    /// The tool's own name on the server.
    pub tool: String,
    pub description: String,
    /// Its input's JSON Schema.
    pub parameters: Value,
}

/// A server that could not be listed.
#[derive(Clone, Debug, PartialEq)]
pub struct Failure {
    pub server: String,
    pub required: bool,
    pub error: String,
}

/// What listing an agent's servers found.
#[derive(Clone, Debug, Default)]
pub struct Listing {
    pub tools: Vec<McpTool>,
    pub failures: Vec<Failure>,
}

/// A tool's answer for the model.
#[derive(Clone, Debug, PartialEq)]
pub struct Answer {
    pub text: String,
    /// The server said the call failed (the text says how).
    pub is_error: bool,
}

type Key = (SessionId, u64);

struct Conn {
    service: Service,
    stale: Arc<AtomicBool>,
    tools: Mutex<Option<(Instant, Vec<rmcp::model::Tool>)>>,
    protocol: String,
    /// The secret values its headers carry: masked in whatever it answers.
    masks: Vec<String>,
}

#[derive(Default)]
struct Slot {
    conn: tokio::sync::Mutex<Option<Arc<Conn>>>,
    used: Mutex<Option<Instant>>,
    /// The last failed connect, answered again for [`RETRY_AFTER`] instead of trying anew:
    /// a server that drops packets would otherwise cost every turn its connect timeout.
    failed: Mutex<Option<(Instant, String)>>,
}

/// How long a failed connect is answered from memory.
pub const RETRY_AFTER: Duration = Duration::from_secs(30);

/// The process's MCP connections.
pub struct McpHub {
    allow_private: bool,
    max_output: usize,
    http: reqwest13::Client,
    secrets: Arc<dyn SecretSource>,
    sandboxes: Arc<dyn SandboxStdio>,
    slots: Mutex<HashMap<Key, Arc<Slot>>>,
}

impl McpHub {
    /// `max_output`: the most bytes of a tool's result the model is given; `sandboxes` starts
    /// the servers run in sandboxes.
    pub fn new(
        allow_private: bool,
        max_output: usize,
        secrets: Arc<dyn SecretSource>,
        sandboxes: Arc<dyn SandboxStdio>,
    ) -> Result<Self, String> {
        Ok(Self {
            allow_private,
            max_output,
            http: crate::guard::http_client(allow_private)?,
            secrets,
            sandboxes,
            slots: Mutex::new(HashMap::new()),
        })
    }

    /// Whether private addresses are allowed (`--mcp-allow-private`).
    pub fn allow_private(&self) -> bool {
        self.allow_private
    }

    /// Lists the tools of `servers` for a turn of `session` (each server's `allowed_tools`
    /// applied, at most [`MAX_TOOLS`] each), those run in the sandbox started first when
    /// the session has none running.
    pub async fn list(
        &self,
        project: ProjectId,
        session: SessionId,
        servers: &[McpServer],
    ) -> Listing {
        self.sweep();
        let lists = futures::future::join_all(
            servers
                .iter()
                .map(|s| async move { (s, self.tools_of(project, session, s).await) }),
        )
        .await;
        let mut out = Listing::default();
        for (s, r) in lists {
            match r {
                Ok(tools) => out.tools.extend(
                    tools
                        .into_iter()
                        .filter(|t| s.allows(&t.name))
                        .take(MAX_TOOLS)
                        .map(|t| McpTool {
                            server: s.name.clone(),
                            tool: t.name.to_string(),
                            description: t.description.as_deref().unwrap_or_default().to_owned(),
                            parameters: Value::Object((*t.input_schema).clone()),
                        }),
                ),
                Err(error) => out.failures.push(Failure {
                    server: s.name.clone(),
                    required: s.required,
                    error,
                }),
            }
        }
        out
    }

    /// Calls `tool` of `server` with JSON-encoded `arguments`, within the server's timeout.
    /// `Err` when the server could not be reached or did not answer in time.
    pub async fn call(
        &self,
        project: ProjectId,
        session: SessionId,
        server: &McpServer,
        tool: &str,
        arguments: &str,
    ) -> Result<Answer, String> {
        let arguments = match serde_json::from_str::<Value>(if arguments.trim().is_empty() {
            "{}"
        } else {
            arguments
        }) {
            Ok(Value::Object(m)) => m,
            Ok(_) => return Err("the arguments must be a JSON object".into()),
            Err(e) => return Err(format!("the arguments are not valid JSON: {e}")),
        };
        let (slot, conn) = self.connection(project, session, server).await?;
        let params = CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments);
        let timeout = server.timeout();
        let hide = |text: String| hide_secrets(text, &conn.masks);
        match tokio::time::timeout(timeout, conn.service.peer().call_tool(params)).await {
            Ok(Ok(result)) => {
                let (text, is_error) = content::to_text(&result, self.max_output);
                Ok(Answer {
                    text: hide(text),
                    is_error,
                })
            }
            Ok(Err(rmcp::ServiceError::McpError(e))) => Ok(Answer {
                text: hide(format!("the server refused the call: {}", e.message)),
                is_error: true,
            }),
            Ok(Err(e)) => {
                drop_conn(&slot, &conn).await;
                Err(hide(format!("the call failed: {e}")))
            }
            Err(_) => Err(format!(
                "the server did not answer within {} s",
                timeout.as_secs()
            )),
        }
    }

    /// Connects to `server` now (a connection of its own, closed after), for a person
    /// looking at the agent: the protocol it speaks and its tools, all of them.
    pub async fn probe(
        &self,
        project: ProjectId,
        server: &McpServer,
    ) -> Result<(String, Vec<McpTool>), String> {
        let url = server
            .url
            .as_deref()
            .ok_or("the server runs in the sandbox")?;
        let (headers, masks) = self.headers(project, server).await?;
        let hide = |text: String| hide_secrets(text, &masks);
        let service = remote::connect(
            &self.http,
            url,
            headers,
            self.allow_private,
            Arc::new(AtomicBool::new(false)),
        )
        .await
        .map_err(hide)?;
        let protocol = service
            .peer()
            .peer_info()
            .map(|i| i.protocol_version.to_string())
            .unwrap_or_default();
        let listed =
            tokio::time::timeout(server.timeout(), list_tools_bounded(service.peer())).await;
        let _ = service.cancel().await;
        let tools = match listed {
            Ok(Ok(t)) => t,
            Ok(Err(e)) => return Err(hide(format!("listing its tools failed: {e}"))),
            Err(_) => {
                return Err(format!(
                    "listing its tools took more than {} s",
                    server.timeout().as_secs()
                ))
            }
        };
        Ok((
            protocol,
            tools
                .into_iter()
                .map(|t| McpTool {
                    server: server.name.clone(),
                    tool: t.name.to_string(),
                    description: t.description.as_deref().unwrap_or_default().to_owned(),
                    parameters: Value::Object((*t.input_schema).clone()),
                })
                .collect(),
        ))
    }

    /// The protocol revision the connection to `server` speaks, when there is one.
    pub async fn protocol(&self, session: SessionId, server: &McpServer) -> Option<String> {
        let slot = self
            .slots
            .lock()
            .unwrap()
            .get(&key(session, server))
            .cloned()?;
        let conn = slot.conn.lock().await;
        conn.as_ref().map(|c| c.protocol.clone())
    }

    /// Closes the session's connections (its sandbox is gone, or it was deleted).
    pub fn forget(&self, session: SessionId) {
        self.slots.lock().unwrap().retain(|(s, _), _| *s != session);
    }

    /// Closes connections unused for [`IDLE`].
    fn sweep(&self) {
        self.slots
            .lock()
            .unwrap()
            .retain(|_, slot| slot.used.lock().unwrap().is_none_or(|t| t.elapsed() < IDLE));
    }

    async fn tools_of(
        &self,
        project: ProjectId,
        session: SessionId,
        server: &McpServer,
    ) -> Result<Vec<rmcp::model::Tool>, String> {
        let (slot, conn) = self.connection(project, session, server).await?;
        {
            let cached = conn.tools.lock().unwrap();
            if let Some((at, tools)) = cached.as_ref() {
                if at.elapsed() < TOOLS_TTL && !conn.stale.load(Ordering::Acquire) {
                    return Ok(tools.clone());
                }
            }
        }
        conn.stale.store(false, Ordering::Release);
        match tokio::time::timeout(server.timeout(), list_tools_bounded(conn.service.peer())).await
        {
            Ok(Ok(tools)) => {
                *conn.tools.lock().unwrap() = Some((Instant::now(), tools.clone()));
                Ok(tools)
            }
            Ok(Err(e)) => {
                drop_conn(&slot, &conn).await;
                Err(hide_secrets(
                    format!("listing its tools failed: {e}"),
                    &conn.masks,
                ))
            }
            Err(_) => Err(format!(
                "listing its tools took more than {} s",
                server.timeout().as_secs()
            )),
        }
    }

    /// The session's connection to `server`, made now when there is none.
    async fn connection(
        &self,
        project: ProjectId,
        session: SessionId,
        server: &McpServer,
    ) -> Result<(Arc<Slot>, Arc<Conn>), String> {
        let slot = self
            .slots
            .lock()
            .unwrap()
            .entry(key(session, server))
            .or_default()
            .clone();
        *slot.used.lock().unwrap() = Some(Instant::now());
        let mut held = slot.conn.lock().await;
        if let Some(c) = held.as_ref().filter(|c| !c.service.is_transport_closed()) {
            return Ok((slot.clone(), c.clone()));
        }
        if let Some((at, error)) = slot.failed.lock().unwrap().as_ref() {
            if at.elapsed() < RETRY_AFTER {
                return Err(format!(
                    "{error} ({}s ago; tried again {}s after a failure)",
                    at.elapsed().as_secs(),
                    RETRY_AFTER.as_secs()
                ));
            }
        }
        let stale = Arc::new(AtomicBool::new(false));
        let started = Instant::now();
        let mut masks = Vec::new();
        let connected = match (&server.url, &server.command) {
            (Some(url), _) => match self.headers(project, server).await {
                Ok((headers, values)) => {
                    masks = values;
                    remote::connect(&self.http, url, headers, self.allow_private, stale.clone())
                        .await
                }
                Err(e) => Err(e),
            },
            (None, Some(command)) => {
                match self
                    .sandboxes
                    .spawn(project, session, command, &server.env)
                    .await
                {
                    Ok(stdio) => sandboxed::connect(stdio, stale.clone()).await,
                    Err(e) => Err(format!("could not start it in the sandbox: {e}")),
                }
            }
            (None, None) => Err("the server has neither a url nor a command".into()),
        };
        let service = match connected {
            Ok(s) => {
                *slot.failed.lock().unwrap() = None;
                s
            }
            Err(e) => {
                let e = hide_secrets(e, &masks);
                *slot.failed.lock().unwrap() = Some((Instant::now(), e.clone()));
                return Err(e);
            }
        };
        let protocol = service
            .peer()
            .peer_info()
            .map(|i| i.protocol_version.to_string())
            .unwrap_or_default();
        tracing::info!(server = %server.name, %protocol, elapsed_ms = started.elapsed().as_millis() as u64, "connected to an MCP server");
        let conn = Arc::new(Conn {
            service,
            stale,
            tools: Mutex::new(None),
            protocol,
            masks,
        });
        *held = Some(conn.clone());
        drop(held);
        Ok((slot, conn))
    }

    /// The server's headers, with secrets read now, and the secret values they carry.
    async fn headers(
        &self,
        project: ProjectId,
        server: &McpServer,
    ) -> Result<(HashMap<http::HeaderName, http::HeaderValue>, Vec<String>), String> {
        let names: Vec<String> = server.secrets().map(str::to_owned).collect();
        let values = if names.is_empty() {
            BTreeMap::new()
        } else {
            self.secrets.values(project, &names).await?
        };
        let mut out = HashMap::new();
        for (name, h) in &server.headers {
            let text = match h {
                McpHeader::Plain(t) => t.clone(),
                McpHeader::Secret(s) => {
                    let v = values
                        .get(&s.secret)
                        .ok_or_else(|| format!("the secret '{}' is gone", s.secret))?;
                    s.format.replace("{value}", v)
                }
            };
            let name = http::HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| format!("'{name}' is not a header name"))?;
            let mut value = http::HeaderValue::from_str(&text)
                .map_err(|_| format!("the value of header '{name}' is not a header value"))?;
            value.set_sensitive(true);
            out.insert(name, value);
        }
        Ok((out, values.into_values().collect()))
    }
}

/// The server's tools, page after page, up to [`MAX_LISTED`] tools or [`MAX_TOOL_PAGES`]
/// pages, whichever comes first.
async fn list_tools_bounded(
    peer: &rmcp::Peer<rmcp::RoleClient>,
) -> Result<Vec<rmcp::model::Tool>, rmcp::ServiceError> {
    let mut tools = Vec::new();
    let mut cursor = None;
    for _ in 0..MAX_TOOL_PAGES {
        let params = rmcp::model::PaginatedRequestParams::default().with_cursor(cursor);
        let page = peer.list_tools(Some(params)).await?;
        tools.extend(page.tools);
        cursor = page.next_cursor;
        if cursor.is_none() || tools.len() >= MAX_LISTED {
            break;
        }
    }
    tools.truncate(MAX_LISTED);
    Ok(tools)
}

/// Forgets `conn` if it is still the slot's.
async fn drop_conn(slot: &Slot, conn: &Arc<Conn>) {
    let mut held = slot.conn.lock().await;
    if held.as_ref().is_some_and(|c| Arc::ptr_eq(c, conn)) {
        *held = None;
    }
}

fn key(session: SessionId, server: &McpServer) -> Key {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    serde_json::to_string(server)
        .unwrap_or_default()
        .hash(&mut h);
    (session, h.finish())
}
