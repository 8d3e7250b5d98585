//! Real MCP servers for tests: `tests/mcp/server.py`, made with the Python `mcp` package, on
//! a port of 127.0.0.1. [`Sdk::Current`] (2.x, from `target/mcp-venv`) speaks the 2026-07-28
//! revision and the earlier ones; [`Sdk::Legacy`] (1.x, from `target/mcp-legacy-venv`) only
//! the earlier ones, with the `initialize` handshake and `Mcp-Session-Id`. scripts/test
//! installs both (tests/mcp/requirements*.txt). Its tools: `add(a, b)`, `fail(message)`,
//! `sleep(seconds)`, `environment(name)` (where it runs) and `grow(name)` (adds a tool and
//! says the list changed).

use crate::eventually;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// Which Python SDK serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sdk {
    Current,
    Legacy,
}

impl Sdk {
    fn venv(self) -> &'static str {
        match self {
            Sdk::Current => "mcp-venv",
            Sdk::Legacy => "mcp-legacy-venv",
        }
    }

    fn requirements(self) -> &'static str {
        match self {
            Sdk::Current => "tests/mcp/requirements.txt",
            Sdk::Legacy => "tests/mcp/requirements-legacy.txt",
        }
    }
}

fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The Python of the SDK's venv, panicking (saying how to install it) when it is missing: an
/// MCP test is never skipped silently.
pub fn python(sdk: Sdk) -> PathBuf {
    let root = workspace();
    let bin = root.join("target").join(sdk.venv()).join("bin/python");
    assert!(
        bin.exists(),
        "the Python MCP SDK is not installed at {}: run `python3 -m venv target/{} && \
         target/{}/bin/pip install -r {}` (scripts/test does)",
        bin.display(),
        sdk.venv(),
        sdk.venv(),
        sdk.requirements()
    );
    bin
}

/// A running MCP server, killed when dropped.
pub struct McpServer {
    url: String,
    child: Child,
}

impl McpServer {
    /// Starts the server; with `token`, it takes only requests that carry `Authorization:
    /// Bearer <token>`.
    pub async fn start(sdk: Sdk, token: Option<&str>) -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let mut command = Command::new(python(sdk));
        command
            .arg(workspace().join("tests/mcp/server.py"))
            .args(["--port", &port.to_string()]);
        if let Some(t) = token {
            command.args(["--token", t]);
        }
        let child = command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("starting tests/mcp/server.py");
        let server = McpServer {
            url: format!("http://127.0.0.1:{port}/mcp"),
            child,
        };
        let addr = format!("127.0.0.1:{port}");
        eventually(
            "the MCP server listens",
            Duration::from_secs(60),
            async || {
                tokio::net::TcpStream::connect(&addr)
                    .await
                    .map(|_| ())
                    .map_err(|e| e.to_string())
            },
        )
        .await;
        server
    }

    /// Its endpoint, `http://127.0.0.1:<port>/mcp`.
    pub fn url(&self) -> &str {
        &self.url
    }
}

impl Drop for McpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
