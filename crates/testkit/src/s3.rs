//! An S3-compatible server for tests of `s3_mount` entries: moto's server (`moto[server]` from
//! PyPI, installed by `scripts/test` into `target/moto-venv`) on a port of 127.0.0.1, and a
//! small unsigned HTTP client to set buckets up and look at them (moto does not check
//! signatures). The server under test talks to it with its own signed client.

use crate::eventually;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// The keys a server under test is given for moto (moto takes any); the secret is distinctive
/// so that a test can look for it in a sandbox.
pub const ACCESS_KEY_ID: &str = "AKIASANDBOXAGENTS01";
pub const SECRET_ACCESS_KEY: &str = "s3-secret-never-in-a-sandbox-7c1e9a";

/// What a server under test needs to reach an S3-compatible store (`AppOptions::s3`).
#[derive(Clone, Debug)]
pub struct S3Access {
    pub endpoint: String,
    pub access_key_id: String,
    pub secret_access_key: String,
}

/// A running moto server, killed when dropped.
pub struct MotoServer {
    endpoint: String,
    child: Child,
    http: reqwest::Client,
}

/// `SANDBOX_AGENTS_MOTO_SERVER`, else `target/moto-venv/bin/moto_server` of this workspace.
fn moto_bin() -> PathBuf {
    if let Some(p) = std::env::var_os("SANDBOX_AGENTS_MOTO_SERVER") {
        return PathBuf::from(p);
    }
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/moto-venv/bin/moto_server")
}

impl MotoServer {
    /// Starts moto on a free port of 127.0.0.1 and waits until it answers. Panics, saying how
    /// to install it, when moto is missing: a test of S3 mounts is never skipped silently.
    pub async fn start() -> Self {
        let bin = moto_bin();
        assert!(
            bin.exists(),
            "moto's server is not installed at {}: run `python3 -m venv target/moto-venv && \
             target/moto-venv/bin/pip install -r tests/contract/requirements-moto.txt` (scripts/test \
             does), or point SANDBOX_AGENTS_MOTO_SERVER at a moto_server",
            bin.display()
        );
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let child = Command::new(&bin)
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("starting {}: {e}", bin.display()));
        let server = MotoServer {
            endpoint: format!("http://127.0.0.1:{port}"),
            child,
            http: reqwest::Client::new(),
        };
        let url = server.endpoint.clone();
        let http = server.http.clone();
        eventually("moto answers", Duration::from_secs(60), async || {
            http.get(&url)
                .send()
                .await
                .map(|_| ())
                .map_err(|e| e.to_string())
        })
        .await;
        server
    }

    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// The endpoint and keys for `AppOptions::s3`.
    pub fn access(&self) -> S3Access {
        S3Access {
            endpoint: self.endpoint.clone(),
            access_key_id: ACCESS_KEY_ID.into(),
            secret_access_key: SECRET_ACCESS_KEY.into(),
        }
    }

    fn url(&self, bucket: &str, key: &str) -> String {
        format!("{}/{bucket}/{key}", self.endpoint)
    }

    /// Creates `bucket` with versioning on, so that a test can tell an object written again
    /// from one left alone (its version id changes).
    pub async fn create_bucket(&self, bucket: &str) {
        let r = self.http.put(self.url(bucket, "")).send().await.unwrap();
        assert!(r.status().is_success(), "creating {bucket}: {}", r.status());
        let body = r#"<VersioningConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Status>Enabled</Status></VersioningConfiguration>"#;
        let r = self
            .http
            .put(format!("{}?versioning", self.url(bucket, "")))
            .body(body)
            .send()
            .await
            .unwrap();
        assert!(
            r.status().is_success(),
            "versioning {bucket}: {}",
            r.status()
        );
    }

    pub async fn put(&self, bucket: &str, key: &str, data: impl Into<reqwest::Body>) {
        let r = self
            .http
            .put(self.url(bucket, key))
            .body(data)
            .send()
            .await
            .unwrap();
        assert!(r.status().is_success(), "putting {key}: {}", r.status());
    }

    /// The object's bytes, `None` when there is none.
    pub async fn get(&self, bucket: &str, key: &str) -> Option<Vec<u8>> {
        let r = self.http.get(self.url(bucket, key)).send().await.unwrap();
        if r.status() == reqwest::StatusCode::NOT_FOUND {
            return None;
        }
        assert!(r.status().is_success(), "getting {key}: {}", r.status());
        Some(r.bytes().await.unwrap().to_vec())
    }

    /// The current version id of an object (of a versioned bucket).
    pub async fn version(&self, bucket: &str, key: &str) -> Option<String> {
        let r = self.http.head(self.url(bucket, key)).send().await.unwrap();
        r.headers()
            .get("x-amz-version-id")
            .map(|v| v.to_str().unwrap().to_owned())
    }

    /// The keys under `prefix`, sorted.
    pub async fn keys(&self, bucket: &str, prefix: &str) -> Vec<String> {
        let r = self
            .http
            .get(format!(
                "{}/{bucket}?list-type=2&prefix={prefix}",
                self.endpoint
            ))
            .send()
            .await
            .unwrap();
        let text = r.text().await.unwrap();
        let mut keys: Vec<String> = text
            .split("<Key>")
            .skip(1)
            .filter_map(|s| s.split("</Key>").next())
            .map(str::to_owned)
            .collect();
        keys.sort();
        keys
    }
}

impl Drop for MotoServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
