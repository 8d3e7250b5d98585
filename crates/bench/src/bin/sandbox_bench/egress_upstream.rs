//! The egress part's upstream (`egress.rs`): a Docker network of the bench's own with an
//! HTTPS server on it, so that no outside address is involved.

use crate::{log, raw};
use anyhow::Context;
use bollard::models::{ContainerCreateBody, HostConfig, NetworkCreateRequest};
use bollard::query_parameters::CreateContainerOptions;
use bollard::Docker;
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// The server's name, known only to the proxy's resolver (and to curl's `--resolve`).
pub const HOST: &str = "egress-bench.test";
pub const PORT: u16 = 8443;
/// The small response of the latency part.
pub const SMALL_BYTES: usize = 1024;
/// The large download.
pub const BIG_MIB: usize = 256;

/// The server: a certificate for [`HOST`], the two files, then `http.server` in TLS
/// (HTTP/1.0: one request per connection). It listens only once the files exist.
fn server_script() -> String {
    format!(
        r#"set -e
mkdir -p /tmp/srv && cd /tmp
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 \
  -keyout k.pem -out c.pem -subj /CN={HOST} -addext subjectAltName=DNS:{HOST} 2>/dev/null
head -c {SMALL_BYTES} /dev/urandom > srv/small
head -c {big} /dev/urandom > srv/big
exec python3 -c '
import http.server, os, ssl
os.chdir("/tmp/srv")
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain("/tmp/c.pem", "/tmp/k.pem")
class H(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *a): pass
s = http.server.ThreadingHTTPServer(("0.0.0.0", {PORT}), H)
s.socket = ctx.wrap_socket(s.socket, server_side=True)
s.serve_forever()
'"#,
        big = BIG_MIB * 1024 * 1024
    )
}

/// The bench network and its server; removed by [`Upstream::remove`].
pub struct Upstream {
    pub network: String,
    container: String,
    pub ip: String,
    pub subnet: String,
}

impl Upstream {
    pub async fn start(docker: &Docker, image: &str) -> anyhow::Result<Upstream> {
        let suffix = &uuid::Uuid::new_v4().simple().to_string()[..8];
        let network = format!("sandbox-bench-egress-{suffix}");
        docker
            .create_network(NetworkCreateRequest {
                name: network.clone(),
                labels: Some(HashMap::from([(
                    raw::BENCH_LABEL.to_owned(),
                    "1".to_owned(),
                )])),
                ..Default::default()
            })
            .await
            .context("creating the bench network")?;
        let mut up = Upstream {
            network: network.clone(),
            container: String::new(),
            ip: String::new(),
            subnet: String::new(),
        };
        if let Err(e) = up.run_server(docker, image, suffix).await {
            up.remove(docker).await;
            return Err(e);
        }
        Ok(up)
    }

    async fn run_server(
        &mut self,
        docker: &Docker,
        image: &str,
        suffix: &str,
    ) -> anyhow::Result<()> {
        let body = ContainerCreateBody {
            image: Some(image.to_owned()),
            cmd: Some(vec!["sh".into(), "-c".into(), server_script()]),
            labels: Some(HashMap::from([(
                raw::BENCH_LABEL.to_owned(),
                "1".to_owned(),
            )])),
            host_config: Some(HostConfig {
                network_mode: Some(self.network.clone()),
                ..Default::default()
            }),
            ..Default::default()
        };
        let options = CreateContainerOptions {
            name: Some(format!("sandbox-bench-raw-egress-server-{suffix}")),
            platform: String::new(),
        };
        self.container = docker
            .create_container(Some(options), body)
            .await
            .context("creating the HTTPS server")?
            .id;
        docker
            .start_container(&self.container, None)
            .await
            .context("starting the HTTPS server")?;
        let inspect = docker.inspect_container(&self.container, None).await?;
        self.ip = inspect
            .network_settings
            .and_then(|n| n.networks)
            .and_then(|n| n.get(&self.network).and_then(|e| e.ip_address.clone()))
            .filter(|ip| !ip.is_empty())
            .context("the HTTPS server has no address on the bench network")?;
        self.subnet = docker
            .inspect_network(&self.network, None)
            .await?
            .ipam
            .and_then(|i| i.config)
            .and_then(|c| c.into_iter().find_map(|c| c.subnet))
            .context("the bench network has no subnet")?;
        // It listens once its files exist; the host reaches it on the bridge.
        let deadline = Instant::now() + Duration::from_secs(60);
        while tokio::net::TcpStream::connect((self.ip.as_str(), PORT))
            .await
            .is_err()
        {
            anyhow::ensure!(
                Instant::now() < deadline,
                "the HTTPS server on {} never listened",
                self.ip
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Ok(())
    }

    pub async fn remove(&self, docker: &Docker) {
        if !self.container.is_empty() {
            let _ = raw::remove(docker, &self.container).await;
        }
        if let Err(e) = docker.remove_network(&self.network).await {
            log(format!(
                "the bench network {} was not removed: {e}",
                self.network
            ));
        }
    }
}
