//! Port previews: a listener of their own reverse-proxies a browser to a service listening
//! inside a session's sandbox, WebSockets included. The API's listener never serves them, so
//! a page a sandbox serves is never same-origin with `/api` or the UI.
//!
//! Two ways to address a preview, both signed ([`token`]):
//! * **path**: `{preview public URL}/preview/<session>-<port>-<mac>/…`, every preview on the
//!   preview listener's origin (the default: the API port + 1);
//! * **domain**: `https://<port>-<session>-<mac>.<preview domain>/…` (a wildcard DNS name and
//!   certificate pointing at the preview listener), one origin per session and port, which is
//!   what deployments that serve browsers should use. The MAC is in the label because the
//!   host is all a browser sends on every request of the page.
//!
//! Security invariants:
//! * **The signed token or label is the only authority.** Cookies and `Authorization` are
//!   never consulted here, and never forwarded when they are ours ([`headers`]). This is why
//!   the session is read by id in any project.
//! * **Upstreams are only ever `127.0.0.2:<host port>`** (`sandbox::PUBLISH_IP`: not the
//!   API's loopback host, so a page cannot send the operator's cookies to a sandbox's port
//!   directly), **or, with `--docker-network`, the sandbox's own address on that network**;
//!   either read from the session's `port_map` (which the lifecycle wrote when the sandbox
//!   started), never from the request. **A port with no address there** (a sandbox behind
//!   the egress proxy has no network but loopback) **is reached through the backend**
//!   (`SandboxBackend::connect_port`: a tunnel to the port on the sandbox's loopback, through
//!   its daemon), by the session's own sandbox id, likewise never from the request.
//! * **On every request the port must be in `exposed_ports` and the session running**: a
//!   token outlives a stop, the check does not.
//! * **Upstream connections are never reused**: a host port freed by one sandbox can be
//!   published by another's, so a kept-alive connection could reach the wrong session.

mod headers;
pub mod links;
mod proxy;
mod token;

pub use links::{url, PreviewDomain, PreviewSettings};
pub use proxy::{moved, router};
pub use token::PreviewKey;
