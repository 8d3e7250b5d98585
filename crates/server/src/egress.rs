//! The egress proxy (`--egress-proxy`) wired to the store: a sandbox's policy is read by its
//! sandbox id, a refusal is written to its session's log as `sandbox.egress_denied`, and what
//! each session reached (or was refused) is summed per host and port into its egress log
//! (`session_egress`, [`summary`]: written every 5 s, so a crash loses at most the last 5 s of
//! those sums; the denial events are written on their own and are durable once written).

use anyhow::Context;
use async_trait::async_trait;
use ipnet::IpNet;
use sandbox_agents_credentials::Credentials;
use sandbox_agents_domain::event::{EventType, NewEvent};
use sandbox_agents_domain::network::LayerSource;
use sandbox_agents_domain::SessionId;
use sandbox_agents_egress::gateway::UnixGateway;
use sandbox_agents_egress::{
    Denial, Guard, GuardSettings, Host, Observer, Policy, PolicySource, Proxy, Resolve,
};
use sandbox_agents_store::Db;
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
    /// `--egress-allow-private`.
    pub allow_private: Vec<IpNet>,
    /// How names are resolved: the host's resolver; the tests' own names in tests.
    pub resolver: Arc<dyn Resolve>,
}

/// Denial events a session gets at most per [`DENIALS_WINDOW`]; the rest are counted only,
/// so a sandbox retrying a refused host in a loop cannot flood its own log.
const DENIALS_PER_WINDOW: u32 = 20;
const DENIALS_WINDOW: Duration = Duration::from_secs(60);
/// Denial events waiting to be written; past it they are counted and dropped.
const EVENT_QUEUE: usize = 1024;

/// The proxy and the gateway Docker sandboxes reach it through. The tasks that write what the
/// proxy observes run until `shutdown`.
pub fn start(
    settings: &EgressSettings,
    db: &Db,
    credentials: &Credentials,
    shutdown: CancellationToken,
) -> anyhow::Result<(Arc<Proxy>, Arc<UnixGateway>)> {
    let guard = Guard::new(GuardSettings {
        allow_private: settings.allow_private.clone(),
        denied: Vec::new(),
    });
    let (tx, rx) = mpsc::channel(EVENT_QUEUE);
    tokio::spawn(write_denials(db.clone(), rx));
    let summary = Arc::new(Summary::default());
    tokio::spawn(summary::write(db.clone(), summary.clone(), shutdown));
    let proxy = Proxy::new(
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
    );
    let gateway =
        UnixGateway::new(proxy.clone(), settings.socket_dir.clone()).with_context(|| {
            format!(
                "making the egress socket directory {}",
                settings.socket_dir.display()
            )
        })?;
    Ok((proxy, gateway))
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

/// Writes denial events one by one, off the proxy's path.
async fn write_denials(db: Db, mut rx: mpsc::Receiver<(SessionId, Map<String, Value>)>) {
    while let Some((session, payload)) = rx.recv().await {
        let event = NewEvent::new(EventType::SandboxEgressDenied, None, Value::Object(payload));
        if let Err(e) = sandbox_agents_store::events::append_now(&db, session, &[event]).await {
            tracing::warn!(session.id = %session, error = %e, "an egress denial could not be written to the session's log");
        }
    }
}
