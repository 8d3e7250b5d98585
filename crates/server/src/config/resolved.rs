//! What the flags resolve to: the settings each part of the server is built from (webhooks,
//! the master key, the known-hosts file, public URLs, the preview listener), and a `Debug`
//! that never shows a secret. Outside this module only `app::Settings::resolve` (and
//! `ServiceSettings::resolve`, its part) calls these, so the configuration is resolved in one
//! place; the binary and the test harness both build from what it returns. `preview_bind` is
//! public because a process binds its listeners before it resolves the rest.

use super::Config;
use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;

/// Debug without secrets: the database URL's password is redacted.
impl fmt::Debug for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Config")
            .field("bind", &self.bind)
            .field("data_dir", &self.data_dir)
            .field(
                "database_url",
                &self.database_url.as_deref().map(redact_url),
            )
            .field("default_model", &self.default_model)
            .field("default_max_input_tokens", &self.default_max_input_tokens)
            .field("db_max_connections", &self.db_max_connections)
            .field("log_format", &self.log_format)
            .field("backend", &self.backend)
            .field("image", &self.image)
            .field("docker_network", &self.docker_network)
            .field("sandboxd_bin", &self.sandboxd_bin)
            .field("idle_ttl_seconds", &self.idle_ttl_seconds)
            .field("warm_pool_size", &self.warm_pool_size)
            .field("max_concurrent_builds", &self.max_concurrent_builds)
            .field("max_concurrent_boots", &self.max_concurrent_boots())
            .field("git_known_hosts", &self.git_known_hosts)
            .field("s3", &self.s3_settings())
            .field("public_url", &self.public_url())
            .field("preview_bind", &self.preview_bind)
            .field("preview_public_url", &self.preview_public_url)
            .field("preview_domain", &self.preview_domain)
            .field("e2b_domain", &self.e2b_domain)
            .field("allowed_hosts", &self.allowed_hosts)
            .field("preview_key", &self.preview_key.as_ref().map(|_| "***"))
            .field("token", &self.token.as_ref().map(|_| "***"))
            .field("master_key", &self.master_key.as_ref().map(|_| "***"))
            .field("previous_master_keys", &self.previous_master_keys.len())
            .field("webhook_allow_private", &self.webhook_allow_private)
            .field("mcp_allow_private", &self.mcp_allow_private)
            .field("webhook_max_attempts", &self.webhook_max_attempts)
            .field(
                "webhook_retry_base_seconds",
                &self.webhook_retry_base_seconds,
            )
            .field("webhook_retry_max_seconds", &self.webhook_retry_max_seconds)
            .field("webhook_deactivate_after", &self.webhook_deactivate_after)
            .field("webhook_concurrency", &self.webhook_concurrency)
            .field(
                "webhook_per_subscription_concurrency",
                &self.webhook_per_subscription_concurrency,
            )
            .field("webhook_timeout_seconds", &self.webhook_timeout_seconds)
            .field("webhook_retention_days", &self.webhook_retention_days)
            .finish()
    }
}

impl Config {
    /// The runtime classes agents and environments may name: `--kubernetes-runtime-classes`
    /// and `--kubernetes-runtime-class`, on Kubernetes; none on another backend (a list given
    /// there stops the server rather than be silently ignored).
    pub(crate) fn runtime_classes(&self) -> anyhow::Result<Vec<String>> {
        let listed: Vec<String> = self
            .kubernetes_runtime_classes
            .as_deref()
            .unwrap_or_default()
            .split(',')
            .map(str::trim)
            .filter(|n| !n.is_empty())
            .map(str::to_owned)
            .collect();
        if self.backend != "kubernetes" {
            if !listed.is_empty() {
                anyhow::bail!(
                    "--kubernetes-runtime-classes is for --backend kubernetes; the {} backend has no runtime classes",
                    self.backend
                );
            }
            return Ok(Vec::new());
        }
        let mut classes = Vec::new();
        for name in self.kubernetes_runtime_class.iter().chain(&listed) {
            if !sandbox_agents_domain::runtime_class::is_valid(name) {
                anyhow::bail!(
                    "--kubernetes-runtime-classes: '{name}' is not a RuntimeClass name (lowercase letters, digits, '-' and '.')"
                );
            }
            if !classes.contains(name) {
                classes.push(name.clone());
            }
        }
        Ok(classes)
    }

