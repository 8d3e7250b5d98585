//! DNS in a sandbox confined to the egress proxy (issue 36): its resolver is the daemon on
//! loopback, which asks the control plane, and only the names its session's policy allows
//! resolve (to the addresses the proxy would connect to).

use crate::egress::{app, status, TestNetwork, PORT};
use sandbox_agents_testkit::{eventually, TestApp};
use serde_json::{json, Value};
use std::time::Duration;

/// How long a denial may take to reach the session's log.
const LOGGED: Duration = Duration::from_secs(10);

/// An `A` query of `allowed.test` over TCP, by hand; prints the response code, the number of
/// answers and the last four bytes as an IPv4 address (the query asks no EDNS, so the
/// answer ends with its one address).
const TCP_QUERY: &str = "import socket, struct
q = struct.pack('>6H', 7, 0x0100, 1, 0, 0, 0) + b'\\x07allowed\\x04test\\x00' + struct.pack('>2H', 1, 1)
s = socket.create_connection(('127.0.0.1', 53), timeout=10)
s.sendall(struct.pack('>H', len(q)) + q)
n = struct.unpack('>H', s.recv(2))[0]
r = b''
while len(r) < n: r += s.recv(n - len(r))
print(r[3] & 15, struct.unpack('>H', r[6:8])[0], socket.inet_ntoa(r[-4:]))";

/// The session's `sandbox.egress_denied` events for `host`:`port`.
async fn denials(app: &TestApp, id: &str, host: &str, port: u16) -> Vec<Value> {
    app.events(id)
        .await
        .into_iter()
        .filter(|e| {
            e["type"] == "sandbox.egress_denied"
                && e["payload"]["host"] == host
                && e["payload"]["port"] == port
        })
        .collect()
}

#[tokio::test]
async fn a_confined_sandbox_resolves_the_names_its_policy_allows_and_no_other() {
    let net = TestNetwork::start("egress-dns").await;
    let app = app(&net).await;
    let policy = json!({"egress": "allowlist", "allow": ["allowed.test"]});
    let id = app
        .running_session("egress-dns", json!({"network": policy}))
        .await;

    let (code, conf, err) = app.exec(&id, "cat /etc/resolv.conf").await;
    assert_eq!(code, 0, "{err}");
    assert!(conf.contains("nameserver 127.0.0.1"), "{conf}");
    assert!(!conf.contains("search"), "no search domain: {conf}");

    // Through the C library (getent: AAAA and A over UDP).
    let (code, out, err) = app.exec(&id, "getent hosts allowed.test").await;
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(
        out.split_whitespace().collect::<Vec<_>>(),
        [net.server_ip.as_str(), "allowed.test"]
    );
    let (code, out, _) = app.exec(&id, "getent hosts other.test").await;
    assert_ne!(code, 0, "other.test is not in the allowlist: {out}");
    // Its own name is its loopback, answered without DNS (nothing refused, nothing logged).
    let (code, out, _) = app.exec(&id, "getent hosts \"$(hostname)\"").await;
    assert_eq!(code, 0, "{out}");
    assert!(
        out.starts_with("::1") || out.starts_with("127.0.0.1"),
        "{out}"
    );
    // As a program asks: Python's getaddrinfo, for a port.
    let (code, out, err) = app
        .exec(
            &id,
            "python3 -c \"import socket; print(sorted({a[4][0] for a in socket.getaddrinfo('allowed.test', 80)}))\"",
        )
        .await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.trim(), format!("['{}']", net.server_ip));
    // Over TCP too (what a client does after a truncated UDP answer): the answer's code, its
    // count of answers and the address in the last.
    let (code, out, err) = app.exec(&id, &format!("python3 -c \"{TCP_QUERY}\"")).await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.trim(), format!("0 1 {}", net.server_ip));
    // A resolved name still goes through the proxy: the connection is decided there.
    assert_eq!(
        status(&app, &id, &format!("http://allowed.test:{PORT}/")).await,
        "200"
    );

    // The refusal is on the session's log, once, though the resolver asked more than once.
    // A later denial (a connection) is written after it: once that one is there, so is
    // every DNS denial before it.
    assert_eq!(
        status(&app, &id, &format!("http://other.test:{PORT}/")).await,
        "403"
    );
    eventually("the connection's denial", LOGGED, async || {
        (!denials(&app, &id, "other.test", PORT).await.is_empty()).then_some(())
    })
    .await;
    let dns = denials(&app, &id, "other.test", 53).await;
    assert_eq!(dns.len(), 1, "{dns:?}");
    let reason = dns[0]["payload"]["reason"].as_str().unwrap();
    assert!(reason.contains("allowlist"), "{reason}");
    // An allowed name is not a denial, nor is the sandbox's own.
    assert!(denials(&app, &id, "allowed.test", 53).await.is_empty());
    let (_, own, _) = app.exec(&id, "hostname").await;
    assert!(denials(&app, &id, own.trim(), 53).await.is_empty());
    app.stop().await;
}
