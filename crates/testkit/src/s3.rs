//! An S3-compatible server for tests of `s3_mount` entries: moto's server (`moto[server]` from
//! PyPI, installed by `scripts/test` into `target/moto-venv`) on a port of 127.0.0.1, and a
//! client to set buckets up and look at them. The server under test talks to it with its own signed client.

use crate::eventually;
use object_store::ObjectStore;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// The keys a server under test is given for moto (moto takes any); the secret is distinctive
/// so that a test can look for it in a sandbox.
pub const ACCESS_KEY_ID: &str = "AKIASANDBOXAGENTS01";
pub const SECRET_ACCESS_KEY: &str = "s3-secret-never-in-a-sandbox-7c1e9a";

/// What a server under test needs to reach an S3-compatible store (its flags, set by [`S3Access::configure`]).
#[derive(Clone, Debug)]
pub struct S3Access {
    pub endpoint: String,
    /// `None`: no static keys, for a server that takes a role's credentials instead.
    pub access_key_id: Option<String>,
    pub secret_access_key: Option<String>,
    /// `--s3-addressing-style virtual`.
    pub virtual_hosted: bool,
    /// `--s3-proxy`.
    pub proxy: Option<String>,
}

impl S3Access {
    /// Sets the server flags this access stands for on `config`.
    pub fn configure(self, config: &mut sandbox_agents_server::config::Config) {
        config.s3_endpoint = Some(self.endpoint);
        config.s3_access_key_id = self.access_key_id;
        config.s3_secret_access_key = self.secret_access_key;
        config.s3_addressing_style = if self.virtual_hosted {
            sandbox_agents_server::config::S3AddressingStyle::Virtual
        } else {
            sandbox_agents_server::config::S3AddressingStyle::Path
        };
        config.s3_proxy = self.proxy;
    }
}

