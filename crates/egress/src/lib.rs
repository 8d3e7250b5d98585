//! The egress proxy: a sandbox's only way out. Sandboxes have no route of their own; what
//! they send through `HTTP_PROXY`/`HTTPS_PROXY` reaches [`Proxy`] on a listener that tells
//! which sandbox is speaking (on Docker, a Unix socket per sandbox: [`gateway`]; on Kubernetes, a TCP listener whose
//! connections name their pod and prove it: [`pods`]), and each
//! connection is decided against the session's network policy ([`decide`]) and the
//! addresses no policy opens ([`guard`]) before anything is connected.
//!
//! Names are resolved here ([`resolve`]), never in the sandbox, and the address connected
//! to is the address checked. The sandbox's own DNS queries come through the same way and
//! are answered here ([`dns`]) for the names its policy allows only.

pub mod count;
pub mod credentials;
pub mod decide;
pub mod dns;
pub mod gateway;
pub mod guard;
mod held;
mod http;
mod intercept;
pub mod observe;
pub mod pods;
pub mod proxy;
pub mod resolve;
pub mod tls;
mod tunnel;

pub use credentials::Credential;
pub use decide::{Decision, Denial, Host, Policy};
pub use gateway::UnixGateway;
pub use guard::{Guard, GuardSettings};
pub use observe::{Observer, Unobserved};
pub use pods::PodGateway;
pub use proxy::{PolicySource, Proxy, DENIED_HEADER};
pub use resolve::{Resolve, StaticResolver, SystemResolver};
pub use tls::Authority;

#[cfg(test)]
mod dns_tests;
#[cfg(test)]
mod proxy_tests;
#[cfg(test)]
mod tunnel_tests;
