//! The proxy against real servers on loopback (which only these tests' guard lets through),
//! spoken to as a sandbox's tools speak to it: plain HTTP in absolute form, and `CONNECT`.

use crate::credentials::Credential;
use crate::decide::{Denial, Host, Policy};
use crate::guard::{Guard, GuardSettings};
use crate::observe::Observer;
use crate::proxy::{PolicySource, Proxy, DENIED_HEADER};
use crate::resolve::StaticResolver;
use crate::tls::{generate_ca, Authority};
use async_trait::async_trait;
use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper::{Request, StatusCode};
use hyper_util::rt::TokioIo;
use sandbox_agents_domain::network::{Egress, NetworkPolicy};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// Policies (and credentials) by sandbox, changed by the tests.
#[derive(Default)]
struct Policies(
    Mutex<HashMap<String, NetworkPolicy>>,
    Mutex<Vec<Credential>>,
);

#[async_trait]
impl PolicySource for Policies {
    async fn policy(&self, sandbox_id: &str) -> Result<Policy, String> {
        let map = self.0.lock().unwrap();
        Ok(match map.get(sandbox_id) {
            Some(p) => Policy::new(format!("session-of-{sandbox_id}"), [("session", p)])
                .with_credentials(self.1.lock().unwrap().clone()),
            None => Policy::closed(),
        })
    }
}

#[derive(Default)]
struct Seen {
    denied: Mutex<Vec<(String, String, u16, String)>>,
    closed: Mutex<Vec<(String, u64, u64)>>,
    notify: tokio::sync::Notify,
}

impl Observer for Seen {
    fn denied(&self, sandbox_id: &str, _: &Policy, host: &Host, port: u16, denial: &Denial) {
        self.denied.lock().unwrap().push((
            sandbox_id.into(),
            host.to_string(),
            port,
            denial.label.into(),
        ));
    }
    fn closed(&self, _: &Policy, host: &Host, _: u16, sent: u64, received: u64) {
        self.closed
            .lock()
            .unwrap()
            .push((host.to_string(), sent, received));
        self.notify.notify_waiters();
    }
}

struct Harness {
    proxy: Arc<Proxy>,
    policies: Arc<Policies>,
    seen: Arc<Seen>,
    http_port: u16,
    echo_port: u16,
}

fn allowlist(entries: &[&str]) -> NetworkPolicy {
    NetworkPolicy {
        egress: Egress::Allowlist,
        allow: entries.iter().map(|e| e.to_string()).collect(),
        presets: Vec::new(),
    }
}

async fn harness() -> Harness {
    harness_with(None).await
}

async fn harness_with(authority: Option<Arc<Authority>>) -> Harness {
    // An HTTP server answering with the path and Host it was sent.
    let http = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let http_port = http.local_addr().unwrap().port();
    tokio::spawn(async move {
        loop {
            let Ok((s, _)) = http.accept().await else {
                return;
            };
            tokio::spawn(async move {
                let svc =
                    hyper::service::service_fn(|req: Request<hyper::body::Incoming>| async move {
                        let host = req
                            .headers()
                            .get("host")
                            .and_then(|h| h.to_str().ok())
                            .unwrap_or("")
                            .to_owned();
                        let auth = req.headers().contains_key("proxy-authorization");
                        let body = format!("path={} host={host} proxy-auth={auth}", req.uri());
                        Ok::<_, std::convert::Infallible>(hyper::Response::new(
                            http_body_util::Full::new(Bytes::from(body)),
                        ))
                    });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(s), svc)
                    .await;
            });
        }
    });
    // A TCP echo server, for tunnels.
    let echo = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let echo_port = echo.local_addr().unwrap().port();
    tokio::spawn(async move {
        loop {
            let Ok((mut s, _)) = echo.accept().await else {
                return;
            };
            tokio::spawn(async move {
                let (mut r, mut w) = s.split();
                let _ = tokio::io::copy(&mut r, &mut w).await;
            });
        }
    });
    let resolver = StaticResolver::new([
        ("allowed.test", "127.0.0.1"),
        ("other.test", "127.0.0.1"),
        ("private.test", "10.255.255.1"),
        ("metadata.test", "169.254.169.254"),
        ("api.test", "127.0.0.1"),
    ]);
    let policies = Arc::new(Policies::default());
    let seen = Arc::new(Seen::default());
    let proxy = Proxy::with_authority(
        Guard::permitting_host_for_tests(GuardSettings::default()),
        Arc::new(resolver),
        policies.clone(),
        seen.clone(),
        authority,
    );
    Harness {
        proxy,
        policies,
        seen,
        http_port,
        echo_port,
    }
}

