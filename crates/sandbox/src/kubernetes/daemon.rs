//! The Kubernetes backend's way to a sandbox's daemon: a TCP connection to the pod's address
//! on the cluster network, opened with the pod's own token (`sandboxd::tcp`). `pods/exec` and
//! the API server are never on this path: a command costs the cluster nothing.
//!
//! Each pod's token is derived from the deployment's daemon key and the pod's namespace and
//! name (HMAC-SHA-256), so every replica of the control plane can reach every sandbox without
//! sharing state, and the pod holds only the token's hash: its own code, which can read its
//! environment, learns nothing that opens a connection.

use crate::daemon_link::{DaemonIo, DaemonTransport};
use crate::{Result, SandboxError};
use async_trait::async_trait;
use hmac::{Hmac, Mac};
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use sha2::Sha256;
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Mutex;

/// The token of the pod `name` in `namespace`.
pub fn token(key: &[u8; 32], namespace: &str, name: &str) -> [u8; 32] {
    derive(key, b"sandbox-agents sandboxd token\0", namespace, name)
}

/// An HMAC-SHA-256 under `key` of `label` (which keeps tokens of different uses apart), the
/// namespace and the pod's name.
fn derive(key: &[u8; 32], label: &[u8], namespace: &str, name: &str) -> [u8; 32] {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes any key length");
    mac.update(label);
    mac.update(namespace.as_bytes());
    mac.update(b"\0");
    mac.update(name.as_bytes());
    mac.finalize().into_bytes().into()
}

/// The egress token of the pod `name` in `namespace`: what its daemon opens each connection
/// to the egress proxy with (`sandboxd::egress::preamble`). The same key as the daemon's
/// tokens under another label, so neither token is ever the other. Unlike the daemon's, the
/// pod holds this token itself (it must send it), so the sandbox's code can read it: it
/// proves only that sandbox's own identity, which the sandbox has anyway.
pub fn egress_token(key: &[u8; 32], namespace: &str, name: &str) -> [u8; 32] {
    derive(key, b"sandbox-agents egress token\0", namespace, name)
}

/// Opens connections to pods' daemons at their addresses.
pub struct PodNetwork {
    pub(crate) pods: Api<Pod>,
    pub(crate) namespace: String,
    pub(crate) key: [u8; 32],
    /// Pod addresses this process has seen, by pod name (a pod keeps its address for life; a
    /// pod made again under the same name is forgotten first).
    pub(crate) addresses: Mutex<HashMap<String, IpAddr>>,
}

impl PodNetwork {
    pub fn remember(&self, name: &str, ip: IpAddr) {
        self.addresses().insert(name.to_owned(), ip);
    }

    pub fn forget(&self, name: &str) {
        self.addresses().remove(name);
    }

    fn addresses(&self) -> std::sync::MutexGuard<'_, HashMap<String, IpAddr>> {
        self.addresses.lock().unwrap_or_else(|e| e.into_inner())
    }

    async fn address(&self, name: &str) -> Result<IpAddr> {
        if let Some(ip) = self.addresses().get(name) {
            return Ok(*ip);
        }
        let pod = self
            .pods
            .get_opt(name)
            .await
            .map_err(super::error::api)?
            .ok_or_else(|| SandboxError::NotFound(name.to_owned()))?;
        let ip = super::status::address(&pod).ok_or_else(|| {
            SandboxError::Backend(format!(
                "the pod {name} has no address yet ({})",
                super::status::describe(&pod)
            ))
        })?;
        self.remember(name, ip);
        Ok(ip)
    }
}

#[async_trait]
impl DaemonTransport for PodNetwork {
    async fn open(&self, sandbox_id: &str) -> Result<Box<dyn DaemonIo>> {
        let ip = self.address(sandbox_id).await?;
        let addr = SocketAddr::new(ip, super::pod::DAEMON_PORT);
        let token = token(&self.key, &self.namespace, sandbox_id);
        let stream = sandboxd::tcp::connect(addr, &token).await.map_err(|e| {
            SandboxError::Backend(format!(
                "connecting to the daemon of {sandbox_id} at {addr}: {e}"
            ))
        })?;
        Ok(Box::new(stream))
    }
}

/// Opens connections to pods' daemons through the API server's `pods/portforward`: for a
/// control plane outside the cluster. The token and the protocol on the stream are the pod
/// network's; only the way there differs (the node connects to the daemon's port inside the
/// pod, so the pod's NetworkPolicy, which admits the control plane's pods, is not in the way).
pub struct PortForward {
    pub(crate) pods: Api<Pod>,
    pub(crate) namespace: String,
    pub(crate) key: [u8; 32],
}

#[async_trait]
impl DaemonTransport for PortForward {
    async fn open(&self, sandbox_id: &str) -> Result<Box<dyn DaemonIo>> {
        use tokio::io::AsyncWriteExt;
        let port = super::pod::DAEMON_PORT;
        let failed = |e: String| {
            SandboxError::Backend(format!(
                "a port-forward to the daemon of {sandbox_id} (port {port}) through the API \
                 server failed: {e}"
            ))
        };
        let mut forward = self
            .pods
            .portforward(sandbox_id, &[port])
            .await
            .map_err(|e| failed(e.to_string()))?;
        let mut stream = forward
            .take_stream(port)
            .ok_or_else(|| failed("the API server opened no stream".to_owned()))?;
        // What the node says when it cannot reach the port (the daemon not listening): the
        // handshake on the stream then fails on its own deadline, and this says why.
        if let Some(error) = forward.take_error(port) {
            let pod = sandbox_id.to_owned();
            tokio::spawn(async move {
                if let Some(e) = error.await {
                    tracing::warn!(%pod, error = %e, "the node could not forward to the daemon");
                }
            });
        }
        // The forward's task lives as long as the stream: dropping the stream ends it.
        let token = token(&self.key, &self.namespace, sandbox_id);
        stream
            .write_all(&sandboxd::tcp::preamble(&token))
            .await
            .map_err(|e| failed(e.to_string()))?;
        Ok(Box::new(stream))
    }
}
