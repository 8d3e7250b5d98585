//! Egress control on Docker (`--egress-proxy`, issue 36): sandboxes with no network of their
//! own, reaching a test server on a Docker network this test makes (never an outside
//! address) only through the proxy, and only as their session's policy allows.

use sandbox_agents_egress::StaticResolver;
use sandbox_agents_server::egress::EgressSettings;
use sandbox_agents_testkit::{TestApp, TestAppBuilder};
use serde_json::{json, Value};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub(crate) const IMAGE: &str = "sandbox-agents-sandbox:1";
pub(crate) const PORT: u16 = 8080;

/// A Docker network of the test's own with an HTTP server on it, removed on drop.
pub(crate) struct TestNetwork {
    pub(crate) name: String,
    /// The egress sockets' directory of the server under test.
    pub(crate) sockets: std::path::PathBuf,
    pub(crate) server_ip: String,
    pub(crate) subnet: String,
    pub(crate) gateway: String,
}

pub(crate) fn docker(args: &[&str]) -> String {
    let out = Command::new("docker")
        .args(args)
        .output()
        .expect("docker runs");
    assert!(
        out.status.success(),
        "docker {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// The address of the container `name` on its network.
pub(crate) fn container_ip(name: &str) -> String {
    docker(&[
        "inspect",
        "-f",
        "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}",
        name,
    ])
}

/// Runs `command` in a container of the sandbox image named `name` on the network `network`
/// (with `options` for `docker run`), removed when it stops; returns its address there.
pub(crate) fn serve_on(name: &str, network: &str, options: &[&str], command: &[&str]) -> String {
    let mut args = vec!["run", "-d", "--rm", "--name", name, "--network", network];
    args.extend_from_slice(options);
    args.push(IMAGE);
    args.extend_from_slice(command);
    docker(&args);
    container_ip(name)
}

/// Returns once a test server at `ip`:`port` accepts connections (the host reaches a
/// container's address on its bridge); fails after 30 s.
pub(crate) async fn listening(ip: &str, port: u16) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while tokio::net::TcpStream::connect((ip, port)).await.is_err() {
        assert!(
            Instant::now() < deadline,
            "the test server on {ip}:{port} never listened"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

impl TestNetwork {
    pub(crate) async fn start(tag: &str) -> TestNetwork {
        let name = format!(
            "sa-test-{tag}-{}",
            &uuid::Uuid::new_v4().simple().to_string()[..8]
        );
        docker(&["network", "create", &name]);
        let port = PORT.to_string();
        let server_ip = serve_on(
            &name,
            &name,
            &[],
            &["python3", "-m", "http.server", &port, "--bind", "0.0.0.0"],
        );
        let subnet = docker(&[
            "network",
            "inspect",
            "-f",
            "{{range .IPAM.Config}}{{.Subnet}}{{end}}",
            &name,
        ]);
        let gateway = docker(&[
            "network",
            "inspect",
            "-f",
            "{{range .IPAM.Config}}{{.Gateway}}{{end}}",
            &name,
        ]);
        listening(&server_ip, PORT).await;
        let sockets = std::env::temp_dir().join(format!("sa-eg-{}", &name[name.len() - 8..]));
        TestNetwork {
            name,
            sockets,
            server_ip,
            subnet,
            gateway,
        }
    }
}

impl TestNetwork {
    /// An address of the test subnet the operator closed (`--egress-deny`); nothing is on it.
    pub(crate) fn denied_ip(&self) -> String {
        let subnet: ipnet::Ipv4Net = self.subnet.parse().unwrap();
        subnet.hosts().nth(200).unwrap().to_string()
    }
}

impl Drop for TestNetwork {
    fn drop(&mut self) {
        let _ = Command::new("docker")
            .args(["rm", "-f", &self.name])
            .output();
        let _ = Command::new("docker")
            .args(["network", "rm", &self.name])
            .output();
        let _ = std::fs::remove_dir_all(&self.sockets);
    }
}

/// A server whose sandboxes leave only through the proxy, which knows the test's names.
pub(crate) async fn app(net: &TestNetwork) -> TestApp {
    builder(net).spawn().await
}

/// [`app`], to be built further.
pub(crate) fn builder(net: &TestNetwork) -> TestAppBuilder<'static> {
    let resolver = StaticResolver::new([
        ("allowed.test", net.server_ip.as_str()),
        ("other.test", net.server_ip.as_str()),
        ("private.test", "10.255.255.1"),
        ("gateway.test", net.gateway.as_str()),
        ("metadata.test", "169.254.169.254"),
        // For `egress_rules`: a wildcard's names, and a preset's hosts, all the test server.
        ("a.wild.test", net.server_ip.as_str()),
        ("wild.test", net.server_ip.as_str()),
        ("pypi.org", net.server_ip.as_str()),
        ("files.pythonhosted.org", net.server_ip.as_str()),
        ("registry.npmjs.org", net.server_ip.as_str()),
        // Inside the opened range, and closed by the operator all the same.
        ("denied.test", net.denied_ip().as_str()),
    ]);
    let settings = EgressSettings {
        socket_dir: net.sockets.clone(),
        pod_listen: None,
        allow_private: vec![net.subnet.parse().unwrap()],
        denied: vec![format!("{}/32", net.denied_ip()).parse().unwrap()],
        resolver: Arc::new(resolver),
    };
    TestApp::builder().with_settings(move |s| s.services.egress = Some(settings))
}

/// Asserts that the sandbox reaches `ip` directly (ignoring the proxy) not at all, and that
/// it is told at once (no route) rather than left to time out.
pub(crate) async fn assert_unrouted(app: &TestApp, id: &str, ip: &str) {
    let started = Instant::now();
    let (code, _, err) = app
        .exec(
            id,
            &format!("curl -sS --noproxy '*' --max-time 10 http://{ip}:{PORT}/"),
        )
        .await;
    assert_ne!(code, 0);
    assert!(
        err.contains("unreachable") || err.contains("Couldn't connect"),
        "{err}"
    );
    assert!(started.elapsed() < Duration::from_secs(8), "it failed fast");
}

/// The HTTP status curl gets for `url` through the proxy (000: no answer at all).
pub(crate) async fn status(app: &TestApp, id: &str, url: &str) -> String {
    let (_, out, _) = app
        .exec(
            id,
            &format!("curl -sS -o /dev/null -w '%{{http_code}}' --max-time 10 {url}"),
        )
        .await;
    out
}

#[tokio::test]
async fn a_sandbox_reaches_what_its_policy_allows_only_through_the_proxy() {
    let net = TestNetwork::start("egress").await;
    let app = app(&net).await;
    let policy = json!({"egress": "allowlist", "allow": [
        format!("allowed.test:{PORT}"), "private.test", "gateway.test", "metadata.test",
    ]});
    let id = app
        .running_session("egress-allowlist", json!({"network": policy}))
        .await;

    // The proxy is all the sandbox has: its environment names it.
    let (_, env, _) = app.exec(&id, "echo $HTTPS_PROXY $http_proxy").await;
    assert_eq!(env.trim(), "http://127.0.0.1:3128 http://127.0.0.1:3128");

    assert_eq!(
        status(&app, &id, &format!("http://allowed.test:{PORT}/")).await,
        "200"
    );
    // Not in the allowlist, though it is the same server.
    assert_eq!(
        status(&app, &id, &format!("http://other.test:{PORT}/")).await,
        "403"
    );
    // Allowed by name, refused by where the name resolves.
    assert_eq!(status(&app, &id, "http://private.test/").await, "403");
    assert_eq!(
        status(&app, &id, &format!("http://gateway.test:{PORT}/")).await,
        "403"
    );
    assert_eq!(status(&app, &id, "http://metadata.test/").await, "403");
    // HTTPS goes through CONNECT, refused the same way.
    let (code, _, err) = app
        .exec(
            &id,
            &format!("curl -sS --max-time 10 https://other.test:{PORT}/"),
        )
        .await;
    assert_ne!(code, 0);
    assert!(err.contains("403"), "{err}");

    // Traffic that ignores the proxy has no route: refused at once, not a hang.
    assert_unrouted(&app, &id, &net.server_ip).await;

    // Each refusal is on the session's log, with what refused it.
    let denials: Vec<Value> = app
        .events(&id)
        .await
        .into_iter()
        .filter(|e| e["type"] == "sandbox.egress_denied")
        .collect();
    let hosts: Vec<&str> = denials
        .iter()
        .filter_map(|e| e["payload"]["host"].as_str())
        .collect();
    for host in [
        "other.test",
        "private.test",
        "gateway.test",
        "metadata.test",
    ] {
        assert!(hosts.contains(&host), "{host} in {hosts:?}");
    }
    // Each refused for what it is, not for a name that did not resolve.
    for (host, why) in [
        ("other.test", "allowlist"),
        ("private.test", "private address"),
        ("gateway.test", "control plane's host"),
        ("metadata.test", "metadata"),
    ] {
        let e = denials
            .iter()
            .find(|e| e["payload"]["host"] == host)
            .unwrap();
        let reason = e["payload"]["reason"].as_str().unwrap();
        assert!(reason.contains(why), "{host}: {reason}");
        assert!(
            !reason.contains(&net.gateway) && !reason.contains("10.255"),
            "no address shown: {reason}"
        );
    }
    let other = denials
        .iter()
        .find(|e| e["payload"]["host"] == "other.test")
        .unwrap();
    assert_eq!(other["payload"]["port"], PORT);
    assert!(
        other["payload"]["reason"]
            .as_str()
            .unwrap()
            .contains("allowlist"),
        "{other}"
    );
    app.stop().await;
}

#[tokio::test]
async fn open_is_the_internet_without_the_host_and_a_changed_policy_applies_to_the_next_connection()
{
    let net = TestNetwork::start("egress-open").await;
    let app = app(&net).await;
    let id = app.running_session("egress-open", json!({})).await;
    // The operator opened the test network's range: its server answers by address.
    assert_eq!(
        status(&app, &id, &format!("http://{}:{PORT}/", net.server_ip)).await,
        "200"
    );
    // Never the host's own address on it, nor metadata.
    assert_eq!(
        status(&app, &id, &format!("http://{}:{PORT}/", net.gateway)).await,
        "403"
    );
    assert_eq!(status(&app, &id, "http://169.254.169.254/").await, "403");
    // A network the operator closed, inside the range it opened: by address and by name.
    assert_eq!(
        status(&app, &id, &format!("http://{}:{PORT}/", net.denied_ip())).await,
        "403"
    );
    let (_, _, err) = app
        .exec(
            &id,
            &format!("curl -sS --fail --max-time 10 http://denied.test:{PORT}/"),
        )
        .await;
    assert!(err.contains("403"), "{err}");
    let reason = crate::egress_rules::denial(&app, &id, "denied.test", PORT).await;
    assert!(reason.contains("--egress-deny"), "{reason}");

    let r = app
        .http
        .patch(app.url(&format!("/api/sessions/{id}")))
        .json(&json!({"network": {"egress": "none"}}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap_or_default());
    assert_eq!(
        status(&app, &id, &format!("http://{}:{PORT}/", net.server_ip)).await,
        "403"
    );
    app.stop().await;
}
