//! `POST /v1/ports/{port}/connect`: a TCP connection to a port on the sandbox's loopback,
//! carried by one HTTP/2 stream. The request body is written to the socket and the socket's
//! bytes are the response body, both at once: how the control plane reaches a service in a
//! sandbox that has no address of its own (behind the egress proxy the network is loopback
//! only), for previews and anything else that uses an exposed port.
//!
//! Half-close travels both ways: the end of the request body shuts the socket's write side
//! (the service reads EOF and may still answer), and the socket's EOF ends the response body.
//! A reset stream (the client went away) drops both halves, which closes the socket.
//!
//! A tunnel never ends at the daemon's own services on loopback (the egress forwarder and
//! DNS, `crate::egress`): they are the sandbox's way out, speaking to the egress proxy as the
//! sandbox (its credentials injected), and whoever holds a preview link is not the sandbox.
//!
//! At most [`MAX_TUNNELS`] are open at once per daemon, whoever opened them: each holds a
//! socket, a task and a stream of the connection the control plane's other calls share.

use super::error::Failure;
use super::Daemon;
use crate::proto::{ErrorKind, CHUNK, MAX_TUNNELS};
use axum::body::Body;
use axum::extract::{Path, State};
use axum::response::Response;
use futures::StreamExt;
use http_body_util::BodyExt;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// How long one connect attempt may take (loopback answers at once, or refuses).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// The tunnels a daemon holds open.
pub(crate) struct Tunnels(Arc<Semaphore>);

impl Default for Tunnels {
    fn default() -> Self {
        Tunnels(Arc::new(Semaphore::new(MAX_TUNNELS)))
    }
}

pub async fn connect(
    State(daemon): State<Arc<Daemon>>,
    Path(port): Path<String>,
    body: Body,
) -> Result<Response, Failure> {
    let port = match port.parse::<u16>() {
        Ok(p) if p > 0 => p,
        _ => {
            return Err(Failure::invalid(format!(
                "{port:?} is not a TCP port (1 to 65535)"
            )))
        }
    };
    if is_the_daemons(port) {
        return Err(Failure::new(
            ErrorKind::PermissionDenied,
            format!(
                "port {port} in the sandbox is its way out through the egress proxy, not a \
                 service; serve on another port"
            ),
        ));
    }
    let permit = daemon.tunnels.0.clone().try_acquire_owned().map_err(|_| {
        Failure::new(
            ErrorKind::TooLarge,
            format!(
                "the sandbox has {MAX_TUNNELS} connections to its ports open already; \
                 close one and try again"
            ),
        )
    })?;
    let socket = dial(port).await?;
    let _ = socket.set_nodelay(true);
    let (read, write) = socket.into_split();
    // Both directions hold the permit: the tunnel counts until neither uses the socket.
    let permit = Arc::new(permit);
    tokio::spawn(copy_in(body, write, permit.clone()));
    let out = tokio_util::io::ReaderStream::with_capacity(read, CHUNK).map(move |chunk| {
        let _held: &Arc<OwnedSemaphorePermit> = &permit;
        chunk
    });
    Ok(Response::new(Body::from_stream(out)))
}

/// Whether `port` on loopback is one of the daemon's own egress services.
fn is_the_daemons(port: u16) -> bool {
    [crate::egress::PROXY_ADDR, crate::egress::DNS_ADDR]
        .iter()
        .any(|addr| addr.rsplit(':').next().and_then(|p| p.parse().ok()) == Some(port))
}

/// Connects to `port` on loopback (`ports::connect_loopback`), saying plainly when nothing
/// listens there.
async fn dial(port: u16) -> Result<TcpStream, Failure> {
    super::ports::connect_loopback(port, CONNECT_TIMEOUT)
        .await
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::ConnectionRefused | std::io::ErrorKind::AddrNotAvailable => {
                Failure::new(
                    ErrorKind::NotFound,
                    format!("nothing is listening on port {port} in the sandbox"),
                )
            }
            _ => Failure::new(
                ErrorKind::Internal,
                format!("connecting to port {port} in the sandbox: {e}"),
            ),
        })
}

/// Writes the request body to the socket; its end shuts the socket's write side. A broken
/// stream (the client reset it) or a failed write ends the copy and drops the write half.
async fn copy_in(
    mut body: Body,
    mut write: tokio::net::tcp::OwnedWriteHalf,
    _permit: Arc<OwnedSemaphorePermit>,
) {
    while let Some(frame) = body.frame().await {
        let Ok(frame) = frame else { return };
        if let Ok(data) = frame.into_data() {
            if write.write_all(&data).await.is_err() {
                return;
            }
        }
    }
    let _ = write.shutdown().await;
}
