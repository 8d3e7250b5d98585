//! The proxy against real servers on loopback (which only these tests' guard lets through),
//! spoken to as a sandbox's tools speak to it: plain HTTP in absolute form, and `CONNECT`.

use crate::decide::{Denial, Host, Policy};
use crate::guard::{Guard, GuardSettings};
use crate::proxy::{Observer, PolicySource, Proxy, DENIED_HEADER};
use crate::resolve::StaticResolver;
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

/// Policies by sandbox, changed by the tests.
#[derive(Default)]
struct Policies(Mutex<HashMap<String, NetworkPolicy>>);

#[async_trait]
impl PolicySource for Policies {
    async fn policy(&self, sandbox_id: &str) -> Result<Policy, String> {
        let map = self.0.lock().unwrap();
        Ok(match map.get(sandbox_id) {
            Some(p) => Policy::new(format!("session-of-{sandbox_id}"), [("session", p)]),
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
    ]);
    let policies = Arc::new(Policies::default());
    let seen = Arc::new(Seen::default());
    let proxy = Proxy::new(
        Guard::permitting_host_for_tests(GuardSettings::default()),
        Arc::new(resolver),
        policies.clone(),
        seen.clone(),
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
