//! The proxy: one HTTP/1.1 connection from one sandbox at a time, `CONNECT` tunnels and
//! plain HTTP requests in absolute form, each decided ([`decide`]) before anything is
//! connected. A refusal is a 403 naming the rule that refused it; a connection that fails
//! is a 502 saying why: never a silent hang, never a tunnel that looks open.

use crate::count::Counted;
use crate::decide::{decide, Decision, Denial, Host, Policy};
use crate::guard::Guard;
use crate::http::{origin_form, strip_hop_by_hop, text, Body};
use crate::observe::{Done, Observer};
use crate::resolve::Resolve;
use http_body_util::{BodyExt, Empty};
use hyper::body::Incoming;
use hyper::header::{self, HeaderName, HeaderValue};
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;

/// How long one connection attempt to an allowed address may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a request's head may take to arrive.
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);
/// The header a refusal names its reason in.
pub const DENIED_HEADER: &str = "x-sandbox-agents-egress-denied";

pub use crate::decide::PolicySource;

pub struct Proxy {
    pub(crate) guard: Guard,
    pub(crate) resolver: Arc<dyn Resolve>,
    source: Arc<dyn PolicySource>,
    pub(crate) observer: Arc<dyn Observer>,
    /// The names the sandbox's DNS refused lately (`dns`).
    pub(crate) dns_refusals: crate::dns::Refusals,
    /// The deployment's egress CA: without it, no credential is applied (their hosts'
    /// tunnels are refused rather than sent without them).
    authority: Option<Arc<crate::tls::Authority>>,
}

impl Proxy {
    pub fn new(
        guard: Guard,
        resolver: Arc<dyn Resolve>,
        source: Arc<dyn PolicySource>,
        observer: Arc<dyn Observer>,
    ) -> Arc<Self> {
        Self::with_authority(guard, resolver, source, observer, None)
    }

    /// [`Proxy::new`], applying bound credentials with the deployment's CA.
    pub fn with_authority(
        guard: Guard,
        resolver: Arc<dyn Resolve>,
        source: Arc<dyn PolicySource>,
        observer: Arc<dyn Observer>,
        authority: Option<Arc<crate::tls::Authority>>,
    ) -> Arc<Self> {
        Arc::new(Proxy {
            guard,
            resolver,
            source,
            observer,
            dns_refusals: Default::default(),
            authority,
        })
    }

    /// The policy of a sandbox, read afresh for every connection: a change (a `PATCH` of the
    /// session's own policy, in any server process) applies from the sandbox's next
    /// connection, and nothing needs telling. One indexed lookup per connection.
    pub(crate) async fn policy(&self, sandbox_id: &str) -> Result<Policy, String> {
        self.source.policy(sandbox_id).await
    }

