//! The server's configuration: one typed struct from flags and environment variables.

use clap::{Parser, Subcommand, ValueEnum};
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

/// `--s3-addressing-style`.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum S3AddressingStyle {
    Path,
    Virtual,
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

    /// The input window, in tokens, of a model the catalogue gives no `max_input_tokens` for
    /// (OpenAI directly, or a proxy that does not say): runs compact their conversation at
    /// 90% of it.
    #[arg(
        long,
        env = "SANDBOX_AGENTS_DEFAULT_MAX_INPUT_TOKENS",
        default_value_t = 128_000,
        value_parser = clap::value_parser!(u64).range(1..),
        global = true
    )]
    pub default_max_input_tokens: u64,

    /// Most database connections this process opens.
    #[arg(
        long,
        env = "SANDBOX_AGENTS_DB_MAX_CONNECTIONS",
        default_value_t = 32,
        global = true
    )]
    pub db_max_connections: u32,

    /// The compute plane sessions run on: `docker` (one Engine, beside this server) or
    /// `kubernetes` (a pod per sandbox in a cluster: the `--kubernetes-*` flags,
    /// docs/kubernetes.md).
    #[arg(long, env = "SANDBOX_AGENTS_BACKEND", default_value = "docker", value_parser = ["docker", "kubernetes"], global = true)]
    pub backend: String,

    /// With `--backend kubernetes`: a kubeconfig to use. Default: the in-cluster
    /// configuration when this server runs in a pod, else `KUBECONFIG` or `~/.kube/config`.
    #[arg(long, env = "SANDBOX_AGENTS_KUBERNETES_KUBECONFIG", global = true)]
    pub kubernetes_kubeconfig: Option<PathBuf>,

    /// With `--backend kubernetes`: the namespace sandboxes' pods run in. It must exist, and
    /// this server's identity must hold the Role of deploy/kubernetes/ there.
    #[arg(
        long,
        env = "SANDBOX_AGENTS_KUBERNETES_NAMESPACE",
        default_value = "sandbox-agents-sandboxes",
        global = true
    )]
    pub kubernetes_namespace: String,

    /// With `--backend kubernetes`: the sandbox image as the cluster pulls it (a registry's
    /// name for what `--image` names locally). Default: `--image` as it is.
    #[arg(long, env = "SANDBOX_AGENTS_KUBERNETES_IMAGE", global = true)]
    pub kubernetes_image: Option<String>,

    /// With `--backend kubernetes`: the image an init container copies the sandbox daemon
    /// from, as the cluster pulls it; it must hold the static daemon at
    /// /usr/local/bin/sandboxd, as this server's own image does. Required with that backend.
    #[arg(long, env = "SANDBOX_AGENTS_KUBERNETES_SANDBOXD_IMAGE", global = true)]
    pub kubernetes_sandboxd_image: Option<String>,

    /// With `--backend kubernetes`: the RuntimeClass sandboxes run under (gVisor, Kata).
    /// Default: the cluster's default runtime.
    #[arg(long, env = "SANDBOX_AGENTS_KUBERNETES_RUNTIME_CLASS", global = true)]
    pub kubernetes_runtime_class: Option<String>,

    /// With `--backend kubernetes`: the RuntimeClasses an agent or environment may name for
    /// its sandboxes (`runtime_class`), as `name,name` (each must exist in the cluster).
    /// --kubernetes-runtime-class, when set, may always be named. Default: none to choose.
    #[arg(long, env = "SANDBOX_AGENTS_KUBERNETES_RUNTIME_CLASSES", global = true)]
    pub kubernetes_runtime_classes: Option<String>,

    /// With `--backend kubernetes`: node labels sandboxes' pods must land on, as
    /// `key=value,key=value`.
    #[arg(long, env = "SANDBOX_AGENTS_KUBERNETES_NODE_SELECTOR", global = true)]
    pub kubernetes_node_selector: Option<String>,

    /// With `--backend kubernetes`: the Secret (in the sandboxes' namespace) the cluster
    /// pulls the sandbox and daemon images with.
    #[arg(
        long,
        env = "SANDBOX_AGENTS_KUBERNETES_IMAGE_PULL_SECRET",
        global = true
    )]
    pub kubernetes_image_pull_secret: Option<String>,

    /// With `--backend kubernetes`: the namespace this server's pods run in. Each sandbox's
    /// NetworkPolicy admits only pods of this namespace carrying
    /// --kubernetes-control-plane-labels (to its daemon) and, with --egress-proxy, lets the
    /// sandbox reach only them (the proxy).
    #[arg(
        long,
        env = "SANDBOX_AGENTS_KUBERNETES_CONTROL_PLANE_NAMESPACE",
        default_value = "sandbox-agents",
        global = true
    )]
    pub kubernetes_control_plane_namespace: String,

    /// With `--backend kubernetes`: labels every pod of this server carries, as
    /// `key=value,key=value` (see --kubernetes-control-plane-namespace).
    #[arg(
        long,
        env = "SANDBOX_AGENTS_KUBERNETES_CONTROL_PLANE_LABELS",
        default_value = "app.kubernetes.io/name=sandbox-agents",
        global = true
    )]
    pub kubernetes_control_plane_labels: String,

    /// With `--backend kubernetes` and --egress-proxy: the proxy's address as sandbox pods
    /// reach it, `host:port` (the Service in front of this server's --egress-listen). This
    /// server resolves the name when it makes a pod: sandboxes have no cluster DNS. Default:
    /// `sandbox-agents-egress.<--kubernetes-control-plane-namespace>.svc:3129`, the Service
    /// of deploy/kubernetes/.
    #[arg(long, env = "SANDBOX_AGENTS_KUBERNETES_EGRESS_PROXY", global = true)]
    pub kubernetes_egress_proxy: Option<String>,

    /// With `--backend kubernetes`: how this server reaches each sandbox pod's daemon:
    /// `pod-network` (the pod's IP: this server runs in the cluster, or on a network routed to
    /// its pods), `port-forward` (the API server's pods/portforward, over WebSocket: a server
    /// outside the cluster), or `auto`: `pod-network` with the in-cluster configuration,
    /// `port-forward` with a kubeconfig.
    #[arg(
        long,
        env = "SANDBOX_AGENTS_KUBERNETES_DAEMON_ROUTE",
        default_value = "auto",
        value_parser = ["auto", "pod-network", "port-forward"],
        global = true
    )]
    pub kubernetes_daemon_route: String,

    /// The image sessions boot when their agent names none. Docker reads DOCKER_HOST to find
    /// the Engine (default: the local socket).
    #[arg(
        long,
        env = "SANDBOX_AGENTS_IMAGE",
        default_value = "sandbox-agents-sandbox:1",
        global = true
    )]
    pub image: String,

    /// The Docker network sandboxes join, for a control plane that runs in a container: it
    /// must exist and this server's container must be attached to it. Sandboxes' exposed
    /// ports are then reached at their address on it and published nowhere on the host
    /// (whose loopback a container cannot reach). Default: none, the default bridge with
    /// ports published on the host's 127.0.0.2. The daemon needs no network either way (it is
    /// reached through the Docker API). Give sandboxes a network of their own, never one
    /// PostgreSQL or anything else private is on: what runs in a sandbox can reach whatever
    /// shares it.
    #[arg(long, env = "SANDBOX_AGENTS_DOCKER_NETWORK", global = true)]
    pub docker_network: Option<String>,

    /// Send every sandbox's traffic through this server's egress proxy, which applies the
    /// sessions' network policies (`network` on agents, environments and sessions) and never
    /// lets a sandbox reach this host, loopback, link-local or metadata addresses, or private
    /// ranges outside --egress-allow-private. Sandboxes then have no network of their own
    /// (Docker's `none`): only the proxy, through `HTTP_PROXY`/`HTTPS_PROXY`, and DNS for
    /// the names their policy allows; exposed ports are reached through the sandbox's daemon.
    /// Off by default for now; see docs/security.md.
    #[arg(long, env = "SANDBOX_AGENTS_EGRESS_PROXY", global = true)]
    pub egress_proxy: bool,

    /// Private ranges (CIDRs, comma-separated) sandboxes may reach through the egress proxy
    /// when a policy allows them: an internal package mirror, say. Never opens loopback,
    /// link-local or metadata addresses, or this host's own addresses.
    #[arg(
        long,
        env = "SANDBOX_AGENTS_EGRESS_ALLOW_PRIVATE",
        value_delimiter = ',',
        global = true
    )]
    pub egress_allow_private: Vec<ipnet::IpNet>,

    /// Where the egress proxy's per-sandbox Unix sockets live (mounted into each sandbox).
    /// Must be a path of the Docker host, short enough for socket addresses (at most 47
    /// characters). Default: <data-dir>/egress when that is short enough, else a directory
    /// under /tmp named for the deployment.
    #[arg(long, env = "SANDBOX_AGENTS_EGRESS_SOCKET_DIR", global = true)]
    pub egress_socket_dir: Option<PathBuf>,

    /// With `--backend kubernetes` and --egress-proxy: where the proxy listens for sandbox
    /// pods (TCP; each connection names its pod and proves it with the pod's token).
    #[arg(
        long,
        env = "SANDBOX_AGENTS_EGRESS_LISTEN",
        default_value = "0.0.0.0:3129",
        global = true
    )]
    pub egress_listen: std::net::SocketAddr,

    /// Networks (CIDRs, comma-separated) sandboxes never reach through the egress proxy,
    /// whatever the policy and --egress-allow-private say: the control plane's own networks
    /// (its database, its other services) when they are not on this host, or any range the
    /// operator closes. Public ranges may be named too.
    #[arg(
        long,
        env = "SANDBOX_AGENTS_EGRESS_DENY",
        value_delimiter = ',',
        global = true
    )]
    pub egress_deny: Vec<ipnet::IpNet>,

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

    /// The most CPUs a session may ask for in its `resources` (default: this host's CPUs).
    #[arg(long, env = "SANDBOX_AGENTS_SANDBOX_MAX_CPUS", global = true)]
    pub sandbox_max_cpus: Option<f64>,

    /// The most memory, in MiB, a session may ask for in its `resources`.
    #[arg(
        long,
        env = "SANDBOX_AGENTS_SANDBOX_MAX_MEMORY_MB",
        default_value_t = 8192,
        global = true
    )]
    pub sandbox_max_memory_mb: i64,

    /// Processes each sandbox may run at once.
    #[arg(
        long,
        env = "SANDBOX_AGENTS_SANDBOX_PIDS",
        default_value_t = 512,
        global = true
    )]
    pub sandbox_pids: i64,

    /// The most MiB a sandbox may write to its own filesystem (the container's writable
    /// layer: the workspace, /tmp, installed packages); a sandbox over it is stopped, reason
    /// `disk`, its workspace archived. Measured every --sandbox-disk-check-seconds, since
    /// Docker has no size limit for containers on ext4 or on xfs without project quotas.
    /// A session may set a lower one (`resources.disk_mb`). 0: no server-wide limit (a
    /// session's own still holds).
    #[arg(
        long,
        env = "SANDBOX_AGENTS_SANDBOX_DISK_MB",
        default_value_t = 10240,
        global = true
    )]
    pub sandbox_disk_mb: u64,

    /// How often the disk use of running sandboxes is measured against --sandbox-disk-mb
    /// (the engine walks each sandbox's written files to answer).
    #[arg(
        long,
        env = "SANDBOX_AGENTS_SANDBOX_DISK_CHECK_SECONDS",
        default_value_t = 60,
        value_parser = clap::value_parser!(u64).range(1..),
        global = true
    )]
    pub sandbox_disk_check_seconds: u64,

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

    /// Most sandboxes the deployment runs at once (sessions running or booting, every server
    /// process together; warm-pool sandboxes are not counted). A boot over it waits in
    /// `provisioning`, queued fairly between projects, and says so with `session.queued`.
    /// Default: no limit.
    #[arg(long, env = "SANDBOX_AGENTS_MAX_SANDBOXES", value_parser = clap::value_parser!(u32).range(1..), global = true)]
    pub max_sandboxes: Option<u32>,

    /// Most sandboxes one project runs at once; a boot over it waits like one over
    /// --max-sandboxes. Default: no limit.
    #[arg(long, env = "SANDBOX_AGENTS_MAX_SANDBOXES_PER_PROJECT", value_parser = clap::value_parser!(u32).range(1..), global = true)]
    pub max_sandboxes_per_project: Option<u32>,

    /// Most turns in flight in the deployment at once (runs driving their loop, every server
    /// process together; a turn parked on client tool results does not count). A turn over it
    /// waits before its first step, queued fairly between projects, and says so with
    /// `session.run_queued`. Default: no limit.
    #[arg(long, env = "SANDBOX_AGENTS_MAX_RUNS", value_parser = clap::value_parser!(u32).range(1..), global = true)]
    pub max_runs: Option<u32>,

    /// Most turns in flight in one project at once; a turn over it waits like one over
    /// --max-runs. Default: no limit.
    #[arg(long, env = "SANDBOX_AGENTS_MAX_RUNS_PER_PROJECT", value_parser = clap::value_parser!(u32).range(1..), global = true)]
    pub max_runs_per_project: Option<u32>,

    /// The most sandboxes the warm pool grows to when demand asks for it: the pool holds as
    /// many as the busiest minute of the last ten booted (sessions it could serve), between
    /// --warm-pool-size and this, and shrinks back when that minute falls out of the ten.
    /// At most --warm-pool-size (e.g. 0): a fixed pool. Every process should say the same.
    #[arg(
        long,
        env = "SANDBOX_AGENTS_WARM_POOL_MAX",
        default_value_t = 8,
        global = true
    )]
    pub warm_pool_max: usize,

    /// Keep the warm pool's sandboxes running when the last server process of the deployment
    /// stops, for the next start to adopt. Off by default: a stopped deployment leaves no
    /// pool sandboxes behind (a start refills the pool in seconds). A process that stops
    /// while another of the deployment runs always leaves the pool to that one.
    #[arg(long, env = "SANDBOX_AGENTS_KEEP_WARM_POOL", global = true)]
    pub keep_warm_pool: bool,

    /// How many session boots one server process runs at once; more wait their turn in
    /// `provisioning`, in the order they came, holding nothing (a burst of any size queues).
    /// Default: twice the machine's cores, at most a quarter of --db-max-connections (at
    /// least 1).
    #[arg(long, env = "SANDBOX_AGENTS_MAX_CONCURRENT_BOOTS", value_parser = clap::value_parser!(u32).range(1..), global = true)]
    pub max_concurrent_boots: Option<u32>,

    /// How many environment image builds one server process runs at once; more wait their
    /// turn.
    #[arg(
        long,
        env = "SANDBOX_AGENTS_MAX_CONCURRENT_BUILDS",
        default_value_t = 2,
        global = true
    )]
    pub max_concurrent_builds: usize,

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

    /// The in-sandbox daemon's binary (`sandboxd`, built static by `scripts/build-sandboxd`),
    /// mounted read-only into every sandbox: commands, files and terminals go through it
    /// (a Docker exec each otherwise). Default: `sandboxd` beside this executable. `off`: none,
    /// every command is a Docker exec.
    #[arg(long, env = "SANDBOX_AGENTS_SANDBOXD_BIN", global = true)]
    pub sandboxd_bin: Option<PathBuf>,

    /// A PEM file of CA certificates to trust in addition to the system's: by the control
    /// plane's own clients (git, models, webhooks, S3), by every sandbox (added to its trust store
    /// at boot and named by SSL_CERT_FILE, REQUESTS_CA_BUNDLE, PIP_CERT, NODE_EXTRA_CA_CERTS and
    /// GIT_SSL_CAINFO) and by environment builds. Networks that inspect TLS need it.
    #[arg(long, env = "SANDBOX_AGENTS_EXTRA_CA_CERTS", global = true)]
    pub extra_ca_certs: Option<PathBuf>,

    /// The S3 endpoint `s3_mount` entries are read from and written to, for an S3-compatible
    /// store (MinIO, Ceph, ...; `http://` is allowed). Default: AWS_ENDPOINT_URL, else AWS S3
    /// itself. Only the control plane talks to it: sandboxes get plain files, never a key.
    #[arg(long, env = "SANDBOX_AGENTS_S3_ENDPOINT", global = true)]
    pub s3_endpoint: Option<String>,

    /// Where workspace archives, snapshots, skill bundle versions, upload spools and build
    /// logs are kept: `s3://bucket/prefix` (S3 or the S3-compatible store of --s3-endpoint,
    /// with the same keys and region as `s3_mount` entries; every server process of a
    /// deployment must name the same one) or `file:///directory`. Default: <data-dir>/blobs,
    /// which only processes on this host can share.
    #[arg(long, env = "SANDBOX_AGENTS_BLOB_URL", global = true)]
    pub blob_url: Option<String>,

    /// The region of `s3_mount` buckets. Default: AWS_REGION, else AWS_DEFAULT_REGION, else
    /// us-east-1.
    #[arg(long, env = "SANDBOX_AGENTS_S3_REGION", global = true)]
    pub s3_region: Option<String>,

    /// How buckets are addressed: `path` (`endpoint/bucket/key`, which AWS and every
    /// S3-compatible store accept) or `virtual` (`bucket.endpoint/key`, for stores that
    /// require it; with --s3-endpoint the bucket is put in front of its host name, so the
    /// endpoint needs a host name that has a DNS entry, or a wildcard one, for each bucket).
    #[arg(
        long,
        env = "SANDBOX_AGENTS_S3_ADDRESSING_STYLE",
        value_enum,
        default_value = "path",
        global = true
    )]
    pub s3_addressing_style: S3AddressingStyle,

    /// An HTTP(S) proxy for the control plane's S3 requests only (`http://[user:pass@]host:port`).
    /// Without it the standard HTTPS_PROXY / HTTP_PROXY / NO_PROXY variables apply, as they do
    /// to every client of the server.
    #[arg(
        long,
        env = "SANDBOX_AGENTS_S3_PROXY",
        hide_env_values = true,
        global = true
    )]
    pub s3_proxy: Option<String>,

    /// The access key the control plane reads and writes `s3_mount` buckets with.
    #[arg(long, env = "AWS_ACCESS_KEY_ID", global = true)]
    pub s3_access_key_id: Option<String>,

    /// The secret of --s3-access-key-id. Never shown, never given to a sandbox.
    #[arg(
        long,
        env = "AWS_SECRET_ACCESS_KEY",
        hide_env_values = true,
        global = true
    )]
    pub s3_secret_access_key: Option<String>,

    /// A session token for temporary S3 credentials.
    #[arg(long, env = "AWS_SESSION_TOKEN", hide_env_values = true, global = true)]
    pub s3_session_token: Option<String>,

    /// Without static keys, take S3 credentials from the EC2 instance profile (IMDSv2, at
    /// AWS_EC2_METADATA_SERVICE_ENDPOINT or 169.254.169.254). A role given by the
    /// environment (AWS_WEB_IDENTITY_TOKEN_FILE with AWS_ROLE_ARN, or
    /// AWS_CONTAINER_CREDENTIALS_RELATIVE_URI / _FULL_URI) is used without this flag; the
    /// instance profile is opt-in so that a server with no credentials refuses a mount at once
    /// instead of waiting on a metadata service that is not there.
    #[arg(
        long,
        env = "SANDBOX_AGENTS_S3_INSTANCE_CREDENTIALS",
        default_value_t = false,
        global = true
    )]
    pub s3_instance_credentials: bool,

    /// Most bytes an `s3_mount` prefix may hold; a boot whose prefix holds more fails saying
    /// so. Default 1 GiB.
    #[arg(
        long,
        env = "SANDBOX_AGENTS_S3_STAGE_MAX_BYTES",
        default_value_t = 1 << 30,
        global = true
    )]
    pub s3_stage_max_bytes: u64,

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

    /// A listener of its own for `GET /metrics` (Prometheus' text format), answered without a
    /// credential: bind it to an interface only your scraper reaches. Without it, `/metrics`
    /// is on the API listener and needs an operator's credential (the shared token or an
    /// operator's API key as a bearer token).
    #[arg(long, env = "SANDBOX_AGENTS_METRICS_BIND", global = true)]
    pub metrics_bind: Option<SocketAddr>,

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

    /// A wildcard domain pointing at the API listener (DNS and a certificate for *.<domain>,
    /// TLS at your proxy) for the E2B SDKs' sandbox hosts, <port>-<sandbox id>.<domain>: E2B
    /// sandboxes' data plane by host name (and their signed file URLs), as on E2B's cloud.
    /// Without it, the SDKs reach it with E2B_SANDBOX_URL=<public url>/e2b-sandbox.
    #[arg(long, env = "SANDBOX_AGENTS_E2B_DOMAIN", global = true)]
    pub e2b_domain: Option<String>,

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
    /// by address) may make to the deployment, all its server processes together (each takes
    /// N cells of the budget per request with N processes alive); over it, 429 with
    /// Retry-After. 0 = unlimited.
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

    /// Let agents' remote MCP servers be on loopback, private and link-local addresses too.
    /// Off by default: an agent's definition could otherwise reach services inside the
    /// deployment's network through the control plane. Checked when an agent is saved and
    /// again against the addresses a name resolves to at every connection.
    #[arg(long, env = "SANDBOX_AGENTS_MCP_ALLOW_PRIVATE", global = true)]
    pub mcp_allow_private: bool,

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

impl Config {
    /// What the flags say when none is given and no environment variable is set: the
    /// documented defaults, for a process (a test server) that must not pick up a developer's
    /// `SANDBOX_AGENTS_*` settings. It changes the fields it needs, and resolves the result
    /// with [`crate::app::Settings::resolve`] as the binary does.
    pub fn defaults() -> Config {
        use clap::{Args, FromArgMatches};
        let command = Config::augment_args(clap::Command::new("sandbox-agents"))
            .mut_args(|arg| arg.env(None));
        let matches = command
            .try_get_matches_from(["sandbox-agents"])
            .expect("every flag has a default or is optional");
        Config::from_arg_matches(&matches).expect("the defaults make a configuration")
    }
}

mod resolved;

pub use resolved::redact_url;
