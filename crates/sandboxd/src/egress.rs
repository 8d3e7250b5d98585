//! The sandbox's end of the egress proxy. A sandbox with egress control has no network of its
//! own (no interface but loopback): the control plane mounts a directory holding the proxy's
//! Unix socket for this sandbox at [`SOCKET_DIR`], and the daemon listens on
//! [`PROXY_ADDR`] on loopback, joining each connection to that socket byte for byte. Tools
//! find it through `HTTP_PROXY`/`HTTPS_PROXY`; traffic that ignores them has no route.
//!
//! Names: the sandbox's `/etc/resolv.conf` is [`RESOLV_CONF`] (the control plane writes
//! it as [`RESOLV_CONF_NAME`] in the socket's directory and mounts it), naming the daemon's
//! DNS server on [`DNS_ADDR`] ([`dns`]), which asks the control plane over the same socket:
//! a name is answered only when the session's policy allows it.
//!
//! Which sandbox is speaking is told by which socket the connection arrives on: nothing
//! the sandbox sends can claim another identity.

use std::path::Path;
use tokio::net::{TcpListener, UnixStream};

pub mod dns;

/// Where the control plane mounts the socket's directory (read-only).
pub const SOCKET_DIR: &str = "/run/sandbox-agents/egress";
/// The proxy's socket in it.
pub const SOCKET: &str = "/run/sandbox-agents/egress/proxy.sock";
/// Where tools in the sandbox reach the proxy.
pub const PROXY_ADDR: &str = "127.0.0.1:3128";
/// Where the daemon answers DNS queries (UDP and TCP) in the sandbox.
pub const DNS_ADDR: &str = "127.0.0.1:53";
/// The host the daemon sends DNS queries to through the proxy's socket, in the style of
/// RFC 8484 (`POST http://{DNS_HOST}{DNS_PATH}`, `application/dns-message` both ways). The
/// proxy answers requests to this host itself and never resolves or connects to it; the
/// name is under `.internal`, which no public DNS delegates.
pub const DNS_HOST: &str = "dns.sandbox-agents.internal";
/// The path of [`DNS_HOST`]'s queries.
pub const DNS_PATH: &str = "/dns-query";
/// The media type of a DNS message over HTTP (RFC 8484), both ways.
pub const DNS_CONTENT_TYPE: &str = "application/dns-message";
/// The largest DNS message (its length is 16 bits on TCP), both ways.
pub const DNS_MAX_MESSAGE: usize = 65_535;
/// The name of the resolver configuration in the socket's directory, mounted read-only at
/// `/etc/resolv.conf`.
pub const RESOLV_CONF_NAME: &str = "resolv.conf";
/// The sandbox's resolver configuration: the daemon only, no search domain (a name is asked
/// as written, so the control plane never sees a host's search domains appended).
pub const RESOLV_CONF: &str =
    "# Names are answered by sandboxd, which asks the control plane: only names the\n\
# session's network policy allows resolve.\n\
nameserver 127.0.0.1\n\
options ndots:1\n";

/// Forwards connections to [`PROXY_ADDR`] to the mounted socket, for ever, when the
/// sandbox has one; returns at once when it has none (a sandbox with its own network).
/// Starts the DNS server on [`DNS_ADDR`] beside it.
pub async fn forward() {
    if !Path::new(SOCKET_DIR).is_dir() {
        return;
    }
    tokio::spawn(dns::serve());
    let listener = match TcpListener::bind(PROXY_ADDR).await {
        Ok(l) => l,
        Err(e) => {
            tracing::warn!(error = %e, "cannot listen for the egress proxy; this sandbox has no network");
            return;
        }
    };
    join_to_socket(listener, Path::new(SOCKET)).await
}

/// Joins each connection `listener` accepts to a new connection to the Unix socket
/// `socket`, byte for byte, for ever: the forwarder (public so that the egress benchmark
/// measures this very code).
pub async fn join_to_socket(listener: TcpListener, socket: &Path) {
    let socket: std::sync::Arc<Path> = socket.into();
    loop {
        let Ok((mut client, _)) = listener.accept().await else {
            continue;
        };
        let socket = socket.clone();
        tokio::spawn(async move {
            match UnixStream::connect(&*socket).await {
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
