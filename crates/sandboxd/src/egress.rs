//! The sandbox's end of the egress proxy. A sandbox with egress control has no network of its
//! own (no interface but loopback): the control plane mounts a directory holding the proxy's
//! Unix socket for this sandbox at [`SOCKET_DIR`], and the daemon listens on
//! [`PROXY_ADDR`] on loopback, joining each connection to that socket byte for byte. Tools
//! find it through `HTTP_PROXY`/`HTTPS_PROXY`; traffic that ignores them has no route.
//!
//! Which sandbox is speaking is told by which socket the connection arrives on: nothing
//! the sandbox sends can claim another identity.

use std::path::Path;
use tokio::net::{TcpListener, UnixStream};

/// Where the control plane mounts the socket's directory (read-only).
pub const SOCKET_DIR: &str = "/run/sandbox-agents/egress";
/// The proxy's socket in it.
pub const SOCKET: &str = "/run/sandbox-agents/egress/proxy.sock";
/// Where tools in the sandbox reach the proxy.
pub const PROXY_ADDR: &str = "127.0.0.1:3128";

/// Forwards connections to [`PROXY_ADDR`] to the mounted socket, for ever, when the
/// sandbox has one; returns at once when it has none (a sandbox with its own network).
pub async fn forward() {
    if !Path::new(SOCKET_DIR).is_dir() {
        return;
    }
    let listener = match TcpListener::bind(PROXY_ADDR).await {
        Ok(l) => l,
        Err(e) => {
            tracing::warn!(error = %e, "cannot listen for the egress proxy; this sandbox has no network");
            return;
        }
    };
    loop {
        let Ok((mut client, _)) = listener.accept().await else {
            continue;
        };
        tokio::spawn(async move {
            match UnixStream::connect(SOCKET).await {
                Ok(mut proxy) => {
                    let _ = tokio::io::copy_bidirectional(&mut client, &mut proxy).await;
                }
                // The control plane is restarting, or this sandbox is being removed: the
                // client sees its connection closed at once, not a hang.
                Err(e) => tracing::debug!(error = %e, "the egress proxy is not listening"),
            }
        });
    }
}
