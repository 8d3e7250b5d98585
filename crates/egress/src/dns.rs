//! The sandbox's DNS, answered here (issue 36): the daemon in a confined sandbox sends each
//! query it gets on `127.0.0.1:53` through the proxy's socket as `POST
//! http://dns.sandbox-agents.internal/dns-query` ([`DNS_HOST`], [`DNS_PATH`]), the wire
//! message as an `application/dns-message` body in the style of RFC 8484, and gets the
//! answer the same way. The proxy sends every request to [`DNS_HOST`] here, so the
//! reserved name is never resolved or connected to.
//!
//! A name is answered like a connection is decided, on any port ([`decide_any_port`]: each
//! layer must permit it on some port): a name no allowlist holds is refused before it is
//! resolved (the resolver never carries it out), and the addresses the guard refuses are
//! left out of the answer.
//!
//! - `A`/`AAAA` of an allowed name: its addresses of that family, TTL [`TTL`] (a policy
//!   change reaches names already asked within that time); none of the family is an empty
//!   `NOERROR`.
//! - A name the policy refuses, or whose every address the guard refuses: `REFUSED`, and a
//!   `sandbox.egress_denied` event (port 53) at most once per name, sandbox and
//!   [`DENIAL_WINDOW`] (a resolver asks `A` and `AAAA` and retries). `REFUSED` rather than
//!   `NXDOMAIN`: the name may well exist, and no cache keeps a refusal (RFC 2308 caches
//!   `NXDOMAIN`), so a policy that allows it later applies from the next query.
//! - An allowed name that does not resolve: `NXDOMAIN` without an SOA, so that nothing
//!   caches it (the resolver does not tell a missing name from a failed lookup).
//! - Other types (`MX`, `TXT`, `PTR`, `HTTPS`…), other classes, a name that is not a host
//!   name: `REFUSED`, not observed: the proxy reaches hosts by address only, so no other
//!   record helps a sandbox out, and `REFUSED` ends a stub resolver's wait at once.
//! - Not a standard query: `NOTIMP`; not exactly one question: `FORMERR` (RFC 9619).
//!
//! HTTP that is not such a query (another method, path or media type, a body over 64 KiB or
//! no DNS message) is a 4xx in plain text.

use crate::decide::{decide_any_port, Decision, Host, PolicySource};
use crate::guard::Guard;
use crate::http::{text, Body};
use crate::observe::Observer;
use crate::resolve::Resolve;
use bytes::Bytes;
use hickory_proto::op::{Message, MessageType, OpCode, ResponseCode};
use hickory_proto::rr::rdata::{A, AAAA};
use hickory_proto::rr::{DNSClass, RData, Record, RecordType};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::header::{self, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sandboxd::egress::{DNS_CONTENT_TYPE as CONTENT_TYPE, DNS_MAX_MESSAGE as MAX_MESSAGE};
pub use sandboxd::egress::{DNS_HOST, DNS_PATH};

/// The TTL of an answer: short, so that a policy change applies to names asked before.
pub const TTL: u32 = 30;
/// How often a name refused to one sandbox becomes an event at most.
pub const DENIAL_WINDOW: Duration = Duration::from_secs(60);
/// The port a DNS refusal is observed on.
pub const DNS_PORT: u16 = 53;
/// Refusals remembered at most (all sandboxes): past it, the expired ones are dropped, and
/// when none has expired a refusal is not remembered and not observed (a sandbox asking for
/// random names must not grow this without bound; its count in the metrics remains).
const MAX_REMEMBERED: usize = 10_000;

/// Whether `req` is for the sandbox's DNS (whatever its method or path): the proxy answers
/// it here.
pub(crate) fn is_dns(req: &Request<Incoming>) -> bool {
    // As a host is parsed everywhere else (case, a trailing dot), so that no spelling of the
    // reserved name reaches the policy and the resolver.
    req.uri()
        .host()
        .is_some_and(|h| h.trim_end_matches('.').eq_ignore_ascii_case(DNS_HOST))
}

/// The names refused to each sandbox lately, so that each becomes one event per window.
#[derive(Debug, Default)]
pub(crate) struct Refusals(Mutex<HashMap<(Arc<str>, String), Instant>>);

impl Refusals {
    /// Whether `name`'s refusal to `sandbox_id` is the first in [`DENIAL_WINDOW`].
    fn first(&self, sandbox_id: &str, name: &str) -> bool {
        let mut seen = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        let key = (Arc::from(sandbox_id), name.to_owned());
        if let Some(at) = seen.get(&key) {
            if now.duration_since(*at) < DENIAL_WINDOW {
                return false;
            }
        }
        if seen.len() >= MAX_REMEMBERED && !seen.contains_key(&key) {
            seen.retain(|_, at| now.duration_since(*at) < DENIAL_WINDOW);
            if seen.len() >= MAX_REMEMBERED {
                return false;
            }
        }
        seen.insert(key, now);
        true
    }
}

fn count(verdict: &'static str, reason: &'static str) {
    metrics::counter!("sandbox_agents_egress_dns_total", "verdict" => verdict, "reason" => reason)
        .increment(1);
}

/// What answering needs of the proxy, which lends its parts (this module never names it).
pub(crate) struct Answerer<'a> {
    pub(crate) source: &'a dyn PolicySource,
    pub(crate) resolver: &'a dyn Resolve,
    pub(crate) guard: &'a Guard,
    pub(crate) observer: &'a dyn Observer,
    pub(crate) refusals: &'a Refusals,
}

impl Answerer<'_> {
    /// Answers one request to [`DNS_HOST`] from the sandbox `sandbox_id`.
    pub(crate) async fn answer(&self, sandbox_id: &str, req: Request<Incoming>) -> Response<Body> {
        answer(self, sandbox_id, req).await
    }
}

