//! Kubernetes' way in to the proxy: one TCP listener for every sandbox pod. A pod's
//! NetworkPolicy lets it reach this listener and nothing else; which sandbox is speaking is
//! told by the preamble its daemon opens each connection with
//! ([`sandboxd::egress::preamble`]): the pod's name and its egress token, an HMAC of that
//! name under the deployment's key ([`sandbox_agents_sandbox::kubernetes::egress_token`]).
//!
//! Any replica of the control plane checks a preamble without state of its own, and the
//! pod's name is its `sandbox_id`, so a pod is decided by its session's policy whichever
//! replica it reaches. A pod of a removed session still has a valid token, and reaches
//! nothing: no session holds its name any more.
//!
//! A missing, slow, malformed or wrong preamble closes the connection without a byte.

use crate::held::Held;
use crate::proxy::Proxy;
use sandboxd::egress::{parse_preamble, MAX_PREAMBLE};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::AsyncReadExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;

/// Connections one sandbox has open through the proxy at once, as on a Unix socket
/// (`gateway`), tunnels included.
const MAX_CONNECTIONS: usize = 256;
/// How long a new connection has to send its preamble.
const PREAMBLE_TIMEOUT: Duration = Duration::from_secs(5);
/// Sandboxes whose bounds are kept before the idle ones are dropped.
const KEPT_BOUNDS: usize = 1024;

/// The proxy on a TCP listener for the pods of one namespace.
pub struct PodGateway {
    proxy: Arc<Proxy>,
    key: [u8; 32],
    namespace: String,
    bounds: Mutex<HashMap<Arc<str>, Arc<Semaphore>>>,
}

impl std::fmt::Debug for PodGateway {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PodGateway")
            .field("namespace", &self.namespace)
            .finish_non_exhaustive()
    }
}

impl PodGateway {
    /// A gateway for the pods of `namespace`, whose tokens are derived from `key` (the
    /// Kubernetes backend's daemon key).
    pub fn new(proxy: Arc<Proxy>, key: [u8; 32], namespace: &str) -> Arc<Self> {
        Arc::new(PodGateway {
            proxy,
            key,
            namespace: namespace.to_owned(),
            bounds: Mutex::default(),
        })
    }

    /// Accepts connections on `listener` for ever.
    pub async fn serve(self: Arc<Self>, listener: TcpListener) {
        loop {
            let (stream, peer) = match listener.accept().await {
                Ok(accepted) => accepted,
                // Out of descriptors, say: the pods' way out pauses, it does not end.
                Err(e) => {
                    tracing::warn!(error = %e, "the egress listener could not accept; trying again");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
            let gateway = self.clone();
            tokio::spawn(async move {
                match gateway.admit(stream).await {
                    Ok((stream, sandbox)) => {
                        let permit = gateway.bound(&sandbox).acquire_owned().await;
                        let Ok(permit) = permit else { return };
                        gateway
                            .proxy
                            .clone()
                            .serve(Held::new(stream, permit), sandbox)
                            .await
                    }
                    Err(why) => {
                        tracing::debug!(%peer, why, "an egress connection was refused")
                    }
                }
            });
        }
    }

    /// Reads and checks the preamble: the stream, at the first byte after it, and the
    /// sandbox speaking.
    async fn admit(&self, mut stream: TcpStream) -> Result<(TcpStream, Arc<str>), &'static str> {
        let _ = stream.set_nodelay(true);
        let line = tokio::time::timeout(PREAMBLE_TIMEOUT, read_line(&mut stream))
            .await
            .map_err(|_| "no preamble in time")?
            .map_err(|_| "the preamble ended early")?;
        let (name, token) = parse_preamble(&line).ok_or("a malformed preamble")?;
        let expected =
            sandbox_agents_sandbox::kubernetes::egress_token(&self.key, &self.namespace, name);
        use subtle::ConstantTimeEq;
        if !bool::from(expected.ct_eq(&token)) {
            return Err("a wrong token");
        }
        Ok((stream, Arc::from(name)))
    }

    /// The bound of `sandbox`'s connections (idle bounds are dropped as the map grows).
    fn bound(&self, sandbox: &Arc<str>) -> Arc<Semaphore> {
        let mut bounds = self.bounds.lock().unwrap_or_else(|e| e.into_inner());
        if bounds.len() >= KEPT_BOUNDS && !bounds.contains_key(sandbox) {
            // A permit holds its semaphore: one held only here has no connection open.
            bounds.retain(|_, s| Arc::strong_count(s) > 1);
        }
        bounds
            .entry(sandbox.clone())
            .or_insert_with(|| Arc::new(Semaphore::new(MAX_CONNECTIONS)))
            .clone()
    }
}

/// The preamble, byte by byte up to its newline (never a byte of what follows it), at most
/// [`MAX_PREAMBLE`] bytes.
async fn read_line(stream: &mut TcpStream) -> std::io::Result<Vec<u8>> {
    let mut line = Vec::with_capacity(MAX_PREAMBLE);
    while line.len() < MAX_PREAMBLE {
        let byte = stream.read_u8().await?;
        line.push(byte);
        if byte == b'\n' {
            break;
        }
    }
    Ok(line)
}