    /// The webhook settings from the `--webhook-*` flags (the extra CA certificates aside).
    pub(crate) fn webhook_settings(
        &self,
    ) -> anyhow::Result<sandbox_agents_webhooks::WebhookSettings> {
        let secs = |name: &str, v: f64| {
            if v.is_finite() && v > 0.0 {
                Ok(std::time::Duration::from_secs_f64(v))
            } else {
                Err(anyhow::anyhow!(
                    "--{name} must be a positive number of seconds"
                ))
            }
        };
        Ok(sandbox_agents_webhooks::WebhookSettings {
            allow_private: self.webhook_allow_private,
            retry: sandbox_agents_webhooks::RetryPolicy {
                max_attempts: self.webhook_max_attempts,
                base: secs(
                    "webhook-retry-base-seconds",
                    self.webhook_retry_base_seconds,
                )?,
                max: secs("webhook-retry-max-seconds", self.webhook_retry_max_seconds)?,
            },
            deactivate_after: self.webhook_deactivate_after,
            concurrency: self.webhook_concurrency as usize,
            per_subscription: self.webhook_per_subscription_concurrency as usize,
            timeout: secs("webhook-timeout-seconds", self.webhook_timeout_seconds)?,
            poll: std::time::Duration::from_secs(1),
            retention_days: self.webhook_retention_days,
            // `app::Settings::resolve` sets it from the certificates read once at start.
            extra_ca: None,
        })
    }

    /// `--blob-url`, else the directory `<data-dir>/blobs`.
    pub(crate) fn blob_location(&self) -> anyhow::Result<sandbox_agents_workspace::BlobLocation> {
        match self.blob_url.as_deref().filter(|u| !u.trim().is_empty()) {
            Some(url) => {
                sandbox_agents_workspace::BlobLocation::parse(url).map_err(anyhow::Error::msg)
            }
            None => Ok(sandbox_agents_workspace::BlobLocation::Local(
                self.data_dir.join("blobs"),
            )),
        }
    }

    /// How `s3_mount` entries reach their buckets: the `--s3-*` flags, with the standard AWS
    /// variables for what they leave unset (`AWS_ENDPOINT_URL`, `AWS_REGION`,
    /// `AWS_DEFAULT_REGION`).
    pub(crate) fn s3_settings(&self) -> sandbox_agents_workspace::s3::S3Settings {
        let env = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
        sandbox_agents_workspace::s3::S3Settings {
            endpoint: self
                .s3_endpoint
                .clone()
                .or_else(|| env("AWS_ENDPOINT_URL"))
                .map(|e| e.trim_end_matches('/').to_owned()),
            region: self
                .s3_region
                .clone()
                .or_else(|| env("AWS_REGION"))
                .or_else(|| env("AWS_DEFAULT_REGION"))
                .unwrap_or_else(|| "us-east-1".into()),
            virtual_hosted: self.s3_addressing_style == super::S3AddressingStyle::Virtual,
            proxy: self.s3_proxy.clone().filter(|p| !p.trim().is_empty()),
            access_key_id: self.s3_access_key_id.clone(),
            secret_access_key: self.s3_secret_access_key.clone(),
            session_token: self.s3_session_token.clone(),
            ambient: self.s3_ambient_credentials(env),
            stage_max_bytes: self.s3_stage_max_bytes,
            // `app::ServiceSettings::resolve` sets it from the certificates read once at start.
            extra_ca: None,
        }
    }

    /// The role the environment gives the server, in the order of the AWS SDKs' default chain
    /// (static keys, which come first, are handled by the caller): web identity, the ECS task
    /// role, EKS Pod Identity, then the instance profile when `--s3-instance-credentials`.
    fn s3_ambient_credentials(
        &self,
        env: impl Fn(&str) -> Option<String>,
    ) -> Option<sandbox_agents_workspace::s3::AmbientCredentials> {
        use sandbox_agents_workspace::s3::AmbientCredentials as A;
        if env("AWS_WEB_IDENTITY_TOKEN_FILE").is_some() && env("AWS_ROLE_ARN").is_some() {
            return Some(A::WebIdentity {
                sts_endpoint: env("AWS_ENDPOINT_URL_STS"),
                session_name: env("AWS_ROLE_SESSION_NAME"),
            });
        }
        if let Some(relative_uri) = env("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI") {
            return Some(A::EcsTask { relative_uri });
        }
        if let (Some(full_uri), Some(token_file)) = (
            env("AWS_CONTAINER_CREDENTIALS_FULL_URI"),
            env("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE"),
        ) {
            return Some(A::PodIdentity {
                full_uri,
                token_file,
            });
        }
        self.s3_instance_credentials.then(|| A::Instance {
            metadata_endpoint: env("AWS_EC2_METADATA_SERVICE_ENDPOINT"),
        })
    }

