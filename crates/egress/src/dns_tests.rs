//! The sandbox's DNS as the daemon asks it: RFC 8484-style `POST`s through the proxy's
//! connection, answered for the names the policy allows only.

use crate::decide::{Denial, Host, Policy};
use crate::dns::{DNS_HOST, DNS_PATH, TTL};
use crate::guard::{Guard, GuardSettings};
use crate::observe::Observer;
use crate::proxy::{PolicySource, Proxy};
use crate::resolve::StaticResolver;
use async_trait::async_trait;
use bytes::Bytes;
use hickory_proto::op::{Message, MessageType, Query, ResponseCode};
use hickory_proto::rr::{Name, RData, RecordType};
use http_body_util::{BodyExt, Full};
use hyper::{Request, StatusCode};
use hyper_util::rt::TokioIo;
use sandbox_agents_domain::network::{Egress, NetworkPolicy};
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

/// One allowlist for every sandbox.
struct Allow(NetworkPolicy);

#[async_trait]
impl PolicySource for Allow {
    async fn policy(&self, sandbox_id: &str) -> Result<Policy, String> {
        Ok(Policy::new(
            format!("session-of-{sandbox_id}"),
            [("session", &self.0)],
        ))
    }
}

/// One denial heard: (sandbox, host, port, label, reason).
type Heard = (String, String, u16, String, String);

#[derive(Default)]
struct Seen(Mutex<Vec<Heard>>);

impl Observer for Seen {
    fn denied(&self, sandbox_id: &str, _: &Policy, host: &Host, port: u16, denial: &Denial) {
        self.0.lock().unwrap().push((
            sandbox_id.into(),
            host.to_string(),
            port,
            denial.label.into(),
            denial.reason.clone(),
        ));
    }
    fn closed(&self, _: &Policy, _: &Host, _: u16, _: u64, _: u64) {}
}

fn proxy(allow: &[&str]) -> (Arc<Proxy>, Arc<Seen>) {
    let resolver = StaticResolver::new([
        ("allowed.test", "203.0.113.7"),
        ("allowed.test", "2001:db8::7"),
        ("mixed.test", "10.1.2.3"),
        ("mixed.test", "203.0.113.8"),
        ("private.test", "10.1.2.3"),
        ("other.test", "203.0.113.9"),
    ]);
    let policy = NetworkPolicy {
        egress: Egress::Allowlist,
        allow: allow.iter().map(|e| e.to_string()).collect(),
        presets: Vec::new(),
    };
    let seen = Arc::new(Seen::default());
    let proxy = Proxy::new(
        Guard::new(GuardSettings::default()),
        Arc::new(resolver),
        Arc::new(Allow(policy)),
        seen.clone(),
    );
    (proxy, seen)
}

/// A request through a new connection to the proxy as the sandbox `sb-1`: the status, the
/// content type and the body.
async fn send(
    proxy: &Arc<Proxy>,
    req: Request<Full<Bytes>>,
) -> (StatusCode, Option<String>, Bytes) {
    let (client, server) = tokio::io::duplex(128 * 1024);
    tokio::spawn(proxy.clone().serve(server, Arc::from("sb-1")));
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(client))
        .await
        .unwrap();
    tokio::spawn(conn);
    let resp = sender.send_request(req).await.unwrap();
    let status = resp.status();
    let media = resp
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_owned());
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    (status, media, body)
}

fn post(body: Vec<u8>) -> Request<Full<Bytes>> {
    Request::post(format!("http://{DNS_HOST}{DNS_PATH}"))
        .header("content-type", "application/dns-message")
        .body(Full::new(Bytes::from(body)))
        .unwrap()
}

fn query(name: &str, qtype: RecordType) -> Vec<u8> {
    let mut m = Message::new();
    m.set_id(4242)
        .set_recursion_desired(true)
        .add_query(Query::query(Name::from_ascii(name).unwrap(), qtype));
    m.to_vec().unwrap()
}

/// Asks `name` as the daemon would; the answer's code and addresses.
async fn ask(proxy: &Arc<Proxy>, name: &str, qtype: RecordType) -> (ResponseCode, Vec<IpAddr>) {
    let (status, media, body) = send(proxy, post(query(name, qtype))).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(media.as_deref(), Some("application/dns-message"));
    let answer = Message::from_vec(&body).unwrap();
    assert_eq!(answer.id(), 4242);
    assert_eq!(answer.message_type(), MessageType::Response);
    assert_eq!(answer.queries().len(), 1, "the question is repeated");
    let addrs = answer
        .answers()
        .iter()
        .map(|r| {
            assert_eq!(r.ttl(), TTL);
            match r.data() {
                RData::A(a) => IpAddr::V4(a.0),
                RData::AAAA(a) => IpAddr::V6(a.0),
                other => panic!("{other:?}"),
            }
        })
        .collect();
    (answer.response_code(), addrs)
}

fn ips(list: &[&str]) -> Vec<IpAddr> {
    list.iter().map(|s| s.parse().unwrap()).collect()
}

