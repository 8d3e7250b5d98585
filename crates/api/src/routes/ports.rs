//! Port previews: a URL on the control plane that reaches a port the
//! session exposes. The proxy behind the URL is [`crate::preview`].

use crate::error::{ApiError, ApiResult, NotFoundExt};
use crate::preview;
use crate::project::Project;
use crate::routes::sessions::{session_id, session_not_found};
use crate::state::AppState;
use axum::extract::{Path, State};
use axum::Json;
use sandbox_agents_domain::session::PortPreview;
use sandbox_agents_store::sessions;

/// Get a preview URL for a port
///
/// A preview URL for a port in the session's `exposed_ports`. The URL is signed for this
/// session and port only, and serves while the session runs.
#[utoipa::path(get, path = "/api/sessions/{session_id}/ports/{port}", operation_id = "get_port_preview", tag = "sessions",
    params(("session_id" = String, Path, description = "The session's id"), ("port" = u16, Path, minimum = 1, maximum = 65535, description = "A port in the session's `exposed_ports`")),
    responses((status = 200, body = PortPreview),
              (status = 404, description = "No such session, or the port is not exposed"),
              (status = 409, description = "The session is not running")))]
#[tracing::instrument(skip_all, fields(session.id = %raw, port = %port))]
pub async fn get(
    State(st): State<AppState>,
    Project(project): Project,
    Path((raw, port)): Path<(String, String)>,
) -> ApiResult<Json<PortPreview>> {
    let id = session_id(&raw)?;
    let s = sessions::get(&st.db, project, id)
        .await
        .or_not_found(session_not_found(&raw))?;
    let exposed = port
        .parse::<u16>()
        .ok()
        .filter(|p| s.exposed_ports.contains(&i32::from(*p)));
    let Some(port) = exposed else {
        return Err(ApiError::NotFound(format!("port {port} is not exposed")));
    };
    sandbox_agents_sessions::require_running(&s)?;
    Ok(Json(PortPreview {
        port,
        url: preview::url(&st.settings.preview, id, port),
    }))
}
