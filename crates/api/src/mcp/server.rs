//! The control plane as an MCP server: [`Gateway`] answers `tools/list` with
//! [`super::tools::TOOLS`] and runs `tools/call` as the REST call the tool mirrors, in
//! process, through the whole router with the caller's own headers: the same credentials,
//! project, Host/Origin rules, validation and `detail`. `send_message` then follows the
//! session's live stream until the turn ends or parks, sending each event of the turn as a
//! progress notification.

use super::tools::{self, Call};
use axum::body::Body;
use axum::http::{header, HeaderMap, Request};
use axum::Router;
use futures::StreamExt;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ErrorData,
    Implementation, ListToolsResult, PaginatedRequestParams, ProgressNotificationParam,
    ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{RoleServer, ServerHandler};
use serde_json::{json, Map, Value};
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use tower::ServiceExt;

/// Most bytes of a REST answer a tool returns as text.
const MAX_ANSWER: usize = 256 * 1024;
/// How long `send_message` waits by default, and at most.
const DEFAULT_WAIT: u64 = 600;
const MAX_WAIT: u64 = 3600;

/// Headers of the `/mcp` request that are the transport's, not the caller's.
const TRANSPORT_HEADERS: &[&str] = &[
    "content-type",
    "content-length",
    "accept",
    "transfer-encoding",
    "mcp-session-id",
    "mcp-protocol-version",
    "last-event-id",
];

/// Serves `/mcp`'s tools through `app` (the whole router, set once it is built).
#[derive(Clone)]
pub struct Gateway {
    pub app: Arc<OnceLock<Router>>,
    /// For the end of a session's log (read once the caller's GET of it succeeded).
    pub db: sandbox_agents_store::Db,
}

/// What a REST call answered.
struct Answer {
    status: u16,
    body: Value,
}

impl Gateway {
    /// Runs `call` as the caller of the `/mcp` request whose headers are `headers`.
    async fn rest(&self, headers: &HeaderMap, call: &Call) -> Result<Answer, ErrorData> {
        let response = self.send(headers, call).await?;
        let status = response.status().as_u16();
        let bytes = axum::body::to_bytes(response.into_body(), MAX_ANSWER)
            .await
            .map_err(|e| ErrorData::internal_error(format!("reading the answer: {e}"), None))?;
        let body = serde_json::from_slice(&bytes)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
        Ok(Answer { status, body })
    }

    async fn send(
        &self,
        headers: &HeaderMap,
        call: &Call,
    ) -> Result<axum::response::Response, ErrorData> {
        let app = self
            .app
            .get()
            .ok_or_else(|| ErrorData::internal_error("the router is not built yet", None))?
            .clone();
        let mut req = Request::builder()
            .method(call.method.clone())
            .uri(&call.uri);
        for (name, value) in headers {
            if !TRANSPORT_HEADERS.contains(&name.as_str()) {
                req = req.header(name, value);
            }
        }
        let body = match &call.body {
            Some(b) => {
                req = req.header(header::CONTENT_TYPE, "application/json");
                Body::from(b.to_string())
            }
            None => Body::empty(),
        };
        let req = req
            .body(body)
            .map_err(|e| ErrorData::internal_error(format!("the call: {e}"), None))?;
        app.oneshot(req)
            .await
            .map_err(|e| ErrorData::internal_error(format!("the call: {e}"), None))
    }

    /// Follows the session's stream after `after` until an event `ends` (of run `run`, when
    /// one is named), or `wait` passes; each event followed goes out as progress when the
    /// caller asked for it.
    #[allow(clippy::too_many_arguments)]
    async fn follow(
        &self,
        headers: &HeaderMap,
        session: &str,
        run: Option<&str>,
        after: i64,
        wait: Duration,
        ctx: &RequestContext<RoleServer>,
        ends: fn(&str) -> bool,
    ) -> Result<Value, ErrorData> {
        let call = Call {
            method: axum::http::Method::GET,
            uri: format!(
                "/api/sessions/{}/events/stream?after={after}",
                tools::segment(session)
            ),
            body: None,
        };
        let response = self.send(headers, &call).await?;
        if !response.status().is_success() {
            return Err(ErrorData::internal_error(
                format!("the session's stream answered {}", response.status()),
                None,
            ));
        }
        let token = ctx.meta.get_progress_token();
        let mut events =
            eventsource_stream::Eventsource::eventsource(response.into_body().into_data_stream());
        let mut seen = 0u32;
        let mut last_text = None;
        let deadline = tokio::time::sleep(wait);
        tokio::pin!(deadline);
        loop {
            let next = tokio::select! {
                e = events.next() => e,
                _ = &mut deadline => return Ok(json!({"run_id": run, "timed_out": true, "output": last_text})),
                _ = ctx.ct.cancelled() => return Err(ErrorData::internal_error("cancelled by the client", None)),
            };
            let Some(Ok(frame)) = next else {
                return Err(ErrorData::internal_error(
                    "the session's stream ended before the turn did",
                    None,
                ));
            };
            let Ok(ev) = serde_json::from_str::<Value>(&frame.data) else {
                continue;
            };
            if run.is_some_and(|r| ev["run_id"] != r) {
                continue;
            }
            let kind = ev["type"].as_str().unwrap_or_default().to_owned();
            if kind == "agent.message" {
                last_text = ev["payload"]["text"].as_str().map(str::to_owned);
            }
            seen += 1;
            if let Some(t) = &token {
                let message = match ev["payload"]["tool"].as_str() {
                    Some(tool) => format!("{kind} {tool}"),
                    None => kind.clone(),
                };
                let _ = ctx
                    .peer
                    .notify_progress(
                        ProgressNotificationParam::new(t.clone(), f64::from(seen))
                            .with_message(message),
                    )
                    .await;
            }
            if ends(&kind) {
                let p = &ev["payload"];
                return Ok(json!({
                    "event": kind,
                    "run_id": run,
                    "run_status": p.get("run_status").cloned().unwrap_or(Value::Null),
                    "stop_reason": p.get("stop_reason").cloned().unwrap_or(Value::Null),
                    "error": p.get("error").cloned().unwrap_or(Value::Null),
                    "call_ids": p.get("call_ids").cloned().unwrap_or(Value::Null),
                    "output": last_text,
                }));
            }
        }
    }

