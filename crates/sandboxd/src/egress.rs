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
//!
//! On Kubernetes there is no socket to mount: the pod's NetworkPolicy lets it reach the
//! proxy's TCP listener and nothing else, and the daemon opens each connection to it with
//! [`preamble`], the pod's name and its egress token ([`Upstream::from_env`]). The token is
//! an HMAC of the name under a key only the control plane holds, so a sandbox can speak as
//! itself and as no other.

use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UnixStream};

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

/// The environment variable naming the proxy's TCP address (`ip:port`) for a pod.
pub const PROXY_ENV: &str = "SANDBOXD_EGRESS_PROXY";
/// The environment variable holding the pod's name and its egress token in hex, separated by
/// a space: what follows [`PREAMBLE_PREFIX`] on each connection.
pub const TOKEN_ENV: &str = "SANDBOXD_EGRESS_TOKEN";
/// How a connection to the proxy's TCP listener starts; the sandbox's name, a space, its
/// token in lowercase hex and `\n` follow.
pub const PREAMBLE_PREFIX: &[u8] = b"SANDBOX-EGRESS ";
/// The longest preamble the proxy reads: the prefix, a pod name (at most 63 bytes, as a
/// label value), a space, 64 hex digits, the newline.
pub const MAX_PREAMBLE: usize = PREAMBLE_PREFIX.len() + 63 + 1 + 64 + 1;

/// What [`TOKEN_ENV`] holds for the sandbox `sandbox` with `token`: its name, a space, the
/// token in hex (the preamble between its prefix and its newline).
pub fn token_value(sandbox: &str, token: &[u8; 32]) -> String {
    format!("{sandbox} {}", hex::encode(token))
}

/// The line a pod's connection to the proxy starts with.
pub fn preamble(sandbox: &str, token: &[u8; 32]) -> Vec<u8> {
    line_of(&token_value(sandbox, token))
}

/// [`PREAMBLE_PREFIX`], `value` and the newline.
fn line_of(value: &str) -> Vec<u8> {
    let mut line = Vec::with_capacity(MAX_PREAMBLE);
    line.extend_from_slice(PREAMBLE_PREFIX);
    line.extend_from_slice(value.as_bytes());
    line.push(b'\n');
    line
}

/// The sandbox name and token of a preamble line (its `\n` included); `None` when it is not
/// one.
pub fn parse_preamble(line: &[u8]) -> Option<(&str, [u8; 32])> {
    let rest = line.strip_prefix(PREAMBLE_PREFIX)?.strip_suffix(b"\n")?;
    let space = rest.iter().position(|b| *b == b' ')?;
    let (name, digits) = (&rest[..space], &rest[space + 1..]);
    let name = std::str::from_utf8(name).ok()?;
    let plain = !name.is_empty()
        && name.len() <= 63
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    if !plain {
        return None;
    }
    let mut token = [0u8; 32];
    hex::decode_to_slice(digits, &mut token).ok()?;
    Some((name, token))
}

/// Where the daemon sends what tools give [`PROXY_ADDR`] and the DNS queries.
#[derive(Clone)]
pub enum Upstream {
    /// The proxy's socket, mounted at [`SOCKET`] (Docker).
    Socket(PathBuf),
    /// The proxy's TCP listener, each connection opened with this preamble (Kubernetes).
    Tcp {
        addr: SocketAddr,
        preamble: Arc<[u8]>,
    },
}

impl std::fmt::Debug for Upstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Upstream::Socket(path) => f.debug_tuple("Socket").field(path).finish(),
            Upstream::Tcp { addr, .. } => f.debug_struct("Tcp").field("addr", addr).finish(),
        }
    }
}

/// A connection to the proxy, whichever way it is reached.
pub trait ProxyStream: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> ProxyStream for T {}

impl Upstream {
    /// The TCP upstream from [`PROXY_ENV`] and [`TOKEN_ENV`] (as `main` read them before
    /// taking them out of the environment); `None` when neither is set; a sentence saying
    /// what is wrong when one is missing or malformed.
    pub fn from_env(
        proxy: Option<OsString>,
        token: Option<OsString>,
    ) -> Result<Option<Self>, String> {
        let (proxy, token) = match (proxy, token) {
            (None, None) => return Ok(None),
            (Some(p), Some(t)) => (
                p.to_string_lossy().into_owned(),
                t.to_string_lossy().into_owned(),
            ),
            _ => {
                return Err(format!(
                    "{PROXY_ENV} and {TOKEN_ENV} are set together or not at all"
                ))
            }
        };
        let addr: SocketAddr = proxy.trim().parse().map_err(|_| {
            format!("{PROXY_ENV} must be an address and port such as 10.0.0.5:3129, not '{proxy}'")
        })?;
        let line = line_of(token.trim());
        if parse_preamble(&line).is_none() {
            return Err(format!(
                "{TOKEN_ENV} must be the pod's name, a space and 64 hex digits"
            ));
        }
        Ok(Some(Upstream::Tcp {
            addr,
            preamble: line.into(),
        }))
    }