async fn answer(proxy: &Answerer<'_>, sandbox_id: &str, req: Request<Incoming>) -> Response<Body> {
    let query = match read_query(req).await {
        Ok(q) => q,
        Err((status, reason, message)) => {
            count("malformed", reason);
            return text(status, message);
        }
    };
    let reply = respond(proxy, sandbox_id, &query).await;
    match reply.to_vec() {
        Ok(wire) => {
            let mut r = Response::new(Full::new(Bytes::from(wire)).map_err(|n| match n {}).boxed());
            r.headers_mut()
                .insert(header::CONTENT_TYPE, HeaderValue::from_static(CONTENT_TYPE));
            r
        }
        Err(e) => text(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("the DNS answer could not be encoded: {e}\n"),
        ),
    }
}

type Refusal = (StatusCode, &'static str, String);

/// The DNS query a request carries, or why it carries none.
async fn read_query(req: Request<Incoming>) -> Result<Message, Refusal> {
    if req.method() != Method::POST {
        return Err((
            StatusCode::METHOD_NOT_ALLOWED,
            "method",
            format!("{DNS_HOST} takes DNS queries as POST {DNS_PATH}\n"),
        ));
    }
    if req.uri().path() != DNS_PATH {
        return Err((
            StatusCode::NOT_FOUND,
            "path",
            format!("{DNS_HOST} answers {DNS_PATH} only\n"),
        ));
    }
    let media = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if !media.eq_ignore_ascii_case(CONTENT_TYPE) {
        return Err((
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "content_type",
            format!("a DNS query is sent as {CONTENT_TYPE}\n"),
        ));
    }
    let too_large = || {
        (
            StatusCode::PAYLOAD_TOO_LARGE,
            "size",
            format!("a DNS message is at most {MAX_MESSAGE} bytes\n"),
        )
    };
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > MAX_MESSAGE as u64) {
        return Err(too_large());
    }
    let body = match Limited::new(req.into_body(), MAX_MESSAGE).collect().await {
        Ok(b) => b.to_bytes(),
        Err(_) => return Err(too_large()),
    };
    match Message::from_vec(&body) {
        Ok(m) if m.message_type() == MessageType::Query => Ok(m),
        Ok(_) => Err((
            StatusCode::BAD_REQUEST,
            "message",
            "the body is a DNS response, not a query\n".into(),
        )),
        Err(_) => Err((
            StatusCode::BAD_REQUEST,
            "message",
            "the body is not a DNS message\n".into(),
        )),
    }
}

/// `reply` with `code`, counted.
fn finish(
    mut reply: Message,
    code: ResponseCode,
    verdict: &'static str,
    reason: &'static str,
) -> Message {
    count(verdict, reason);
    reply.set_response_code(code);
    reply
}

/// The DNS answer to `query`.
async fn respond(proxy: &Answerer<'_>, sandbox_id: &str, query: &Message) -> Message {
    let mut reply = Message::new();
    reply
        .set_id(query.id())
        .set_message_type(MessageType::Response)
        .set_op_code(query.op_code())
        .set_recursion_desired(query.recursion_desired())
        .set_recursion_available(true)
        .add_queries(query.queries().iter().cloned());
    if query.op_code() != OpCode::Query {
        return finish(reply, ResponseCode::NotImp, "unsupported", "opcode");
    }
    let [question] = query.queries() else {
        return finish(reply, ResponseCode::FormErr, "unsupported", "questions");
    };
    let qtype = question.query_type();
    if question.query_class() != DNSClass::IN || !matches!(qtype, RecordType::A | RecordType::AAAA)
    {
        return finish(reply, ResponseCode::Refused, "unsupported", "type");
    }
    let name = match Host::parse(&question.name().to_ascii()) {
        Some(Host::Name(n)) => n,
        _ => return finish(reply, ResponseCode::Refused, "unsupported", "name"),
    };
    let host = Host::Name(name.clone());
    let policy = match proxy.source.policy(sandbox_id).await {
        Ok(p) => p,
        Err(e) => {
            tracing::error!(sandbox_id, error = %e, "an egress policy could not be read");
            return finish(reply, ResponseCode::ServFail, "failed", "policy_read");
        }
    };
    match decide_any_port(&policy, &host, proxy.resolver, proxy.guard).await {
        Decision::Allow { addrs, rule } => {
            tracing::debug!(sandbox_id, %host, rule, "a sandbox's name answered");
            let answers = addrs.iter().filter_map(|a| {
                let rdata = match (a.ip(), qtype) {
                    (IpAddr::V4(v4), RecordType::A) => RData::A(A(v4)),
                    (IpAddr::V6(v6), RecordType::AAAA) => RData::AAAA(AAAA(v6)),
                    _ => return None,
                };
                Some(Record::from_rdata(question.name().clone(), TTL, rdata))
            });
            reply.add_answers(answers);
            finish(reply, ResponseCode::NoError, "allowed", "policy")
        }
        Decision::Deny(denial) if denial.label == "resolve" => {
            finish(reply, ResponseCode::NXDomain, "not_found", "resolve")
        }
        Decision::Deny(denial) => {
            tracing::info!(sandbox_id, session = policy.session.as_deref(), %host, reason = %denial.reason, "a sandbox's name refused");
            if proxy.refusals.first(sandbox_id, &name) {
                proxy
                    .observer
                    .denied(sandbox_id, &policy, &host, DNS_PORT, &denial);
            }
            finish(reply, ResponseCode::Refused, "denied", denial.label)
        }
    }
}