    /// Serves one connection from the sandbox `sandbox_id` until it closes.
    pub async fn serve<IO>(self: Arc<Self>, io: IO, sandbox_id: Arc<str>)
    where
        IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let service = service_fn(move |req| {
            let proxy = self.clone();
            let sandbox = sandbox_id.clone();
            async move { Ok::<_, Infallible>(proxy.handle(&sandbox, req).await) }
        });
        // A sandbox that opens a connection and sends nothing holds no task for long.
        let served = hyper::server::conn::http1::Builder::new()
            .timer(hyper_util::rt::TokioTimer::new())
            .header_read_timeout(HEADER_READ_TIMEOUT)
            .serve_connection(TokioIo::new(io), service)
            .with_upgrades()
            .await;
        if let Err(e) = served {
            tracing::debug!(error = %e, "an egress connection ended with an error");
        }
    }

    async fn handle(self: &Arc<Self>, sandbox_id: &str, req: Request<Incoming>) -> Response<Body> {
        // The sandbox's DNS queries (`dns`): answered here, never resolved or connected to.
        if crate::dns::is_dns(&req) {
            let dns = crate::dns::Answerer {
                source: &*self.source,
                resolver: &*self.resolver,
                guard: &self.guard,
                observer: &*self.observer,
                refusals: &self.dns_refusals,
            };
            return dns.answer(sandbox_id, req).await;
        }
        let (host, port) = match target(&req) {
            Ok(t) => t,
            Err(answer) => return answer,
        };
        let policy = match self.policy(sandbox_id).await {
            Ok(p) => Arc::new(p),
            Err(e) => {
                tracing::error!(sandbox_id, error = %e, "an egress policy could not be read");
                return text(
                    StatusCode::SERVICE_UNAVAILABLE,
                    format!("the egress policy could not be read: {e}\n"),
                );
            }
        };
        let addrs = match decide(&policy, &host, port, &*self.resolver, &self.guard).await {
            Decision::Deny(denial) => {
                metrics::counter!("sandbox_agents_egress_decisions_total", "verdict" => "denied", "reason" => denial.label).increment(1);
                tracing::info!(sandbox_id, session = policy.session.as_deref(), %host, port, reason = %denial.reason, "egress denied");
                self.observer
                    .denied(sandbox_id, &policy, &host, port, &denial);
                return refused(&host, port, &denial);
            }
            Decision::Allow { addrs, rule } => {
                metrics::counter!("sandbox_agents_egress_decisions_total", "verdict" => "allowed", "reason" => "policy").increment(1);
                tracing::debug!(sandbox_id, %host, port, rule, "egress allowed");
                addrs
            }
        };
        let stream = match connect(&addrs).await {
            Ok(s) => s,
            Err(e) => {
                return text(
                    StatusCode::BAD_GATEWAY,
                    format!("{host}:{port} could not be reached: {e}\n"),
                );
            }
        };
        let sent = Arc::new(AtomicU64::new(0));
        let received = Arc::new(AtomicU64::new(0));
        let done = Done {
            observer: self.observer.clone(),
            policy,
            host,
            port,
            sent: sent.clone(),
            received: received.clone(),
        };
        let stream = Counted::new(stream, received, sent);
        let credentials: Vec<_> = done
            .policy
            .credentials
            .iter()
            .filter(|c| c.applies_to(&done.host.to_string()))
            .cloned()
            .collect();
        if req.method() == Method::CONNECT && !credentials.is_empty() {
            return self.intercepting(req, stream, credentials, done).await;
        }
        if req.method() == Method::CONNECT {
            tokio::spawn(crate::tunnel::run(req, stream, done, Arc::from(sandbox_id)));
            Response::new(Empty::new().map_err(|n| match n {}).boxed())
        } else {
            forward(req, stream, done).await
        }
    }
}

impl Proxy {
    /// A tunnel to a host with credentials: TLS to the host first (so a host that cannot be
    /// verified is a 502 on the `CONNECT`), then the sandbox's side (`intercept`).
    async fn intercepting(
        &self,
        req: Request<Incoming>,
        stream: Counted<TcpStream>,
        credentials: Vec<crate::credentials::Credential>,
        done: Done,
    ) -> Response<Body> {
        let host = done.host.to_string();
        let Some(authority) = &self.authority else {
            return text(StatusCode::BAD_GATEWAY, format!("{host} has credentials bound, and this server has no egress CA to apply them with\n"));
        };
        let config = match authority.server_config(&host) {
            Ok(c) => c,
            Err(e) => return text(StatusCode::BAD_GATEWAY, format!("{host}: {e}\n")),
        };
        let name = match rustls_pki_types::ServerName::try_from(host.clone()) {
            Ok(n) => n,
            Err(e) => return text(StatusCode::BAD_GATEWAY, format!("{host}: {e}\n")),
        };
        let handshake =
            tokio_rustls::TlsConnector::from(authority.upstream()).connect(name, stream);
        let upstream = match tokio::time::timeout(CONNECT_TIMEOUT, handshake).await {
            Err(_) => {
                return text(
                    StatusCode::BAD_GATEWAY,
                    format!("{host}: TLS with the host did not finish in {CONNECT_TIMEOUT:?}\n"),
                )
            }
            Ok(Ok(u)) => u,
            Ok(Err(e)) => {
                return text(
                    StatusCode::BAD_GATEWAY,
                    format!("{host}: TLS with the host failed: {e}\n"),
                )
            }
        };
        tokio::spawn(crate::intercept::serve(
            req,
            upstream,
            config,
            credentials,
            done,
        ));
        Response::new(Empty::new().map_err(|n| match n {}).boxed())
    }
}

