//! Background processes of a running session's sandbox: started by one request, running on
//! after it, listed, read (state, exit code, recent output) and killed by others. They end
//! with the sandbox (a stop, an idle release, a delete).

use crate::error::ApiResult;
use crate::extract::{ApiJson, SessionPath};
use crate::project::Project;
use crate::routes::sessions::session_id;
use crate::state::AppState;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use sandbox_agents_domain::process::{Process, ProcessDetail, StartProcess};

/// Start a background process
///
/// Runs `sh -c command` in the sandbox (with the session's bound secrets in its environment)
/// and answers at once with its id; it keeps running after the request, until it exits, is
/// killed, or the sandbox stops. At most 256 per sandbox.
#[utoipa::path(post, path = "/api/sessions/{session_id}/processes", operation_id = "start_process", tag = "sessions",
    params(("session_id" = String, Path, description = "The session's id")),
    request_body = StartProcess,
    responses((status = 201, body = Process),
              (status = 400, description = "An empty command or a bad working directory"),
              (status = 404, description = "No such session, or no such working directory"),
              (status = 409, description = "The session is not running, or its sandbox has no daemon"),
              (status = 413, description = "256 processes are running already")))]
#[tracing::instrument(skip_all, fields(session.id = %raw))]
pub async fn start(
    State(st): State<AppState>,
    Project(project): Project,
    SessionPath { id, raw }: SessionPath,
    ApiJson(body): ApiJson<StartProcess>,
) -> ApiResult<(StatusCode, Json<Process>)> {
    let started = st.sessions.start_process(project, id, body).await?;
    Ok((StatusCode::CREATED, Json(started)))
}

/// List background processes
///
/// Every background process of the sandbox, running or exited, oldest first. An exited one
/// stays until it is deleted (or, beyond 256, the oldest exited ones are forgotten first).
#[utoipa::path(get, path = "/api/sessions/{session_id}/processes", operation_id = "list_processes", tag = "sessions",
    params(("session_id" = String, Path, description = "The session's id")),
    responses((status = 200, body = Vec<Process>),
              (status = 404, description = "No such session"),
              (status = 409, description = "The session is not running, or its sandbox has no daemon")))]
#[tracing::instrument(skip_all, fields(session.id = %raw))]
pub async fn list(
    State(st): State<AppState>,
    Project(project): Project,
    SessionPath { id, raw }: SessionPath,
) -> ApiResult<Json<Vec<Process>>> {
    Ok(Json(st.sessions.processes(project, id).await?))
}

/// Get a background process
///
/// Its state, exit code and the last 64 KiB of its stdout and of its stderr.
#[utoipa::path(get, path = "/api/sessions/{session_id}/processes/{process_id}", operation_id = "get_process", tag = "sessions",
    params(("session_id" = String, Path, description = "The session's id"),
           ("process_id" = String, Path, description = "The process's id (`proc_...`)")),
    responses((status = 200, body = ProcessDetail),
              (status = 404, description = "No such session or process"),
              (status = 409, description = "The session is not running, or its sandbox has no daemon")))]
#[tracing::instrument(skip_all, fields(session.id = %raw, process = %process))]
pub async fn get(
    State(st): State<AppState>,
    Project(project): Project,
    Path((raw, process)): Path<(String, String)>,
) -> ApiResult<Json<ProcessDetail>> {
    let id = session_id(&raw)?;
    Ok(Json(st.sessions.process(project, id, &process).await?))
}

/// Kill and remove a background process
///
/// TERM to the process and everything it started, KILL two seconds later; once it ended it is
/// removed (a later `GET` is 404 and the list leaves it out) and the answer is the last of
/// it: its final state, exit code and recent output. Removing one that exited already is how
/// a finished process is cleared away.
#[utoipa::path(delete, path = "/api/sessions/{session_id}/processes/{process_id}", operation_id = "kill_process", tag = "sessions",
    params(("session_id" = String, Path, description = "The session's id"),
           ("process_id" = String, Path, description = "The process's id (`proc_...`)")),
    responses((status = 200, body = ProcessDetail),
              (status = 404, description = "No such session or process"),
              (status = 409, description = "The session is not running, or its sandbox has no daemon")))]
#[tracing::instrument(skip_all, fields(session.id = %raw, process = %process))]
pub async fn kill(
    State(st): State<AppState>,
    Project(project): Project,
    Path((raw, process)): Path<(String, String)>,
) -> ApiResult<Json<ProcessDetail>> {
    let id = session_id(&raw)?;
    Ok(Json(st.sessions.kill_process(project, id, &process).await?))
}