    /// `--master-key`, or the key file under the data directory (created on first start),
    /// with `--previous-master-keys`.
    pub(crate) fn master_key(&self) -> anyhow::Result<sandbox_agents_vault::MasterKey> {
        use anyhow::Context;
        let previous = self
            .previous_master_keys
            .iter()
            .filter(|k| !k.trim().is_empty())
            .enumerate()
            .map(|(i, k)| {
                sandbox_agents_vault::MasterKey::parse(k).with_context(|| {
                    format!(
                        "SANDBOX_AGENTS_PREVIOUS_MASTER_KEYS: key {} is not usable",
                        i + 1
                    )
                })
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        Ok(self.current_master_key()?.with_previous(previous))
    }

    fn current_master_key(&self) -> anyhow::Result<sandbox_agents_vault::MasterKey> {
        use anyhow::Context;
        match &self.master_key {
            Some(k) => sandbox_agents_vault::MasterKey::parse(k)
                .context("SANDBOX_AGENTS_MASTER_KEY is not usable"),
            None => {
                let path = self.data_dir.join("master.key");
                sandbox_agents_vault::MasterKey::load_or_create(&path).with_context(|| {
                    format!(
                        "reading or creating the master key {} (set SANDBOX_AGENTS_MASTER_KEY instead)",
                        path.display()
                    )
                })
            }
        }
    }

    /// `--max-concurrent-boots`, else twice the machine's cores, at most a quarter of the
    /// database pool: a boot needs one connection at a time, and requests, runs and the other
    /// workers need the rest.
    pub(crate) fn max_concurrent_boots(&self) -> usize {
        if let Some(n) = self.max_concurrent_boots {
            return n as usize;
        }
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        (2 * cores).min(self.db_max_connections as usize / 4).max(1)
    }

    /// The backend sandboxes run on (`--backend`) with its flags; Docker's Engine address is
    /// `DOCKER_HOST`, as for every Docker client. A Kubernetes deployment's daemon tokens are
    /// derived from `master_key`, so every replica reaches every sandbox.
    pub(crate) fn backend_settings(
        &self,
        master_key: &sandbox_agents_vault::MasterKey,
    ) -> anyhow::Result<sandbox_agents_sandbox::BackendSettings> {
        use sandbox_agents_sandbox::kubernetes::DaemonRoute;
        use sandbox_agents_sandbox::{BackendSettings, DockerSettings, KubernetesSettings};
        if self.backend == "kubernetes" {
            let Some(sandboxd_image) = self.kubernetes_sandboxd_image.as_deref() else {
                anyhow::bail!(
                    "--backend kubernetes needs --kubernetes-sandboxd-image \
                     (SANDBOX_AGENTS_KUBERNETES_SANDBOXD_IMAGE): the image, usually this \
                     server's own, whose /usr/local/bin/sandboxd every sandbox pod gets"
                );
            };
            let key = master_key.keyed_hash(b"sandbox-agents kubernetes daemon tokens");
            let mut k = KubernetesSettings::new(&self.kubernetes_namespace, sandboxd_image, key);
            k.kubeconfig = self.kubernetes_kubeconfig.clone();
            k.image = self.kubernetes_image.clone();
            k.runtime_class = self.kubernetes_runtime_class.clone();
            k.runtime_classes = self.runtime_classes()?;
            k.disk_limit = (self.sandbox_disk_mb > 0)
                .then(|| self.sandbox_disk_mb.saturating_mul(1024 * 1024));
            k.image_pull_secret = self.kubernetes_image_pull_secret.clone();
            k.route = match self.kubernetes_daemon_route.as_str() {
                "pod-network" => DaemonRoute::PodNetwork,
                "port-forward" => DaemonRoute::PortForward,
                // clap accepts nothing but the three names.
                _ => DaemonRoute::Auto,
            };
            k.node_selector = node_selector(self.kubernetes_node_selector.as_deref())?;
            k.control_plane = sandbox_agents_sandbox::kubernetes::ControlPlanePods {
                namespace: self.kubernetes_control_plane_namespace.clone(),
                labels: labels(
                    "--kubernetes-control-plane-labels",
                    Some(self.kubernetes_control_plane_labels.as_str()),
                )?,
            };
            if k.control_plane.labels.is_empty() {
                anyhow::bail!(
                    "--kubernetes-control-plane-labels names no label: sandboxes' NetworkPolicies would admit every pod of {}",
                    k.control_plane.namespace
                );
            }
            k.egress_proxy = self.egress_proxy.then(|| {
                self.kubernetes_egress_proxy.clone().unwrap_or_else(|| {
                    format!(
                        "sandbox-agents-egress.{}.svc:3129",
                        self.kubernetes_control_plane_namespace
                    )
                })
            });
            return Ok(BackendSettings::Kubernetes(k));
        }
        // clap accepts nothing but the two names.
        Ok(BackendSettings::Docker(DockerSettings {
            host: std::env::var("DOCKER_HOST").ok().filter(|h| !h.is_empty()),
            network: self.docker_network.clone(),
            sandboxd: self.sandboxd_bin(),
            egress: None,
        }))
    }

    /// The egress proxy's settings with `--egress-proxy`; the socket directory made absolute
    /// (Docker mounts it by path), under the data directory when that is short enough.
    pub(crate) fn egress_settings(&self) -> anyhow::Result<Option<crate::egress::EgressSettings>> {
        if !self.egress_proxy {
            if !self.egress_allow_private.is_empty() || !self.egress_deny.is_empty() {
                tracing::warn!("--egress-allow-private and --egress-deny apply only with --egress-proxy: without it sandboxes have the backend's network and these ranges change nothing");
            }
            return Ok(None);
        }
        // The sandbox's end of the proxy is the daemon's: without it a sandbox would have no
        // network at all, which is a configuration to refuse, not to discover at a boot.
        if self.sandboxd_bin().is_none() && self.backend != "kubernetes" {
            anyhow::bail!(
                "--egress-proxy needs the sandbox daemon (--sandboxd-bin, or sandboxd beside this executable): it is the sandbox's way to the proxy"
            );
        }
        let socket_dir = match &self.egress_socket_dir {
            Some(dir) => std::path::absolute(dir)?,
            None => {
                let under_data = std::path::absolute(self.data_dir.join("egress"))?;
                if under_data.as_os_str().len() <= 47 {
                    under_data
                } else {
                    // Named for the data directory, so two servers with different data
                    // directories never share sockets.
                    let digest = <sha2::Sha256 as sha2::Digest>::digest(
                        under_data.as_os_str().as_encoded_bytes(),
                    );
                    std::env::temp_dir().join(format!("sa-egress-{}", &hex::encode(digest)[..12]))
                }
            }
        };
        let resolver = sandbox_agents_egress::SystemResolver::new().map_err(anyhow::Error::msg)?;
        tracing::info!(socket_dir = %socket_dir.display(), allow_private = ?self.egress_allow_private, deny = ?self.egress_deny, "sandboxes reach the network through the egress proxy");
        Ok(Some(crate::egress::EgressSettings {
            pod_listen: (self.backend == "kubernetes").then_some(self.egress_listen),
            socket_dir,
            allow_private: self.egress_allow_private.clone(),
            denied: self.egress_deny.clone(),
            resolver: std::sync::Arc::new(resolver),
        }))
    }

    /// The daemon's binary: `--sandboxd-bin`, else `sandboxd` beside this executable if it is
    /// there; `off` means none.
    fn sandboxd_bin(&self) -> Option<PathBuf> {
        match &self.sandboxd_bin {
            Some(p) if p.as_os_str() == "off" => None,
            Some(p) => Some(p.clone()),
            None => std::env::current_exe()
                .ok()
                .and_then(|exe| Some(exe.parent()?.join("sandboxd")))
                .filter(|p| p.is_file()),
        }
    }

    /// The certificates of `--extra-ca-certs`, checked at start: a file that cannot be read or
    /// holds anything but certificates stops the server with the reason.
    pub(crate) fn extra_ca_certs(
        &self,
    ) -> anyhow::Result<Option<sandbox_agents_domain::ca::ExtraCaCerts>> {
        let Some(path) = &self.extra_ca_certs else {
            return Ok(None);
        };
        let text = std::fs::read_to_string(path).map_err(|e| {
            anyhow::anyhow!(
                "SANDBOX_AGENTS_EXTRA_CA_CERTS: cannot read {}: {e}",
                path.display()
            )
        })?;
        let certs = sandbox_agents_domain::ca::ExtraCaCerts::parse(&text).map_err(|e| {
            anyhow::anyhow!("SANDBOX_AGENTS_EXTRA_CA_CERTS: {} {e}", path.display())
        })?;
        tracing::info!(path = %path.display(), certificates = certs.count(), "trusting extra CA certificates");
        Ok(Some(certs))
    }

    /// With extra CA certificates, the bundle git run by the control plane is pointed at
    /// (`GIT_SSL_CAINFO` replaces git's trust store rather than adding to it): the system's
    /// bundle followed by the extra certificates, written to `<data-dir>/git-ca-bundle.pem`
    /// at every start (through a rename, so a process reading it never sees half of it).
    pub(crate) fn git_ca_bundle(
        &self,
        extra: Option<&sandbox_agents_domain::ca::ExtraCaCerts>,
    ) -> anyhow::Result<Option<PathBuf>> {
        use anyhow::Context;
        let Some(extra) = extra else {
            return Ok(None);
        };
        let mut bundle = SYSTEM_BUNDLES
            .iter()
            .find_map(|p| std::fs::read_to_string(p).ok())
            .unwrap_or_default();
        if !bundle.is_empty() && !bundle.ends_with('\n') {
            bundle.push('\n');
        }
        bundle.push_str(extra.pem());
        std::fs::create_dir_all(&self.data_dir)
            .with_context(|| format!("creating {}", self.data_dir.display()))?;
        let path = std::path::absolute(self.data_dir.join("git-ca-bundle.pem"))?;
        let tmp = path.with_extension(format!("pem.{}", std::process::id()));
        std::fs::write(&tmp, bundle)
            .and_then(|()| std::fs::rename(&tmp, &path))
            .with_context(|| format!("writing {}", path.display()))?;
        Ok(Some(path))
    }

    /// `--git-known-hosts` or `<data-dir>/known_hosts`, made absolute (git runs elsewhere).
    pub(crate) fn git_known_hosts(&self) -> anyhow::Result<PathBuf> {
        let path = self
            .git_known_hosts
            .clone()
            .unwrap_or_else(|| self.data_dir.join("known_hosts"));
        let text = path.to_string_lossy();
        if text.is_empty()
            || text
                .chars()
                .any(|c| c.is_whitespace() || c.is_control() || "'\"\\%".contains(c))
        {
            anyhow::bail!(
                "SANDBOX_AGENTS_GIT_KNOWN_HOSTS ({text}) must be a path without whitespace, quotes, backslashes or '%'"
            );
        }
        Ok(std::path::absolute(&path)?)
    }

    /// `--public-url` without a trailing slash, or one derived from `--bind`.
    pub(crate) fn public_url(&self) -> String {
        self.public_url_at(self.bind)
    }

    /// `--public-url`, or one derived from the address the API listener got (`bound`, whose
    /// port is the real one when `--bind` asked for port 0).
    pub(crate) fn public_url_at(&self, bound: SocketAddr) -> String {
        match &self.public_url {
            Some(url) => url.trim_end_matches('/').to_owned(),
            None => url_of(bound),
        }
    }

    /// `--preview-bind`, or the API's address with the next port (port 0 stays 0).
    pub fn preview_bind(&self) -> anyhow::Result<SocketAddr> {
        if let Some(b) = self.preview_bind {
            return Ok(b);
        }
        let port = match self.bind.port() {
            0 => 0,
            p => p.checked_add(1).ok_or_else(|| {
                anyhow::anyhow!("--bind uses port 65535, so previews need --preview-bind")
            })?,
        };
        Ok(SocketAddr::new(self.bind.ip(), port))
    }

    /// `--preview-public-url`, or one derived from the address the preview listener got.
    pub(crate) fn preview_public_url_at(&self, bound: SocketAddr) -> String {
        match &self.preview_public_url {
            Some(url) => url.trim_end_matches('/').to_owned(),
            None => url_of(bound),
        }
    }
}

/// Where the control plane's host keeps its trusted roots: Debian's and Alpine's, then
/// Fedora's.
const SYSTEM_BUNDLES: [&str; 2] = [
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
];

/// `http://<addr>`, with 127.0.0.1 (or ::1) for an address of all interfaces.
fn url_of(addr: SocketAddr) -> String {
    match addr.ip() {
        std::net::IpAddr::V4(ip) if ip.is_unspecified() => {
            format!("http://127.0.0.1:{}", addr.port())
        }
        std::net::IpAddr::V6(ip) if ip.is_unspecified() => format!("http://[::1]:{}", addr.port()),
        _ => format!("http://{addr}"),
    }
}

/// `postgres://user:secret@host/db` -> `postgres://user:***@host/db`.
pub fn redact_url(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let creds = &url[scheme + 3..at];
            match creds.find(':') {
                Some(colon) => format!(
                    "{}{}:***{}",
                    &url[..scheme + 3],
                    &creds[..colon],
                    &url[at..]
                ),
                None => url.to_owned(),
            }
        }
        _ => url.to_owned(),
    }
}

