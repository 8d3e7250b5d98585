//! The Docker backend's way to a sandbox's daemon (`sandboxd`): the binary on a volume
//! (`volume`), one bridge per sandbox and control-plane process (`bridge`), an HTTP/2
//! client on it, kept here by container id.
//!
//! A sandbox whose daemon cannot be reached (no binary configured, an image it cannot run
//! in, a handshake that fails) is served by the Docker exec path instead, and asked again
//! after [`RETRY_AFTER`]. A connection that drops (the daemon died, the sandbox stopped) is
//! forgotten; the next call opens a new bridge, which starts the daemon again.

mod bridge;
mod exec;
pub mod volume;

pub(crate) use exec::exec;
pub use volume::DaemonBinary;

use bollard::Docker;
use sandboxd::client::Client;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a sandbox whose daemon could not be reached is served by Docker exec before
/// the daemon is tried again.
pub const RETRY_AFTER: Duration = Duration::from_secs(60);
/// How long opening a bridge and the handshake may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

enum Slot {
    Open(Client),
    Unavailable(Instant),
}

/// The daemons of this backend's sandboxes.
pub struct Daemons {
    binary: Option<DaemonBinary>,
    /// Whether the volume holds the binary: `None` until a fill was tried.
    filled: tokio::sync::Mutex<Option<(bool, Instant)>>,
    slots: Mutex<HashMap<String, Slot>>,
    /// One connect at a time per sandbox.
    connecting: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

impl std::fmt::Debug for Daemons {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Daemons")
            .field("binary", &self.binary.as_ref().map(|b| &b.digest))
            .finish()
    }
}

impl Daemons {
    pub fn new(binary: Option<DaemonBinary>) -> Self {
        Daemons {
            binary,
            filled: tokio::sync::Mutex::new(None),
            slots: Mutex::new(HashMap::new()),
            connecting: Mutex::new(HashMap::new()),
        }
    }

    pub fn enabled(&self) -> bool {
        self.binary.is_some()
    }

    /// The mount a new sandbox gets, once the volume holds the binary (filled through a
    /// container of `image` on first need); none without a binary or when filling failed.
    pub(crate) async fn mount(
        &self,
        docker: &Docker,
        image: &str,
    ) -> Option<bollard::models::Mount> {
        let binary = self.binary.as_ref()?;
        let mut filled = self.filled.lock().await;
        let fresh = match *filled {
            Some((true, _)) => true,
            Some((false, at)) if at.elapsed() < RETRY_AFTER => false,
            _ => {
                let ok = match volume::fill(docker, binary, image).await {
                    Ok(()) => true,
                    Err(e) => {
                        tracing::warn!(error = %e, "could not put the sandbox daemon on its volume; sandboxes use Docker exec");
                        false
                    }
                };
                *filled = Some((ok, Instant::now()));
                ok
            }
        };
        fresh.then(|| binary.mount())
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
    /// sandbox runs: the connection is an exec's stream, and it ends when the sandbox stops.
    pub(crate) fn connected(&self, id: &str) -> bool {
        matches!(self.open_client(id), Some(Ok(_)))
    }

    /// The client of the sandbox's daemon, connecting if need be; `None` when the daemon
    /// cannot be reached (the caller uses Docker exec).
    pub(crate) async fn client(self: &Arc<Self>, docker: &Docker, id: &str) -> Option<Client> {
        self.binary.as_ref()?;
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
        match tokio::time::timeout(CONNECT_TIMEOUT, self.connect(docker, id)).await {
            Ok(Ok(client)) => {
                tracing::debug!(container.id = %id, elapsed = ?started.elapsed(), "connected to the sandbox daemon");
                self.slots()
                    .insert(id.to_owned(), Slot::Open(client.clone()));
                Some(client)
            }
            failed => {
                let reason = match failed {
                    Ok(Err(e)) => e,
                    _ => format!("no answer within {CONNECT_TIMEOUT:?}"),
                };
                tracing::warn!(container.id = %id, %reason, "the sandbox daemon cannot be reached; using Docker exec");
                self.slots()
                    .insert(id.to_owned(), Slot::Unavailable(Instant::now()));
                None
            }
        }
    }

    async fn connect(self: &Arc<Self>, docker: &Docker, id: &str) -> Result<Client, String> {
        let io = bridge::open(docker, id).await.map_err(|e| e.to_string())?;
        let (client, driver) = Client::handshake(io).await.map_err(|e| e.to_string())?;
        let daemons = Arc::downgrade(self);
        let container = id.to_owned();
        tokio::spawn(async move {
            driver.await;
            // The connection is gone: forget it, so the next call opens another.
            if let Some(daemons) = daemons.upgrade() {
                let mut slots = daemons.slots();
                if matches!(slots.get(&container), Some(Slot::Open(c)) if !c.is_open()) {
                    slots.remove(&container);
                }
            }
        });
        client.hello().await.map_err(|e| e.to_string())?;
        Ok(client)
    }

    /// Connects in the background (a boot does not wait for it): the daemon starts with the
    /// sandbox, and the first command finds its connection open.
    pub(crate) fn warm(self: &Arc<Self>, docker: &Docker, id: &str) {
        if !self.enabled() {
            return;
        }
        let (daemons, docker, id) = (self.clone(), docker.clone(), id.to_owned());
        tokio::spawn(async move {
            daemons.client(&docker, &id).await;
        });
    }

    /// Drops what is kept for a sandbox that is stopped or removed.
    pub(crate) fn forget(&self, id: &str) {
        self.slots().remove(id);
        self.connecting
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(id);
    }
}
