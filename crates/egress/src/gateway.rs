//! Docker's way in to the proxy: one Unix socket per sandbox, in a directory of its own
//! under the gateway's root, which the backend mounts into that sandbox alone. The socket a
//! connection arrives on is the sandbox speaking: nothing it sends can claim to be another.
//!
//! The directory also holds the sandbox's `resolv.conf` ([`sandboxd::egress::RESOLV_CONF`]),
//! naming the daemon's DNS server, which asks the proxy ([`crate::dns`]).
//!
//! The root is the control plane's (mode 0700): no other user of the host reaches a
//! sandbox's socket, and so its policy, through the host's filesystem.

use crate::proxy::Proxy;
use sandbox_agents_sandbox::EgressGateway;
use std::collections::HashMap;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// The socket's name in a sandbox's directory (as `sandboxd` expects it).
const SOCKET_NAME: &str = "proxy.sock";
/// The longest key: a container name at creation (`sa-<uuid>`, `sa-pool-<uuid>`) fits.
const MAX_KEY: usize = 48;
/// Connections one sandbox has open through the proxy at once, its `CONNECT` tunnels
/// included (`held`).
const MAX_CONNECTIONS: usize = 256;
/// `sun_path` holds 108 bytes, its terminating NUL included.
const MAX_SOCKET_PATH: usize = 107;

/// One sandbox's way in: who it is (once bound) and the task accepting on its socket.
struct Way {
    identity: Arc<Mutex<Option<Arc<str>>>>,
    accept: tokio::task::AbortHandle,
}

pub struct UnixGateway {
    proxy: Arc<Proxy>,
    root: PathBuf,
    ways: Mutex<HashMap<String, Way>>,
}

impl std::fmt::Debug for UnixGateway {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UnixGateway")
            .field("root", &self.root)
            .finish()
    }
}

impl UnixGateway {
    /// A gateway whose sockets live under `root` (made if need be, mode 0700). Refused when
    /// a socket's path under it would be longer than a Unix socket's address allows.
    pub fn new(proxy: Arc<Proxy>, root: PathBuf) -> std::io::Result<Arc<Self>> {
        let longest = root.as_os_str().len() + 1 + MAX_KEY + 1 + SOCKET_NAME.len();
        if longest > MAX_SOCKET_PATH {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!(
                    "the egress socket directory {} is too long for Unix socket paths: use one of at most {} characters (--egress-socket-dir)",
                    root.display(),
                    MAX_SOCKET_PATH - (MAX_KEY + 2 + SOCKET_NAME.len())
                ),
            ));
        }
        std::fs::create_dir_all(&root)?;
        // A directory someone else made (under /tmp, say), or a link to one, would let them
        // put a socket of theirs where a sandbox's traffic goes.
        let meta = std::fs::symlink_metadata(&root)?;
        let ours = std::fs::metadata("/proc/self")?.uid();
        if !meta.is_dir() || meta.uid() != ours {
            return Err(std::io::Error::new(
                std::io::ErrorKind::PermissionDenied,
                format!(
                    "the egress socket directory {} is not a directory of this server's user",
                    root.display()
                ),
            ));
        }
        std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o700))?;
        Ok(Arc::new(UnixGateway {
            proxy,
            root,
            ways: Mutex::default(),
        }))
    }

    fn ways(&self) -> std::sync::MutexGuard<'_, HashMap<String, Way>> {
        self.ways.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn dir(&self, key: &str) -> std::io::Result<PathBuf> {
        let plain = !key.is_empty()
            && key.len() <= MAX_KEY
            && key
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.')
            && key != "."
            && key != "..";
        if !plain {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("'{key}' is not a sandbox key"),
            ));
        }
        Ok(self.root.join(key))
    }

    fn listen(&self, dir: &Path) -> std::io::Result<tokio::net::UnixListener> {
        std::fs::create_dir_all(dir)?;
        // The sandbox user (whatever its uid) lists the directory and connects to the socket;
        // nobody else can reach the directory through the root.
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755))?;
        // The sandbox's resolver configuration, which the backend mounts read-only at
        // `/etc/resolv.conf`: Docker's own `dns` settings for a sandbox without a network
        // differ across versions, this file does not. Rewritten in place (same file), so a
        // sandbox that has it mounted already (a restarted control plane) reads it still.
        let resolv = dir.join(sandboxd::egress::RESOLV_CONF_NAME);
        std::fs::write(&resolv, sandboxd::egress::RESOLV_CONF)?;
        std::fs::set_permissions(&resolv, std::fs::Permissions::from_mode(0o644))?;
        let socket = dir.join(SOCKET_NAME);
        match std::fs::remove_file(&socket) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
        let listener = std::os::unix::net::UnixListener::bind(&socket)?;
        std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o666))?;
        listener.set_nonblocking(true)?;
        tokio::net::UnixListener::from_std(listener)
    }
}

