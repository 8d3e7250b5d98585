//! `GET /api/sessions/{id}/terminal`: an interactive shell in the sandbox over a WebSocket.
//!
//! The messages (documented in the README and on the operation):
//! - client → server: binary messages are the terminal's input, as bytes; a text message is
//!   JSON, `{"type": "input", "data": "ls\r"}` or `{"type": "resize", "rows": 40, "cols": 120}`.
//! - server → client: binary messages are the terminal's output, as bytes; when the shell
//!   ends, a text message `{"type": "exit", "exit_code": 0, "signal": null}` and a close (1000).
//!   A sandbox that stops closes it with 1001 ("going away"), as does a server shutting down;
//!   a failure closes it with 1011 and says why.
//!
//! Authenticated like every `/api` route. A browser cannot put headers on a WebSocket, so the
//! project may be named by `?project=` as well as by `X-Project`, and the guard checks the
//! `Origin` of every upgrade as it does for changes (a page of another site cannot open one
//! with the user's cookie).

use crate::error::{ApiError, ApiResult};
use crate::extract::{ApiQuery, SessionPath};
use crate::principal::Principal;
use crate::project;
use crate::state::AppState;
use axum::extract::ws::{CloseFrame, Message, Utf8Bytes, WebSocket, WebSocketUpgrade};
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;
use futures::{SinkExt, StreamExt};
use sandbox_agents_sandbox::sandboxd::proto::{Frame, FrameError};
use sandbox_agents_sessions::{terminal_size, Terminal};
use serde::Deserialize;
use std::time::Duration;
use utoipa::IntoParams;

/// Largest message a client may send (input is typed, or pasted: 1 MiB is plenty).
const MAX_MESSAGE: usize = 1 << 20;
/// A ping this often keeps proxies from closing a quiet terminal.
const PING_EVERY: Duration = Duration::from_secs(25);

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct TerminalQuery {
    /// Rows of the terminal (1–1000, default 24); a `resize` message changes it later.
    pub rows: Option<u16>,
    /// Columns of the terminal (1–1000, default 80).
    pub cols: Option<u16>,
    /// The project (id or slug), for clients that cannot send `X-Project` (browsers).
    pub project: Option<String>,
}

/// A client's text message.
#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Control {
    Input { data: String },
    Resize { rows: u16, cols: u16 },
}

/// Open a terminal in the sandbox
///
/// Upgrades to a WebSocket carrying an interactive shell (bash when the image has it) on a
/// pseudo-terminal in the workspace, with the session's environment and bound secrets.
/// Binary messages are the terminal's bytes both ways; text messages are JSON:
/// `{"type":"resize","rows":R,"cols":C}` and `{"type":"input","data":"..."}` from the
/// client, `{"type":"exit","exit_code":N,"signal":S}` from the server when the shell ends
/// (then a close with 1000). The socket closes with 1001 when the sandbox stops. At most 8
/// terminals per session.
#[utoipa::path(get, path = "/api/sessions/{session_id}/terminal", operation_id = "open_terminal", tag = "sessions",
    params(("session_id" = String, Path, description = "The session's id"), TerminalQuery),
    responses((status = 101, description = "Switching to the WebSocket protocol"),
              (status = 400, description = "Not a WebSocket request, or a size out of bounds"),
              (status = 404, description = "No such session"),
              (status = 409, description = "The session is not running, its sandbox has no daemon, or it has 8 terminals open")))]