impl Harness {
    fn set(&self, sandbox: &str, p: NetworkPolicy) {
        self.policies.0.lock().unwrap().insert(sandbox.into(), p);
    }

    /// A new connection to the proxy as `sandbox`, as its client end.
    fn connect(&self, sandbox: &str) -> tokio::io::DuplexStream {
        let (client, server) = tokio::io::duplex(64 * 1024);
        tokio::spawn(self.proxy.clone().serve(server, Arc::from(sandbox)));
        client
    }

    /// A plain HTTP GET of `url` through the proxy: the status, the denial header, the body.
    async fn get(&self, sandbox: &str, url: &str) -> (StatusCode, Option<String>, String) {
        let io = TokioIo::new(self.connect(sandbox));
        let (mut sender, conn) = hyper::client::conn::http1::handshake(io).await.unwrap();
        tokio::spawn(conn);
        let req = Request::get(url)
            .header("proxy-authorization", "Basic c2VjcmV0")
            .body(Empty::<Bytes>::new())
            .unwrap();
        let resp = sender.send_request(req).await.unwrap();
        let status = resp.status();
        let denied = resp
            .headers()
            .get(DENIED_HEADER)
            .map(|v| v.to_str().unwrap().to_owned());
        let body = resp.into_body().collect().await.unwrap().to_bytes();
        (status, denied, String::from_utf8_lossy(&body).into_owned())
    }

    /// A `CONNECT` to `authority`: the status line, and the connection when it was opened.
    async fn tunnel(&self, sandbox: &str, authority: &str) -> (String, tokio::io::DuplexStream) {
        let mut io = self.connect(sandbox);
        io.write_all(
            format!("CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n\r\n").as_bytes(),
        )
        .await
        .unwrap();
        let mut head = Vec::new();
        while !head.ends_with(b"\r\n\r\n") {
            let mut b = [0u8; 1];
            if io.read(&mut b).await.unwrap() == 0 {
                break;
            }
            head.push(b[0]);
        }
        let head = String::from_utf8(head).unwrap();
        (head.lines().next().unwrap_or("").to_owned(), io)
    }
}

#[tokio::test]
async fn an_allowed_plain_request_is_forwarded_in_origin_form_without_proxy_headers() {
    let h = harness().await;
    h.set("sb", allowlist(&["allowed.test"]));
    let (status, denied, body) = h
        .get("sb", &format!("http://allowed.test:{}/a?b=1", h.http_port))
        .await;
    assert_eq!((status, denied), (StatusCode::OK, None));
    assert_eq!(
        body,
        format!(
            "path=/a?b=1 host=allowed.test:{} proxy-auth=false",
            h.http_port
        )
    );
}

#[tokio::test]
async fn a_denied_request_is_a_403_naming_the_rule_and_is_observed() {
    let h = harness().await;
    h.set("sb", allowlist(&["allowed.test"]));
    let (status, denied, body) = h
        .get("sb", &format!("http://other.test:{}/", h.http_port))
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert!(denied.unwrap().contains("allowlist"), "{body}");
    assert!(body.contains("other.test"), "{body}");
    let seen = h.seen.denied.lock().unwrap().clone();
    assert_eq!(
        seen,
        vec![(
            "sb".into(),
            "other.test".into(),
            h.http_port,
            "policy".into()
        )]
    );
}

