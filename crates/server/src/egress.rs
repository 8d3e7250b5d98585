//! The egress proxy (`--egress-proxy`) wired to the store: a sandbox's policy is read by its
//! sandbox id, a refusal is written to its session's log as `sandbox.egress_denied`, and what
//! each session reached (or was refused) is summed per host and port into its egress log
//! (`session_egress`, [`summary`]: written every 5 s, so a crash loses at most the last 5 s of
//! those sums; the denial events are written on their own and are durable once written).

use anyhow::Context;
use async_trait::async_trait;
use ipnet::IpNet;
use sandbox_agents_credentials::Credentials;
use sandbox_agents_domain::ca::ExtraCaCerts;
use sandbox_agents_domain::event::{EventType, NewEvent};
use sandbox_agents_domain::network::LayerSource;
use sandbox_agents_domain::SessionId;
use sandbox_agents_egress::gateway::UnixGateway;
use sandbox_agents_egress::Authority;
use sandbox_agents_egress::PodGateway;
use sandbox_agents_egress::{
    Denial, Guard, GuardSettings, Host, Observer, Policy, PolicySource, Proxy, Resolve,
};
use sandbox_agents_store::Db;
use sandbox_agents_vault::MasterKey;
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use summary::Summary;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

mod credentials;
mod summary;

/// What the egress proxy runs with (`--egress-*`).
pub struct EgressSettings {
    /// Where the per-sandbox sockets live (a path of the Docker host).
    pub socket_dir: PathBuf,
    /// Where the proxy listens for Kubernetes pods (`--egress-listen`; with that backend).
    pub pod_listen: Option<std::net::SocketAddr>,
    /// `--egress-allow-private`.
    pub allow_private: Vec<IpNet>,
    /// `--egress-deny`.
    pub denied: Vec<IpNet>,
    /// How names are resolved: the host's resolver; the tests' own names in tests.
    pub resolver: Arc<dyn Resolve>,
}

/// Denial events a session gets at most per [`DENIALS_WINDOW`]; the rest are counted only,
/// so a sandbox retrying a refused host in a loop cannot flood its own log.
const DENIALS_PER_WINDOW: u32 = 20;
const DENIALS_WINDOW: Duration = Duration::from_secs(60);
/// Denial events waiting to be written; past it they are counted and dropped.
const EVENT_QUEUE: usize = 1024;

/// The AAD the egress CA's key is sealed with.
const CA_AAD: &[u8] = b"egress-ca";

/// The deployment's egress CA (made and stored by the first process that needs it), which
/// verifies real hosts against the host's trust store and `extra_ca`.
pub async fn authority(
    db: &Db,
    key: &MasterKey,
    extra_ca: Option<&ExtraCaCerts>,
) -> anyhow::Result<Arc<Authority>> {
    let stored = match sandbox_agents_store::egress_ca::get(db).await? {
        Some(ca) => ca,
        None => {
            let (cert_pem, key_pem) = sandbox_agents_egress::tls::generate_ca()?;
            let candidate = sandbox_agents_store::egress_ca::EgressCa {
                cert_pem,
                key_sealed: key.seal(key_pem.as_bytes(), CA_AAD)?,
            };
            sandbox_agents_store::egress_ca::get_or_insert(db, &candidate).await?
        }
    };
    let key_pem = key
        .open(&stored.key_sealed, CA_AAD)
        .context("the egress CA's key cannot be opened (was the master key changed?)")?;
    let key_pem = String::from_utf8(key_pem).context("the egress CA's key is not PEM")?;
    let roots = extra_ca
        .map(|ca| {
            rustls_pki_types::pem::PemObject::pem_slice_iter(ca.pem().as_bytes())
                .filter_map(Result::ok)
                .collect()
        })
        .unwrap_or_default();
    Ok(Arc::new(Authority::load(
        &stored.cert_pem,
        &key_pem,
        roots,
    )?))
}