#[tracing::instrument(skip_all, fields(session.id = %raw))]
pub async fn open(
    State(st): State<AppState>,
    principal: Principal,
    headers: HeaderMap,
    SessionPath { id, raw }: SessionPath,
    ApiQuery(q): ApiQuery<TerminalQuery>,
    ws: Result<WebSocketUpgrade, axum::extract::ws::rejection::WebSocketUpgradeRejection>,
) -> ApiResult<Response> {
    let named = project::named_in(&headers).or(q.project.filter(|p| !p.trim().is_empty()));
    let project = project::resolve(&st.project_ids, &principal, named.as_deref())
        .await?
        .ok_or_else(|| {
            ApiError::BadRequest(
                "several projects are available; name one with ?project= or the X-Project header"
                    .into(),
            )
        })?;
    // The session first: another project's is a 404 whatever else the request says.
    let target = st.sessions.terminal(project, id).await?;
    let size = terminal_size(q.rows, q.cols)?;
    let ws = ws.map_err(|e| {
        ApiError::BadRequest(format!(
            "this is a WebSocket endpoint: open it with a WebSocket client ({e})"
        ))
    })?;
    let terminal = target.open(size).await?;
    Ok(ws
        .max_message_size(MAX_MESSAGE)
        .on_upgrade(move |socket| relay(socket, terminal)))
}

fn close(code: u16, reason: &str) -> Message {
    // A close reason is at most 123 bytes.
    let mut reason = reason.to_owned();
    while reason.len() > 123 {
        reason.pop();
    }
    Message::Close(Some(CloseFrame {
        code,
        reason: Utf8Bytes::from(reason),
    }))
}

/// Carries bytes between the socket and the shell until one of them ends.
async fn relay(socket: WebSocket, mut terminal: Terminal) {
    let (mut tx, mut rx) = socket.split();
    let input = terminal.execution.input.clone();
    let shutdown = terminal.shutdown().clone();
    let mut ping = tokio::time::interval(PING_EVERY);
    ping.tick().await;
    let last = loop {
        tokio::select! {
            frame = terminal.execution.frames.next() => match frame {
                Some(Ok(Frame::Stdout(b) | Frame::Stderr(b))) => {
                    if tx.send(Message::Binary(b)).await.is_err() {
                        return;
                    }
                }
                Some(Ok(Frame::Started(_))) => {}
                Some(Ok(Frame::Exit(exit))) => {
                    let text = serde_json::json!({
                        "type": "exit", "exit_code": exit.code, "signal": exit.signal,
                    });
                    let _ = tx.send(Message::Text(text.to_string().into())).await;
                    break close(1000, "the shell ended");
                }
                Some(Ok(Frame::Error(e))) => break close(1011, &e.detail),
                Some(Ok(other)) => {
                    tracing::warn!(frame = ?other, "a terminal's daemon sent an unexpected frame");
                    break close(1011, "the sandbox's daemon sent something unexpected");
                }
                // The daemon's connection went away with its sandbox (a stop, an idle
                // release, a delete) or broke.
                Some(Err(FrameError::Io(_))) | None => {
                    break close(1001, "the session's sandbox stopped");
                }
                Some(Err(e)) => break close(1011, &format!("the sandbox's daemon broke the protocol: {e}")),
            },
            message = rx.next() => {
                let frame = match message {
                    Some(Ok(Message::Binary(b))) => Frame::Stdin(b),
                    Some(Ok(Message::Text(t))) => match serde_json::from_str::<Control>(t.as_str()) {
                        Ok(Control::Input { data }) => Frame::Stdin(data.into()),
                        Ok(Control::Resize { rows, cols }) => match terminal_size(Some(rows), Some(cols)) {
                            Ok(size) => Frame::Resize(size),
                            Err(e) => break close(1008, &e.to_string()),
                        },
                        Err(e) => break close(1008, &format!("a text message is JSON input or resize: {e}")),
                    },
                    Some(Ok(Message::Ping(_) | Message::Pong(_))) => continue,
                    // The client went away: dropping the terminal kills the shell.
                    Some(Ok(Message::Close(_))) | Some(Err(_)) | None => return,
                };
                if matches!(frame, Frame::Stdin(_)) {
                    terminal.used().await;
                }
                if input.send(frame).await.is_err() {
                    break close(1001, "the session's sandbox stopped");
                }
            }
            _ = ping.tick() => {
                if tx.send(Message::Ping(Default::default())).await.is_err() {
                    return;
                }
            }
            () = shutdown.cancelled() => break close(1001, "the server is shutting down"),
        }
    };
    let _ = tx.send(last).await;
    let _ = tx.close().await;
    tracing::info!(session.id = %terminal.session, "closed a terminal");
}
