//! The notebook of a session's Python kernel (the `python` capability): every cell it ran,
//! with its outputs, as an nbformat 4.5 document.

use crate::error::ApiResult;
use crate::extract::SessionPath;
use crate::project::Project;
use crate::state::AppState;
use axum::extract::State;
use axum::Json;
use sandbox_agents_domain::notebook::Notebook;

/// Get the session's notebook
///
/// Every cell the session's `python` tool ran, oldest first (the latest 2,000), with its
/// outputs (stream text, results, images, errors with their tracebacks), as an nbformat 4.5
/// notebook that Jupyter opens and `nbformat.validate` accepts. A cell's
/// `metadata.sandbox_agents` says how it ended (`ok`, `error`, `timeout`, `died`,
/// `interrupted`, `running`) and which kernel ran it (`epoch`: a new one after a restart).
/// Readable in any state, a stopped session's included; empty before the first cell.
#[utoipa::path(get, path = "/api/sessions/{session_id}/notebook", operation_id = "get_notebook", tag = "sessions",
    params(("session_id" = String, Path, description = "The session's id")),
    responses((status = 200, body = Notebook, content_type = "application/json"),
              (status = 404, description = "No such session")))]
#[tracing::instrument(skip_all, fields(session.id = %raw))]
pub async fn get(
    State(st): State<AppState>,
    Project(project): Project,
    SessionPath { id, raw }: SessionPath,
) -> ApiResult<Json<Notebook>> {
    Ok(Json(st.sessions.notebook(project, id).await?))
}
