//! TLS for tests: a CA of the test's own ([`TestCa`], made with `openssl` on the host) and a
//! small https server on 127.0.0.1 with a certificate it issued ([`HttpsStub`]), for checking
//! that the control plane's clients trust `--extra-ca-certs` (and nothing else they should
//! not).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

fn run(cmd: &mut Command) {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

const EC: [&str; 5] = [
    "-newkey",
    "ec",
    "-pkeyopt",
    "ec_paramgen_curve:prime256v1",
    "-nodes",
];

/// A certificate authority in a temporary directory, removed on drop.
pub struct TestCa {
    dir: PathBuf,
}

impl TestCa {
    /// A new CA (P-256, valid two days).
    pub fn new() -> TestCa {
        let dir =
            std::env::temp_dir().join(format!("sa-test-ca-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).expect("the CA's directory");
        run(Command::new("openssl")
            .current_dir(&dir)
            .args(["req", "-x509"])
            .args(EC)
            .args(["-keyout", "ca.key", "-out", "ca.crt", "-days", "2"])
            .args(["-subj", "/CN=sandbox-agents test CA"])
            .args(["-addext", "basicConstraints=critical,CA:TRUE"])
            .args(["-addext", "keyUsage=critical,keyCertSign,cRLSign"]));
        TestCa { dir }
    }

    /// The CA's certificate (PEM).
    pub fn cert(&self) -> PathBuf {
        self.dir.join("ca.crt")
    }

    /// Issues a server certificate for `san` (e.g. `IP:127.0.0.1` or `DNS:git.test`) into
    /// `into`: `server.crt` and `server.key` there; returns their paths.
    pub fn issue(&self, san: &str, into: &Path) -> (PathBuf, PathBuf) {
        let (crt, key, csr) = (
            into.join("server.crt"),
            into.join("server.key"),
            into.join("server.csr"),
        );
        run(Command::new("openssl")
            .arg("req")
            .args(EC)
            .arg("-keyout")
            .arg(&key)
            .arg("-out")
            .arg(&csr)
            .args(["-subj", "/CN=sandbox-agents test server"]));
        let ext = into.join("ext.cnf");
        std::fs::write(
            &ext,
            format!(
                "subjectAltName={san}\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\nkeyUsage=digitalSignature\n"
            ),
        )
        .expect("ext.cnf");
        run(Command::new("openssl")
            .args(["x509", "-req", "-days", "2", "-CAcreateserial"])
            .arg("-in")
            .arg(&csr)
            .arg("-CA")
            .arg(self.cert())
            .arg("-CAkey")
            .arg(self.dir.join("ca.key"))
            .arg("-out")
            .arg(&crt)
            .arg("-extfile")
            .arg(&ext));
        (crt, key)
    }
}

impl Default for TestCa {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for TestCa {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Answers `GET /v1/models` like an OpenAI-compatible server with one model, `stub-model`,
/// and any other request with 200 `{}`. Writes its port to the file it is given.
const STUB_PY: &str = r#"
import http.server, json, os, ssl, sys

class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"

    def log_message(self, fmt, *args):
        pass

    def answer(self, body):
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path.startswith("/v1/models"):
            self.answer({"object": "list", "data": [{"id": "stub-model", "object": "model", "owned_by": "test"}]})
        else:
            self.answer({})

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.answer({})

ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(sys.argv[1], sys.argv[2])
srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
with open(sys.argv[3] + ".tmp", "w") as f:
    f.write(str(srv.server_address[1]))
os.rename(sys.argv[3] + ".tmp", sys.argv[3])
srv.serve_forever()
"#;

/// An https server on 127.0.0.1 (python3 on the host) with a certificate `ca` issued for
/// `IP:127.0.0.1`; stopped on drop.
pub struct HttpsStub {
    child: Child,
    dir: PathBuf,
    pub port: u16,
}

impl HttpsStub {
    pub async fn start(ca: &TestCa) -> HttpsStub {
        let dir = std::env::temp_dir().join(format!("sa-https-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).expect("the stub's directory");
        let (crt, key) = ca.issue("IP:127.0.0.1", &dir);
        let script = dir.join("stub.py");
        std::fs::write(&script, STUB_PY).expect("stub.py");
        let port_file = dir.join("port");
        let child = Command::new("python3")
            .arg(&script)
            .arg(&crt)
            .arg(&key)
            .arg(&port_file)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("python3 on the host");
        let mut stub = HttpsStub {
            child,
            dir,
            port: 0,
        };
        stub.port = crate::eventually(
            "the https stub to listen",
            Duration::from_secs(20),
            async || {
                std::fs::read_to_string(&port_file)
                    .ok()
                    .and_then(|p| p.trim().parse::<u16>().ok())
            },
        )
        .await;
        stub
    }

    /// `https://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("https://127.0.0.1:{}", self.port)
    }
}

impl Drop for HttpsStub {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
