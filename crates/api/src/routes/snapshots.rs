//! Snapshots of a session's workspace and its container's filesystem: list, take, restore.

use crate::error::ApiResult;
use crate::extract::{ApiJson, SessionPath};
use crate::project::Project;
use crate::routes::sessions::session_id;
use crate::state::AppState;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use sandbox_agents_domain::session::{Session, Snapshot, SnapshotCreate};
use sandbox_agents_store::snapshots::SnapshotRecord;

fn wire(s: &SnapshotRecord) -> Snapshot {
    Snapshot {
        id: s.id.to_string(),
        session_id: s.session_id.to_string(),
        label: s.label.clone(),
        size_bytes: s.size_bytes,
        created_at: s.created_at,
    }
}

/// List snapshots
///
/// The session's snapshots, oldest first.
#[utoipa::path(get, path = "/api/sessions/{session_id}/snapshots", operation_id = "list_snapshots", tag = "sessions", params(("session_id" = String, Path, description = "The session's id")),
    responses((status = 200, body = Vec<Snapshot>), (status = 404, description = "No such session")))]
#[tracing::instrument(skip_all, fields(session.id = %raw))]
pub async fn list(
    State(st): State<AppState>,
    Project(project): Project,
    SessionPath { id, raw }: SessionPath,
) -> ApiResult<Json<Vec<Snapshot>>> {
    let all = st.sessions.list_snapshots(project, id).await?;
    Ok(Json(all.iter().map(wire).collect()))
}

/// Take a snapshot
///
/// Archives the workspace (and, on Docker, the container's filesystem, so installed packages
/// survive). A stopped session's snapshot is its workspace archive.
/// The body is at most 64 KiB (413 above).
#[utoipa::path(post, path = "/api/sessions/{session_id}/snapshots", operation_id = "create_snapshot", tag = "sessions", params(("session_id" = String, Path, description = "The session's id")),
    request_body = SnapshotCreate,
    responses((status = 201, body = Snapshot), (status = 404, description = "No such session"),
              (status = 409, description = "Nothing to snapshot yet")))]
#[tracing::instrument(skip_all, fields(session.id = %raw))]
pub async fn create(
    State(st): State<AppState>,
    Project(project): Project,
    SessionPath { id, raw }: SessionPath,
    ApiJson(body): ApiJson<SnapshotCreate>,
) -> ApiResult<(StatusCode, Json<Snapshot>)> {
    let snap = st
        .sessions
        .create_snapshot(project, id, &body.label)
        .await?;
    Ok((StatusCode::CREATED, Json(wire(&snap))))
}

/// Restore a snapshot
///
/// Replaces the session's workspace (and filesystem) with the snapshot's; any snapshot of the
/// project may be restored. Returns once the sandbox is back up.
#[utoipa::path(post, path = "/api/sessions/{session_id}/snapshots/{snapshot_id}/restore", operation_id = "restore_snapshot", tag = "sessions",
    params(("session_id" = String, Path, description = "The session's id"), ("snapshot_id" = String, Path, description = "The id of a snapshot of any session of the project")),
    responses((status = 200, body = Session), (status = 404, description = "No such session or snapshot")))]
#[tracing::instrument(skip_all, fields(session.id = %raw, snapshot.id = %snap))]
pub async fn restore(
    State(st): State<AppState>,
    Project(project): Project,
    Path((raw, snap)): Path<(String, String)>,
) -> ApiResult<Json<Session>> {
    let row = st
        .sessions
        .restore_snapshot(project, session_id(&raw)?, &snap)
        .await?;
    Ok(Json(super::sessions::wire_one(&st.db, &row).await?))
}
