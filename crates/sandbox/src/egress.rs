//! The backend's side of egress control (issue 36): where a sandbox's traffic goes when
//! the deployment runs the egress proxy. The proxy itself (`sandbox-agents-egress`) decides
//! each connection; a backend only makes sure the sandbox has no other way out and that its
//! way in tells the proxy who is speaking.
//!
//! - Docker: the sandbox has no network at all (`none`: loopback only); a directory holding
//!   the proxy's Unix socket for this one sandbox is mounted read-only at
//!   [`sandboxd::egress::SOCKET_DIR`], and the daemon joins a loopback listener to it; the
//!   directory's [`sandboxd::egress::RESOLV_CONF_NAME`] is mounted at `/etc/resolv.conf`,
//!   naming the daemon's DNS server, which asks the proxy.
//! - Kubernetes (to come): a NetworkPolicy admitting only the proxy and DNS, the same proxy
//!   on a TCP listener, and the pod's address as its identity.

use std::collections::BTreeMap;
use std::path::PathBuf;

/// The control plane's proxy as a backend sees it.
pub trait EgressGateway: Send + Sync + std::fmt::Debug {
    /// Makes ready the way in of a sandbox about to be created under `key` (a name unique
    /// among the deployment's sandboxes while it lives; on Docker, the container's name at
    /// creation): the directory to mount into it. Until [`EgressGateway::bind`], its
    /// connections reach nothing. The directory holds the socket and
    /// [`sandboxd::egress::RESOLV_CONF_NAME`].
    fn prepare(&self, key: &str) -> std::io::Result<PathBuf>;

    /// The sandbox made under `key` is `sandbox_id`: its connections are that sandbox's.
    fn bind(&self, key: &str, sandbox_id: &str);

    /// The sandbox `sandbox_id` is gone: its way in is closed and removed.
    fn forget(&self, sandbox_id: &str);

    /// The way in made under `key` is not needed (its sandbox was never created, or no
    /// longer exists): closed and removed.
    fn abandon(&self, key: &str);

    /// The keys of every way in made ready, bound or not (for the sweep of leftovers).
    fn keys(&self) -> Vec<String>;
}

/// The environment that points a sandbox's tools at the proxy, through the daemon's
/// loopback listener. Both spellings: curl reads only the lowercase `http_proxy`, others
/// only the uppercase ones.
pub fn proxy_env() -> BTreeMap<String, String> {
    let url = format!("http://{}", sandboxd::egress::PROXY_ADDR);
    let none = "localhost,127.0.0.1,::1".to_owned();
    [
        ("HTTP_PROXY", url.clone()),
        ("HTTPS_PROXY", url.clone()),
        ("http_proxy", url.clone()),
        ("https_proxy", url),
        ("NO_PROXY", none.clone()),
        ("no_proxy", none),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect()
}