#[tokio::test]
async fn an_allowed_name_is_answered_with_the_resolvers_addresses_of_the_asked_family() {
    // Allowed on one port only: a name is answered if some port of it is.
    let (proxy, seen) = proxy(&["allowed.test:8080"]);
    assert_eq!(
        ask(&proxy, "allowed.test.", RecordType::A).await,
        (ResponseCode::NoError, ips(&["203.0.113.7"]))
    );
    assert_eq!(
        ask(&proxy, "Allowed.Test.", RecordType::AAAA).await,
        (ResponseCode::NoError, ips(&["2001:db8::7"]))
    );
    assert!(seen.0.lock().unwrap().is_empty());
}

#[tokio::test]
async fn a_refused_name_is_refused_and_observed_once() {
    let (proxy, seen) = proxy(&["allowed.test"]);
    // A resolver asks both families, and asks again.
    for qtype in [RecordType::A, RecordType::AAAA, RecordType::A] {
        assert_eq!(
            ask(&proxy, "other.test.", qtype).await,
            (ResponseCode::Refused, vec![])
        );
    }
    let denials = seen.0.lock().unwrap().clone();
    assert_eq!(denials.len(), 1, "{denials:?}");
    let (sandbox, host, port, label, reason) = &denials[0];
    assert_eq!(
        (sandbox.as_str(), host.as_str(), *port, label.as_str()),
        ("sb-1", "other.test", 53, "policy")
    );
    assert_eq!(
        reason,
        "other.test is not in the session policy's allowlist"
    );
}

#[tokio::test]
async fn a_name_resolving_to_a_private_address_is_answered_without_it() {
    let (proxy, seen) = proxy(&["mixed.test", "private.test"]);
    assert_eq!(
        ask(&proxy, "mixed.test.", RecordType::A).await,
        (ResponseCode::NoError, ips(&["203.0.113.8"]))
    );
    // Nothing left: refused, and observed for what it resolves to (never the address).
    assert_eq!(
        ask(&proxy, "private.test.", RecordType::A).await,
        (ResponseCode::Refused, vec![])
    );
    let denials = seen.0.lock().unwrap().clone();
    assert_eq!(denials.len(), 1, "{denials:?}");
    assert_eq!(denials[0].3, "private");
    assert!(!denials[0].4.contains("10.1"), "{}", denials[0].4);
}

#[tokio::test]
async fn other_types_and_unknown_names_are_answered_without_an_event() {
    let (proxy, seen) = proxy(&["allowed.test", "missing.test"]);
    assert_eq!(
        ask(&proxy, "allowed.test.", RecordType::TXT).await,
        (ResponseCode::Refused, vec![])
    );
    assert_eq!(
        ask(&proxy, "missing.test.", RecordType::A).await,
        (ResponseCode::NXDomain, vec![])
    );
    assert!(seen.0.lock().unwrap().is_empty());
    // Two questions in one message: FORMERR (RFC 9619).
    let mut two = Message::new();
    for name in ["allowed.test.", "missing.test."] {
        two.add_query(Query::query(Name::from_ascii(name).unwrap(), RecordType::A));
    }
    let (_, _, body) = send(&proxy, post(two.to_vec().unwrap())).await;
    assert_eq!(
        Message::from_vec(&body).unwrap().response_code(),
        ResponseCode::FormErr
    );
}

#[tokio::test]
async fn what_is_not_a_dns_query_is_a_4xx() {
    let (proxy, seen) = proxy(&["allowed.test"]);
    let (status, _, body) = send(&proxy, post(b"not a dns message".to_vec())).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body:?}");
    let get = Request::get(format!("http://{DNS_HOST}{DNS_PATH}?dns=AAAB"))
        .body(Full::new(Bytes::new()))
        .unwrap();
    assert_eq!(send(&proxy, get).await.0, StatusCode::METHOD_NOT_ALLOWED);
    let text = Request::post(format!("http://{DNS_HOST}{DNS_PATH}"))
        .header("content-type", "text/plain")
        .body(Full::new(Bytes::from(query(
            "allowed.test.",
            RecordType::A,
        ))))
        .unwrap();
    assert_eq!(
        send(&proxy, text).await.0,
        StatusCode::UNSUPPORTED_MEDIA_TYPE
    );
    let elsewhere = Request::post(format!("http://{DNS_HOST}/other"))
        .header("content-type", "application/dns-message")
        .body(Full::new(Bytes::from(query(
            "allowed.test.",
            RecordType::A,
        ))))
        .unwrap();
    assert_eq!(send(&proxy, elsewhere).await.0, StatusCode::NOT_FOUND);
    let (status, _, _) = send(&proxy, post(vec![0; 70_000])).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    // A response sent as a query.
    let mut response = Message::new();
    response.set_message_type(MessageType::Response);
    let (status, _, _) = send(&proxy, post(response.to_vec().unwrap())).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    // The reserved name is never decided as a host: no denial for it.
    assert!(seen.0.lock().unwrap().is_empty());
}
