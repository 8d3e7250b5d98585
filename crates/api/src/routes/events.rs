//! A session's event log: one page at a time, or as a resumable SSE stream.

use crate::error::{ApiError, ApiResult, NotFoundExt};
use crate::extract::ApiQuery;
use crate::extract::SessionPath;
use crate::project::Project;
use crate::routes::sessions::session_not_found;
use crate::sse::event_stream;
use crate::state::AppState;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::IntoResponse;
use axum::Json;
use sandbox_agents_domain::event::SessionEvent;
use sandbox_agents_domain::FieldError;
use sandbox_agents_store::events::MAX_PAGE;
use sandbox_agents_store::{events, sessions};
use serde::Deserialize;
use serde_json::Value;
use std::time::Duration;
use utoipa::IntoParams;

/// Silence after which the stream writes `: ping`; the client's read timeout is 60 s.
pub const HEARTBEAT: Duration = Duration::from_secs(15);

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct PageQuery {
    /// Only events with `seq` greater than this (exclusive); absent (or negative): from the
    /// start. Past the end gives `[]`.
    pub after: Option<i64>,
    /// At most this many events: 1 to 1000, default 500. A page is always full when enough
    /// events follow the cursor, so a shorter page is the end of the log.
    #[param(minimum = 1, maximum = 1000, default = 500)]
    pub limit: Option<i64>,
}

/// Read the event log
///
/// One page of the stored log, ascending by `seq`: stored events only (no text deltas).
/// Always a full page when enough events follow the cursor; page on with `after=<last seq>`.
/// Works in any session state.
#[utoipa::path(get, path = "/api/sessions/{session_id}/events", operation_id = "list_events", tag = "events", params(("session_id" = String, Path, description = "The session's id"), PageQuery),
    responses((status = 200, body = Vec<SessionEvent>), (status = 404, description = "No such session"),
              (status = 422, description = "`limit` is out of range")))]
#[tracing::instrument(skip_all, fields(session.id = %raw))]
pub async fn page(
    State(st): State<AppState>,
    Project(project): Project,
    SessionPath { id, raw }: SessionPath,
    ApiQuery(q): ApiQuery<PageQuery>,
) -> ApiResult<Json<Vec<SessionEvent>>> {
    let limit = q.limit.unwrap_or(500);
    if !(1..=MAX_PAGE).contains(&limit) {
        return Err(ApiError::Validation(vec![FieldError {
            kind: "value_error".into(),
            loc: vec!["query".into(), "limit".into()],
            msg: "limit is between 1 and 1000".into(),
            input: Value::from(limit),
        }]));
    }
    sessions::get(&st.db, project, id)
        .await
        .or_not_found(session_not_found(&raw))?;
    let page = events::page(&st.db, project, id, q.after.unwrap_or(0).max(0), limit).await?;
    Ok(Json(page))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct StreamQuery {
    /// Replay stored events after this seq, then follow live. Absent: from the start, or from
    /// a `Last-Event-ID` header when one is sent.
    pub after: Option<i64>,
    /// Also send `agent.tool_output_delta` events: a running sandbox tool's output as it is
    /// written (ephemeral, `seq: 0`). Off by default, so readers that know only
    /// `agent.text_delta` and `stream_gap` as ephemeral never see them.
    pub tool_output: Option<bool>,
}

/// Stream the event log (SSE)
///
/// The log as Server-Sent Events: the stored backlog after the cursor, then live events (token
/// deltas included, with `seq: 0` and no `id:`), in order, without gaps or repeats. A `: ping`
/// comment follows every 15 s of silence. The stream never ends on its own; it ends when the
/// session is deleted or the server shuts down, and resumes with `after=<last seq seen>`.
/// `stream_gap` (which the contract reserves for a stream that must skip stored events) is
/// never sent by this server: the log is never pruned, and a reader however far behind is
/// caught up from the database, never skipped ahead.
#[utoipa::path(get, path = "/api/sessions/{session_id}/events/stream", operation_id = "stream_events", tag = "events",
    params(("session_id" = String, Path, description = "The session's id"), StreamQuery,
           ("Last-Event-ID" = Option<String>, Header, pattern = "^[+-]?[0-9]{1,18}$", description = "Resume cursor for EventSource clients: the `id:` (a seq) of the last event received; `after` wins. Anything but an integer is a 422")),
    responses((status = 200, content_type = "text/event-stream", description = "One SessionEvent per `data:` frame"),
              (status = 404, description = "No such session")))]
#[tracing::instrument(skip_all, fields(session.id = %raw))]
pub async fn stream(
    State(st): State<AppState>,
    Project(project): Project,
    SessionPath { id, raw }: SessionPath,
    headers: HeaderMap,
    ApiQuery(q): ApiQuery<StreamQuery>,
) -> ApiResult<impl IntoResponse> {
    let last_event_id = last_event_id(&headers)?;
    sessions::get(&st.db, project, id)
        .await
        .or_not_found(session_not_found(&raw))?;
    let after = q.after.or(last_event_id).unwrap_or(0).max(0);
    let subscription = st
        .hub
        .subscribe(id)
        .await
        .map_err(|e| ApiError::Unavailable(e.to_string()))?;
    tracing::debug!(after, "stream opened");
    let stream = event_stream(
        st.db.clone(),
        project,
        id,
        after,
        subscription,
        crate::sse::StreamOptions {
            tool_output: q.tool_output.unwrap_or(false),
        },
    );
    Ok(crate::sse::response(stream, st.settings.heartbeat))
}

/// The `Last-Event-ID` header as a cursor: None when absent; a 422 when it is not an integer,
/// blank included (EventSource sends back the `id:` lines of this stream, which are seqs, and
/// sends no header before it has seen one, so anything else is a client's mistake that
/// replaying from the start would hide).
fn last_event_id(headers: &HeaderMap) -> ApiResult<Option<i64>> {
    let Some(value) = headers.get("last-event-id") else {
        return Ok(None);
    };
    let text = value.to_str().map(str::trim).unwrap_or("\u{fffd}");
    text.parse().map(Some).map_err(|_| {
        ApiError::Validation(vec![FieldError {
            kind: "int_parsing".into(),
            loc: vec!["header".into(), "Last-Event-ID".into()],
            msg: "Last-Event-ID should be the seq of the last event received, an integer; \
                  leave it out to read from the start"
                .into(),
            input: Value::from(text),
        }])
    })
}
