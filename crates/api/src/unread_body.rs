//! Responses to requests whose body was not read to its end say `Connection: close`.
//!
//! A refusal (a bad path, a 413, a 401) often answers before the body is read. HTTP/1.1 cannot
//! reuse such a connection: the unread bytes are still in it, so the server closes it after
//! the response. A client that does not know puts it back in its pool and sends its next
//! request on a socket that is closing, and gets "server disconnected without sending a
//! response" for a request that never reached us (the published client does not retry
//! POSTs and DELETEs). Saying `Connection: close` makes every client open a fresh connection
//! instead. Requests without a body, and those whose body was read to its end, are left
//! alone, so keep-alive works as before.

use axum::body::Body;
use axum::extract::Request;
use axum::http::{header, HeaderValue};
use axum::middleware::Next;
use axum::response::Response;
use bytes::Bytes;
use http_body::{Body as HttpBody, Frame, SizeHint};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

pub async fn layer(req: Request, next: Next) -> Response {
    if req.body().is_end_stream() {
        return next.run(req).await;
    }
    let ended = Arc::new(AtomicBool::new(false));
    let req = req.map(|inner| {
        Body::new(Watched {
            inner,
            ended: ended.clone(),
        })
    });
    let mut response = next.run(req).await;
    if !ended.load(Ordering::Acquire) {
        response
            .headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    response
}

/// A body that records when it has been read to its end.
struct Watched {
    inner: Body,
    ended: Arc<AtomicBool>,
}

impl HttpBody for Watched {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        if matches!(polled, Poll::Ready(None)) || self.inner.is_end_stream() {
            self.ended.store(true, Ordering::Release);
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
