//! Files by absolute path inside a running session's sandbox, through its daemon: raw bytes
//! in and out, 100 MiB at most each way. The workspace's files (`routes::files`) keep their
//! confinement and events; these are anywhere the sandbox user may read or write.

use crate::error::ApiResult;
use crate::extract::{ApiQuery, SessionPath};
use crate::project::Project;
use crate::routes::files::FileBytes;
use crate::state::AppState;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap};
use axum::response::{IntoResponse, Response};
use axum::Json;
use futures::TryStreamExt;
use sandbox_agents_domain::process::SandboxFile;
use serde::Deserialize;
use utoipa::IntoParams;

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct SandboxPathQuery {
    /// The absolute path inside the sandbox, e.g. `/tmp/data.parquet`.
    pub path: String,
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct SandboxWriteQuery {
    /// The absolute path inside the sandbox; missing parent directories are created.
    pub path: String,
    /// The permission bits in octal, e.g. `755`; default `644`.
    #[param(value_type = Option<String>, pattern = "^[0-7]{1,4}$")]
    pub mode: Option<String>,
}

/// Read a file anywhere in the sandbox
///
/// The raw bytes (`application/octet-stream`) of a file at an absolute path the sandbox user
/// may read, streamed; at most 100 MiB. The session must be running and its sandbox have a
/// daemon. No event is written.
#[utoipa::path(get, path = "/api/sessions/{session_id}/sandbox-files", operation_id = "read_sandbox_file", tag = "sessions",
    params(("session_id" = String, Path, description = "The session's id"), SandboxPathQuery),
    responses((status = 200, body = FileBytes, content_type = "application/octet-stream", description = "The file's bytes"),
              (status = 400, description = "The path is not absolute"),
              (status = 403, description = "The sandbox user may not read it"),
              (status = 404, description = "No such session or file"),
              (status = 409, description = "A directory; or the session is not running, or its sandbox has no daemon"),
              (status = 413, description = "The file is larger than 100 MiB")))]
#[tracing::instrument(skip_all, fields(session.id = %raw))]
pub async fn read(
    State(st): State<AppState>,
    Project(project): Project,
    SessionPath { id, raw }: SessionPath,
    ApiQuery(q): ApiQuery<SandboxPathQuery>,
) -> ApiResult<Response> {
    let (size, body) = st.sessions.read_sandbox_file(project, id, &q.path).await?;
    let mut headers = HeaderMap::new();
    headers.insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/octet-stream"),
    );
    headers.insert(header::CONTENT_LENGTH, size.into());
    Ok((headers, Body::from_stream(body)).into_response())
}

/// Write a file anywhere in the sandbox
///
/// The request body's raw bytes become the file at an absolute path the sandbox user may
/// write (replaced whole once the body ended: a reader never sees half of it); at most 100
/// MiB. No `user.file` event is written.
#[utoipa::path(put, path = "/api/sessions/{session_id}/sandbox-files", operation_id = "write_sandbox_file", tag = "sessions",
    params(("session_id" = String, Path, description = "The session's id"), SandboxWriteQuery),
    request_body(content = FileBytes, content_type = "application/octet-stream", description = "The file's bytes"),
    responses((status = 200, body = SandboxFile),
              (status = 400, description = "The path is not absolute, or the mode is not octal permission bits"),
              (status = 403, description = "The sandbox user may not write it"),
              (status = 404, description = "No such session"),
              (status = 409, description = "A directory; or the session is not running, or its sandbox has no daemon"),
              (status = 413, description = "The body is larger than 100 MiB")))]
#[tracing::instrument(skip_all, fields(session.id = %raw))]
pub async fn write(
    State(st): State<AppState>,
    Project(project): Project,
    SessionPath { id, raw }: SessionPath,
    ApiQuery(q): ApiQuery<SandboxWriteQuery>,
    req: Request,
) -> ApiResult<Json<SandboxFile>> {
    let mode = match q.mode.as_deref() {
        None | Some("") => None,
        Some(m) => Some(
            u32::from_str_radix(m, 8)
                .ok()
                .filter(|m| *m <= 0o7777)
                .ok_or_else(|| {
                    crate::error::ApiError::BadRequest(format!(
                        "mode '{m}' is not octal permission bits (e.g. 644 or 755)"
                    ))
                })?,
        ),
    };
    let body = req
        .into_body()
        .into_data_stream()
        .map_err(std::io::Error::other);
    let file = st
        .sessions
        .write_sandbox_file(project, id, &q.path, mode, Box::pin(body))
        .await?;
    Ok(Json(file))
}
