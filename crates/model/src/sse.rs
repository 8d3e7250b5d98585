//! A streamed answer's body as the `data` of its server-sent events, parsed by
//! `eventsource-stream`.
//!
//! Invariants: bytes may be split anywhere (inside a line, inside a UTF-8 character); an event
//! is only returned once its terminating blank line has arrived, so a half-received event is
//! never parsed. Lines end in `\n`, `\r\n` or `\r`. Comments (`:`), `event:`, `id:` and `retry:`
//! fields are ignored; several `data:` lines of one event are joined with `\n`. Besides what
//! the parser does:
//! - the idle timeout counts between chunks of the body, not between events, so a provider's
//!   heartbeat comments keep a slow answer alive;
//! - the end of the body closes the last event even without its blank line (some servers end
//!   that way; whether the answer was complete is the client's question);
//! - the first error ends the stream.

use std::time::Duration;

use bytes::Bytes;
use eventsource_stream::{EventStreamError, Eventsource};
use futures::{Stream, StreamExt};

use crate::error::describe;
use crate::error::ModelError;

/// The `data` of each event of `body`, in order. The errors are a broken connection
/// ([`ModelError::Connect`]), `idle` passed without a chunk ([`ModelError::Timeout`]) and a
/// body that is not UTF-8 ([`ModelError::Protocol`]).
pub(crate) fn data<S>(
    body: S,
    idle: Duration,
) -> impl Stream<Item = Result<String, ModelError>> + Send
where
    S: Stream<Item = reqwest::Result<Bytes>> + Send,
{
    async_stream::stream! {
        let events = watched(body, idle).eventsource();
        futures::pin_mut!(events);
        while let Some(event) = events.next().await {
            match event {
                Ok(event) => yield Ok(event.data),
                Err(error) => {
                    yield Err(parse_error(error));
                    return;
                }
            }
        }
    }
}

/// The body's chunks with the idle timeout applied, and a blank line after the last one.
fn watched<S>(body: S, idle: Duration) -> impl Stream<Item = Result<Bytes, ModelError>> + Send
where
    S: Stream<Item = reqwest::Result<Bytes>> + Send,
{
    async_stream::stream! {
        futures::pin_mut!(body);
        loop {
            match tokio::time::timeout(idle, body.next()).await {
                Ok(Some(Ok(chunk))) => yield Ok(chunk),
                Ok(None) => {
                    // Ends a last line and event that lacked their line breaks; after a
                    // complete event it is only an empty one, which dispatches nothing.
                    yield Ok(Bytes::from_static(b"\n\n"));
                    return;
                }
                Ok(Some(Err(e))) => {
                    yield Err(ModelError::Connect(format!(
                        "the connection to the model provider broke in the middle of its \
                         answer: {}",
                        describe(&e)
                    )));
                    return;
                }
                Err(_) => {
                    yield Err(ModelError::Timeout(format!(
                        "the model provider sent nothing for {} s in the middle of its answer",
                        idle.as_secs_f64()
                    )));
                    return;
                }
            }
        }
    }
}

fn parse_error(error: EventStreamError<ModelError>) -> ModelError {
    match error {
        EventStreamError::Transport(error) => error,
        EventStreamError::Utf8(_) => {
            ModelError::Protocol("the model provider's stream is not valid UTF-8 text".to_owned())
        }
        EventStreamError::Parser(e) => ModelError::Protocol(format!(
            "the model provider's stream is not made of server-sent events: {e}"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::FutureExt;

    const IDLE: Duration = Duration::from_secs(1);

    async fn all(chunks: &[&[u8]]) -> Vec<Result<String, ModelError>> {
        let chunks: Vec<reqwest::Result<Bytes>> = chunks
            .iter()
            .map(|c| Ok(Bytes::copy_from_slice(c)))
            .collect();
        data(futures::stream::iter(chunks), IDLE).collect().await
    }

    #[tokio::test]
    async fn events_split_anywhere_come_out_whole() {
        let stream =
            ": comment\r\ndata: {\"a\":1}\r\n\r\nevent: x\ndata: é\ndata: two\n\ndata: [DONE]\n\n";
        let bytes = stream.as_bytes();
        for split in 0..bytes.len() {
            let events = all(&[&bytes[..split], &bytes[split..]]).await;
            assert_eq!(
                events,
                [
                    Ok("{\"a\":1}".to_owned()),
                    Ok("é\ntwo".to_owned()),
                    Ok("[DONE]".to_owned())
                ],
                "split at {split}"
            );
        }
    }

    #[tokio::test]
    async fn a_lone_cr_ends_a_line_and_the_last_event_may_lack_its_blank_line() {
        let (tx, rx) = futures::channel::mpsc::unbounded::<reqwest::Result<Bytes>>();
        let events = data(rx, IDLE);
        futures::pin_mut!(events);
        tx.unbounded_send(Ok(Bytes::from_static(b"data: a\r")))
            .unwrap();
        assert!(
            events.next().now_or_never().is_none(),
            "no event is complete yet"
        );
        tx.unbounded_send(Ok(Bytes::from_static(b"\r\ndata: b")))
            .unwrap();
        assert_eq!(events.next().await, Some(Ok("a".to_owned())));
        drop(tx);
        assert_eq!(events.next().await, Some(Ok("b".to_owned())));
        assert_eq!(events.next().await, None);
    }

    /// Chunks that arrive `gap` apart.
    fn slow(
        chunks: &'static [&'static [u8]],
        gap: Duration,
    ) -> impl Stream<Item = reqwest::Result<Bytes>> {
        futures::stream::iter(chunks).then(move |c| async move {
            tokio::time::sleep(gap).await;
            Ok(Bytes::from_static(c))
        })
    }

    #[tokio::test(start_paused = true)]
    async fn heartbeats_keep_a_slow_answer_alive() {
        let chunks: &[&[u8]] = &[b": ping\n", b": ping\n", b": ping\n", b"data: x\n\n"];
        let events: Vec<_> = data(slow(chunks, IDLE * 3 / 4), IDLE).collect().await;
        assert_eq!(events, [Ok("x".to_owned())]);
    }

    #[tokio::test(start_paused = true)]
    async fn silence_longer_than_the_idle_timeout_ends_the_stream_with_a_timeout() {
        let chunks: &[&[u8]] = &[b"data: x\n\n"];
        let events: Vec<_> = data(slow(chunks, IDLE * 2), IDLE).collect().await;
        assert!(
            matches!(&events[..], [Err(ModelError::Timeout(m))] if m.contains("sent nothing for 1 s")),
            "{events:?}"
        );
    }

    #[tokio::test]
    async fn text_that_is_not_utf8_is_a_protocol_error() {
        let events = all(&[b"data: \xff\n\n"]).await;
        assert!(
            matches!(events.last(), Some(Err(ModelError::Protocol(_)))),
            "{events:?}"
        );
    }
}
