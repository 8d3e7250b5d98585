//! A command's output: pumped from its pipes into frames (capped, counted), or kept as the
//! recent tail of a background process.

use crate::proto::{Frame, CHUNK};
use bytes::{Bytes, BytesMut};
use std::collections::VecDeque;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::sync::{mpsc, watch};

/// After the command exited, how long a pipe may stay silent before the pump stops: a
/// process the command left in the background (`server &`) holds the pipe open, and the
/// command's result must not wait for it.
pub const LINGER: Duration = Duration::from_millis(100);

/// What a pump saw of one stream.
#[derive(Clone, Copy, Debug, Default)]
pub struct Counted {
    pub bytes: u64,
    pub truncated: bool,
}

/// Reads `pipe`, sending at most `max` bytes as frames made by `make` to `tx` (the rest is
/// read, counted and dropped), until EOF, until `tx` is closed, or until `exited` holds and
/// the pipe stays silent for [`LINGER`]; a pipe still open then is drained in the
/// background, so that whoever holds it is not killed by `SIGPIPE`.
pub async fn pump<R>(
    mut pipe: R,
    max: u64,
    make: fn(Bytes) -> Frame,
    tx: mpsc::Sender<Bytes>,
    mut exited: watch::Receiver<bool>,
) -> Counted
where
    R: AsyncRead + Unpin + Send + 'static,
{
    let mut counted = Counted::default();
    let mut buf = BytesMut::with_capacity(CHUNK);
    loop {
        buf.clear();
        buf.reserve(CHUNK);
        let read = if *exited.borrow() {
            match tokio::time::timeout(LINGER, pipe.read_buf(&mut buf)).await {
                Ok(r) => r,
                Err(_) => {
                    tokio::spawn(async move {
                        let _ = tokio::io::copy(&mut pipe, &mut tokio::io::sink()).await;
                    });
                    return counted;
                }
            }
        } else {
            tokio::select! {
                r = pipe.read_buf(&mut buf) => r,
                _ = exited.changed() => continue,
            }
        };
        let n = match read {
            Ok(0) | Err(_) => return counted,
            Ok(n) => n,
        };
        let room = max.saturating_sub(counted.bytes) as usize;
        counted.bytes += n as u64;
        if n > room {
            counted.truncated = true;
        }
        if room > 0 {
            let chunk = buf.split_to(n.min(room)).freeze();
            if tx.send(make(chunk).encode_to_bytes()).await.is_err() {
                return counted;
            }
        }
    }
}

/// The last `cap` bytes written to a stream, and how many came before them.
#[derive(Debug)]
pub struct Tail {
    cap: usize,
    kept: VecDeque<u8>,
    pub dropped: u64,
}

impl Tail {
    pub fn new(cap: usize) -> Self {
        Tail {
            cap,
            kept: VecDeque::new(),
            dropped: 0,
        }
    }

    pub fn push(&mut self, data: &[u8]) {
        let data = if data.len() > self.cap {
            self.dropped += (data.len() - self.cap) as u64;
            &data[data.len() - self.cap..]
        } else {
            data
        };
        let over = (self.kept.len() + data.len()).saturating_sub(self.cap);
        self.kept.drain(..over);
        self.dropped += over as u64;
        self.kept.extend(data);
    }

    /// The kept bytes as text (invalid UTF-8, a character cut at the start included, is
    /// replaced).
    pub fn text(&self) -> String {
        let (a, b) = self.kept.as_slices();
        String::from_utf8_lossy(&[a, b].concat()).into_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tail_keeps_the_last_bytes() {
        let mut t = Tail::new(4);
        t.push(b"ab");
        t.push(b"cdef");
        assert_eq!(t.text(), "cdef");
        assert_eq!(t.dropped, 2);
        t.push(b"0123456789");
        assert_eq!(t.text(), "6789");
        assert_eq!(t.dropped, 12);
    }
}
