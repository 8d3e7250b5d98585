//! MCP servers run inside a session's sandbox (`command`), spoken to over their stdin and
//! stdout through the sandbox's daemon.
//!
//! What runs in the sandbox is untrusted, so:
//! * a line it writes is read up to [`MAX_RESPONSE_BYTES`](crate::remote::MAX_RESPONSE_BYTES)
//!   and dropped past it, so it cannot grow the control plane's memory;
//! * nothing of ours enters its environment: it gets the session's own variables (those the
//!   user bound there) and the server's `env`;
//! * what it says on stderr is kept only as a short tail, to say why it failed.

use crate::remote::{self, Service, MAX_RESPONSE_BYTES};
use async_trait::async_trait;
use rmcp::transport::async_rw::AsyncRwTransport;
use rmcp::RoleClient;
use sandbox_agents_domain::{ProjectId, SessionId};
use std::collections::BTreeMap;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use tokio::io::{AsyncRead, AsyncWrite};

/// A command started in a sandbox, spoken to over its stdio for as long as it is kept
/// (dropping both ends ends it).
pub struct Stdio {
    pub read: Box<dyn AsyncRead + Send + Unpin>,
    pub write: Box<dyn AsyncWrite + Send + Unpin>,
    /// The last of what it wrote to stderr, and how it ended once it has: why it failed.
    pub stderr: Arc<dyn Fn() -> String + Send + Sync>,
}

/// Starts commands in sessions' sandboxes: what the hub needs of them.
#[async_trait]
pub trait SandboxStdio: Send + Sync {
    /// Starts `command` (with `env` added to the session's own variables) in the workspace
    /// of the session's running sandbox.
    async fn spawn(
        &self,
        project: ProjectId,
        session: SessionId,
        command: &[String],
        env: &BTreeMap<String, String>,
    ) -> Result<Stdio, String>;
}

/// A hub without sandboxes: a server run in the sandbox is an error.
pub struct NoSandboxes;

#[async_trait]
impl SandboxStdio for NoSandboxes {
    async fn spawn(
        &self,
        _: ProjectId,
        _: SessionId,
        _: &[String],
        _: &BTreeMap<String, String>,
    ) -> Result<Stdio, String> {
        Err("this process runs no sandboxes".into())
    }
}

/// Speaks MCP over a started command's stdio. A failed handshake says what the command
/// wrote to stderr (a missing module, a bad argument) when it said anything.
pub async fn connect(stdio: Stdio, stale: Arc<AtomicBool>) -> Result<Service, String> {
    let transport = AsyncRwTransport::<RoleClient, _, _>::new_client(stdio.read, stdio.write)
        .with_max_line_length(MAX_RESPONSE_BYTES);
    remote::handshake(transport, stale).await.map_err(|e| {
        let said = (stdio.stderr)();
        let said = said.trim();
        if said.is_empty() {
            e
        } else {
            format!("{e}; the server's stderr: {said}")
        }
    })
}
