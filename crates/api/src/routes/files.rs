//! The session workspace: list, read, upload and delete files. Listing and
//! reading also work on a stopped session, from the archive its stop made, without booting.
//! Paths are workspace-relative; absolute paths, `..` and symbolic links that lead outside
//! the workspace get 400.

use crate::error::{ApiError, ApiResult};
use crate::extract::{lenient_bool, ApiQuery, SessionPath};
use crate::multipart::{file_part, FilePart};
use crate::project::Project;
use crate::state::AppState;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use sandbox_agents_domain::session::{UploadResult, WorkspaceEntry};
use sandbox_agents_sessions::files::MAX_UPLOAD_BYTES;
use serde::Deserialize;
use utoipa::{IntoParams, ToSchema};

/// The largest upload request accepted: the file plus room for the multipart framing.
pub const UPLOAD_BODY_LIMIT: u64 = MAX_UPLOAD_BYTES + 1024 * 1024;

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListQuery {
    /// Workspace-relative path (default `.`, the workspace itself).
    pub path: Option<String>,
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct PathQuery {
    /// Workspace-relative path of the file (no leading `/`, nothing that leaves the workspace).
    pub path: String,
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct UploadQuery {
    /// Where the file lands, workspace-relative (default `uploads/<filename>`; a path ending
    /// in `/` names the directory to put it in). Missing parent directories are created.
    pub path: Option<String>,
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct DeleteQuery {
    /// Workspace-relative path to delete; not the workspace root.
    pub path: String,
    /// Also delete directories, with everything in them. Default false. Takes `true`/`false`
    /// (and `1`/`0`, `yes`/`no`, `on`/`off`, `t`/`f`, `y`/`n`, in any case).
    #[serde(default, deserialize_with = "lenient_bool")]
    #[param(value_type = Option<bool>, default = false)]
    pub recursive: bool,
}

/// A file's raw bytes.
#[derive(ToSchema)]
#[schema(value_type = String, format = Binary)]
pub struct FileBytes(pub Vec<u8>);

/// The multipart form of an upload: exactly one part, `file`, with a filename.
#[derive(ToSchema)]
#[allow(dead_code)]
pub struct UploadForm {
    /// The file; its multipart filename names it under `uploads/` when `path` is not given.
    #[schema(value_type = String, format = Binary)]
    file: Vec<u8>,
}

/// List workspace files
///
/// A directory's entries (not recursive, sorted by path), or a file as a single entry. Works
/// on a stopped session too, from its archived workspace, without booting it.
#[utoipa::path(get, path = "/api/sessions/{session_id}/files", operation_id = "list_files", tag = "sessions",
    params(("session_id" = String, Path, description = "The session's id"), ListQuery),
    responses((status = 200, body = Vec<WorkspaceEntry>),
              (status = 400, description = "The path leaves the workspace"),
              (status = 404, description = "No such session, file or directory"),
              (status = 409, description = "The session is neither running nor stopped with an archived workspace")))]
#[tracing::instrument(skip_all, fields(session.id = %raw))]
pub async fn list(
    State(st): State<AppState>,
    Project(project): Project,
    SessionPath { id, raw }: SessionPath,
    ApiQuery(q): ApiQuery<ListQuery>,
) -> ApiResult<Json<Vec<WorkspaceEntry>>> {
    let path = q.path.as_deref().unwrap_or(".");
    let entries = st.sessions.list_files(project, id, path).await?;
    Ok(Json(entries))
}

/// Download a workspace file
///
/// A regular file's raw bytes (`application/octet-stream`), streamed. Works on a stopped
/// session too, from its archived workspace. A directory gets 400.
#[utoipa::path(get, path = "/api/sessions/{session_id}/files/content", operation_id = "read_file", tag = "sessions",
    params(("session_id" = String, Path, description = "The session's id"), PathQuery),
    responses((status = 200, body = FileBytes, content_type = "application/octet-stream", description = "The file's bytes"),
              (status = 400, description = "A directory, a link, or a path that leaves the workspace"),
              (status = 404, description = "No such session or file"),
              (status = 409, description = "The session is neither running nor stopped with an archived workspace")))]
#[tracing::instrument(skip_all, fields(session.id = %raw))]
pub async fn content(
    State(st): State<AppState>,
    Project(project): Project,
    SessionPath { id, raw }: SessionPath,
    ApiQuery(q): ApiQuery<PathQuery>,
) -> ApiResult<Response> {
    let file = st.sessions.read_file(project, id, &q.path).await?;
    let mut headers = HeaderMap::new();
    headers.insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/octet-stream"),
    );
    headers.insert(header::CONTENT_LENGTH, file.size.into());
    Ok((headers, Body::from_stream(file.body)).into_response())
}

/// Upload a file to the workspace
///
/// Uploads one file (multipart, one part named `file` with a filename) into a running
/// session's workspace, 100 MiB at most; a `user.file` event records it.
#[utoipa::path(post, path = "/api/sessions/{session_id}/files", operation_id = "upload_file", tag = "sessions",
    params(("session_id" = String, Path, description = "The session's id"), UploadQuery),
    request_body(content = UploadForm, content_type = "multipart/form-data",
                 description = "Exactly one part, `file`, with a filename"),
    responses((status = 201, body = UploadResult),
              (status = 400, description = "A bad path or filename, or one that leaves the workspace"),
              (status = 404, description = "No such session"),
              (status = 409, description = "The session is not running"),
              (status = 413, description = "The file is larger than 100 MiB"),
              (status = 422, description = "No `file` part")))]
#[tracing::instrument(skip_all, fields(session.id = %raw))]
pub async fn upload(
    State(st): State<AppState>,
    Project(project): Project,
    SessionPath { id, raw }: SessionPath,
    ApiQuery(q): ApiQuery<UploadQuery>,
    req: Request,
) -> ApiResult<(StatusCode, Json<UploadResult>)> {
    let FilePart {
        filename,
        data,
        overflow,
    } = file_part(req, UPLOAD_BODY_LIMIT, MAX_UPLOAD_BYTES, too_large).await?;
    let result = st
        .sessions
        .upload_file(project, id, q.path.as_deref(), filename.as_deref(), data)
        .await
        .map_err(ApiError::from);
    let result = overflow.or_too_large(result, too_large);
    Ok((StatusCode::CREATED, Json(result?)))
}

/// Delete a workspace file
///
/// Deletes a file or link (a link itself, never what it points at), or a directory with
/// `recursive=true`. Only on a running session.
#[utoipa::path(delete, path = "/api/sessions/{session_id}/files", operation_id = "delete_file", tag = "sessions",
    params(("session_id" = String, Path, description = "The session's id"), DeleteQuery),
    responses((status = 204),
              (status = 400, description = "A directory without recursive=true, the workspace root, or a path that leaves the workspace"),
              (status = 404, description = "No such session, file or directory"),
              (status = 409, description = "The session is not running")))]
#[tracing::instrument(skip_all, fields(session.id = %raw))]
pub async fn delete(
    State(st): State<AppState>,
    Project(project): Project,
    SessionPath { id, raw }: SessionPath,
    ApiQuery(q): ApiQuery<DeleteQuery>,
) -> ApiResult<StatusCode> {
    st.sessions
        .delete_file(project, id, &q.path, q.recursive)
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

fn too_large() -> ApiError {
    ApiError::PayloadTooLarge(format!(
        "the upload is too large: files of at most {} MiB are accepted",
        MAX_UPLOAD_BYTES / (1024 * 1024)
    ))
}