#[tokio::test]
async fn names_resolving_to_private_or_metadata_addresses_are_refused_even_when_allowed() {
    let h = harness().await;
    h.set(
        "sb",
        allowlist(&["private.test", "metadata.test", "169.254.169.254"]),
    );
    for (url, label) in [
        ("http://private.test/", "private address"),
        ("http://metadata.test/", "metadata"),
        ("http://169.254.169.254/latest/meta-data/", "metadata"),
    ] {
        let (status, denied, _) = h.get("sb", url).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{url}");
        assert!(
            denied.as_deref().unwrap_or("").contains(label),
            "{url}: {denied:?}"
        );
    }
}

#[tokio::test]
async fn a_tunnel_to_an_allowed_port_carries_bytes_and_its_traffic_is_reported() {
    let h = harness().await;
    h.set("sb", allowlist(&[&format!("allowed.test:{}", h.echo_port)]));
    let (status, mut io) = h
        .tunnel("sb", &format!("allowed.test:{}", h.echo_port))
        .await;
    assert!(status.starts_with("HTTP/1.1 200"), "{status}");
    io.write_all(b"ping").await.unwrap();
    let mut back = [0u8; 4];
    io.read_exact(&mut back).await.unwrap();
    assert_eq!(&back, b"ping");
    let reported = h.seen.notify.notified();
    drop(io);
    tokio::time::timeout(std::time::Duration::from_secs(10), reported)
        .await
        .expect("the closed tunnel is reported");
    let closed = h.seen.closed.lock().unwrap().clone();
    assert_eq!(closed, vec![("allowed.test".into(), 4, 4)]);
}

#[tokio::test]
async fn a_port_rule_refuses_other_ports_and_a_refused_upstream_is_a_502() {
    let h = harness().await;
    h.set("sb", allowlist(&[&format!("allowed.test:{}", h.echo_port)]));
    let (status, _) = h
        .tunnel("sb", &format!("allowed.test:{}", h.http_port))
        .await;
    assert!(status.starts_with("HTTP/1.1 403"), "{status}");
    // A port nothing listens on, allowed: the sandbox hears why at once.
    let closed = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    h.set("sb", allowlist(&["allowed.test"]));
    let (status, _) = h.tunnel("sb", &format!("allowed.test:{port}")).await;
    assert!(status.starts_with("HTTP/1.1 502"), "{status}");
}

#[tokio::test]
async fn a_changed_policy_applies_to_the_next_connection() {
    let h = harness().await;
    h.set("sb", NetworkPolicy::default());
    let url = format!("http://allowed.test:{}/", h.http_port);
    assert_eq!(h.get("sb", &url).await.0, StatusCode::OK);
    h.set(
        "sb",
        NetworkPolicy {
            egress: Egress::None,
            ..Default::default()
        },
    );
    let (status, denied, _) = h.get("sb", &url).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert!(denied.unwrap().contains("'none'"));
}

#[tokio::test]
async fn a_sandbox_without_a_session_reaches_nothing_and_requests_to_the_proxy_itself_are_400s() {
    let h = harness().await;
    let (status, _, _) = h
        .get(
            "unclaimed",
            &format!("http://allowed.test:{}/", h.http_port),
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    h.set("sb", NetworkPolicy::default());
    let (status, _, body) = h.get("sb", "/not-a-proxy-request").await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    let (status, _, _) = h.get("sb", "https://allowed.test/").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
}

/// A TLS server for `api.test` and `other.test` (a certificate from a CA of the test's own),
/// answering every request with the headers it received, one `name: value` per line.
async fn tls_upstream() -> (u16, rustls_pki_types::CertificateDer<'static>) {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
    let ca_key = KeyPair::generate().unwrap();
    let mut ca = CertificateParams::default();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(DnType::CommonName, "the upstream's own CA");
    let ca_cert = ca.clone().self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca, ca_key);
    let key = KeyPair::generate().unwrap();
    let leaf = CertificateParams::new(vec!["api.test".to_owned(), "other.test".to_owned()])
        .unwrap()
        .signed_by(&key, &issuer)
        .unwrap();
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(
        vec![leaf.der().clone()],
        rustls_pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()),
    )
    .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        loop {
            let Ok((s, _)) = listener.accept().await else {
                return;
            };
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(s).await else {
                    return;
                };
                let svc =
                    hyper::service::service_fn(|req: Request<hyper::body::Incoming>| async move {
                        let mut seen = String::new();
                        for (name, value) in req.headers() {
                            seen.push_str(&format!("{name}: {}\n", value.to_str().unwrap_or("?")));
                        }
                        Ok::<_, std::convert::Infallible>(hyper::Response::new(
                            http_body_util::Full::new(Bytes::from(seen)),
                        ))
                    });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(tls), svc)
                    .await;
            });
        }
    });
    (port, ca_cert.der().clone())
}

