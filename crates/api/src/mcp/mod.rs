//! `/mcp`: the control plane as an MCP server (streamable HTTP, `rmcp`). Requests pass the
//! router's guard (Host/Origin) and auth layers like `/api` ones; each tool runs as the REST
//! call it mirrors, with the caller's headers (`server.rs`, `tools.rs`). Stateless: any
//! replica answers any request, for the current revision and the earlier ones alike.

mod server;
pub mod tools;

use axum::Router;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use std::sync::{Arc, OnceLock};

pub use server::Gateway;

/// The `/mcp` service; `app` is set to the whole router once it is built.
pub fn service(
    app: Arc<OnceLock<Router>>,
    db: sandbox_agents_store::Db,
    shutdown: tokio_util::sync::CancellationToken,
) -> StreamableHttpService<Gateway, LocalSessionManager> {
    let gateway = Gateway { app, db };
    let mut config = StreamableHttpServerConfig::default()
        // The router's guard checks Host against the deployment's names already.
        .disable_allowed_hosts();
    config.legacy_session_mode = false;
    config.cancellation_token = shutdown;
    StreamableHttpService::new(
        move || Ok(gateway.clone()),
        Arc::new(LocalSessionManager::default()),
        config,
    )
}
