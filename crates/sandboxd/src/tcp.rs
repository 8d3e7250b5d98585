//! The daemon on TCP (`sandboxd serve --listen <ip:port>`), for backends whose control plane
//! reaches a sandbox over the network (a Kubernetes pod, at its IP) instead of through an
//! exec bridge.
//!
//! Anything on that network may connect, so a connection must first prove that it comes from
//! the control plane: its first bytes are [`preamble`], a line holding the sandbox's 32-byte
//! token in hex. The daemon never holds the token, only its SHA-256 ([`TOKEN_ENV`], read
//! and removed from its environment at start): the sandbox's own code can read the pod's
//! spec and environment, and a hash read there lets nobody connect. A wrong, missing, slow or
//! malformed preamble closes the connection without a byte of answer; after a good one the
//! connection is served exactly as one on the abstract socket is (`daemon::serve_connection`).

use sha2::{Digest, Sha256};
use std::io;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The environment variable holding the hex SHA-256 of the token the daemon accepts.
pub const TOKEN_ENV: &str = "SANDBOXD_TOKEN_SHA256";
/// How a connection's preamble starts; the token in lowercase hex and `\n` follow.
pub const PREAMBLE_PREFIX: &[u8] = b"SANDBOXD-TOKEN ";
/// The port the daemon listens on in a pod.
pub const DEFAULT_TCP_PORT: u16 = 7077;

/// The preamble's length: the prefix, 64 hex digits and the newline. Fixed, so the daemon
/// reads exactly this much and never a byte of the HTTP/2 preface behind it.
const PREAMBLE_LEN: usize = PREAMBLE_PREFIX.len() + 64 + 1;
/// How long a new connection has to send its preamble.
const PREAMBLE_TIMEOUT: Duration = Duration::from_secs(5);
/// Keepalive probes: a control plane that vanished without closing (its node lost) ends its
/// connections within about a minute instead of holding them for ever.
const KEEPALIVE_IDLE: Duration = Duration::from_secs(30);
const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(10);
const KEEPALIVE_RETRIES: u32 = 3;

/// The hex SHA-256 of `token`: what the control plane puts in [`TOKEN_ENV`] of the sandbox.
pub fn token_hash(token: &[u8; 32]) -> String {
    hex::encode(Sha256::digest(token))
}

/// The line a connection starts with: [`PREAMBLE_PREFIX`], the token in hex, `\n`.
pub fn preamble(token: &[u8; 32]) -> Vec<u8> {
    let mut line = Vec::with_capacity(PREAMBLE_LEN);
    line.extend_from_slice(PREAMBLE_PREFIX);
    line.extend_from_slice(hex::encode(token).as_bytes());
    line.push(b'\n');
    line
}

/// Connects to a daemon's TCP listener and sends the preamble; the caller then runs
/// `client::Client::handshake` on the stream, as on a bridge's.
pub async fn connect(addr: SocketAddr, token: &[u8; 32]) -> io::Result<TcpStream> {
    let mut stream = TcpStream::connect(addr).await?;
    stream.set_nodelay(true)?;
    keepalive(&stream)?;
    stream.write_all(&preamble(token)).await?;
    Ok(stream)
}

/// The SHA-256 of the one token the listener accepts.
#[derive(Clone, Copy)]
pub struct TokenHash([u8; 32]);

impl std::fmt::Debug for TokenHash {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TokenHash(..)")
    }
}

impl TokenHash {
    /// Parses 64 hex digits (what [`token_hash`] makes).
    pub fn parse(hex_digest: &str) -> Result<Self, String> {
        let mut hash = [0u8; 32];
        hex::decode_to_slice(hex_digest.trim(), &mut hash).map_err(|_| {
            format!("{TOKEN_ENV} must be 64 hex digits (the SHA-256 of the sandbox's token)")
        })?;
        Ok(TokenHash(hash))
    }

    /// Whether `token` hashes to this, in time independent of where they differ.
    fn admits(&self, token: &[u8; 32]) -> bool {
        use subtle::ConstantTimeEq;
        Sha256::digest(token).as_slice().ct_eq(&self.0).into()
    }
}

/// Reads and checks the preamble; the stream, ready for HTTP/2, when it admits the
/// connection. Dropping the stream on refusal closes it without an answer.
pub(crate) async fn admit(
    mut stream: TcpStream,
    expected: &TokenHash,
) -> Result<TcpStream, String> {
    let _ = stream.set_nodelay(true);
    keepalive(&stream).map_err(|e| format!("cannot set keepalive: {e}"))?;
    let mut line = [0u8; PREAMBLE_LEN];
    match tokio::time::timeout(PREAMBLE_TIMEOUT, stream.read_exact(&mut line)).await {
        Err(_) => return Err(format!("no preamble within {PREAMBLE_TIMEOUT:?}")),
        Ok(Err(e)) => return Err(format!("the preamble ended early: {e}")),
        Ok(Ok(_)) => {}
    }
    let token = parse_preamble(&line).ok_or("a malformed preamble")?;
    if !expected.admits(&token) {
        return Err("a wrong token".into());
    }
    Ok(stream)
}

/// The token of a well-formed preamble line.
fn parse_preamble(line: &[u8; PREAMBLE_LEN]) -> Option<[u8; 32]> {
    let digits = line.strip_prefix(PREAMBLE_PREFIX)?.strip_suffix(b"\n")?;
    let mut token = [0u8; 32];
    hex::decode_to_slice(digits, &mut token).ok()?;
    Some(token)
}

fn keepalive(stream: &TcpStream) -> io::Result<()> {
    let keepalive = socket2::TcpKeepalive::new()
        .with_time(KEEPALIVE_IDLE)
        .with_interval(KEEPALIVE_INTERVAL)
        .with_retries(KEEPALIVE_RETRIES);
    socket2::SockRef::from(stream).set_tcp_keepalive(&keepalive)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_preamble_carries_the_token_that_hashes_to_the_expected_digest() {
        let token = [7u8; 32];
        let line: [u8; PREAMBLE_LEN] = preamble(&token).try_into().unwrap();
        let parsed = parse_preamble(&line).unwrap();
        assert_eq!(parsed, token);
        let expected = TokenHash::parse(&token_hash(&token)).unwrap();
        assert!(expected.admits(&parsed));
        assert!(!expected.admits(&[8u8; 32]));
    }

    #[test]
    fn a_digest_that_is_not_64_hex_digits_is_refused() {
        for bad in ["", "abc", &"g".repeat(64), &"a".repeat(66)] {
            assert!(TokenHash::parse(bad).is_err(), "{bad}");
        }
    }
}