/// `extra_ca` with the egress CA added: what sandboxes trust, so that a host the proxy
/// answers for (to add a credential) is trusted like the host itself.
pub fn trusted_by_sandboxes(
    extra_ca: Option<&ExtraCaCerts>,
    authority: &Authority,
) -> anyhow::Result<ExtraCaCerts> {
    let pem = match extra_ca {
        Some(ca) => format!("{}\n{}", ca.pem().trim_end(), authority.cert_pem()),
        None => authority.cert_pem().to_owned(),
    };
    ExtraCaCerts::parse(&pem).map_err(anyhow::Error::msg)
}

/// What [`start`] makes: the proxy, the gateway Docker sandboxes reach it through, and the
/// writer of what the proxy observes.
pub struct Started {
    pub proxy: Arc<Proxy>,
    pub writer: Writer,
}

/// Docker's way in to `proxy`: a socket per sandbox under the settings' directory.
pub fn unix_gateway(
    proxy: &Arc<Proxy>,
    settings: &EgressSettings,
) -> anyhow::Result<Arc<UnixGateway>> {
    UnixGateway::new(proxy.clone(), settings.socket_dir.clone()).with_context(|| {
        format!(
            "making the egress socket directory {}",
            settings.socket_dir.display()
        )
    })
}

/// Kubernetes' way in to `proxy`: its TCP listener for the pods of `namespace`, whose egress
/// tokens derive from `key`, served until the process ends.
pub async fn serve_pods(
    proxy: &Arc<Proxy>,
    settings: &EgressSettings,
    key: [u8; 32],
    namespace: &str,
) -> anyhow::Result<std::net::SocketAddr> {
    let addr = settings
        .pod_listen
        .context("the egress proxy has no listener for pods (--egress-listen)")?;
    let listener = tokio::net::TcpListener::bind(addr).await.with_context(|| {
        format!("listening for sandbox pods' egress on {addr} (--egress-listen)")
    })?;
    let bound = listener.local_addr()?;
    tracing::info!(%bound, %namespace, "the egress proxy listens for sandbox pods");
    tokio::spawn(PodGateway::new(proxy.clone(), key, namespace).serve(listener));
    Ok(bound)
}

/// The task writing what the proxy observes (denial events, the egress log's sums). It runs
/// past the server's shutdown signal, while sessions drain and tunnels close and report, and
/// stops when told ([`Writer::finish`]) or dropped, writing what is queued and summed once
/// more before it ends.
pub struct Writer {
    task: tokio::task::JoinHandle<()>,
    _stop: tokio_util::sync::DropGuard,
}

impl Writer {
    /// Stops the writer and waits up to `within` for its last writes.
    pub async fn finish(self, within: Duration) {
        let Writer { task, _stop } = self;
        drop(_stop);
        let _ = tokio::time::timeout(within, task).await;
    }
}

/// Starts the proxy; see [`Started`].
pub fn start(
    settings: &EgressSettings,
    db: &Db,
    credentials: &Credentials,
    authority: Option<Arc<Authority>>,
) -> anyhow::Result<Started> {
    let stop = CancellationToken::new();
    let shutdown = stop.clone();
    let guard = Guard::new(GuardSettings {
        allow_private: settings.allow_private.clone(),
        denied: settings.denied.clone(),
    });
    let (tx, rx) = mpsc::channel(EVENT_QUEUE);
    let summary = Arc::new(Summary::default());
    let task = tokio::spawn({
        let (db, summary) = (db.clone(), summary.clone());
        async move {
            tokio::join!(
                write_denials(db.clone(), rx, shutdown.clone()),
                summary::write(db, summary, shutdown),
            );
        }
    });
    let proxy = Proxy::with_authority(
        guard,
        settings.resolver.clone(),
        Arc::new(StorePolicies {
            db: db.clone(),
            credentials: credentials.clone(),
        }),
        Arc::new(EventLog {
            tx,
            recent: Mutex::default(),
            summary,
        }),
        authority,
    );
    Ok(Started {
        proxy,
        writer: Writer {
            task,
            _stop: stop.drop_guard(),
        },
    })
}

/// Reads a sandbox's policy layers and the credentials its boot sealed for the proxy, in one
/// statement per connection.
struct StorePolicies {
    db: Db,
    credentials: Credentials,
}

