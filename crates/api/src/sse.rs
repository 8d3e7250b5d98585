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

use axum::response::sse::Event;
use futures::Stream;
use sandbox_agents_domain::event::{EventType, SessionEvent};
use sandbox_agents_domain::{ProjectId, SessionId};
use sandbox_agents_store::events::{self, MAX_PAGE};
use sandbox_agents_store::{Db, LiveEvent, Shared, Subscription};
use std::convert::Infallible;
use tokio::sync::broadcast::error::RecvError;
use tokio_util::sync::CancellationToken;

fn frame(e: &SessionEvent) -> Event {
    let data = serde_json::to_string(e).expect("a SessionEvent always serializes");
    framed(e, &data)
}

/// A live event's frame, from the JSON its feed's streams share.
fn shared_frame(e: &Shared) -> Event {
    framed(e, e.json())
}

fn framed(e: &SessionEvent, data: &str) -> Event {
    let ev = Event::default().event(&e.kind).data(data);
    // Never `id: 0`: a browser would resume from 0 and replay the whole log.
    if e.seq > 0 {
        ev.id(e.seq.to_string())
    } else {
        ev
    }
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
    shutdown: CancellationToken,
    options: StreamOptions,
) -> impl Stream<Item = Result<Event, Infallible>> {
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
                    yield Ok(frame(e));
                }
                catching_up = full;
                continue;
            }
            let item = tokio::select! {
                item = sub.rx.recv() => item,
                _ = shutdown.cancelled() => break,
            };
            match item {
                Ok(LiveEvent::Stored(e)) => {
                    if e.seq > cursor {
                        cursor = e.seq;
                        yield Ok(shared_frame(&e));
                    }
                }
                Ok(LiveEvent::Ephemeral(e)) => {
                    if sends(&e, options.tool_output) {
                        yield Ok(shared_frame(&e));
                    }
                }
                Ok(LiveEvent::Deleted) | Err(RecvError::Closed) => break,
                Err(RecvError::Lagged(n)) => {
                    tracing::debug!(session.id = %session, skipped = n, "a slow stream is caught up from the database");
                    catching_up = true;
                }
            }
        }
    }
}

/// One open stream, for the process's metrics: counted while it lives.
struct Open;

impl Open {
    fn new() -> Self {
        metrics::gauge!("sandbox_agents_sse_streams_open").increment(1);
        Open
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        metrics::gauge!("sandbox_agents_sse_streams_open").decrement(1);
    }
}

/// `stream`, counted: open while it is being sent, each event it sends.
fn counted(
    stream: impl Stream<Item = Result<Event, Infallible>> + Send + 'static,
) -> impl Stream<Item = Result<Event, Infallible>> + Send + 'static {
    use futures::StreamExt;
    async_stream::stream! {
        let _open = Open::new();
        let sent = metrics::counter!("sandbox_agents_sse_events_sent_total");
        futures::pin_mut!(stream);
        while let Some(item) = stream.next().await {
            sent.increment(1);
            yield item;
        }
    }
}

/// An SSE answer as every stream of ours is sent: `text/event-stream`, no proxy buffering
/// (`X-Accel-Buffering: no`), and a `: ping` comment after `heartbeat` of silence.
pub fn response(
    stream: impl Stream<Item = Result<Event, Infallible>> + Send + 'static,
    heartbeat: std::time::Duration,
) -> axum::response::Response {
    use axum::http::{header, HeaderValue};
    use axum::response::IntoResponse;
    let stream = counted(stream);
    (
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/event-stream; charset=utf-8"),
            ),
            (
                header::HeaderName::from_static("x-accel-buffering"),
                HeaderValue::from_static("no"),
            ),
        ],
        axum::response::sse::Sse::new(stream).keep_alive(
            axum::response::sse::KeepAlive::new()
                .interval(heartbeat)
                .text("ping"),
        ),
    )
        .into_response()
}