/// `--kubernetes-node-selector`: `key=value` pairs separated by commas.
fn node_selector(flag: Option<&str>) -> anyhow::Result<std::collections::BTreeMap<String, String>> {
    labels("--kubernetes-node-selector", flag)
}

/// A flag of `key=value` labels separated by commas.
fn labels(
    name: &str,
    flag: Option<&str>,
) -> anyhow::Result<std::collections::BTreeMap<String, String>> {
    let mut labels = std::collections::BTreeMap::new();
    for pair in flag
        .unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
    {
        let Some((k, v)) = pair.split_once('=') else {
            anyhow::bail!("{name}: '{pair}' is not key=value");
        };
        labels.insert(k.trim().to_owned(), v.trim().to_owned());
    }
    Ok(labels)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Cli, Command};
    use clap::Parser;

    #[test]
    fn passwords_never_reach_debug_output() {
        assert_eq!(
            redact_url("postgres://u:secret@h:5432/db"),
            "postgres://u:***@h:5432/db"
        );
        assert_eq!(redact_url("postgres://u@h/db"), "postgres://u@h/db");
        assert_eq!(
            redact_url("postgres:///db?host=/run"),
            "postgres:///db?host=/run"
        );
    }

    #[test]
    fn the_defaults_are_the_documented_ones_whatever_the_environment_says() {
        let d = Config::defaults();
        assert_eq!(d.bind.to_string(), "127.0.0.1:8000");
        assert_eq!(d.database_url, None, "DATABASE_URL is not read");
        assert_eq!(d.token, None, "SANDBOX_AGENTS_TOKEN is not read");
        assert_eq!(d.warm_pool_size, 2);
        assert_eq!(d.db_max_connections, 32);
        assert_eq!(d.s3_stage_max_bytes, 1 << 30);
        assert_eq!(d.webhook_retry_max_seconds, 43_200.0);
    }

    #[test]
    fn no_subcommand_means_serve_with_the_documented_defaults() {
        let cli = Cli::try_parse_from(["sandbox-agents"]).unwrap();
        assert_eq!(cli.command, None);
        assert_eq!(cli.config.bind.to_string(), "127.0.0.1:8000");
        assert_eq!(cli.config.public_url(), "http://127.0.0.1:8000");
        assert_eq!(
            cli.config.preview_bind().unwrap().to_string(),
            "127.0.0.1:8001"
        );
        let all = Cli::try_parse_from(["sandbox-agents", "--bind", "0.0.0.0:9000"]).unwrap();
        let preview = all.config.preview_bind().unwrap();
        assert_eq!(preview.to_string(), "0.0.0.0:9001");
        assert_eq!(
            all.config.preview_public_url_at(preview),
            "http://127.0.0.1:9001"
        );
        assert!(!cli.config.webhook_allow_private);
        let w = cli.config.webhook_settings().unwrap();
        assert_eq!(w.retry.max_attempts, 8);
        assert_eq!(w.concurrency, 32);
        assert_eq!(cli.config.warm_pool_size, 2);
        let cli = Cli::try_parse_from(["sandbox-agents", "migrate", "--data-dir", "/x"]).unwrap();
        assert_eq!(cli.command, Some(Command::Migrate));
        assert_eq!(cli.config.data_dir, PathBuf::from("/x"));
    }

    #[test]
    fn boots_at_once_follow_the_cores_and_a_quarter_of_the_pool_unless_set() {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let boots = |args: &[&str]| {
            let mut all = vec!["sandbox-agents"];
            all.extend(args);
            Cli::try_parse_from(all)
                .unwrap()
                .config
                .max_concurrent_boots()
        };
        assert_eq!(boots(&[]), (2 * cores).min(8));
        assert_eq!(boots(&["--db-max-connections", "8"]), (2 * cores).min(2));
        assert_eq!(boots(&["--db-max-connections", "2"]), 1);
        assert_eq!(boots(&["--max-concurrent-boots", "40"]), 40);
        assert!(Cli::try_parse_from(["sandbox-agents", "--max-concurrent-boots", "0"]).is_err());
    }

    #[test]
    fn runtime_classes_are_the_listed_and_the_default_on_kubernetes_only() {
        let classes = |args: &[&str]| {
            let mut all = vec!["sandbox-agents"];
            all.extend(args);
            Cli::try_parse_from(all).unwrap().config.runtime_classes()
        };
        assert_eq!(classes(&[]).unwrap(), Vec::<String>::new());
        let k8s = ["--backend", "kubernetes"];
        assert_eq!(
            classes(
                &[
                    &k8s[..],
                    &[
                        "--kubernetes-runtime-class",
                        "gvisor",
                        "--kubernetes-runtime-classes",
                        "kata, gvisor,,runc"
                    ]
                ]
                .concat()
            )
            .unwrap(),
            ["gvisor", "kata", "runc"]
        );
        let e = classes(&["--kubernetes-runtime-classes", "gvisor"]).unwrap_err();
        assert!(e.to_string().contains("--backend kubernetes"), "{e}");
        let e =
            classes(&[&k8s[..], &["--kubernetes-runtime-classes", "GVisor"]].concat()).unwrap_err();
        assert!(
            e.to_string()
                .contains("'GVisor' is not a RuntimeClass name"),
            "{e}"
        );
    }

    #[test]
    fn s3_secrets_never_reach_debug_output() {
        let cli = Cli::try_parse_from([
            "sandbox-agents",
            "--s3-endpoint",
            "http://127.0.0.1:9000/",
            "--s3-access-key-id",
            "AKIDTEST",
            "--s3-secret-access-key",
            "s3cr3t-value",
            "--s3-proxy",
            "http://egress:pr0xy-pass@proxy.internal:3128",
        ])
        .unwrap();
        let shown = format!("{:?}", cli.config);
        assert!(
            !shown.contains("s3cr3t-value") && !shown.contains("pr0xy-pass"),
            "{shown}"
        );
        assert!(shown.contains("proxy.internal:3128"), "{shown}");
        let s = cli.config.s3_settings();
        assert_eq!(s.endpoint.as_deref(), Some("http://127.0.0.1:9000"));
        assert_eq!(s.stage_max_bytes, 1 << 30);
        assert!(!s.virtual_hosted, "path-style unless asked");
        let virt = Cli::try_parse_from(["sandbox-agents", "--s3-addressing-style", "virtual"])
            .unwrap()
            .config;
        assert!(virt.s3_settings().virtual_hosted);
    }

    #[test]
    fn s3_roles_follow_the_sdk_chain_and_the_instance_profile_is_opt_in() {
        use sandbox_agents_workspace::s3::AmbientCredentials as A;
        let vars = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                pairs
                    .iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| v.to_string())
            }
        };
        let plain = Cli::try_parse_from(["sandbox-agents"]).unwrap().config;
        let opted = Cli::try_parse_from(["sandbox-agents", "--s3-instance-credentials"])
            .unwrap()
            .config;
        assert_eq!(plain.s3_ambient_credentials(vars(&[])), None);
        assert_eq!(
            opted.s3_ambient_credentials(vars(&[(
                "AWS_EC2_METADATA_SERVICE_ENDPOINT",
                "http://10.0.0.1"
            )])),
            Some(A::Instance {
                metadata_endpoint: Some("http://10.0.0.1".into())
            })
        );
        // Half of a pair is not a role: the token file without the role, or the full URI
        // without its token.
        assert_eq!(
            plain.s3_ambient_credentials(vars(&[
                ("AWS_WEB_IDENTITY_TOKEN_FILE", "/t"),
                ("AWS_CONTAINER_CREDENTIALS_FULL_URI", "http://x/creds"),
            ])),
            None
        );
        let all: &[(&str, &str)] = &[
            ("AWS_WEB_IDENTITY_TOKEN_FILE", "/t"),
            ("AWS_ROLE_ARN", "arn:aws:iam::1:role/r"),
            ("AWS_ENDPOINT_URL_STS", "https://sts.example"),
            ("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "/v2/creds"),
            ("AWS_CONTAINER_CREDENTIALS_FULL_URI", "http://x/creds"),
            ("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE", "/k"),
        ];
        assert_eq!(
            opted.s3_ambient_credentials(vars(all)),
            Some(A::WebIdentity {
                sts_endpoint: Some("https://sts.example".into()),
                session_name: None
            })
        );
        assert_eq!(
            opted.s3_ambient_credentials(vars(&all[3..])),
            Some(A::EcsTask {
                relative_uri: "/v2/creds".into()
            })
        );
        assert_eq!(
            plain.s3_ambient_credentials(vars(&all[4..])),
            Some(A::PodIdentity {
                full_uri: "http://x/creds".into(),
                token_file: "/k".into()
            })
        );
    }

    #[test]
    fn the_git_known_hosts_file_defaults_to_the_data_dir_and_refuses_what_ssh_would_split() {
        let cli = Cli::try_parse_from(["sandbox-agents", "--data-dir", "/srv/sa"]).unwrap();
        assert_eq!(
            cli.config.git_known_hosts().unwrap(),
            PathBuf::from("/srv/sa/known_hosts")
        );
        let rel = Cli::try_parse_from(["sandbox-agents", "--git-known-hosts", "kh"]).unwrap();
        assert!(rel.config.git_known_hosts().unwrap().is_absolute());
        for bad in ["/a b/kh", "/a/%d/kh", "/a/'kh"] {
            let cli = Cli::try_parse_from(["sandbox-agents", "--git-known-hosts", bad]).unwrap();
            assert!(cli.config.git_known_hosts().is_err(), "{bad}");
        }
    }

    #[test]
    fn egress_ranges_are_lists_of_cidrs_and_a_bad_one_is_refused_at_the_flag() {
        let cli = Cli::try_parse_from([
            "sandbox-agents",
            "--egress-proxy",
            "--sandboxd-bin",
            "/bin/true",
            "--egress-allow-private",
            "10.20.0.0/16",
            "--egress-deny",
            "10.20.5.0/24,203.0.113.0/24",
        ])
        .unwrap();
        let e = cli.config.egress_settings().unwrap().unwrap();
        assert_eq!(e.allow_private, vec!["10.20.0.0/16".parse().unwrap()]);
        assert_eq!(
            e.denied,
            vec![
                "10.20.5.0/24".parse::<ipnet::IpNet>().unwrap(),
                "203.0.113.0/24".parse().unwrap()
            ]
        );
        let bad = Cli::try_parse_from(["sandbox-agents", "--egress-deny", "10.0.0.0/33"]);
        assert!(bad.is_err());
    }

    #[test]
    fn kubernetes_sandboxes_are_confined_to_the_control_plane_and_its_proxy_as_the_flags_say() {
        use sandbox_agents_sandbox::BackendSettings;
        let key = sandbox_agents_vault::MasterKey::from_bytes(&[3u8; 32]).unwrap();
        let k8s = |extra: &[&str]| {
            let mut args = vec![
                "sandbox-agents",
                "--backend",
                "kubernetes",
                "--kubernetes-sandboxd-image",
                "sa:1",
            ];
            args.extend_from_slice(extra);
            Cli::try_parse_from(args).unwrap().config
        };
        let BackendSettings::Kubernetes(k) = k8s(&[]).backend_settings(&key).unwrap() else {
            panic!("kubernetes settings");
        };
        // What deploy/kubernetes/ deploys; no proxy unless asked for.
        assert_eq!(k.control_plane.namespace, "sandbox-agents");
        assert_eq!(
            k.control_plane.labels,
            [(
                "app.kubernetes.io/name".to_owned(),
                "sandbox-agents".to_owned()
            )]
            .into()
        );
        assert_eq!(k.egress_proxy, None);

        let config = k8s(&[
            "--egress-proxy",
            "--kubernetes-control-plane-namespace",
            "cp",
        ]);
        let BackendSettings::Kubernetes(k) = config.backend_settings(&key).unwrap() else {
            panic!("kubernetes settings");
        };
        assert_eq!(
            k.egress_proxy.as_deref(),
            Some("sandbox-agents-egress.cp.svc:3129")
        );
        // Pods reach the proxy on its listener; no daemon binary is needed on this host.
        let egress = config.egress_settings().unwrap().unwrap();
        assert_eq!(egress.pod_listen, Some("0.0.0.0:3129".parse().unwrap()));

        let none = k8s(&["--kubernetes-control-plane-labels", " "]).backend_settings(&key);
        let why = none.unwrap_err().to_string();
        assert!(why.contains("admit every pod of sandbox-agents"), "{why}");
        let bad = k8s(&["--kubernetes-control-plane-labels", "app"]).backend_settings(&key);
        let why = bad.unwrap_err().to_string();
        assert!(
            why.contains("--kubernetes-control-plane-labels: 'app' is not key=value"),
            "{why}"
        );
    }
}