#[async_trait]
impl PolicySource for StorePolicies {
    async fn policy(&self, sandbox_id: &str) -> Result<Policy, String> {
        if sandbox_id.is_empty() {
            return Ok(Policy::closed());
        }
        match sandbox_agents_store::sessions::network_layers_by_sandbox(&self.db, sandbox_id).await
        {
            Ok(Some(found)) => Ok(Policy::new(
                found.session.to_string(),
                found.layers.iter().map(|l| (source(l.from), &l.policy)),
            )
            .with_credentials(credentials::bound(
                &self.credentials,
                found.session,
                found.credentials.as_deref(),
            ))),
            Ok(None) => Ok(Policy::closed()),
            Err(e) => Err(e.to_string()),
        }
    }
}

/// A layer's source as a denial names it ("not in the agent policy's allowlist").
fn source(from: LayerSource) -> &'static str {
    match from {
        LayerSource::Agent => "agent",
        LayerSource::Environment => "environment",
        LayerSource::Session => "session",
    }
}

/// Hands denials to [`write_denials`], at most [`DENIALS_PER_WINDOW`] per session, and sums
/// every denial and closed connection into the [`Summary`].
struct EventLog {
    tx: mpsc::Sender<(SessionId, Map<String, Value>)>,
    recent: Mutex<HashMap<String, (Instant, u32)>>,
    summary: Arc<Summary>,
}

impl EventLog {
    fn admit(&self, session: &str) -> bool {
        let mut recent = self.recent.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        if recent.len() > 10_000 {
            recent.retain(|_, (at, _)| now.duration_since(*at) < DENIALS_WINDOW);
        }
        let entry = recent.entry(session.to_owned()).or_insert((now, 0));
        if now.duration_since(entry.0) >= DENIALS_WINDOW {
            *entry = (now, 0);
        }
        entry.1 += 1;
        entry.1 <= DENIALS_PER_WINDOW
    }
}

impl Observer for EventLog {
    fn denied(&self, _sandbox_id: &str, policy: &Policy, host: &Host, port: u16, denial: &Denial) {
        let Some(session) = policy.session.as_deref() else {
            return;
        };
        let Some(id) = SessionId::parse(session) else {
            return;
        };
        // Every refusal counts in the summary, those past the events' rate limit too.
        self.summary.denied(id, host, port);
        if !self.admit(session) {
            metrics::counter!("sandbox_agents_egress_denials_unlogged_total", "why" => "rate")
                .increment(1);
            return;
        }
        let mut payload = Map::new();
        payload.insert("host".into(), Value::from(host.to_string()));
        payload.insert("port".into(), Value::from(port));
        payload.insert("reason".into(), Value::from(denial.reason.clone()));
        if self.tx.try_send((id, payload)).is_err() {
            metrics::counter!("sandbox_agents_egress_denials_unlogged_total", "why" => "queue")
                .increment(1);
        }
    }

    fn closed(&self, policy: &Policy, host: &Host, port: u16, sent: u64, received: u64) {
        metrics::counter!("sandbox_agents_egress_bytes_total", "direction" => "sent")
            .increment(sent);
        metrics::counter!("sandbox_agents_egress_bytes_total", "direction" => "received")
            .increment(received);
        let Some(id) = policy.session.as_deref().and_then(SessionId::parse) else {
            return;
        };
        self.summary.closed(id, host, port, sent, received);
    }
}

/// Writes denial events one by one, off the proxy's path; at shutdown, those queued, then
/// returns.
async fn write_denials(
    db: Db,
    mut rx: mpsc::Receiver<(SessionId, Map<String, Value>)>,
    shutdown: CancellationToken,
) {
    loop {
        let next = tokio::select! {
            next = rx.recv() => next,
            () = shutdown.cancelled() => break,
        };
        let Some((session, payload)) = next else {
            return;
        };
        write_denial(&db, session, payload).await;
    }
    while let Ok((session, payload)) = rx.try_recv() {
        write_denial(&db, session, payload).await;
    }
}

async fn write_denial(db: &Db, session: SessionId, payload: Map<String, Value>) {
    let event = NewEvent::new(EventType::SandboxEgressDenied, None, Value::Object(payload));
    if let Err(e) = sandbox_agents_store::events::append_now(db, session, &[event]).await {
        tracing::warn!(session.id = %session, error = %e, "an egress denial could not be written to the session's log");
    }
}
