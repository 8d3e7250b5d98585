//! `POST /v1/ports/wait`: until a TCP port of the sandbox accepts connections.

use super::error::Json;
use crate::proto::{PortState, WaitPort};
use std::time::{Duration, Instant};

/// The longest wait a request may ask for.
const MAX_WAIT: Duration = Duration::from_secs(600);
/// Between attempts.
const PAUSE: Duration = Duration::from_millis(25);

pub async fn wait(Json(req): Json<WaitPort>) -> Json<PortState> {
    let started = Instant::now();
    let deadline = started + Duration::from_millis(req.timeout_ms).min(MAX_WAIT);
    loop {
        if connect_loopback(req.port, PAUSE).await.is_ok() {
            return Json(PortState {
                open: true,
                waited_ms: started.elapsed().as_millis() as u64,
            });
        }
        if Instant::now() >= deadline {
            return Json(PortState {
                open: false,
                waited_ms: started.elapsed().as_millis() as u64,
            });
        }
        tokio::time::sleep(PAUSE).await;
    }
}

/// A connection to `port` on the sandbox's loopback, v4 then v6 (a server bound to all
/// addresses answers on the first; one bound to `::1` only on the second), each attempt
/// given `within`; the last attempt's error when neither answers.
pub(super) async fn connect_loopback(
    port: u16,
    within: Duration,
) -> std::io::Result<tokio::net::TcpStream> {
    let mut last = None;
    for host in ["127.0.0.1", "::1"] {
        match tokio::time::timeout(within, tokio::net::TcpStream::connect((host, port))).await {
            Ok(Ok(socket)) => return Ok(socket),
            Ok(Err(e)) => last = Some(e),
            Err(_) => {
                last = Some(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    format!("no answer within {within:?}"),
                ))
            }
        }
    }
    Err(last.unwrap_or_else(|| std::io::Error::other("no loopback address to connect to")))
}
