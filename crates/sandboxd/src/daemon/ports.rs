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
        // Loopback, v4 or v6: a server bound to all addresses answers there too.
        for host in ["127.0.0.1", "::1"] {
            let attempt = tokio::net::TcpStream::connect((host, req.port));
            if let Ok(Ok(_)) = tokio::time::timeout(PAUSE, attempt).await {
                return Json(PortState {
                    open: true,
                    waited_ms: started.elapsed().as_millis() as u64,
                });
            }
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
