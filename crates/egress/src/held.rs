//! A connection that holds its place under its socket's bound for as long as it lives.
//!
//! The bound on a sandbox's open connections (`gateway`) must count `CONNECT` tunnels too:
//! when hyper upgrades a connection it hands this stream to the tunnel, so the permit goes
//! with the bytes and is given back only when the tunnel drops them, not when the HTTP
//! exchange that opened it ends.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::OwnedSemaphorePermit;

pub struct Held<S> {
    inner: S,
    _permit: OwnedSemaphorePermit,
}

impl<S> Held<S> {
    pub fn new(inner: S, permit: OwnedSemaphorePermit) -> Self {
        Held {
            inner,
            _permit: permit,
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Held<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Held<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
