//! Turns, client tools and approvals: `POST /api/sessions/{id}/messages`, `POST
//! .../tool-results`, `GET .../tool-calls` and `.../tool-confirmations`. The run is created and returned at once; its steps
//! and its end arrive over the event log.

use crate::auth::Principal;
use crate::error::ApiResult;
use crate::extract::{ApiJson, SessionPath};
use crate::project::Project;
use crate::state::AppState;
use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use sandbox_agents_domain::permissions::{
    AwaitingConfirmation, ToolConfirmationCreate, MAX_DECISION_MESSAGE,
};
use sandbox_agents_domain::session::{ClientToolCall, MessageCreate, Run, ToolResultCreate};
use sandbox_agents_errors::ServiceError;

/// Send a message (start a turn)
///
/// Starts a turn: 202 with the `running` Run, whose id every event of the turn carries. A
/// session with a turn in flight or parked on client tools, or that is provisioning, failed
/// or stopped (not asleep), answers 409; an asleep session is woken first. The body is at
/// most 1 MiB (413 above).
#[utoipa::path(post, path = "/api/sessions/{session_id}/messages", operation_id = "send_message", tag = "sessions",
    params(("session_id" = String, Path, description = "The session's id")), request_body = MessageCreate,
    responses((status = 202, body = Run), (status = 404, description = "No such session"),
              (status = 402, description = "The project's monthly spend limit is reached (the detail names the limit and the month's spend); no turn starts and nothing is written"),
              (status = 409, description = "The session cannot take a message now"),
              (status = 422, description = "The body is invalid")))]
#[tracing::instrument(skip_all, fields(session.id = %raw))]
pub async fn send_message(
    State(st): State<AppState>,
    Project(project): Project,
    SessionPath { id, raw }: SessionPath,
    ApiJson(body): ApiJson<MessageCreate>,
) -> ApiResult<(StatusCode, Json<Run>)> {
    let tools = body.client_tools.unwrap_or_default();
    let run = st
        .runs
        .send_message(project, id, body.prompt, body.max_turns, &tools)
        .await?;
    Ok((StatusCode::ACCEPTED, Json(run.to_wire())))
}

/// Answer a client tool call
///
/// Answers a client tool call. 404 when nothing waits on `call_id` (unknown, answered
/// already, timed out or cancelled). The last answer a parked run waited on continues it.
/// The body is at most 4 MiB (413 above).
#[utoipa::path(post, path = "/api/sessions/{session_id}/tool-results", operation_id = "submit_tool_result", tag = "sessions",
    params(("session_id" = String, Path, description = "The session's id")), request_body = ToolResultCreate,
    responses((status = 204, description = "Accepted; the turn goes on"),
              (status = 404, description = "No such session, or nothing waits on this call_id"),
              (status = 422, description = "The body is invalid")))]
#[tracing::instrument(skip_all, fields(session.id = %raw))]
pub async fn submit_tool_result(
    State(st): State<AppState>,
    Project(project): Project,
    SessionPath { id, raw }: SessionPath,
    ApiJson(body): ApiJson<ToolResultCreate>,
) -> ApiResult<StatusCode> {
    st.runs
        .submit_tool_result(project, id, &body.call_id, &body.output, body.is_error)
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

/// List pending client tool calls
///
/// The client tool calls the session waits on now: ordinary calls held open and parked
/// deferrable calls. Usually `[]`.
#[utoipa::path(get, path = "/api/sessions/{session_id}/tool-calls", operation_id = "list_tool_calls", tag = "sessions",
    params(("session_id" = String, Path, description = "The session's id")),
    responses((status = 200, body = [ClientToolCall]), (status = 404, description = "No such session")))]
#[tracing::instrument(skip_all, fields(session.id = %raw))]
pub async fn tool_calls(
    State(st): State<AppState>,
    Project(project): Project,
    SessionPath { id, raw }: SessionPath,
) -> ApiResult<Json<Vec<ClientToolCall>>> {
    Ok(Json(st.runs.pending_tool_calls(project, id).await?))
}

/// Decide a call that waits for a person
///
/// Allows or denies a call the agent's permissions say to ask about (an `agent.tool_use`
/// with `awaiting_approval: true`, listed by `GET .../tool-confirmations`). Allowed, it runs
/// as the run continues (a client tool's call goes to the caller as a deferrable call);
/// denied, the model gets the denial, with `message`, as the tool's error. The decision
/// that settles the last call the run waits on continues the run. A call that does not wait
/// for a decision (decided already, cancelled, never asked about, unknown) is a 409 and
/// changes nothing.
#[utoipa::path(post, path = "/api/sessions/{session_id}/tool-confirmations", operation_id = "confirm_tool_call", tag = "sessions",
    params(("session_id" = String, Path, description = "The session's id")), request_body = ToolConfirmationCreate,
    responses((status = 204, description = "Recorded; the turn goes on once nothing else waits"),
              (status = 404, description = "No such session"),
              (status = 409, description = "Nothing waits for a decision on this call_id"),
              (status = 422, description = "The body is invalid")))]
#[tracing::instrument(skip_all, fields(session.id = %raw))]
pub async fn confirm_tool_call(
    State(st): State<AppState>,
    Project(project): Project,
    p: Principal,
    SessionPath { id, raw }: SessionPath,
    ApiJson(body): ApiJson<ToolConfirmationCreate>,
) -> ApiResult<StatusCode> {
    if let Some(m) = body.message.as_deref() {
        if m.chars().count() > MAX_DECISION_MESSAGE {
            return Err(ServiceError::field(
                &["message"],
                format!("message is at most {MAX_DECISION_MESSAGE} characters"),
                serde_json::Value::from(m.chars().count()),
            )
            .into());
        }
    }
    let by = p.changed_by();
    st.runs
        .confirm_tool_call(
            project,
            id,
            &body.call_id,
            body.decision,
            body.message.as_deref(),
            by.as_ref(),
        )
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

/// List calls that wait for a person
///
/// The calls of the session that wait for a person's decision now (its agent's permissions
/// said to ask), oldest first. Usually `[]`.
#[utoipa::path(get, path = "/api/sessions/{session_id}/tool-confirmations", operation_id = "list_tool_confirmations", tag = "sessions",
    params(("session_id" = String, Path, description = "The session's id")),
    responses((status = 200, body = [AwaitingConfirmation]), (status = 404, description = "No such session")))]
#[tracing::instrument(skip_all, fields(session.id = %raw))]
pub async fn tool_confirmations(
    State(st): State<AppState>,
    Project(project): Project,
    SessionPath { id, raw }: SessionPath,
) -> ApiResult<Json<Vec<AwaitingConfirmation>>> {
    Ok(Json(st.runs.awaiting_confirmations(project, id).await?))
}
