//! The egress part's host side (`egress.rs`): proxies served on the host and a forwarder
//! like sandboxd's, to take the proxy's own cost apart from the sandbox's path.

use anyhow::{bail, Context};
use async_trait::async_trait;
use sandbox_agents_domain::network::NetworkPolicy;
use sandbox_agents_egress::{Policy, PolicySource, Proxy};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A fixed policy: the proxy's cost without the database lookup a server makes.
pub struct FixedPolicy(pub NetworkPolicy);

#[async_trait]
impl PolicySource for FixedPolicy {
    async fn policy(&self, _: &str) -> Result<Policy, String> {
        Ok(Policy::new("bench", [("session", &self.0)]))
    }
}

/// The sandbox id a host-side proxy with a fixed policy serves.
const FIXED_ID: &str = "bench";

/// Serves `proxy` on a loopback TCP port; returns the port. The tasks end with the runtime.
pub async fn serve_on_loopback(proxy: Arc<Proxy>) -> anyhow::Result<u16> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let port = listener.local_addr()?.port();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let _ = stream.set_nodelay(true);
            tokio::spawn(proxy.clone().serve(stream, Arc::from(FIXED_ID)));
        }
    });
    Ok(port)
}

/// Serves `proxy` on a Unix socket at `path`, as a gateway does.
pub fn serve_on_unix(proxy: Arc<Proxy>, path: &Path) -> anyhow::Result<()> {
    let listener = tokio::net::UnixListener::bind(path)
        .with_context(|| format!("listening on {}", path.display()))?;
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(proxy.clone().serve(stream, Arc::from(FIXED_ID)));
        }
    });
    Ok(())
}

/// A loopback TCP port joined to the Unix socket at `path` by sandboxd's own forwarder
/// (`sandboxd::egress::join_to_socket`, what joins 127.0.0.1:3128 in a sandbox); returns
/// the port.
pub async fn serve_forwarder(path: PathBuf) -> anyhow::Result<u16> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let port = listener.local_addr()?.port();
    tokio::spawn(async move { sandboxd::egress::join_to_socket(listener, &path).await });
    Ok(port)
}

/// The socket of the egress server's one sandbox: the only directory under its socket root
/// that holds one.
pub fn sandbox_socket(root: &Path) -> anyhow::Result<PathBuf> {
    let found: Vec<PathBuf> = std::fs::read_dir(root)
        .with_context(|| format!("listing {}", root.display()))?
        .flatten()
        .map(|e| e.path().join("proxy.sock"))
        .filter(|p| p.exists())
        .collect();
    match &found[..] {
        [one] => Ok(one.clone()),
        _ => bail!(
            "expected one sandbox socket under {}, found {found:?}",
            root.display()
        ),
    }
}
