//! Egress rules on Docker (`--egress-proxy`, issue 36), each against the egress tests' own
//! network and server (`super::egress`): wildcards, CIDRs, ports and presets permit what
//! they name and nothing beside it; `none` leaves a sandbox no route at all; and under `open`
//! neither another sandbox, nor Docker's default bridge, nor the host is reachable, nor is
//! anything over UDP; a tunnel's TLS must ask for the host it was opened to.

use super::egress::{app, assert_unrouted, docker, listening, serve_on, status, TestNetwork, PORT};
use sandbox_agents_testkit::{eventually, TestApp};
use serde_json::{json, Value};
use std::process::Command;
use std::time::Duration;

/// A second port of the test server, for the port rule.
const OTHER_PORT: u16 = 8081;
/// Denials reach the log through a channel: a few seconds of slack.
const LOGGED: Duration = Duration::from_secs(10);

/// Replaces the session's own policy; the proxy reads it on the next connection.
async fn set_network(app: &TestApp, id: &str, policy: Value) {
    let r = app
        .http
        .patch(app.url(&format!("/api/sessions/{id}")))
        .json(&json!({ "network": policy }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap_or_default());
}

/// The reason of the session's `sandbox.egress_denied` event for `host`:`port`, once it is
/// on the log.
pub(crate) async fn denial(app: &TestApp, id: &str, host: &str, port: u16) -> String {
    eventually(&format!("a denial of {host}:{port}"), LOGGED, async || {
        let events = app.events(id).await;
        events
            .iter()
            .find(|e| {
                e["type"] == "sandbox.egress_denied"
                    && e["payload"]["host"] == host
                    && e["payload"]["port"] == port
            })
            .and_then(|e| e["payload"]["reason"].as_str().map(str::to_owned))
            .ok_or_else(|| format!("{} events", events.len()))
    })
    .await
}

/// The interfaces of the sandbox and the lines of its IPv4 routing table (the header
/// excluded).
async fn interfaces_and_routes(app: &TestApp, id: &str) -> (String, usize) {
    let (code, ifs, err) = app.exec(id, "ls /sys/class/net").await;
    assert_eq!(code, 0, "{err}");
    let (code, routes, err) = app.exec(id, "cat /proc/net/route").await;
    assert_eq!(code, 0, "{err}");
    assert!(routes.starts_with("Iface"), "{routes}");
    (
        ifs.split_whitespace().collect::<Vec<_>>().join(" "),
        routes
            .lines()
            .skip(1)
            .filter(|l| !l.trim().is_empty())
            .count(),
    )
}

/// A container of the test's own, removed on drop.
struct Container(String);

impl Drop for Container {
    fn drop(&mut self) {
        let _ = Command::new("docker").args(["rm", "-f", &self.0]).output();
    }
}

#[tokio::test]
async fn wildcards_networks_ports_and_presets_permit_what_they_name_and_nothing_beside() {
    let net = TestNetwork::start("egress-rules").await;
    // The same server on a second port, so a refusal there is the rule's, not a closed port.
    docker(&[
        "exec",
        "-d",
        &net.name,
        "python3",
        "-m",
        "http.server",
        &OTHER_PORT.to_string(),
        "--bind",
        "0.0.0.0",
    ]);
    listening(&net.server_ip, OTHER_PORT).await;
    let app = app(&net).await;
    let id = app.running_session("egress-rules", json!({})).await;
    let url = |host: &str, port: u16| format!("http://{host}:{port}/");

    // A wildcard: any name under it, not the name itself (`Target::Under`).
    set_network(
        &app,
        &id,
        json!({"egress": "allowlist", "allow": ["*.wild.test"]}),
    )
    .await;
    assert_eq!(status(&app, &id, &url("a.wild.test", PORT)).await, "200");
    assert_eq!(status(&app, &id, &url("wild.test", PORT)).await, "403");
    let reason = denial(&app, &id, "wild.test", PORT).await;
    assert!(reason.contains("allowlist"), "{reason}");

    // A CIDR: the server by address on any port; a name resolving into it is still refused,
    // since names are matched by name rules only (and never resolved to be matched).
    set_network(
        &app,
        &id,
        json!({"egress": "allowlist", "allow": [net.subnet]}),
    )
    .await;
    assert_eq!(status(&app, &id, &url(&net.server_ip, PORT)).await, "200");
    assert_eq!(
        status(&app, &id, &url(&net.server_ip, OTHER_PORT)).await,
        "200"
    );
    assert_eq!(status(&app, &id, &url("allowed.test", PORT)).await, "403");
    let reason = denial(&app, &id, "allowed.test", PORT).await;
    assert!(reason.contains("allowlist"), "{reason}");

    // A port: the same host on one port, not on the other (which answered above).
    let on_port = format!("allowed.test:{PORT}");
    set_network(
        &app,
        &id,
        json!({"egress": "allowlist", "allow": [on_port]}),
    )
    .await;
    assert_eq!(status(&app, &id, &url("allowed.test", PORT)).await, "200");
    assert_eq!(
        status(&app, &id, &url("allowed.test", OTHER_PORT)).await,
        "403"
    );
    let reason = denial(&app, &id, "allowed.test", OTHER_PORT).await;
    assert!(reason.contains("allowlist"), "{reason}");

    // A preset: its hosts (any port: `pypi`'s entries name none), and no host beside them,
    // though every one of these names is the same server.
    set_network(
        &app,
        &id,
        json!({"egress": "allowlist", "presets": ["pypi"]}),
    )
    .await;
    assert_eq!(status(&app, &id, &url("pypi.org", PORT)).await, "200");
    assert_eq!(
        status(&app, &id, &url("files.pythonhosted.org", PORT)).await,
        "200"
    );
    assert_eq!(
        status(&app, &id, &url("registry.npmjs.org", PORT)).await,
        "403"
    );
    let reason = denial(&app, &id, "registry.npmjs.org", PORT).await;
    assert!(reason.contains("allowlist"), "{reason}");
    assert_eq!(status(&app, &id, &url("allowed.test", PORT)).await, "403");
    app.stop().await;
}

#[tokio::test]
async fn a_session_created_with_egress_none_has_no_route_at_all() {
    let net = TestNetwork::start("egress-none").await;
    let app = app(&net).await;
    app.create_agent("egress-none", json!({})).await;
    let id = app
        .boot_session(json!({
            "agent_id": "egress-none", "title": "t", "network": {"egress": "none"},
        }))
        .await;

    // Through the proxy: refused, naming the policy that refused it.
    let (_, out, err) = app
        .exec(
            &id,
            &format!("curl -sS --max-time 10 -w '\\n%{{http_code}}' http://allowed.test:{PORT}/"),
        )
        .await;
    assert!(out.ends_with("403"), "{out} {err}");
    assert!(out.contains("'none'"), "{out}");
    let reason = denial(&app, &id, "allowed.test", PORT).await;
    assert!(
        reason.contains("session policy's egress is 'none'"),
        "{reason}"
    );

    // Around it: no route, refused at once rather than a hang.
    assert_unrouted(&app, &id, &net.server_ip).await;

    // Nothing but loopback, and no route in the routing table.
    let (ifs, routes) = interfaces_and_routes(&app, &id).await;
    assert_eq!(ifs, "lo");
    assert_eq!(routes, 0, "an IPv4 route");
    app.stop().await;
}

#[tokio::test]
async fn under_open_other_sandboxes_the_default_bridge_the_host_and_udp_are_unreachable() {
    let net = TestNetwork::start("egress-reach").await;
    // A server on Docker's default bridge: a private range the operator did not open (only
    // the test network's is).
    let bridged = Container(format!("{}-bridge", net.name));
    let port = PORT.to_string();
    let bridged_ip = serve_on(
        &bridged.0,
        "bridge",
        &[],
        &["python3", "-m", "http.server", &port, "--bind", "0.0.0.0"],
    );
    // The host reaches it: a refusal below is the proxy's, not a server that is not there.
    listening(&bridged_ip, PORT).await;
    // The host's address on it: the IPAM gateway, which a Docker Engine whose default bridge
    // was set up by its own start may leave out of `inspect`; then the subnet's first host,
    // which Docker always gives the bridge.
    let bridge_gateway = match docker(&[
        "network",
        "inspect",
        "-f",
        "{{range .IPAM.Config}}{{.Gateway}}{{end}}",
        "bridge",
    ]) {
        g if !g.is_empty() => g,
        _ => {
            let subnet = docker(&[
                "network",
                "inspect",
                "-f",
                "{{range .IPAM.Config}}{{.Subnet}}{{end}}",
                "bridge",
            ]);
            let subnet: ipnet::Ipv4Net = subnet.parse().expect("the default bridge's subnet");
            subnet.hosts().next().expect("a host").to_string()
        }
    };
    let app = app(&net).await;
    let id = app.running_session("egress-reach", json!({})).await;
    let url = |host: &str| format!("http://{host}:{PORT}/");
    // What the operator opened answers, so the refusals below are of the addresses alone.
    assert_eq!(status(&app, &id, &url(&net.server_ip)).await, "200");

    assert_eq!(status(&app, &id, &url(&bridged_ip)).await, "403");
    let reason = denial(&app, &id, &bridged_ip, PORT).await;
    assert!(reason.contains("a private address"), "{reason}");
    assert_eq!(status(&app, &id, &url(&bridge_gateway)).await, "403");
    let reason = denial(&app, &id, &bridge_gateway, PORT).await;
    assert!(reason.contains("the control plane's host"), "{reason}");

    // Another sandbox has no address to reach: loopback is all it has, and no route.
    let other = app
        .boot_session(json!({"agent_id": "egress-reach", "title": "other"}))
        .await;
    let (ifs, routes) = interfaces_and_routes(&app, &other).await;
    assert_eq!(ifs, "lo");
    assert_eq!(routes, 0, "an IPv4 route");

    // UDP has no route either: a datagram fails at once, not silently.
    let (code, _, err) = app
        .exec(
            &id,
            &format!(
                "python3 -c \"import socket; socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'x', ('{}', {PORT}))\"",
                net.server_ip
            ),
        )
        .await;
    assert_ne!(code, 0);
    assert!(err.contains("Network is unreachable"), "{err}");
    app.stop().await;
}

/// Opens `CONNECT host:8080` through the sandbox's proxy, then starts TLS asking for `sni`
/// (verification off: only what the proxy lets through is tested). Prints the proxy's status
/// line, then how the handshake ended.
const SNI_CLIENT: &str = r#"
import socket, ssl, sys
host, sni = sys.argv[1], sys.argv[2]
s = socket.create_connection(("127.0.0.1", 3128))
s.sendall(f"CONNECT {host}:8080 HTTP/1.1\r\nHost: {host}:8080\r\n\r\n".encode())
head = b""
while b"\r\n\r\n" not in head:
    head += s.recv(1)
print(head.split(b"\r\n")[0].decode())
ctx = ssl.create_default_context()
ctx.check_hostname = False
ctx.verify_mode = ssl.CERT_NONE
try:
    ctx.wrap_socket(s, server_hostname=sni)
    print("handshake done")
except ssl.SSLError as e:
    print("ssl:", e.reason)
except OSError as e:
    print("os:", e)
"#;

#[tokio::test]
async fn a_tunnel_reaches_only_the_host_it_was_opened_to_whatever_tls_asks_for() {
    let net = TestNetwork::start("egress-sni").await;
    let app = app(&net).await;
    let policy = json!({"egress": "allowlist", "allow": [format!("allowed.test:{PORT}")]});
    let id = app
        .running_session("egress-sni", json!({"network": policy}))
        .await;
    let script = format!("cat > /tmp/sni.py <<'EOF'\n{SNI_CLIENT}EOF");
    assert_eq!(app.exec(&id, &script).await.0, 0);
    let attempt = async |sni: &str| {
        let (_, out, err) = app
            .exec(&id, &format!("python3 /tmp/sni.py allowed.test {sni}"))
            .await;
        let lines: Vec<String> = out.lines().map(str::to_owned).collect();
        assert_eq!(lines.len(), 2, "{out} {err}");
        assert!(
            lines[0].starts_with("HTTP/1.1 200"),
            "the tunnel opened: {out}"
        );
        lines[1].clone()
    };
    // Its own name: the hello goes up (the test server speaks plain HTTP, so TLS fails there,
    // past the proxy).
    let own = attempt("allowed.test").await;
    assert!(!own.contains("ACCESS_DENIED"), "{own}");
    // Another name on the same tunnel: the proxy ends it with an alert, and says why.
    let other = attempt("other.test").await;
    assert_eq!(other, "ssl: TLSV1_ALERT_ACCESS_DENIED");
    let reason = denial(&app, &id, "allowed.test", PORT).await;
    assert!(
        reason.contains("'other.test'") && reason.contains("only the host it was opened to"),
        "{reason}"
    );
}
