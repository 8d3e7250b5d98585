//! How the control plane reaches a sandbox's daemon (`sandboxd`), whatever runs the sandbox.
//!
//! A backend says only how to open one byte stream to one sandbox's daemon
//! ([`DaemonTransport`]: Docker opens a bridge through an exec; Kubernetes, next, the pod's
//! address or a port-forward). [`DaemonLinks`] does the rest the same way for every backend:
//! one HTTP/2 connection per sandbox and control-plane process, opened on first need (or
//! ahead of it, [`DaemonLinks::warm`]), one connect at a time per sandbox, forgotten when it
//! drops (the next call opens another, which starts the daemon again), and a sandbox whose
//! daemon cannot be reached (an image it cannot run in, a failed handshake) left to the
//! backend's fallback (a plain exec) for [`RETRY_AFTER`] before it is tried again.

use crate::Result;
use async_trait::async_trait;
use sandboxd::client::Client;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite};

/// How long a sandbox whose daemon could not be reached is served by the backend's fallback
/// before the daemon is tried again.
pub const RETRY_AFTER: Duration = Duration::from_secs(60);
/// How long opening a stream and the handshake may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// A byte stream to one sandbox's daemon.
pub trait DaemonIo: AsyncRead + AsyncWrite + Unpin + Send + 'static {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send + 'static> DaemonIo for T {}

/// Opens byte streams to sandboxes' daemons: the one thing about reaching a daemon that
/// depends on where the sandbox runs.
#[async_trait]
pub trait DaemonTransport: Send + Sync + 'static {
    /// A new stream to the daemon of the sandbox `sandbox_id` (starting the daemon if the
    /// transport does that, as Docker's bridge does).
    async fn open(&self, sandbox_id: &str) -> Result<Box<dyn DaemonIo>>;
}

enum Slot {
    Open(Client),
    Unavailable(Instant),
}

/// The connections of one control-plane process to its sandboxes' daemons, by sandbox id.
pub struct DaemonLinks {
    transport: Arc<dyn DaemonTransport>,
    slots: Mutex<HashMap<String, Slot>>,
    /// One connect at a time per sandbox.
    connecting: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

impl std::fmt::Debug for DaemonLinks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DaemonLinks")
            .field("open", &self.slots().len())
            .finish()
    }
}

impl DaemonLinks {
    pub fn new(transport: Arc<dyn DaemonTransport>) -> Arc<Self> {
        Arc::new(DaemonLinks {
            transport,
            slots: Mutex::new(HashMap::new()),
            connecting: Mutex::new(HashMap::new()),
        })
    }

    fn slots(&self) -> std::sync::MutexGuard<'_, HashMap<String, Slot>> {
        self.slots.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn open_client(&self, id: &str) -> Option<Result<Client, ()>> {
        match self.slots().get(id) {
            Some(Slot::Open(c)) if c.is_open() => Some(Ok(c.clone())),
            Some(Slot::Unavailable(at)) if at.elapsed() < RETRY_AFTER => Some(Err(())),
            _ => None,
        }
    }

    /// Whether this process holds an open connection to the sandbox's daemon, which means the
    /// sandbox runs: the connection ends when the sandbox stops.
    pub fn connected(&self, id: &str) -> bool {
        matches!(self.open_client(id), Some(Ok(_)))
    }

    /// The client of the sandbox's daemon, connecting if need be; `None` when the daemon
    /// cannot be reached (the caller uses its fallback).
    pub async fn client(self: &Arc<Self>, id: &str) -> Option<Client> {
        if let Some(found) = self.open_client(id) {
            return found.ok();
        }
        let lock = self
            .connecting
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(id.to_owned())
            .or_default()
            .clone();
        let _held = lock.lock().await;
        if let Some(found) = self.open_client(id) {
            return found.ok();
        }
        let started = Instant::now();
        match tokio::time::timeout(CONNECT_TIMEOUT, self.connect(id)).await {
            Ok(Ok(client)) => {
                tracing::debug!(sandbox.id = %id, elapsed = ?started.elapsed(), "connected to the sandbox daemon");
                self.slots()
                    .insert(id.to_owned(), Slot::Open(client.clone()));
                Some(client)
            }
            failed => {
                let reason = match failed {
                    Ok(Err(e)) => e,
                    _ => format!("no answer within {CONNECT_TIMEOUT:?}"),
                };
                tracing::warn!(sandbox.id = %id, %reason, "the sandbox daemon cannot be reached; the backend's fallback serves it");
                self.slots()
                    .insert(id.to_owned(), Slot::Unavailable(Instant::now()));
                None
            }
        }
    }

    async fn connect(self: &Arc<Self>, id: &str) -> Result<Client, String> {
        let io = self.transport.open(id).await.map_err(|e| e.to_string())?;
        let (client, driver) = Client::handshake(io).await.map_err(|e| e.to_string())?;
        let links = Arc::downgrade(self);
        let sandbox = id.to_owned();
        tokio::spawn(async move {
            driver.await;
            // The connection is gone: forget it, so the next call opens another.
            if let Some(links) = links.upgrade() {
                let mut slots = links.slots();
                if matches!(slots.get(&sandbox), Some(Slot::Open(c)) if !c.is_open()) {
                    slots.remove(&sandbox);
                }
            }
        });
        client.hello().await.map_err(|e| e.to_string())?;
        Ok(client)
    }

    /// Connects to the daemon of a sandbox that was just created, retrying until `timeout`
    /// (its daemon may not listen yet); unlike [`DaemonLinks::client`], a failure is not
    /// remembered, as the sandbox is not given up on the first refusal. The error is the last
    /// attempt's.
    pub async fn connect_within(
        self: &Arc<Self>,
        id: &str,
        timeout: Duration,
    ) -> Result<Client, String> {
        let deadline = Instant::now() + timeout;
        let mut wait = Duration::from_millis(20);
        loop {
            let attempt = tokio::time::timeout(CONNECT_TIMEOUT, self.connect(id)).await;
            let failure = match attempt {
                Ok(Ok(client)) => {
                    self.slots()
                        .insert(id.to_owned(), Slot::Open(client.clone()));
                    return Ok(client);
                }
                Ok(Err(e)) => e,
                Err(_) => format!("no answer within {CONNECT_TIMEOUT:?}"),
            };
            if Instant::now() + wait >= deadline {
                return Err(failure);
            }
            tokio::time::sleep(wait).await;
            wait = (wait * 2).min(Duration::from_millis(500));
        }
    }

    /// Connects in the background (a boot does not wait for it): the daemon starts with the
    /// sandbox, and the first command finds its connection open.
    pub fn warm(self: &Arc<Self>, id: &str) {
        let (links, id) = (self.clone(), id.to_owned());
        tokio::spawn(async move {
            links.client(&id).await;
        });
    }

    /// Drops what is kept for a sandbox that is stopped or removed.
    pub fn forget(&self, id: &str) {
        self.slots().remove(id);
        self.connecting
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(id);
    }
}