impl EgressGateway for UnixGateway {
    fn prepare(&self, key: &str) -> std::io::Result<PathBuf> {
        let dir = self.dir(key)?;
        let listener = self.listen(&dir)?;
        let identity: Arc<Mutex<Option<Arc<str>>>> = Arc::default();
        let proxy = self.proxy.clone();
        let who = identity.clone();
        let open = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
        let accept = tokio::spawn(async move {
            loop {
                // At the bound, accepting waits: the sandbox's next connections queue in the
                // socket's backlog instead of taking descriptors and tasks from the others.
                let Ok(permit) = open.clone().acquire_owned().await else {
                    return;
                };
                let stream = match listener.accept().await {
                    Ok((s, _)) => s,
                    // Out of descriptors, say: this sandbox's way out pauses, it does not end.
                    Err(e) => {
                        tracing::warn!(error = %e, "an egress socket could not accept; trying again");
                        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                        continue;
                    }
                };
                // Unbound (a sandbox still being created): the empty id, which no session
                // holds, so its connections reach nothing.
                let id = who.lock().unwrap_or_else(|e| e.into_inner()).clone();
                let proxy = proxy.clone();
                // The permit goes with the stream, into a tunnel if it becomes one.
                let stream = crate::held::Held::new(stream, permit);
                tokio::spawn(proxy.serve(stream, id.unwrap_or_else(|| Arc::from(""))));
            }
        })
        .abort_handle();
        if let Some(old) = self.ways().insert(key.to_owned(), Way { identity, accept }) {
            old.accept.abort();
        }
        Ok(dir)
    }

    fn bind(&self, key: &str, sandbox_id: &str) {
        if let Some(way) = self.ways().get(key) {
            *way.identity.lock().unwrap_or_else(|e| e.into_inner()) = Some(Arc::from(sandbox_id));
        }
    }

    fn forget(&self, sandbox_id: &str) {
        let key = self.ways().iter().find_map(|(k, w)| {
            let id = w.identity.lock().unwrap_or_else(|e| e.into_inner());
            (id.as_deref() == Some(sandbox_id)).then(|| k.clone())
        });
        if let Some(key) = key {
            self.abandon(&key);
        }
    }

    fn abandon(&self, key: &str) {
        if let Some(way) = self.ways().remove(key) {
            way.accept.abort();
        }
        if let Ok(dir) = self.dir(key) {
            match std::fs::remove_dir_all(&dir) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    tracing::warn!(dir = %dir.display(), error = %e, "an egress socket's directory could not be removed")
                }
                _ => {}
            }
        }
    }

    fn keys(&self) -> Vec<String> {
        let mut keys: Vec<String> = self.ways().keys().cloned().collect();
        if let Ok(entries) = std::fs::read_dir(&self.root) {
            for e in entries.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                if !keys.contains(&name) {
                    keys.push(name);
                }
            }
        }
        keys
    }
}
