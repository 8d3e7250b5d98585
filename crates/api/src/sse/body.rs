//! The body of every SSE answer of ours: frames as they come from a stream of ready-made
//! bytes, and a `: ping` comment after `heartbeat` of silence.
//!
//! Why not axum's `Sse`: it assembles each frame from an `Event` per stream, copying the data
//! into a buffer of that stream's own, and resets a timer on every frame. With a thousand
//! streams on one session that is a thousand copies and timer updates per event. Here a
//! frame is written as the shared bytes it was built as, and the timer is only touched when
//! it fires: it is then set to `heartbeat` after the last frame, or a ping goes out.

use super::frame::PING;
use bytes::Bytes;
use futures::Stream;
use http_body::Frame;
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use std::time::Duration;
use tokio::time::{Instant, Sleep};

pub struct SseBody {
    frames: Pin<Box<dyn Stream<Item = Bytes> + Send>>,
    heartbeat: Duration,
    /// When the last frame (or ping) went out.
    last_sent: Instant,
    /// Fires at the earliest moment a ping may be due; moved on (not reset per frame) when a
    /// frame went out since it was set.
    alive: Pin<Box<Sleep>>,
    sent: metrics::Counter,
    _open: Open,
}

impl SseBody {
    pub fn new(frames: impl Stream<Item = Bytes> + Send + 'static, heartbeat: Duration) -> Self {
        let now = Instant::now();
        SseBody {
            frames: Box::pin(frames),
            heartbeat,
            last_sent: now,
            alive: Box::pin(tokio::time::sleep_until(now + heartbeat)),
            sent: metrics::counter!("sandbox_agents_sse_events_sent_total"),
            _open: Open::new(),
        }
    }

    /// Polls the keep-alive timer: a ping when `heartbeat` passed since the last frame,
    /// otherwise the timer is moved to that moment and polled again (which registers it).
    fn poll_ping(&mut self, cx: &mut Context<'_>) -> Poll<Bytes> {
        loop {
            ready!(self.alive.as_mut().poll(cx));
            let due = self.last_sent + self.heartbeat;
            let now = Instant::now();
            if due <= now {
                self.last_sent = now;
                self.alive.as_mut().reset(now + self.heartbeat);
                return Poll::Ready(Bytes::from_static(PING));
            }
            self.alive.as_mut().reset(due);
        }
    }
}

impl http_body::Body for SseBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let this = self.get_mut();
        match this.frames.as_mut().poll_next(cx) {
            Poll::Ready(Some(bytes)) => {
                this.sent.increment(1);
                this.last_sent = Instant::now();
                Poll::Ready(Some(Ok(Frame::data(bytes))))
            }
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => this.poll_ping(cx).map(|ping| Some(Ok(Frame::data(ping)))),
        }
    }
}

/// One open stream, for the process's metrics: counted while its body lives.
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

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    /// What the body yields next, or None if nothing within `within` (in paused time).
    async fn next(body: &mut SseBody, within: Duration) -> Option<Bytes> {
        tokio::time::timeout(within, body.frame())
            .await
            .ok()
            .map(|f| f.expect("not at the end").unwrap().into_data().unwrap())
    }

    #[tokio::test(start_paused = true)]
    async fn a_ping_comes_only_after_a_heartbeat_of_silence() {
        let hb = Duration::from_millis(300);
        let (tx, rx) = futures::channel::mpsc::unbounded::<Bytes>();
        let mut body = SseBody::new(rx, hb);
        // Frames every 200 ms keep the stream busy: no ping in between.
        for i in 0..5 {
            tokio::time::sleep(Duration::from_millis(200)).await;
            tx.unbounded_send(Bytes::from(format!("f{i}"))).unwrap();
            assert_eq!(
                next(&mut body, Duration::from_millis(1)).await.unwrap(),
                format!("f{i}")
            );
        }
        // Then silence: nothing before 300 ms, a ping at 300 ms, another 300 ms later.
        assert_eq!(next(&mut body, Duration::from_millis(299)).await, None);
        assert_eq!(
            next(&mut body, Duration::from_millis(2)).await.unwrap(),
            PING
        );
        assert_eq!(next(&mut body, Duration::from_millis(299)).await, None);
        assert_eq!(
            next(&mut body, Duration::from_millis(2)).await.unwrap(),
            PING
        );
        drop(tx);
        assert!(
            body.frame().await.is_none(),
            "the body ends with its stream"
        );
    }
}
