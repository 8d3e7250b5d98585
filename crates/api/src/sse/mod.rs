//! The SSE event stream of one session.
//!
//! Order of work, which is what makes it gap-free and repeat-free:
//! 1. the caller subscribes to the live feed **first**;
//! 2. the stored backlog after the cursor is read from Postgres in pages until caught up;
//! 3. live events follow; stored ones at or below the cursor (already sent as backlog) are
//!    dropped, so nothing repeats;
//! 4. a subscriber that lagged behind the broadcast buffer re-reads from Postgres after its
//!    cursor, so a slow reader is caught up rather than dropped.
//!
//! Because seq order equals commit order within a session, "everything after my cursor"
//! read from Postgres never misses an event that a later read would find.

mod body;
pub mod frame;

pub use body::SseBody;

use bytes::Bytes;
use futures::Stream;
use sandbox_agents_domain::event::{EventType, SessionEvent};
use sandbox_agents_domain::{ProjectId, SessionId};
use sandbox_agents_store::events::{self, MAX_PAGE};
use sandbox_agents_store::{Db, LiveEvent, Shared, Subscription};
use tokio::sync::broadcast::error::RecvError;

/// A live event's frame, built by the first of its feed's streams and shared by the others.
fn shared_frame(e: &Shared) -> Bytes {
    e.encoded(frame::session_event)
}

/// Everything stored after `cursor`, page by page. Updates the cursor as it goes.
async fn read_after(
    db: &Db,
    project: ProjectId,
    session: SessionId,
    cursor: i64,
) -> Result<Vec<SessionEvent>, ()> {
    events::page(db, project, session, cursor, MAX_PAGE).await.map_err(|e| {
        tracing::warn!(session.id = %session, error = %e, "a stream could not read the log; it ends and the client resumes");
    })
}

/// Whether a live ephemeral event goes to a stream: the opt-in types only to streams that
/// asked for them.
fn sends(e: &SessionEvent, opted_in: bool) -> bool {
    opted_in || !EventType::parse(&e.kind).is_some_and(EventType::is_opt_in)
}

/// What a stream sends besides the log and token deltas.
#[derive(Clone, Copy, Debug, Default)]
pub struct StreamOptions {
    /// `agent.tool_output_delta` events.
    pub tool_output: bool,
}

pub fn event_stream(
    db: Db,
    project: ProjectId,
    session: SessionId,
    after: i64,
    sub: Subscription,
    options: StreamOptions,
) -> impl Stream<Item = Bytes> {
    async_stream::stream! {
        // Move the whole subscription in: capturing only `sub.rx` would drop the feed handle
        // when this function returns, and with it the feed.
        let mut sub = sub;
        let mut cursor = after;
        // The backlog, then any catch-up after a lag, share this loop.
        let mut catching_up = true;
        loop {
            if catching_up {
                let Ok(page) = read_after(&db, project, session, cursor).await else { break };
                let full = page.len() as i64 == MAX_PAGE;
                for e in &page {
                    cursor = e.seq;
                    yield frame::session_event(e);
                }
                catching_up = full;
                continue;
            }
            // A shutdown ends the feed, which says so (`Closed`): no token is watched per event.
            match sub.rx.recv().await {
                Ok(LiveEvent::Stored(e)) => {
                    if e.seq > cursor {
                        cursor = e.seq;
                        yield shared_frame(&e);
                    }
                }
                Ok(LiveEvent::Ephemeral(e)) => {
                    if sends(&e, options.tool_output) {
                        yield shared_frame(&e);
                    }
                }
                Ok(LiveEvent::Deleted | LiveEvent::Closed) | Err(RecvError::Closed) => break,
                Err(RecvError::Lagged(n)) => {
                    tracing::debug!(session.id = %session, skipped = n, "a slow stream is caught up from the database");
                    catching_up = true;
                }
            }
        }
    }
}

/// An SSE answer as every stream of ours is sent: `text/event-stream`, no proxy buffering
/// (`X-Accel-Buffering: no`), the frames as they come, and a `: ping` comment after
/// `heartbeat` of silence.
pub fn response(
    frames: impl Stream<Item = Bytes> + Send + 'static,
    heartbeat: std::time::Duration,
) -> axum::response::Response {
    use axum::http::{header, HeaderValue};
    use axum::response::IntoResponse;
    (
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/event-stream; charset=utf-8"),
            ),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
            (
                header::HeaderName::from_static("x-accel-buffering"),
                HeaderValue::from_static("no"),
            ),
        ],
        axum::body::Body::new(SseBody::new(frames, heartbeat)),
    )
        .into_response()
}