    async fn run_tool(
        &self,
        name: &str,
        args: Map<String, Value>,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let parts = ctx
            .extensions
            .get::<axum::http::request::Parts>()
            .ok_or_else(|| ErrorData::internal_error("no HTTP request in the context", None))?;
        let headers = &parts.headers;
        let wait = args.get("wait").and_then(Value::as_bool).unwrap_or(true);
        let timeout = args
            .get("timeout_seconds")
            .and_then(Value::as_u64)
            .unwrap_or(DEFAULT_WAIT)
            .clamp(1, MAX_WAIT);
        let session = args
            .get("session_id")
            .and_then(Value::as_str)
            .map(str::to_owned);
        let call = match tools::call(name, args) {
            Ok(c) => c,
            Err(e) => return Ok(failed(422, json!(e))),
        };
        // The log's end before the message, so that following it after the POST misses none
        // of the turn's events (and reads none of the turns before).
        let after = match (name, &session) {
            ("send_message", Some(s)) if wait => {
                let page = self
                    .rest(
                        headers,
                        &Call {
                            method: axum::http::Method::GET,
                            uri: format!("/api/sessions/{}", tools::segment(s)),
                            body: None,
                        },
                    )
                    .await?;
                if page.status >= 400 {
                    return Ok(failed(page.status, page.body));
                }
                let id = page.body["id"]
                    .as_str()
                    .and_then(|i| i.parse::<uuid::Uuid>().ok())
                    .ok_or_else(|| ErrorData::internal_error("the session has no id", None))?;
                Some(
                    sandbox_agents_store::events::last_seq(
                        &self.db,
                        sandbox_agents_domain::SessionId(id),
                    )
                    .await
                    .map_err(|e| ErrorData::internal_error(e.to_string(), None))?,
                )
            }
            _ => None,
        };
        let answer = self.rest(headers, &call).await?;
        if answer.status >= 400 {
            return Ok(failed(answer.status, answer.body));
        }
        // A new session is followed until its sandbox runs (or its boot fails), so that a
        // message can follow at once.
        if let (true, true, Some(id)) = (name == "create_session", wait, answer.body["id"].as_str())
        {
            let booted = self
                .follow(
                    headers,
                    id,
                    None,
                    0,
                    Duration::from_secs(timeout),
                    ctx,
                    |k| {
                        matches!(
                            k,
                            "session.status_running"
                                | "session.status_error"
                                | "session.status_stopped"
                        )
                    },
                )
                .await?;
            let mut body = answer.body.clone();
            body["status"] = match booted["event"].as_str() {
                Some("session.status_running") => json!("running"),
                Some("session.status_error") => json!("error"),
                Some(_) => json!("stopped"),
                None => body["status"].clone(),
            };
            if booted["event"] == "session.status_error" {
                return Ok(failed(
                    409,
                    json!({"detail": booted["error"].clone(), "session": body}),
                ));
            }
            let mut result = CallToolResult::success(vec![ContentBlock::text(body.to_string())]);
            result.structured_content = Some(body);
            return Ok(result);
        }
        if let (Some(s), Some(after), Some(run)) =
            (&session, after, answer.body["id"].as_str().filter(|_| wait))
        {
            let end = self
                .follow(
                    headers,
                    s,
                    Some(run),
                    after,
                    Duration::from_secs(timeout),
                    ctx,
                    |k| matches!(k, "session.status_idle" | "session.status_error"),
                )
                .await?;
            let text = end["output"].as_str().unwrap_or_default().to_owned();
            let mut result =
                CallToolResult::success(vec![ContentBlock::text(if text.is_empty() {
                    end.to_string()
                } else {
                    text
                })]);
            result.structured_content = Some(end);
            return Ok(result);
        }
        let mut result = CallToolResult::success(vec![ContentBlock::text(match &answer.body {
            Value::String(s) => s.clone(),
            Value::Null => "done".to_owned(),
            v => v.to_string(),
        })]);
        if answer.body.is_object() {
            result.structured_content = Some(answer.body);
        }
        Ok(result)
    }
}

/// A REST error as the tool's error: the status and the same `detail`.
fn failed(status: u16, body: Value) -> CallToolResult {
    let detail = body.get("detail").cloned().unwrap_or(body);
    let text = match &detail {
        Value::String(s) => s.clone(),
        v => v.to_string(),
    };
    let mut r = CallToolResult::error(vec![ContentBlock::text(text)]);
    r.structured_content = Some(json!({"status": status, "detail": detail}));
    r
}

impl ServerHandler for Gateway {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new(
                "sandbox-agents",
                env!("CARGO_PKG_VERSION"),
            ))
            .with_instructions(
                "Drive Sandbox Agents: list agents, create a session, send it a message and wait for the turn, answer client tool calls and approvals, read its events and files, stop it.",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let tools = tools::TOOLS
            .iter()
            .map(|t| {
                let schema = match (t.schema)() {
                    Value::Object(m) => m,
                    _ => Map::new(),
                };
                Tool::new(t.name, t.description, Arc::new(schema))
            })
            .collect();
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let args = request.arguments.unwrap_or_default();
        self.run_tool(&request.name, args, &context)
            .await
            .map(CallToolResponse::Complete)
    }
}
