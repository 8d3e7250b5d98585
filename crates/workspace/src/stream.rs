//! Streaming a file's bytes out of a tar parsed on a blocking thread.

use crate::blobs::ByteStream;
use bytes::Bytes;
use futures::StreamExt;
use sandbox_agents_errors::{Result, ServiceError};
use std::io::Read;
use tokio::sync::{mpsc, oneshot};
use tokio_util::io::{StreamReader, SyncIoBridge};

/// A file's bytes, streamed.
pub struct FileContent {
    /// The file's size (the stream's length).
    pub size: u64,
    pub body: ByteStream,
}

/// Bytes of a file handed over per chunk while streaming it out.
const CHUNK: usize = 64 * 1024;

/// Where the bytes of the entry being read go: first its size (or why there is none), then
/// its data in chunks.
pub struct Sink {
    ready: Option<oneshot::Sender<Result<u64>>>,
    chunks: mpsc::Sender<std::io::Result<Bytes>>,
}

impl Sink {
    pub fn fail(&mut self, e: ServiceError) {
        match self.ready.take() {
            Some(ready) => {
                let _ = ready.send(Err(e));
            }
            None => {
                let _ = self
                    .chunks
                    .blocking_send(Err(std::io::Error::other(e.to_string())));
            }
        }
    }

    /// Announces the entry and sends its data; stops early when the reader went away.
    pub fn send<R: Read>(&mut self, size: u64, data: &mut R) {
        if let Some(ready) = self.ready.take() {
            if ready.send(Ok(size)).is_err() {
                return;
            }
        }
        let mut buf = vec![0u8; CHUNK];
        loop {
            match data.read(&mut buf) {
                Ok(0) => return,
                Ok(n) => {
                    if self
                        .chunks
                        .blocking_send(Ok(Bytes::copy_from_slice(&buf[..n])))
                        .is_err()
                    {
                        return;
                    }
                }
                Err(e) => {
                    let _ = self.chunks.blocking_send(Err(e));
                    return;
                }
            }
        }
    }
}

/// A blocking reader over a byte stream (for use on a blocking thread).
pub fn blocking_reader(stream: ByteStream, handle: tokio::runtime::Handle) -> impl Read {
    SyncIoBridge::new_with_handle(StreamReader::new(stream), handle)
}

/// Runs `work` on a blocking thread with a [`Sink`]; returns once it announced the entry
/// (or failed), with the rest of the data arriving through the stream.
pub async fn stream_from_blocking<F>(work: F) -> Result<FileContent>
where
    F: FnOnce(&mut Sink) + Send + 'static,
{
    let (ready_tx, ready_rx) = oneshot::channel();
    let (tx, mut rx) = mpsc::channel::<std::io::Result<Bytes>>(8);
    tokio::task::spawn_blocking(move || {
        let mut sink = Sink {
            ready: Some(ready_tx),
            chunks: tx,
        };
        work(&mut sink);
    });
    let size = ready_rx
        .await
        .map_err(|_| anyhow::anyhow!("the workspace reader stopped unexpectedly"))??;
    let body = futures::stream::poll_fn(move |cx| rx.poll_recv(cx)).boxed();
    Ok(FileContent { size, body })
}

/// What a [`PipeWriter`]'s write fails with once the stream's reader is gone.
pub const PIPE_GONE: &str = "the reader went away";

/// A writer on a blocking thread whose bytes come out of [`pipe`]'s stream, in chunks: an
/// archive built synchronously goes into a sandbox as it is written, never whole in memory.
/// A write fails once the stream's reader is gone.
pub struct PipeWriter {
    buf: Vec<u8>,
    tx: mpsc::Sender<std::io::Result<Bytes>>,
}

impl PipeWriter {
    fn send(&mut self) -> std::io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let chunk = Bytes::from(std::mem::replace(&mut self.buf, Vec::with_capacity(CHUNK)));
        self.tx
            .blocking_send(Ok(chunk))
            .map_err(|_| std::io::Error::new(std::io::ErrorKind::BrokenPipe, PIPE_GONE))
    }

    /// Ends the stream with an error instead of its end, so the reader never takes a cut
    /// archive for a whole one.
    pub fn fail(self, e: std::io::Error) {
        let _ = self.tx.blocking_send(Err(e));
    }
}

impl std::io::Write for PipeWriter {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        self.buf.extend_from_slice(data);
        if self.buf.len() >= CHUNK {
            self.send()?;
        }
        Ok(data.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.send()
    }
}

/// A writer for a blocking thread and the stream of what it writes. The stream ends when the
/// writer is dropped (flush it first: what is buffered is sent by `flush`).
pub fn pipe() -> (PipeWriter, ByteStream) {
    let (tx, mut rx) = mpsc::channel::<std::io::Result<Bytes>>(8);
    let body = futures::stream::poll_fn(move |cx| rx.poll_recv(cx)).boxed();
    (
        PipeWriter {
            buf: Vec::with_capacity(CHUNK),
            tx,
        },
        body,
    )
}