/// A running moto server, killed when dropped.
pub struct MotoServer {
    endpoint: String,
    child: Child,
    http: reqwest::Client,
    /// With TLS: the test CA's certificate (PEM) this side trusts, and the directory of the
    /// server's certificate.
    tls: Option<(String, PathBuf)>,
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
        Self::start_with(None).await
    }

    /// [`MotoServer::start`] over https, with a certificate `ca` issued for `IP:127.0.0.1`: a
    /// server under test reaches it only if it trusts `ca` (`--extra-ca-certs`).
    pub async fn start_tls(ca: &crate::tls::TestCa) -> Self {
        Self::start_with(Some(ca)).await
    }

    async fn start_with(ca: Option<&crate::tls::TestCa>) -> Self {
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
        let mut command = Command::new(&bin);
        command.args(["-H", "127.0.0.1", "-p", &port.to_string()]);
        let mut http = reqwest::Client::builder();
        let tls = ca.map(|ca| {
            let dir =
                std::env::temp_dir().join(format!("sa-moto-tls-{}", uuid::Uuid::new_v4().simple()));
            std::fs::create_dir_all(&dir).expect("the certificate's directory");
            let (crt, key) = ca.issue("IP:127.0.0.1", &dir);
            command.arg("--ssl-cert").arg(crt).arg("--ssl-key").arg(key);
            let pem = std::fs::read_to_string(ca.cert()).expect("the test CA's certificate");
            http = std::mem::take(&mut http).add_root_certificate(
                reqwest::Certificate::from_pem(pem.as_bytes()).expect("the test CA's certificate"),
            );
            (pem, dir)
        });
        let child = command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("starting {}: {e}", bin.display()));
        let scheme = if tls.is_some() { "https" } else { "http" };
        let server = MotoServer {
            endpoint: format!("{scheme}://127.0.0.1:{port}"),
            child,
            http: http.build().expect("a client of moto"),
            tls,
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

    /// The endpoint and keys, for [`S3Access::configure`].
    pub fn access(&self) -> S3Access {
        S3Access {
            endpoint: self.endpoint.clone(),
            access_key_id: Some(ACCESS_KEY_ID.into()),
            secret_access_key: Some(SECRET_ACCESS_KEY.into()),
            virtual_hosted: false,
            proxy: None,
        }
    }

    /// [`MotoServer::access`] with buckets addressed by host name: the endpoint is a name
    /// nothing resolves (`s3.test`), reached through moto itself as the proxy, which takes the
    /// bucket from the host a request names (`bucket.s3.test`). A path-style request to it
    /// names the bucket `s3`, so only virtual-hosted requests find a bucket.
    pub fn virtual_hosted_access(&self) -> S3Access {
        let port = self
            .endpoint
            .rsplit(':')
            .next()
            .expect("the endpoint's port");
        S3Access {
            endpoint: format!("http://s3.test:{port}"),
            virtual_hosted: true,
            proxy: Some(self.endpoint.clone()),
            ..self.access()
        }
    }

    /// The endpoint alone, for a server whose credentials come from a role (moto takes any).
    pub fn endpoint_only(&self) -> S3Access {
        S3Access {
            endpoint: self.endpoint.clone(),
            access_key_id: None,
            secret_access_key: None,
            virtual_hosted: false,
            proxy: None,
        }
    }

    fn url(&self, bucket: &str, key: &str) -> String {
        format!("{}/{bucket}/{key}", self.endpoint)
    }

    /// Creates `bucket` (unsigned requests suffice for buckets) with versioning on, so that a test can tell an object written again
    /// from one left alone (its version id changes).
    pub async fn create_bucket(&self, bucket: &str) {
        let r = self.http.put(self.url(bucket, "")).send().await.unwrap();
        assert!(r.status().is_success(), "creating {bucket}: {}", r.status());
        let body = r#"<VersioningConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Status>Enabled</Status></VersioningConfiguration>"#;
        let r = self
            .http
            .put(format!("{}?versioning", self.url(bucket, "")))
            .header("content-type", "application/xml")
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

    /// A signed client of `bucket` (moto answers unsigned object requests unreliably).
    fn store(&self, bucket: &str) -> object_store::aws::AmazonS3 {
        let mut b = object_store::aws::AmazonS3Builder::new()
            .with_endpoint(&self.endpoint)
            .with_allow_http(true)
            .with_region("us-east-1")
            .with_bucket_name(bucket)
            .with_access_key_id(ACCESS_KEY_ID)
            .with_secret_access_key(SECRET_ACCESS_KEY);
        if let Some((pem, _)) = &self.tls {
            let cert = object_store::Certificate::from_pem(pem.as_bytes())
                .expect("the test CA's certificate");
            b = b.with_client_options(
                object_store::ClientOptions::new().with_root_certificate(cert),
            );
        }
        b.build().expect("a client of moto")
    }

    pub async fn put(&self, bucket: &str, key: &str, data: impl Into<bytes::Bytes>) {
        self.store(bucket)
            .put(&key.into(), object_store::PutPayload::from(data.into()))
            .await
            .unwrap_or_else(|e| panic!("putting {key}: {e}"));
    }

    /// An empty `key/` object, as S3 consoles make for a folder (object_store cannot write
    /// one; moto takes an unsigned PUT).
    pub async fn folder_marker(&self, bucket: &str, key: &str) {
        let r = self
            .http
            .put(format!("{}/", self.url(bucket, key.trim_end_matches('/'))))
            .header("content-length", "0")
            .send()
            .await
            .unwrap();
        assert!(r.status().is_success(), "putting {key}/: {}", r.status());
    }

    /// The object's bytes, `None` when there is none.
    pub async fn get(&self, bucket: &str, key: &str) -> Option<Vec<u8>> {
        match self.store(bucket).get(&key.into()).await {
            Ok(r) => Some(r.bytes().await.unwrap().to_vec()),
            Err(object_store::Error::NotFound { .. }) => None,
            Err(e) => panic!("getting {key}: {e}"),
        }
    }

    /// The current version id of an object (of a versioned bucket).
    pub async fn version(&self, bucket: &str, key: &str) -> Option<String> {
        match self.store(bucket).head(&key.into()).await {
            Ok(m) => m.version,
            Err(object_store::Error::NotFound { .. }) => None,
            Err(e) => panic!("looking at {key}: {e}"),
        }
    }

    /// Every key of the bucket, sorted.
    pub async fn keys(&self, bucket: &str) -> Vec<String> {
        use futures::TryStreamExt;
        let mut keys: Vec<String> = self
            .store(bucket)
            .list(None)
            .map_ok(|m| m.location.to_string())
            .try_collect()
            .await
            .unwrap();
        keys.sort();
        keys
    }
}

impl Drop for MotoServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some((_, dir)) = &self.tls {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}