/// A GET of `/` over TLS to `name` on `io`, trusting only `root`: the body, or the TLS error.
async fn get_over_tls(
    io: tokio::io::DuplexStream,
    name: &str,
    root: rustls_pki_types::CertificateDer<'static>,
    headers: &[(&str, &str)],
) -> Result<String, String> {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(root).unwrap();
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    let tls = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(
            rustls_pki_types::ServerName::try_from(name.to_owned()).unwrap(),
            io,
        )
        .await
        .map_err(|e| e.to_string())?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
        .await
        .unwrap();
    tokio::spawn(conn);
    let mut req = Request::get("/");
    if !headers.iter().any(|(k, _)| *k == "host") {
        req = req.header("host", name);
    }
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let resp = sender
        .send_request(req.body(Empty::<Bytes>::new()).unwrap())
        .await
        .unwrap();
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    Ok(String::from_utf8_lossy(&body).into_owned())
}

#[tokio::test]
async fn bound_credentials_are_added_inside_tls_for_their_host_and_no_other() {
    let (port, upstream_ca) = tls_upstream().await;
    let (ca_pem, key_pem) = generate_ca().unwrap();
    let authority =
        Arc::new(Authority::load(&ca_pem, &key_pem, vec![upstream_ca.clone()]).unwrap());
    let ours: rustls_pki_types::CertificateDer<'static> =
        rustls_pki_types::pem::PemObject::from_pem_slice(ca_pem.as_bytes()).unwrap();
    let h = harness_with(Some(authority)).await;
    h.set("sb", NetworkPolicy::default());
    *h.policies.1.lock().unwrap() = vec![
        Credential::inject(&["api.test".to_owned()], "X-Api-Key", "injected-secret").unwrap(),
        Credential::swap(
            &["api.test".to_owned()],
            "PLACEHOLDER-7f3a",
            "swapped-secret",
        )
        .unwrap(),
    ];
    let sent = [
        ("authorization", "Bearer PLACEHOLDER-7f3a"),
        ("x-api-key", "forged"),
    ];

    // The bound host: the proxy answers with the deployment CA's certificate for it, and the
    // host sees the credentials, never what the sandbox held.
    let (status, io) = h.tunnel("sb", &format!("api.test:{port}")).await;
    assert!(status.starts_with("HTTP/1.1 200"), "{status}");
    let seen = get_over_tls(io, "api.test", ours.clone(), &sent)
        .await
        .unwrap();
    assert!(
        seen.contains("authorization: Bearer swapped-secret"),
        "{seen}"
    );
    assert!(seen.contains("x-api-key: injected-secret"), "{seen}");
    assert!(
        !seen.contains("PLACEHOLDER") && !seen.contains("forged"),
        "{seen}"
    );

    // Another host: tunnelled untouched (its own certificate, the placeholder as sent).
    let (status, io) = h.tunnel("sb", &format!("other.test:{port}")).await;
    assert!(status.starts_with("HTTP/1.1 200"), "{status}");
    let seen = get_over_tls(io, "other.test", upstream_ca, &sent)
        .await
        .unwrap();
    assert!(
        seen.contains("authorization: Bearer PLACEHOLDER-7f3a"),
        "{seen}"
    );
    assert!(!seen.contains("secret"), "{seen}");
}

