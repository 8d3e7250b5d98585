//! A session's egress log: what its sandbox reached, or was refused, through the egress
//! proxy, summed per host and port (`store::session_egress`).

use crate::error::{ApiResult, NotFoundExt};
use crate::extract::{session_not_found, SessionPath};
use crate::project::Project;
use crate::state::AppState;
use axum::extract::State;
use axum::Json;
use sandbox_agents_domain::egress::{EgressEntry, EgressLog};
use sandbox_agents_store::session_egress::{self, EgressRecord};
use sandbox_agents_store::sessions;

fn wire(r: EgressRecord) -> EgressEntry {
    EgressEntry {
        host: r.host,
        // The proxy only records ports it was asked for, so they fit.
        port: u16::try_from(r.port).unwrap_or_default(),
        connections: r.connections,
        bytes_sent: r.bytes_sent,
        bytes_received: r.bytes_received,
        denied: r.denied,
        first_at: r.first_at,
        last_at: r.last_at,
    }
}

/// Get a session's egress log
///
/// Each host and port the session's sandbox connected to through the egress proxy, or was
/// refused: connections, bytes each way, refusals, first and last seen; the most recently
/// used first, at most 500. The sums are written every 5 s, so they trail the traffic by up
/// to that. `enabled` is false when this server runs no egress proxy (`--egress-proxy`):
/// sandboxes then have the backend's own network and nothing is recorded.
#[utoipa::path(get, path = "/api/sessions/{session_id}/egress", operation_id = "get_session_egress", tag = "sessions",
    params(("session_id" = String, Path, description = "The session's id")),
    responses((status = 200, body = EgressLog), (status = 404, description = "No such session")))]
#[tracing::instrument(skip_all, fields(session.id = %raw))]
pub async fn get(
    State(st): State<AppState>,
    Project(project): Project,
    SessionPath { id, raw }: SessionPath,
) -> ApiResult<Json<EgressLog>> {
    sessions::get(&st.db, project, id)
        .await
        .or_not_found(session_not_found(&raw))?;
    let rows = session_egress::list(&st.db, project, id).await?;
    Ok(Json(EgressLog {
        data: rows.into_iter().map(wire).collect(),
        enabled: st.settings.egress,
    }))
}
