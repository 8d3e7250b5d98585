//! `POST /api/sessions/{id}/exec`: a command in the sandbox, answered whole as JSON, or
//! streamed as Server-Sent Events when the caller sends `Accept: text/event-stream`.
//!
//! The stream: `stdout` and `stderr` events of `{"text": ...}` as the command writes (through
//! the sandbox's daemon; without one, all of it when the command ends), then one `exit` event
//! (`ExecExit`), or an `error` event of `{"detail": ...}` if the command could not finish.
//! Refusals (no such session, not running, a bad timeout) come before the stream, as ordinary
//! JSON errors. A caller that goes away abandons the command: its process tree is killed.

use crate::error::ApiResult;
use crate::extract::{ApiJson, SessionPath};
use crate::project::Project;
use crate::sse::frame::frame;
use crate::state::AppState;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::Json;
use bytes::Bytes;
use sandbox_agents_domain::session::{ExecBody, ExecResult};
use sandbox_agents_sandbox::OutputStream;
use sandbox_agents_sessions::PreparedExec;

/// Whether the caller asked for the stream.
fn wants_stream(headers: &HeaderMap) -> bool {
    crate::extract::accepts_any(headers, &["text/event-stream"])
}

/// Run a command in the sandbox
///
/// Runs `sh -c command` in the workspace of a running session, with its bound secrets in the
/// environment, and answers when it ends. A non-zero exit is still 200; on timeout only the
/// command's process tree is killed (exit code 124, a note in stderr). An asleep session is
/// not woken (409). The body is at most 1 MiB (413 above).
///
/// With `Accept: text/event-stream` the answer is a stream instead: `stdout` and `stderr`
/// events of `{"text": ...}` as the command writes them, then an `exit` event (`ExecExit`),
/// or an `error` event of `{"detail": ...}`. Closing the stream kills the command.
#[utoipa::path(post, path = "/api/sessions/{session_id}/exec", operation_id = "exec_command", tag = "sessions", params(("session_id" = String, Path, description = "The session's id")),
    request_body = ExecBody,
    responses((status = 200,
               description = "How the command ended, with its output; with `Accept: text/event-stream`, `stdout`/`stderr` events of `{\"text\"}`, then `exit` (`ExecExit`) or `error`",
               content((ExecResult = "application/json"),
                       (sandbox_agents_domain::session::ExecExit = "text/event-stream"))),
              (status = 404, description = "No such session"),
              (status = 409, description = "The session is not running")))]
#[tracing::instrument(skip_all, fields(session.id = %raw))]
pub async fn exec(
    State(st): State<AppState>,
    Project(project): Project,
    SessionPath { id, raw }: SessionPath,
    headers: HeaderMap,
    ApiJson(body): ApiJson<ExecBody>,
) -> ApiResult<Response> {
    let prepared = st
        .sessions
        .prepare_exec(project, id, body.command, body.timeout)
        .await?;
    if !wants_stream(&headers) {
        let out: ExecResult = prepared.run(|_, _| {}).await?.result;
        return Ok(Json(out).into_response());
    }
    Ok(crate::sse::response(
        stream(prepared),
        st.settings.heartbeat,
    ))
}

fn output(stream: OutputStream, text: String) -> Bytes {
    let name = match stream {
        OutputStream::Stdout => "stdout",
        OutputStream::Stderr => "stderr",
    };
    frame(name, &serde_json::json!({ "text": text }).to_string(), None)
}

/// The command's events. The stream drives the command: dropping it (the caller went away)
/// drops the command's future, which abandons it.
fn stream(prepared: PreparedExec) -> impl futures::Stream<Item = Bytes> {
    async_stream::stream! {
        let (run, mut rx) = prepared.run_to_channel();
        tokio::pin!(run);
        let outcome = loop {
            tokio::select! {
                biased;
                Some((stream, text)) = rx.recv() => yield output(stream, text),
                outcome = &mut run => break outcome,
            }
        };
        while let Ok((stream, text)) = rx.try_recv() {
            yield output(stream, text);
        }
        yield match outcome {
            Ok(o) => frame("exit", &serde_json::to_string(&o.exit).unwrap_or_default(), None),
            Err(e) => frame("error", &crate::error::ApiError::from(e).body().to_string(), None),
        };
    }
}

#[cfg(test)]
mod tests {
    use super::wants_stream;
    use axum::http::HeaderMap;

    #[test]
    fn the_stream_is_asked_for_by_accept() {
        let with = |v: &str| {
            let mut h = HeaderMap::new();
            h.insert("accept", v.parse().unwrap());
            wants_stream(&h)
        };
        assert!(with("text/event-stream"));
        assert!(with("application/json, Text/Event-Stream;q=0.9"));
        assert!(!with("application/json"));
        assert!(!with("*/*"));
        assert!(!wants_stream(&HeaderMap::new()));
    }
}
