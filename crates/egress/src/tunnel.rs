//! A `CONNECT` tunnel the proxy does not open (no credential is bound to its host): bytes
//! both ways, with two checks a plain copy would not make.
//!
//! * **The TLS server name is the tunnel's host.** The policy allowed `CONNECT host:port`;
//!   a client that then asks the server for another name (SNI) is reaching a host the
//!   policy never decided on (domain fronting on a shared front end). When the tunnel names
//!   a host and the sandbox's first bytes are a TLS handshake, its ClientHello is read
//!   (rustls parses it; nothing is decrypted) before a byte goes up: another name ends the
//!   tunnel with a TLS `access_denied` alert and a denial on the session's log, and a
//!   handshake that cannot be read at all ends it the same way (fail closed). No server
//!   name is allowed (the address is the allowed host's), and so is anything that is not TLS
//!   (the policy allowed the port). The upstream's bytes flow from the start, so protocols
//!   whose server speaks first (SSH) work.
//!   Any other TLS record first (an alert, say, which some servers skip before reading a
//!   ClientHello behind it) is refused too.
//! * **An idle tunnel ends.** With no byte either way for [`IDLE`], the tunnel is closed: a
//!   sandbox cannot hold dead connections (each counts against its socket's bound) for ever.
//!   ([`until_idle`]; intercepted tunnels end the same way.)

use crate::count::Counted;
use crate::decide::{Denial, Host};
use crate::observe::Done;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

/// How long a tunnel may carry nothing before it is closed.
pub const IDLE: Duration = Duration::from_secs(15 * 60);
/// The most of a ClientHello read before deciding (a hello with large key shares is ~2 KiB).
const HELLO_LIMIT: usize = 16 * 1024;
/// How long the ClientHello may take to arrive once it has begun.
const HELLO_TIMEOUT: Duration = Duration::from_secs(10);
/// A TLS record's content type for a handshake.
const HANDSHAKE: u8 = 0x16;
/// TLS record content types: change_cipher_spec, alert, handshake, application_data,
/// heartbeat (each record then begins with the major version, 3).
const RECORD_TYPES: [u8; 5] = [0x14, 0x15, 0x16, 0x17, 0x18];
/// How long the refusal's alert may take to be written.
const ALERT_TIMEOUT: Duration = Duration::from_secs(5);
/// A fatal TLS alert, `access_denied` (RFC 8446, 6.2), in a TLS 1.2 record: what a client
/// shows as "alert access denied" instead of a connection that just closed.
const ACCESS_DENIED: [u8; 7] = [0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x31];

/// Carries an upgraded `CONNECT` until either side is done, a check refuses it, or it idles.
pub(crate) async fn run(
    req: hyper::Request<hyper::body::Incoming>,
    upstream: Counted<TcpStream>,
    done: Done,
    sandbox_id: Arc<str>,
) {
    match hyper::upgrade::on(req).await {
        Ok(upgraded) => {
            let client = hyper_util::rt::TokioIo::new(upgraded);
            if let Err(e) = join(client, upstream, &done, &sandbox_id, IDLE).await {
                tracing::debug!(host = %done.host, error = %e, "an egress tunnel ended with an error");
            }
        }
        Err(e) => tracing::debug!(error = %e, "an egress tunnel was not upgraded"),
    }
    drop(done);
}

/// What the sandbox's first bytes were.
enum Opening {
    /// Send these up, then copy.
    Pass(Vec<u8>),
    /// The sandbox closed before sending anything.
    Closed,
    /// Refused, for this reason.
    Refuse(String),
}

/// The tunnel between `client` (the sandbox) and `upstream`; `done` counts its traffic.
pub(crate) async fn join<C, U>(
    client: C,
    upstream: U,
    done: &Done,
    sandbox_id: &str,
    idle: Duration,
) -> std::io::Result<()>
where
    C: AsyncRead + AsyncWrite + Unpin,
    U: AsyncRead + AsyncWrite + Unpin,
{
    let (mut from_client, mut to_client) = tokio::io::split(client);
    let (mut from_upstream, mut to_upstream) = tokio::io::split(upstream);
    let host = done.host.clone();
    let ended: std::io::Result<Option<String>> = {
        let up = async {
            match opening(&mut from_client, &host).await? {
                Opening::Closed => {}
                Opening::Pass(first) => {
                    to_upstream.write_all(&first).await?;
                    tokio::io::copy(&mut from_client, &mut to_upstream).await?;
                }
                Opening::Refuse(reason) => return Ok(Some(reason)),
            }
            to_upstream.shutdown().await?;
            Ok::<_, std::io::Error>(None)
        };
        let down = async {
            tokio::io::copy(&mut from_upstream, &mut to_client).await?;
            to_client.shutdown().await
        };
        let both = async {
            tokio::pin!(up, down);
            let (mut up_ended, mut down_ended) = (false, false);
            loop {
                tokio::select! {
                    r = &mut up, if !up_ended => match r {
                        Ok(None) if !down_ended => up_ended = true,
                        r => break r,
                    },
                    r = &mut down, if !down_ended => match r {
                        Ok(()) if !up_ended => down_ended = true,
                        r => break r.map(|()| None),
                    },
                }
            }
        };
        until_idle(both, done, idle).await.unwrap_or(Ok(None))
    };
    // The upstream's side is dropped with the futures above, whatever it was doing.
    if let Some(reason) = ended? {
        // Bounded: a sandbox that never reads would hold the tunnel here.
        let _ = tokio::time::timeout(ALERT_TIMEOUT, async {
            to_client.write_all(&ACCESS_DENIED).await?;
            to_client.shutdown().await
        })
        .await;
        refuse(done, sandbox_id, &reason);
    }
    Ok(())
}

