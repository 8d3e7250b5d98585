//! Connecting to a remote MCP server over streamable HTTP with `rmcp`: the current revision
//! (2026-07-28: `server/discover`, stateless requests) first, falling back to the `initialize`
//! handshake and `Mcp-Session-Id` of the earlier revisions (2025-11-25, 2025-06-18) that most
//! deployed servers still speak.

use crate::guard;
use rmcp::model::{ClientCapabilities, ClientConfig, Implementation, ProtocolVersion};
use rmcp::service::{ClientLifecycleMode, ClientServiceExt, NotificationContext, RunningService};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{ClientHandler, RoleClient};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Largest JSON answer or SSE event taken from a server (a tool's result is cut further for
/// the model).
pub const MAX_RESPONSE_BYTES: usize = 4 * 1024 * 1024;
/// How long connecting (and the handshake) may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(20);

/// Our side of a connection: says who we are, and marks the tool list stale when the server
/// says it changed.
#[derive(Clone)]
pub struct Handler {
    pub stale: Arc<AtomicBool>,
}

impl ClientHandler for Handler {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("sandbox-agents", env!("CARGO_PKG_VERSION")),
        )
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.stale.store(true, Ordering::Release);
    }
}

pub type Service = RunningService<RoleClient, Handler>;

/// Connects to `url` with these headers (their values already read from secrets).
pub async fn connect(
    http: &reqwest13::Client,
    url: &str,
    headers: HashMap<http::HeaderName, http::HeaderValue>,
    allow_private: bool,
    stale: Arc<AtomicBool>,
) -> Result<Service, String> {
    guard::check_url(url, allow_private)?;
    let config = StreamableHttpClientTransportConfig::with_uri(url)
        .custom_headers(headers)
        .max_json_response_size(MAX_RESPONSE_BYTES)
        .max_sse_event_size(MAX_RESPONSE_BYTES)
        .reinit_on_expired_session(true);
    let transport = StreamableHttpClientTransport::with_client(http.clone(), config);
    handshake(transport, stale).await
}

/// Speaks the protocol over `transport`: the current revision first, the `initialize`
/// handshake of the earlier ones when the server does not know `server/discover`; within
/// [`CONNECT_TIMEOUT`].
pub(crate) async fn handshake<T, E, A>(
    transport: T,
    stale: Arc<AtomicBool>,
) -> Result<Service, String>
where
    T: rmcp::transport::IntoTransport<RoleClient, E, A>,
    E: std::error::Error + Send + Sync + 'static,
{
    let lifecycle = ClientLifecycleMode::Auto {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        legacy_version: Some(ProtocolVersion::V_2025_11_25),
    };
    let handler = Handler { stale };
    match tokio::time::timeout(
        CONNECT_TIMEOUT,
        handler.serve_with_lifecycle(transport, lifecycle),
    )
    .await
    {
        Ok(Ok(service)) => Ok(service),
        Ok(Err(e)) => Err(describe_init_error(&e)),
        Err(_) => Err(format!(
            "the server did not answer the handshake within {} s",
            CONNECT_TIMEOUT.as_secs()
        )),
    }
}

/// A handshake failure in a sentence: the innermost cause (a refused address, a refused
/// connection, a 404), not the transport's type names around it.
fn describe_init_error(e: &rmcp::service::ClientInitializeError) -> String {
    if e.is_authorization_required() {
        return "the server refused our credentials (401/403): check the headers and the secrets they read".into();
    }
    let mut innermost = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        innermost = s.to_string();
        source = s.source();
    }
    format!("could not connect: {}", without_type_names(innermost))
}

/// `text` without the Rust type names rmcp puts in its transport errors
/// (`Transport [rmcp::transport::worker::WorkerTransport<…>] error: …`): a person reads it.
fn without_type_names(mut text: String) -> String {
    while let Some(start) = text.find("[rmcp::") {
        let Some(len) = text[start..].find(']') else {
            break;
        };
        let end = (start + len + 1).min(text.len());
        let end = if text[end..].starts_with(' ') {
            end + 1
        } else {
            end
        };
        text.replace_range(start..end, "");
    }
    text
}

#[cfg(test)]
mod tests {
    #[test]
    fn type_names_are_left_out_of_errors() {
        let raw = "Send message error Transport [rmcp::transport::worker::WorkerTransport<rmcp::X<reqwest::Client>>] error: Client error: error sending request for url (http://127.0.0.1:9/mcp)".to_owned();
        assert_eq!(
            super::without_type_names(raw),
            "Send message error Transport error: Client error: error sending request for url (http://127.0.0.1:9/mcp)"
        );
    }
}
