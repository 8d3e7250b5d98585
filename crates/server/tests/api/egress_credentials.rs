//! Credentials outside the sandbox (issue 36): a secret bound for egress reaches an HTTPS
//! test server (on a Docker network of the test's own, its certificate from a CA of the
//! test's own) as an injected header and as a swapped placeholder, while the sandbox cannot
//! read it: not in its environment, its files, its processes, nor the session's log.

use super::egress::{listening, serve_on, TestNetwork};
use sandbox_agents_domain::ca::ExtraCaCerts;
use sandbox_agents_egress::StaticResolver;
use sandbox_agents_server::egress::EgressSettings;
use sandbox_agents_testkit::tls::TestCa;
use sandbox_agents_testkit::TestApp;
use serde_json::json;
use std::process::Command;
use std::sync::Arc;

const SECRET: &str = "ghp_egress_secret_4b1d9e";
const TLS_PORT: u16 = 8443;

/// An HTTPS server that prints each request's headers (one JSON object per line, to its
/// log, which only the test reads) and answers `ok`.
const SERVER: &str = r#"
import http.server, json, ssl, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        print(json.dumps(dict(self.headers)), flush=True)
        self.send_response(200); self.send_header("content-length", "2"); self.end_headers()
        self.wfile.write(b"ok")
    def log_message(self, *a): pass
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain("/certs/server.crt", "/certs/server.key")
s = http.server.HTTPServer(("0.0.0.0", 8443), H)
s.socket = ctx.wrap_socket(s.socket, server_side=True)
s.serve_forever()
"#;

/// The HTTPS server's container on `net`, removed on drop.
struct TlsServer {
    name: String,
    ip: String,
}

impl TlsServer {
    async fn start(net: &TestNetwork, certs: &std::path::Path) -> TlsServer {
        let name = format!("{}-tls", net.name);
        let mount = format!("{}:/certs:ro", certs.display());
        let ip = serve_on(
            &name,
            &net.name,
            &["-v", &mount, "--user", "0"],
            &["python3", "-c", SERVER],
        );
        listening(&ip, TLS_PORT).await;
        TlsServer { name, ip }
    }

    /// The headers of every request it received (names lowercase), in order.
    fn requests(&self) -> Vec<serde_json::Value> {
        let out = Command::new("docker")
            .args(["logs", &self.name])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| {
                serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(l).ok()
            })
            // Header names are case-insensitive (the proxy sends them lowercase).
            .map(|h| {
                h.into_iter()
                    .map(|(k, v)| (k.to_ascii_lowercase(), v))
                    .collect()
            })
            .collect()
    }
}

impl Drop for TlsServer {
    fn drop(&mut self) {
        let _ = Command::new("docker")
            .args(["rm", "-f", &self.name])
            .output();
    }
}

#[tokio::test]
async fn a_bound_secret_reaches_the_https_host_as_a_header_and_never_the_sandbox() {
    let net = TestNetwork::start("egress-creds").await;
    let ca = TestCa::new();
    let certs =
        std::env::temp_dir().join(format!("sa-eg-certs-{}", &net.name[net.name.len() - 8..]));
    std::fs::create_dir_all(&certs).unwrap();
    ca.issue("DNS:api.test", &certs);
    // The server runs as root in its container and reads the key; nothing else does.
    let server = TlsServer::start(&net, &certs).await;

    let resolver = StaticResolver::new([
        ("api.test", server.ip.as_str()),
        ("other.test", server.ip.as_str()),
    ]);
    let settings = EgressSettings {
        socket_dir: net.sockets.clone(),
        pod_listen: None,
        allow_private: vec![net.subnet.parse().unwrap()],
        denied: Vec::new(),
        resolver: Arc::new(resolver),
    };
    // The proxy verifies the real host against the operator's extra CA: the test's.
    let extra = ExtraCaCerts::parse(&std::fs::read_to_string(ca.cert()).unwrap()).unwrap();
    let app = TestApp::builder()
        .with_settings(move |s| {
            s.services.egress = Some(settings);
            s.services.sessions.extra_ca = Some(extra);
        })
        .spawn()
        .await;
    let (status, body) = app
        .post_json(
            "/api/secrets",
            json!({"name": "GITHUB_TOKEN", "value": SECRET}),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    let id = app
        .running_session(
            "egress-creds",
            json!({"secret_bindings": [
                {"secret": "GITHUB_TOKEN", "placeholder": {"env": "GITHUB_TOKEN", "hosts": ["api.test"]}},
                {"secret": "GITHUB_TOKEN", "inject": {"host": "api.test", "header": "X-Injected", "format": "token {value}"}},
            ]}),
        )
        .await;

    // A tool that reads its token from the environment works unchanged.
    let (code, out, err) = app
        .exec(&id, &format!("curl -sS --max-time 10 -H \"Authorization: Bearer $GITHUB_TOKEN\" https://api.test:{TLS_PORT}/"))
        .await;
    assert_eq!((code, out.as_str()), (0, "ok"), "{err}");
    // The same placeholder sent to a host it is not bound to stays a placeholder.
    let (code, _, err) = app
        .exec(&id, &format!("curl -sS --max-time 10 -k -H \"Authorization: Bearer $GITHUB_TOKEN\" https://other.test:{TLS_PORT}/"))
        .await;
    assert_eq!(code, 0, "{err}");

    let seen = server.requests();
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert_eq!(
        seen[0]["authorization"],
        format!("Bearer {SECRET}"),
        "{seen:?}"
    );
    assert_eq!(seen[0]["x-injected"], format!("token {SECRET}"), "{seen:?}");
    let to_other = seen[1].to_string();
    assert!(
        !to_other.contains(SECRET),
        "the other host got the secret: {to_other}"
    );
    assert!(to_other.contains("sa-ph-"), "{to_other}");

    // The sandbox holds only the placeholder: not in its environment, files or processes.
    let (_, env, _) = app
        .exec(&id, "env; cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n'")
        .await;
    assert!(env.contains("GITHUB_TOKEN=sa-ph-"), "{env}");
    let (_, ps, _) = app.exec(&id, "ps auxwwe").await;
    let (code, found, _) = app
        // The pattern is put together in the sandbox, so no command line of the test holds it.
        .exec(
            &id,
            &format!(
                "h={}; grep -rIl \"$h{}\" / --exclude-dir=proc --exclude-dir=sys 2>/dev/null; true",
                &SECRET[..6],
                &SECRET[6..]
            ),
        )
        .await;
    assert_eq!(code, 0);
    for (what, text) in [("environment", &env), ("processes", &ps), ("files", &found)] {
        assert!(
            !text.contains(SECRET),
            "the secret is in the sandbox's {what}: {text}"
        );
    }
    let log = serde_json::to_string(&app.events(&id).await).unwrap();
    assert!(!log.contains(SECRET), "the secret is in the session's log");
    app.stop().await;
    let _ = std::fs::remove_dir_all(&certs);
}