/// Runs `work` until it ends (`Some`), or until nothing moved either way through `done`'s
/// counters for `idle` (`None`; `work` is dropped). Checked every quarter of `idle`.
pub(crate) async fn until_idle<T>(
    work: impl std::future::Future<Output = T>,
    done: &Done,
    idle: Duration,
) -> Option<T> {
    let moved = || done.sent.load(Ordering::Relaxed) + done.received.load(Ordering::Relaxed);
    let mut last = moved();
    let mut quiet = Duration::ZERO;
    let mut tick = tokio::time::interval(idle / 4);
    tick.tick().await;
    tokio::pin!(work);
    loop {
        tokio::select! {
            r = &mut work => return Some(r),
            _ = tick.tick() => {
                let now = moved();
                quiet = if now == last { quiet + idle / 4 } else { Duration::ZERO };
                last = now;
                if quiet >= idle {
                    tracing::debug!(host = %done.host, "an idle egress connection was closed");
                    return None;
                }
            }
        }
    }
}

/// Reads the sandbox's first bytes and, when they begin a TLS handshake to a named host,
/// the whole ClientHello, deciding on its server name.
async fn opening<R: AsyncRead + Unpin>(from: &mut R, host: &Host) -> std::io::Result<Opening> {
    let mut buf = vec![0u8; 4096];
    let n = from.read(&mut buf).await?;
    if n == 0 {
        return Ok(Opening::Closed);
    }
    buf.truncate(n);
    let Host::Name(name) = host else {
        return Ok(Opening::Pass(buf));
    };
    // A record of another TLS type first (an alert, say) would be skipped by a server that
    // then reads a ClientHello behind it, unchecked: a TLS client's first record is its
    // ClientHello, so any other is refused.
    if RECORD_TYPES.contains(&buf[0]) && buf[0] != HANDSHAKE {
        if buf.len() < 2 {
            let mut more = [0u8; 1];
            match tokio::time::timeout(HELLO_TIMEOUT, from.read(&mut more)).await {
                Ok(Ok(1)) => buf.push(more[0]),
                _ => return Ok(Opening::Pass(buf)),
            }
        }
        if buf[1] == 0x03 {
            return Ok(Opening::Refuse(format!(
                "the tunnel to {name} began with a TLS record that is not a ClientHello"
            )));
        }
    }
    if buf[0] != HANDSHAKE {
        return Ok(Opening::Pass(buf));
    }
    let read_hello = async {
        let mut acceptor = rustls::server::Acceptor::default();
        let mut fed = 0;
        loop {
            while fed < buf.len() {
                let mut rest = &buf[fed..];
                match acceptor.read_tls(&mut rest) {
                    Ok(0) => break,
                    Ok(k) => fed += k,
                    Err(_) => return Ok(Err("its TLS handshake could not be read".to_owned())),
                }
            }
            match acceptor.accept() {
                Ok(Some(accepted)) => {
                    let sni = accepted.client_hello().server_name().map(str::to_owned);
                    return Ok(Ok(sni));
                }
                Ok(None) => {}
                Err(_) => return Ok(Err("its TLS handshake could not be read".to_owned())),
            }
            if buf.len() >= HELLO_LIMIT {
                return Ok(Err(format!(
                    "its TLS ClientHello is over {HELLO_LIMIT} bytes"
                )));
            }
            let mut more = [0u8; 4096];
            let k = from.read(&mut more).await?;
            if k == 0 {
                return Ok(Err("it closed inside its TLS ClientHello".to_owned()));
            }
            buf.extend_from_slice(&more[..k]);
        }
    };
    let hello: std::io::Result<Result<Option<String>, String>> =
        match tokio::time::timeout(HELLO_TIMEOUT, read_hello).await {
            Ok(r) => r,
            Err(_) => Ok(Err(format!(
                "its TLS ClientHello did not arrive in {HELLO_TIMEOUT:?}"
            ))),
        };
    Ok(match hello? {
        Ok(None) => Opening::Pass(buf),
        Ok(Some(sni)) if sni.trim_end_matches('.').eq_ignore_ascii_case(name) => {
            Opening::Pass(buf)
        }
        Ok(Some(sni)) => Opening::Refuse(format!(
            "the tunnel to {name} asked TLS for the server name '{sni}': a tunnel reaches only the host it was opened to"
        )),
        Err(why) => Opening::Refuse(format!("the tunnel to {name} was closed: {why}")),
    })
}

fn refuse(done: &Done, sandbox_id: &str, reason: &str) {
    let denial = Denial {
        reason: reason.to_owned(),
        label: "server_name",
    };
    metrics::counter!("sandbox_agents_egress_decisions_total", "verdict" => "denied", "reason" => denial.label).increment(1);
    tracing::info!(sandbox_id, host = %done.host, port = done.port, reason, "egress tunnel refused");
    done.observer
        .denied(sandbox_id, &done.policy, &done.host, done.port, &denial);
}