    /// A new connection to the proxy, ready for the first byte of the sandbox's request.
    pub async fn connect(&self) -> std::io::Result<Box<dyn ProxyStream>> {
        match self {
            Upstream::Socket(path) => Ok(Box::new(UnixStream::connect(path).await?)),
            Upstream::Tcp { addr, preamble } => {
                let mut stream = TcpStream::connect(addr).await?;
                stream.set_nodelay(true)?;
                stream.write_all(preamble).await?;
                Ok(Box::new(stream))
            }
        }
    }
}

/// Forwards connections to [`PROXY_ADDR`] to the proxy, for ever, when the sandbox has a
/// way to it (`tcp`, or the mounted socket); returns at once when it has none (a sandbox
/// with its own network). Starts the DNS server on [`DNS_ADDR`] beside it.
pub async fn forward(tcp: Option<Upstream>) {
    let upstream = match tcp {
        Some(upstream) => upstream,
        None if Path::new(SOCKET_DIR).is_dir() => Upstream::Socket(SOCKET.into()),
        None => return,
    };
    let upstream = Arc::new(upstream);
    tokio::spawn(dns::serve(upstream.clone()));
    let listener = match TcpListener::bind(PROXY_ADDR).await {
        Ok(l) => l,
        Err(e) => {
            tracing::warn!(error = %e, "cannot listen for the egress proxy; this sandbox has no network");
            return;
        }
    };
    join(listener, upstream).await
}

/// Joins each connection `listener` accepts to a new connection to the Unix socket
/// `socket`, byte for byte, for ever: the forwarder (public so that the egress benchmark
/// measures this very code).
pub async fn join_to_socket(listener: TcpListener, socket: &Path) {
    join(listener, Arc::new(Upstream::Socket(socket.into()))).await
}

/// Joins each connection `listener` accepts to a new connection to `upstream`, byte for
/// byte, for ever.
async fn join(listener: TcpListener, upstream: Arc<Upstream>) {
    loop {
        let Ok((mut client, _)) = listener.accept().await else {
            continue;
        };
        let upstream = upstream.clone();
        tokio::spawn(async move {
            match upstream.connect().await {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_preamble_reads_back_as_its_name_and_token() {
        let token = [7u8; 32];
        let line = preamble("sa-ses-1-ab12cd34", &token);
        assert!(line.len() <= MAX_PREAMBLE);
        assert_eq!(parse_preamble(&line), Some(("sa-ses-1-ab12cd34", token)));
    }

    #[test]
    fn a_preamble_that_is_not_one_is_refused() {
        let token = hex::encode([7u8; 32]);
        for bad in [
            format!("SANDBOX-EGRESS sa-1 {token}"),   // no newline
            format!("SANDBOX-EGRESS  {token}\n"),     // no name
            format!("SANDBOX-EGRESS Sa-1 {token}\n"), // not a pod name
            format!("SANDBOX-EGRESS sa-1 {}\n", &token[..62]), // short token
            format!("SANDBOXD-TOKEN sa-1 {token}\n"), // the daemon's
            format!("SANDBOX-EGRESS {} {token}\n", "a".repeat(64)), // too long a name
        ] {
            assert_eq!(parse_preamble(bad.as_bytes()), None, "{bad:?}");
        }
    }

    #[test]
    fn the_upstream_comes_from_both_variables_or_neither() {
        let token = format!("sa-1 {}", hex::encode([1u8; 32]));
        assert!(Upstream::from_env(None, None).unwrap().is_none());
        let tcp = Upstream::from_env(Some("10.0.0.5:3129".into()), Some(token.clone().into()))
            .unwrap()
            .unwrap();
        match tcp {
            Upstream::Tcp { addr, preamble } => {
                assert_eq!(addr, "10.0.0.5:3129".parse().unwrap());
                assert_eq!(parse_preamble(&preamble), Some(("sa-1", [1u8; 32])));
            }
            other => panic!("{other:?}"),
        }
        let only_one = Upstream::from_env(Some("10.0.0.5:3129".into()), None).unwrap_err();
        assert!(only_one.contains(TOKEN_ENV), "{only_one}");
        let named = Upstream::from_env(Some("proxy:3129".into()), Some(token.into())).unwrap_err();
        assert!(named.contains("10.0.0.5:3129"), "{named}");
        let bad =
            Upstream::from_env(Some("10.0.0.5:3129".into()), Some("sa-1 zz".into())).unwrap_err();
        assert!(bad.contains("64 hex digits"), "{bad}");
    }
}
