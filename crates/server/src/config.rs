//! The server's configuration: one typed struct from flags and environment variables.

use clap::{Parser, Subcommand, ValueEnum};
use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;

#[derive(Parser, Debug)]
#[command(
    name = "sandbox-agents",
    version,
    about = "Sandbox Agents control plane: agents, sessions and their sandboxes, runs, and the event log.",
    after_help = "Logging: RUST_LOG sets the level and filters (e.g. RUST_LOG=info,sandbox_agents=debug).\n\
                  Without DATABASE_URL the server runs a private PostgreSQL cluster under <data-dir>/postgres,\n\
                  from the system's PostgreSQL binaries (apt-get install -y postgresql)."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    #[command(flatten)]
    pub config: Config,
}

#[derive(Subcommand, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    /// Run the HTTP server (the default).
    Serve,
    /// Apply database migrations and exit.
    Migrate,
    /// Stop every session of the deployment (archiving workspaces as a stop does) and remove
    /// its warm pool, so nothing is left running; refused while a server process is up.
    Teardown,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line, for log shippers.
    Json,
}

#[derive(clap::Args, Clone)]
pub struct Config {
    /// Address to listen on. The published client's default base URL is http://localhost:8000.
    #[arg(
        long,
        env = "SANDBOX_AGENTS_BIND",
        default_value = "127.0.0.1:8000",
        global = true
    )]
    pub bind: SocketAddr,

    /// Directory for the server's own state: the embedded PostgreSQL cluster (when DATABASE_URL
    /// is not set) and, later, workspace archives.
    #[arg(
        long,
        env = "SANDBOX_AGENTS_DATA_DIR",
        default_value = "./data",
        global = true
    )]
    pub data_dir: PathBuf,

    /// PostgreSQL connection URL. Without it the server runs its own cluster under
    /// <data-dir>/postgres.
    #[arg(long, env = "DATABASE_URL", hide_env_values = true, global = true)]
    pub database_url: Option<String>,

    /// The model an agent uses when its `model` is null; shown in every Agent response.
    #[arg(
        long,
        env = "SANDBOX_AGENTS_DEFAULT_MODEL",
        default_value = "gpt-5.4-mini",
        global = true
    )]
    pub default_model: String,

    /// Most database connections this process opens.
    #[arg(
        long,
        env = "SANDBOX_AGENTS_DB_MAX_CONNECTIONS",
        default_value_t = 32,
        global = true
    )]
    pub db_max_connections: u32,

    /// The compute plane sessions run on (the only one so far: docker).
    #[arg(long, env = "SANDBOX_AGENTS_BACKEND", default_value = "docker", value_parser = ["docker"], global = true)]
    pub backend: String,

    /// The image sessions boot when their agent names none. Docker reads DOCKER_HOST to find
    /// the Engine (default: the local socket).
    #[arg(
        long,
        env = "SANDBOX_AGENTS_IMAGE",
        default_value = "sandbox-agents-sandbox:1",
        global = true
    )]
    pub image: String,

    /// CPUs each sandbox may use.
    #[arg(
        long,
        env = "SANDBOX_AGENTS_SANDBOX_CPUS",
        default_value_t = 1.0,
        global = true
    )]
    pub sandbox_cpus: f64,

    /// Memory each sandbox may use, in MiB (no swap beyond it).
    #[arg(
        long,
        env = "SANDBOX_AGENTS_SANDBOX_MEMORY_MB",
        default_value_t = 1024,
        global = true
    )]
    pub sandbox_memory_mb: i64,

    /// Processes each sandbox may run at once.
    #[arg(
        long,
        env = "SANDBOX_AGENTS_SANDBOX_PIDS",
        default_value_t = 512,
        global = true
    )]
    pub sandbox_pids: i64,

    /// Started sandboxes of the default image kept waiting for sessions, so that a session
    /// without exposed ports boots in a fraction of the time (0 disables the pool). Every
    /// process of a deployment should use the same value.
    #[arg(
        long,
        env = "SANDBOX_AGENTS_WARM_POOL_SIZE",
        default_value_t = 2,
        global = true
    )]
    pub warm_pool_size: usize,

    /// Seconds a running, idle sandbox is kept when its agent's idle_ttl_seconds is null
    /// (0 = never released).
    #[arg(
        long,
        env = "SANDBOX_AGENTS_IDLE_TTL_SECONDS",
        default_value_t = 1800,
        global = true
    )]
    pub idle_ttl_seconds: u64,

    /// Host directories that manifest `local_dir` entries may copy from (comma-separated).
    /// Empty (the default) refuses `local_dir`: it would let API callers read host files.
    #[arg(
        long,
        env = "SANDBOX_AGENTS_LOCAL_DIR_ROOTS",
        value_delimiter = ',',
        global = true
    )]
    pub local_dir_roots: Vec<std::path::PathBuf>,

    /// The known_hosts file git uses over ssh with deploy keys (key tests, clones): a host's
    /// key is accepted the first time and must match after. Default: <data-dir>/known_hosts.
    /// No whitespace, quotes or '%' (ssh would split or expand them).
    #[arg(long, env = "SANDBOX_AGENTS_GIT_KNOWN_HOSTS", global = true)]
    pub git_known_hosts: Option<PathBuf>,

    /// The URL browsers reach the API and the web UI at (links in /api/me, recovery links,
    /// Secure cookies behind https, the origin allowed to change state). Default:
    /// http://<bind> (http://127.0.0.1:<port> when bound to all interfaces).
    #[arg(long, env = "SANDBOX_AGENTS_PUBLIC_URL", global = true)]
    pub public_url: Option<String>,

    /// Address of the listener that serves port previews, an origin of its own so that pages
    /// sandboxes serve are never same-origin with the API. Default: the API's address with
    /// its port + 1.
    #[arg(long, env = "SANDBOX_AGENTS_PREVIEW_BIND", global = true)]
    pub preview_bind: Option<SocketAddr>,

    /// The URL browsers reach the preview listener at; path preview URLs are
    /// <preview-public-url>/preview/<token>/. Default: http://<preview-bind>.
    #[arg(long, env = "SANDBOX_AGENTS_PREVIEW_PUBLIC_URL", global = true)]
    pub preview_public_url: Option<String>,

    /// A wildcard domain pointing at the preview listener (DNS and certificate for
    /// *.<domain>): preview URLs become https://<port>-<session>-<mac>.<domain>/, one origin
    /// per session and port. An origin (http://preview.localhost:8001) keeps its scheme and
    /// port.
    #[arg(long, env = "SANDBOX_AGENTS_PREVIEW_DOMAIN", global = true)]
    pub preview_domain: Option<String>,

    /// Host names (besides IP addresses, localhost and the public URLs' hosts) this server
    /// answers for, comma-separated; `.example.com` allows the domain and its subdomains, `*`
    /// turns the check off. Requests naming any other Host get 421 (DNS rebinding).
    #[arg(
        long,
        env = "SANDBOX_AGENTS_ALLOWED_HOSTS",
        value_delimiter = ',',
        global = true
    )]
    pub allowed_hosts: Vec<String>,

    /// Secret that signs port preview URLs (at least 32 characters); every process of a
    /// deployment needs the same one. Default: <data-dir>/preview.key, created on first start.
    #[arg(
        long,
        env = "SANDBOX_AGENTS_PREVIEW_KEY",
        hide_env_values = true,
        global = true
    )]
    pub preview_key: Option<String>,

    /// A deployment-wide shared token: callers send it as `Authorization: Bearer <token>` and
    /// act as operators. With neither a token nor any API key, the deployment is open (no
    /// credential is checked); `GET /api/me` says which.
    #[arg(
        long,
        env = "SANDBOX_AGENTS_TOKEN",
        hide_env_values = true,
        global = true
    )]
    pub token: Option<String>,

    /// Requests per minute each credential (an API key, the shared token; callers without one
    /// by address) may make to this process; over it, 429 with Retry-After. 0 = unlimited.
    #[arg(
        long,
        env = "SANDBOX_AGENTS_RATE_LIMIT_PER_MINUTE",
        default_value_t = 6000,
        global = true
    )]
    pub rate_limit_per_minute: u32,

    /// How many requests a credential may make at once before the per-minute rate applies.
    #[arg(
        long,
        env = "SANDBOX_AGENTS_RATE_LIMIT_BURST",
        default_value_t = 500,
        global = true
    )]
    pub rate_limit_burst: u32,
    /// The master key that seals stored secrets (secret values, webhook signing secrets, the
    /// variables of running sandboxes): 32 bytes as 64 hex digits or standard base64. Every
    /// process of a deployment needs the same one. Default: <data-dir>/master.key, 32 random
    /// bytes created on first start with mode 0600. Losing the key makes stored secrets
    /// unreadable.
    #[arg(
        long,
        env = "SANDBOX_AGENTS_MASTER_KEY",
        hide_env_values = true,
        global = true
    )]
    pub master_key: Option<String>,

    /// Master keys being rotated away from, comma-separated, in the same form as the master
    /// key. What they sealed still opens, and at start every stored value is sealed again
    /// under the current key; once the log says none is left, remove them.
    #[arg(
        long,
        env = "SANDBOX_AGENTS_PREVIOUS_MASTER_KEYS",
        hide_env_values = true,
        value_delimiter = ',',
        global = true
    )]
    pub previous_master_keys: Vec<String>,

    /// Deliver webhooks to loopback, private and link-local addresses too. Off by default:
    /// a subscription could otherwise reach services inside the deployment's network. Checked
    /// against the addresses a name resolves to at every send, not only when subscribing.
    #[arg(long, env = "SANDBOX_AGENTS_WEBHOOK_ALLOW_PRIVATE", global = true)]
    pub webhook_allow_private: bool,

    /// Attempts per webhook delivery, the first included, before it is marked failed.
    #[arg(long, env = "SANDBOX_AGENTS_WEBHOOK_MAX_ATTEMPTS", default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..), global = true)]
    pub webhook_max_attempts: u32,

    /// Seconds before the first retry of a failed delivery; each later wait is 5 times the
    /// previous one (with 20% jitter), up to --webhook-retry-max-seconds. The defaults spread
    /// 8 attempts over about a day.
    #[arg(
        long,
        env = "SANDBOX_AGENTS_WEBHOOK_RETRY_BASE_SECONDS",
        default_value_t = 10.0,
        global = true
    )]
    pub webhook_retry_base_seconds: f64,

    /// The longest wait between two attempts, in seconds.
    #[arg(
        long,
        env = "SANDBOX_AGENTS_WEBHOOK_RETRY_MAX_SECONDS",
        default_value_t = 43_200.0,
        global = true
    )]
    pub webhook_retry_max_seconds: f64,

    /// Failed attempts in a row (across all of a subscription's deliveries) after which the
    /// subscription is deactivated, with the reason in its deactivated_reason (0 = never).
    #[arg(
        long,
        env = "SANDBOX_AGENTS_WEBHOOK_DEACTIVATE_AFTER",
        default_value_t = 100,
        global = true
    )]
    pub webhook_deactivate_after: u32,

    /// Webhook requests in flight at once in this process.
    #[arg(long, env = "SANDBOX_AGENTS_WEBHOOK_CONCURRENCY", default_value_t = 32, value_parser = clap::value_parser!(u32).range(1..), global = true)]
    pub webhook_concurrency: u32,

    /// Webhook requests in flight at once for one subscription in this process, so that a
    /// slow or hanging receiver holds only these slots while other subscriptions' deliveries
    /// go on.
    #[arg(long, env = "SANDBOX_AGENTS_WEBHOOK_PER_SUBSCRIPTION_CONCURRENCY", default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..), global = true)]
    pub webhook_per_subscription_concurrency: u32,

    /// Seconds one webhook request may take, reading the response included.
    #[arg(
        long,
        env = "SANDBOX_AGENTS_WEBHOOK_TIMEOUT_SECONDS",
        default_value_t = 10.0,
        global = true
    )]
    pub webhook_timeout_seconds: f64,

    /// Days finished (delivered or failed) deliveries are kept in the log (0 = forever).
    #[arg(
        long,
        env = "SANDBOX_AGENTS_WEBHOOK_RETENTION_DAYS",
        default_value_t = 30,
        global = true
    )]
    pub webhook_retention_days: u32,

    /// Log line format.
    #[arg(
        long,
        env = "SANDBOX_AGENTS_LOG_FORMAT",
        value_enum,
        default_value = "text",
        global = true
    )]
    pub log_format: LogFormat,
}

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
            .field("db_max_connections", &self.db_max_connections)
            .field("log_format", &self.log_format)
            .field("backend", &self.backend)
            .field("image", &self.image)
            .field("idle_ttl_seconds", &self.idle_ttl_seconds)
            .field("warm_pool_size", &self.warm_pool_size)
            .field("git_known_hosts", &self.git_known_hosts)
            .field("public_url", &self.public_url())
            .field("preview_bind", &self.preview_bind)
            .field("preview_public_url", &self.preview_public_url)
            .field("preview_domain", &self.preview_domain)
            .field("allowed_hosts", &self.allowed_hosts)
            .field("preview_key", &self.preview_key.as_ref().map(|_| "***"))
            .field("token", &self.token.as_ref().map(|_| "***"))
            .field("master_key", &self.master_key.as_ref().map(|_| "***"))
            .field("previous_master_keys", &self.previous_master_keys.len())
            .field("webhook_allow_private", &self.webhook_allow_private)
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
    /// The webhook settings from the `--webhook-*` flags.
    pub fn webhook_settings(&self) -> anyhow::Result<sandbox_agents_webhooks::WebhookSettings> {
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
        })
    }

    /// `--master-key`, or the key file under the data directory (created on first start),
    /// with `--previous-master-keys`.
    pub fn master_key(&self) -> anyhow::Result<sandbox_agents_vault::MasterKey> {
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

    /// `--git-known-hosts` or `<data-dir>/known_hosts`, made absolute (git runs elsewhere).
    pub fn git_known_hosts(&self) -> anyhow::Result<PathBuf> {
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
    pub fn public_url(&self) -> String {
        self.public_url_at(self.bind)
    }

    /// `--public-url`, or one derived from the address the API listener got (`bound`, whose
    /// port is the real one when `--bind` asked for port 0).
    pub fn public_url_at(&self, bound: SocketAddr) -> String {
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
    pub fn preview_public_url_at(&self, bound: SocketAddr) -> String {
        match &self.preview_public_url {
            Some(url) => url.trim_end_matches('/').to_owned(),
            None => url_of(bound),
        }
    }
}

/// `http://<addr>`, with 127.0.0.1 (or ::1) for an address of all interfaces.
fn url_of(addr: SocketAddr) -> String {
    match addr.ip() {
        std::net::IpAddr::V4(ip) if ip.is_unspecified() => format!("http://127.0.0.1:{}", addr.port()),
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

#[cfg(test)]
mod tests {
    use super::*;

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
    fn no_subcommand_means_serve_with_the_documented_defaults() {
        let cli = Cli::try_parse_from(["sandbox-agents"]).unwrap();
        assert_eq!(cli.command, None);
        assert_eq!(cli.config.bind.to_string(), "127.0.0.1:8000");
        assert_eq!(cli.config.public_url(), "http://127.0.0.1:8000");
        assert_eq!(cli.config.preview_bind().unwrap().to_string(), "127.0.0.1:8001");
        let all = Cli::try_parse_from(["sandbox-agents", "--bind", "0.0.0.0:9000"]).unwrap();
        let preview = all.config.preview_bind().unwrap();
        assert_eq!(preview.to_string(), "0.0.0.0:9001");
        assert_eq!(all.config.preview_public_url_at(preview), "http://127.0.0.1:9001");
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
}