#[tokio::test]
async fn a_bound_host_that_fails_verification_is_a_502_before_anything_is_sent() {
    // The upstream's CA is not trusted: the host cannot prove it is api.test.
    let (port, _) = tls_upstream().await;
    let (ca_pem, key_pem) = generate_ca().unwrap();
    let authority = Arc::new(Authority::load(&ca_pem, &key_pem, Vec::new()).unwrap());
    let h = harness_with(Some(authority)).await;
    h.set("sb", NetworkPolicy::default());
    *h.policies.1.lock().unwrap() =
        vec![Credential::swap(&["api.test".to_owned()], "P", "s").unwrap()];
    let (status, _) = h.tunnel("sb", &format!("api.test:{port}")).await;
    assert!(status.starts_with("HTTP/1.1 502"), "{status}");
}

#[tokio::test]
async fn an_intercepted_request_naming_another_host_is_refused_with_its_credential_unsent() {
    let (port, upstream_ca) = tls_upstream().await;
    let (ca_pem, key_pem) = generate_ca().unwrap();
    let authority = Arc::new(Authority::load(&ca_pem, &key_pem, vec![upstream_ca]).unwrap());
    let ours: rustls_pki_types::CertificateDer<'static> =
        rustls_pki_types::pem::PemObject::from_pem_slice(ca_pem.as_bytes()).unwrap();
    let h = harness_with(Some(authority)).await;
    h.set("sb", NetworkPolicy::default());
    *h.policies.1.lock().unwrap() =
        vec![Credential::inject(&["api.test".to_owned()], "X-Api-Key", "injected-secret").unwrap()];
    // A front end routing by Host would send this, with the key, to other.test.
    let (_, io) = h.tunnel("sb", &format!("api.test:{port}")).await;
    let seen = get_over_tls(io, "api.test", ours, &[("host", "other.test")])
        .await
        .unwrap();
    assert!(seen.contains("needs a tunnel of its own"), "{seen}");
    assert!(!seen.contains("injected-secret"), "{seen}");
}

/// A pod's connection as its daemon opens it: the preamble, then what the tool sent.
async fn pod_get(addr: std::net::SocketAddr, preamble: &[u8], url: &str) -> Option<StatusCode> {
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    stream.write_all(preamble).await.unwrap();
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .ok()?;
    tokio::spawn(conn);
    let req = Request::get(url).body(Empty::<Bytes>::new()).unwrap();
    Some(sender.send_request(req).await.ok()?.status())
}

#[tokio::test]
async fn a_pod_speaks_as_itself_with_its_own_token_and_as_nobody_without_it() {
    use sandbox_agents_sandbox::kubernetes::egress_token;
    let h = harness().await;
    h.set("sa-a-1", allowlist(&["allowed.test"]));
    h.set("sa-b-2", allowlist(&["other.test"]));
    let key = [9u8; 32];
    let gateway = crate::pods::PodGateway::new(h.proxy.clone(), key, "sandboxes");
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(gateway.serve(listener));
    let allowed = format!("http://allowed.test:{}/", h.http_port);
    let own = egress_token(&key, "sandboxes", "sa-a-1");

    let as_itself = sandboxd::egress::preamble("sa-a-1", &own);
    assert_eq!(
        pod_get(addr, &as_itself, &allowed).await,
        Some(StatusCode::OK)
    );
    // Its policy, not another's: sa-b-2's host is refused to it.
    let other = format!("http://other.test:{}/", h.http_port);
    assert_eq!(
        pod_get(addr, &as_itself, &other).await,
        Some(StatusCode::FORBIDDEN)
    );

    // Its token under another pod's name, a token of another namespace, no preamble at all:
    // the connection is closed without an answer.
    let claimed = sandboxd::egress::preamble("sa-b-2", &own);
    assert_eq!(pod_get(addr, &claimed, &other).await, None);
    let elsewhere = sandboxd::egress::preamble("sa-a-1", &egress_token(&key, "other", "sa-a-1"));
    assert_eq!(pod_get(addr, &elsewhere, &allowed).await, None);
    assert_eq!(pod_get(addr, b"", &allowed).await, None);
}
