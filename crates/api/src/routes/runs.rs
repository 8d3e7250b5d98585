//! Turns: `POST /api/sessions/{id}/messages` (API.md §2.5). The run is created and returned at
//! once; its steps and its end arrive over the event log.

use crate::error::{ApiError, ApiResult};
use crate::extract::ApiJson;
use crate::project::Project;
use crate::routes::sessions::session_id;
use crate::state::AppState;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use sandbox_agents_domain::session::{MessageCreate, Run};
use sandbox_agents_domain::FieldError;

/// Starts a turn: 202 with the `running` Run, whose id every event of the turn carries. A
/// session with a turn in flight, or that is provisioning, failed or stopped (not asleep),
/// answers 409; an asleep session is woken first.
#[utoipa::path(post, path = "/api/sessions/{session_id}/messages", tag = "sessions",
    params(("session_id" = String, Path)), request_body = MessageCreate,
    responses((status = 202, body = Run), (status = 404, description = "No such session"),
              (status = 409, description = "The session cannot take a message now"),
              (status = 422, description = "The body is invalid")))]
#[tracing::instrument(skip_all, fields(session.id = %raw))]
pub async fn send_message(
    State(st): State<AppState>,
    Project(project): Project,
    Path(raw): Path<String>,
    ApiJson(body): ApiJson<MessageCreate>,
) -> ApiResult<(StatusCode, Json<Run>)> {
    let id = session_id(&raw)?;
    if body.client_tools.as_ref().is_some_and(|t| !t.is_empty()) {
        return Err(ApiError::Validation(vec![FieldError {
            kind: "value_error".into(),
            loc: vec!["body".into(), "client_tools".into()],
            msg: "client tools are not supported yet".into(),
            input: serde_json::Value::Null,
        }]));
    }
    let run = st
        .runtime
        .send_message(project, id, body.prompt, body.max_turns)
        .await?;
    Ok((StatusCode::ACCEPTED, Json(run.to_wire())))
}
