//! Session lifecycle: create (202, the container boots in the background), start, stop,
//! interrupt and delete.

use crate::error::ApiResult;
use crate::extract::{ApiJson, SessionPath};
use crate::project::Project;
use crate::state::AppState;
use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use sandbox_agents_domain::session::StoppedReason;
use sandbox_agents_domain::session::{Session, SessionCreate};

/// Create a session
///
/// Creates a session: 202 with `status: provisioning` (the row exists, the container not
/// yet); `session.created`, then `session.status_running` (or `session.status_error`, with
/// the row's `status: error`) follow in the log once the container is up (or failed). The
/// body is at most 8 MiB (413 above).
#[utoipa::path(post, path = "/api/sessions", operation_id = "create_session", tag = "sessions", request_body = SessionCreate,
    responses((status = 202, body = Session), (status = 404, description = "No such agent or snapshot"),
              (status = 402, description = "With a `prompt`: the project's monthly spend limit is reached (the detail names the limit and the month's spend); nothing is created"),
              (status = 409, description = "The agent is archived"), (status = 422, description = "The body is invalid")))]
#[tracing::instrument(skip_all)]
pub async fn create(
    State(st): State<AppState>,
    Project(project): Project,
    ApiJson(body): ApiJson<SessionCreate>,
) -> ApiResult<(StatusCode, Json<Session>)> {
    let row = st.sessions.create(project, body).await?;
    Ok((
        StatusCode::ACCEPTED,
        Json(super::sessions::wire_one(&st.db, &row).await?),
    ))
}

/// Start a session
///
/// Brings a stopped or failed session back up, restoring the workspace its stop archived.
/// Returns at once (`provisioning`); `session.status_running` follows. A running session is
/// returned unchanged. A session past its `max_lifetime_seconds` cannot run again (409).
#[utoipa::path(post, path = "/api/sessions/{session_id}/start", operation_id = "start_session", tag = "sessions", params(("session_id" = String, Path, description = "The session's id")),
    responses((status = 200, body = Session), (status = 404, description = "No such session"),
              (status = 409, description = "The session reached its `max_lifetime_seconds`")))]
#[tracing::instrument(skip_all, fields(session.id = %raw))]
pub async fn start(
    State(st): State<AppState>,
    Project(project): Project,
    SessionPath { id, raw }: SessionPath,
) -> ApiResult<Json<Session>> {
    let row = st.sessions.start(project, id).await?;
    Ok(Json(super::sessions::wire_one(&st.db, &row).await?))
}

/// Stop a session
///
/// Archives the workspace and removes the container: `stopped`, reason `requested`. A later
/// start brings the workspace back byte for byte.
#[utoipa::path(post, path = "/api/sessions/{session_id}/stop", operation_id = "stop_session", tag = "sessions", params(("session_id" = String, Path, description = "The session's id")),
    responses((status = 200, body = Session), (status = 404, description = "No such session")))]
#[tracing::instrument(skip_all, fields(session.id = %raw))]
pub async fn stop(
    State(st): State<AppState>,
    Project(project): Project,
    SessionPath { id, raw }: SessionPath,
) -> ApiResult<Json<Session>> {
    let row = st
        .sessions
        .stop(Some(project), id, StoppedReason::Requested)
        .await?;
    Ok(Json(super::sessions::wire_one(&st.db, &row).await?))
}

/// Interrupt the turn in flight
///
/// Cancels the turn in flight (or parked) and keeps the sandbox up; returns once the run's
/// terminal event (`stop_reason: cancelled`) is in the log. With no turn in flight the
/// session is returned unchanged.
#[utoipa::path(post, path = "/api/sessions/{session_id}/interrupt", operation_id = "interrupt_session", tag = "sessions", params(("session_id" = String, Path, description = "The session's id")),
    responses((status = 200, body = Session), (status = 404, description = "No such session")))]
#[tracing::instrument(skip_all, fields(session.id = %raw))]
pub async fn interrupt(
    State(st): State<AppState>,
    Project(project): Project,
    SessionPath { id, raw }: SessionPath,
) -> ApiResult<Json<Session>> {
    let row = st.runs.interrupt(project, id).await?;
    Ok(Json(super::sessions::wire_one(&st.db, &row).await?))
}

/// Delete a session
///
/// Destroys the container, the session and its log. Open streams end.
#[utoipa::path(delete, path = "/api/sessions/{session_id}", operation_id = "delete_session", tag = "sessions", params(("session_id" = String, Path, description = "The session's id")),
    responses((status = 204), (status = 404, description = "No such session")))]
#[tracing::instrument(skip_all, fields(session.id = %raw))]
pub async fn delete(
    State(st): State<AppState>,
    Project(project): Project,
    SessionPath { id, raw }: SessionPath,
) -> ApiResult<StatusCode> {
    st.sessions.delete(project, id).await?;
    Ok(StatusCode::NO_CONTENT)
}
