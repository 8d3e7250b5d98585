//! A session's egress log as the API shows it (`GET /api/sessions/{id}/egress`).

use serde::Serialize;
use time::OffsetDateTime;
use utoipa::ToSchema;

/// What a session's sandbox reached, or was refused, on one host and port through the
/// egress proxy. Counts are summed every few seconds, so they trail the traffic by up to 5 s.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct EgressEntry {
    /// The name the sandbox asked for (SNI, `CONNECT` or `Host`), or an address.
    pub host: String,
    pub port: u16,
    /// Connections allowed and closed.
    pub connections: i64,
    /// Bytes the sandbox sent over those connections.
    pub bytes_sent: i64,
    /// Bytes it received over them.
    pub bytes_received: i64,
    /// Connections refused (each also a `sandbox.egress_denied` event, up to 20 a minute).
    pub denied: i64,
    #[serde(with = "time::serde::rfc3339")]
    pub first_at: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339")]
    pub last_at: OffsetDateTime,
}

/// `EgressLog`: a session's egress, the most recently used host first (at most 500).
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct EgressLog {
    pub data: Vec<EgressEntry>,
    /// Whether this server runs the egress proxy (`--egress-proxy`). Without it sandboxes
    /// have the backend's own network and nothing is recorded here.
    pub enabled: bool,
}