/// A plain HTTP request, forwarded in origin form on a connection of its own.
async fn forward(
    req: Request<Incoming>,
    upstream: Counted<TcpStream>,
    done: Done,
) -> Response<Body> {
    let (mut sender, conn) =
        match hyper::client::conn::http1::handshake(TokioIo::new(upstream)).await {
            Ok(pair) => pair,
            Err(e) => return text(StatusCode::BAD_GATEWAY, format!("{}: {e}\n", done.host)),
        };
    tokio::spawn(async move {
        if let Err(e) = conn.await {
            tracing::debug!(error = %e, "a forwarded egress request's connection failed");
        }
    });
    let (mut parts, body) = req.into_parts();
    let authority = parts.uri.authority().map(|a| a.as_str().to_owned());
    parts.uri = origin_form(&parts.uri);
    strip_hop_by_hop(&mut parts.headers);
    if let Some(a) = authority {
        if let Ok(v) = HeaderValue::from_str(&a) {
            parts.headers.insert(header::HOST, v);
        }
    }
    match sender.send_request(Request::from_parts(parts, body)).await {
        Ok(resp) => {
            let (mut parts, body) = resp.into_parts();
            strip_hop_by_hop(&mut parts.headers);
            // The body owns `done`: the traffic is reported once it is read or dropped.
            let body = body.map_frame(move |frame| {
                let _ = &done;
                frame
            });
            Response::from_parts(parts, body.boxed())
        }
        Err(e) => text(StatusCode::BAD_GATEWAY, format!("{}: {e}\n", done.host)),
    }
}

/// Where a request goes: `CONNECT host:port`, or `http://host[:port]/…`.
#[allow(clippy::result_large_err)]
fn target(req: &Request<Incoming>) -> Result<(Host, u16), Response<Body>> {
    let uri = req.uri();
    let Some(authority) = uri.authority() else {
        return Err(text(
            StatusCode::BAD_REQUEST,
            "this is the sandbox's egress proxy: send requests through it (HTTP_PROXY, HTTPS_PROXY), not to it\n".into(),
        ));
    };
    let port = if req.method() == Method::CONNECT {
        match authority.port_u16() {
            Some(p) => p,
            None => {
                return Err(text(
                    StatusCode::BAD_REQUEST,
                    "CONNECT needs host:port\n".into(),
                ))
            }
        }
    } else {
        match uri.scheme_str() {
            Some("http") => authority.port_u16().unwrap_or(80),
            _ => {
                return Err(text(
                    StatusCode::BAD_REQUEST,
                    "only http:// requests are forwarded; HTTPS goes through CONNECT\n".into(),
                ))
            }
        }
    };
    // `user@host`: not a host, and a Host header built from it would name another.
    if authority.as_str().contains('@') {
        return Err(text(
            StatusCode::BAD_REQUEST,
            "a proxied request names no user: send credentials in headers\n".into(),
        ));
    }
    match Host::parse(authority.host()) {
        Some(h) => Ok((h, port)),
        None => Err(text(
            StatusCode::BAD_REQUEST,
            format!("'{}' is not a host\n", authority.host()),
        )),
    }
}

async fn connect(addrs: &[SocketAddr]) -> std::io::Result<TcpStream> {
    let mut last = None;
    for addr in addrs {
        match tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(addr)).await {
            Ok(Ok(s)) => {
                let _ = s.set_nodelay(true);
                return Ok(s);
            }
            Ok(Err(e)) => last = Some(e),
            Err(_) => {
                last = Some(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    format!("{addr} did not answer in {CONNECT_TIMEOUT:?}"),
                ))
            }
        }
    }
    Err(last.unwrap_or_else(|| std::io::Error::other("no address")))
}

fn refused(host: &Host, port: u16, denial: &Denial) -> Response<Body> {
    let mut r = text(
        StatusCode::FORBIDDEN,
        format!(
            "sandbox-agents egress proxy refused {host}:{port}: {}\n",
            denial.reason
        ),
    );
    if let Ok(v) = HeaderValue::from_str(&denial.reason) {
        r.headers_mut()
            .insert(HeaderName::from_static(DENIED_HEADER), v);
    }
    r
}
