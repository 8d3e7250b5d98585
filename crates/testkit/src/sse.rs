//! A minimal Server-Sent Events reader for tests: frames as the wire has them.

use bytes::Bytes;
use futures::{Stream, StreamExt};
use std::pin::Pin;
use std::time::Duration;

/// One SSE frame: a comment (`: ping`) or an event with its fields.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Frame {
    pub id: Option<String>,
    pub event: Option<String>,
    pub data: Option<String>,
    pub comment: Option<String>,
}

impl Frame {
    /// The `data:` as JSON, for event frames.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(self.data.as_deref().expect("an event frame")).expect("data is JSON")
    }

    pub fn seq(&self) -> i64 {
        self.json()["seq"].as_i64().expect("seq is an integer")
    }
}

pub struct SseReader {
    body: Pin<Box<dyn Stream<Item = reqwest::Result<Bytes>> + Send>>,
    /// Bytes, not text: a character split between two reads is decoded whole.
    buf: Vec<u8>,
}

impl SseReader {
    pub fn new(resp: reqwest::Response) -> Self {
        Self {
            body: Box::pin(resp.bytes_stream()),
            buf: Vec::new(),
        }
    }

    /// The next frame, or `None` when the stream ended. Panics after `timeout` of silence.
    pub async fn next(&mut self, timeout: Duration) -> Option<Frame> {
        loop {
            if let Some(f) = take_frame(&mut self.buf) {
                return Some(f);
            }
            match tokio::time::timeout(timeout, self.body.next()).await {
                Err(_) => panic!("no SSE frame within {timeout:?}"),
                Ok(None) => return None,
                Ok(Some(chunk)) => self
                    .buf
                    .extend_from_slice(&chunk.expect("reading the stream")),
            }
        }
    }

    /// The next event frame, skipping comments.
    pub async fn next_event(&mut self, timeout: Duration) -> Option<Frame> {
        loop {
            let f = self.next(timeout).await?;
            if f.data.is_some() {
                return Some(f);
            }
        }
    }
}

/// Takes the first whole frame (up to its blank line) out of `buf`, the bytes read so far of
/// a stream; `None` until one is whole.
pub fn take_frame(buf: &mut Vec<u8>) -> Option<Frame> {
    let end = buf.windows(2).position(|w| w == b"\n\n")?;
    let raw = String::from_utf8_lossy(&buf[..end + 2]).into_owned();
    buf.drain(..end + 2);
    let mut f = Frame::default();
    for line in raw.lines() {
        if let Some(c) = line.strip_prefix(':') {
            f.comment = Some(c.trim().to_owned());
        } else if let Some((k, v)) = line.split_once(':') {
            let v = v.strip_prefix(' ').unwrap_or(v).to_owned();
            match k {
                "id" => f.id = Some(v),
                "event" => f.event = Some(v),
                "data" => f.data = Some(f.data.map_or(v.clone(), |d| d + "\n" + &v)),
                _ => {}
            }
        }
    }
    Some(f)
}
