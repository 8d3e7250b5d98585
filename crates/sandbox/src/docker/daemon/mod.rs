//! The Docker backend's way to a sandbox's daemon (`sandboxd`): the binary on a volume
//! (`volume`) mounted into every sandbox, and the bridge (`bridge`, a Docker exec) as the
//! [`DaemonTransport`] the shared connection keeping (`crate::daemon_link`) opens streams with.
//!
//! A sandbox whose daemon cannot be reached (no binary configured, an image it cannot run
//! in, a handshake that fails) is served by the Docker exec path instead.

mod bridge;
pub mod volume;

pub(crate) use crate::daemon_exec::exec;
pub use volume::DaemonBinary;

use crate::daemon_link::{DaemonIo, DaemonLinks, DaemonTransport, RETRY_AFTER};
use async_trait::async_trait;
use bollard::Docker;
use sandboxd::client::Client;
use std::sync::Arc;
use std::time::Instant;

/// Docker's transport to a daemon: a bridge exec in the sandbox.
struct Bridge(Docker);

#[async_trait]
impl DaemonTransport for Bridge {
    async fn open(&self, sandbox_id: &str) -> crate::Result<Box<dyn DaemonIo>> {
        Ok(Box::new(bridge::open(&self.0, sandbox_id).await?))
    }
}

/// The daemons of this backend's sandboxes: the binary they get and the connections to them.
pub struct Daemons {
    binary: Option<DaemonBinary>,
    /// Whether the volume holds the binary: `None` until a fill was tried.
    filled: tokio::sync::Mutex<Option<(bool, Instant)>>,
    /// None without a binary: every command is a Docker exec.
    links: Option<Arc<DaemonLinks>>,
}

impl std::fmt::Debug for Daemons {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Daemons")
            .field("binary", &self.binary.as_ref().map(|b| &b.digest))
            .finish()
    }
}

impl Daemons {
    pub fn new(docker: &Docker, binary: Option<DaemonBinary>) -> Self {
        let links = binary
            .is_some()
            .then(|| DaemonLinks::new(Arc::new(Bridge(docker.clone()))));
        Daemons {
            binary,
            filled: tokio::sync::Mutex::new(None),
            links,
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

    /// Whether this process holds an open connection to the sandbox's daemon, which means the
    /// sandbox runs: the connection is an exec's stream, and it ends when the sandbox stops.
    pub(crate) fn connected(&self, id: &str) -> bool {
        self.links.as_ref().is_some_and(|l| l.connected(id))
    }

    /// The client of the sandbox's daemon, connecting if need be; `None` when the daemon
    /// cannot be reached (the caller uses Docker exec).
    pub(crate) async fn client(&self, id: &str) -> Option<Client> {
        self.links.as_ref()?.client(id).await
    }

    /// Connects in the background (a boot does not wait for it).
    pub(crate) fn warm(&self, id: &str) {
        if let Some(links) = &self.links {
            links.warm(id);
        }
    }

    /// Drops what is kept for a sandbox that is stopped or removed.
    pub(crate) fn forget(&self, id: &str) {
        if let Some(links) = &self.links {
            links.forget(id);
        }
    }
}
