//! The Connect protocol as the E2B SDKs speak it to envd: the JSON codec only (every SDK
//! sends `useBinaryFormat: false` or its equivalent), unary calls and server-streaming calls.
//! No crate fits: those that serve Connect need the services' protobuf code generated and
//! speak the binary codec first, while all this takes is the envelope below around JSON the
//! handlers read with serde. The envelope's codec is `domain::e2b::envelope`, fuzzed with
//! the daemon's parsers (`crates/sandboxd/fuzz`, target `connect_envelope`).
//!
//! * unary: a JSON request body, a JSON answer; an error is an HTTP status from its code and
//!   `{"code": "not_found", "message": "..."}`;
//! * server streaming (`application/connect+json`): the request is one envelope, the answer
//!   a sequence of envelopes, each `[flags: u8][length: u32 big-endian][JSON]`, the last one
//!   flagged end-of-stream (`0x02`) holding `{}` or `{"error": {...}}`. A keepalive message
//!   goes out at least every interval the client asks for, so that idle streams (a quiet
//!   background command) are not cut by proxies.

use axum::body::Body;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use futures::stream::{Stream, StreamExt};
use sandbox_agents_errors::ServiceError;
use serde_json::{json, Value};
use std::time::Duration;

use sandbox_agents_domain::e2b::envelope;
pub use sandbox_agents_domain::e2b::envelope::{END_STREAM, MAX_MESSAGE};
/// The content type of streaming calls.
pub const STREAM_CONTENT_TYPE: &str = "application/connect+json";
/// The longest keepalive interval used, whatever the client asks.
pub const MAX_KEEPALIVE: Duration = Duration::from_secs(50);

/// A Connect error: a code and a message for a person.
#[derive(Clone, Debug, PartialEq)]
pub struct ConnectError {
    pub code: Code,
    pub message: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Code {
    Canceled,
    InvalidArgument,
    DeadlineExceeded,
    NotFound,
    AlreadyExists,
    PermissionDenied,
    ResourceExhausted,
    FailedPrecondition,
    Unimplemented,
    Internal,
    Unavailable,
    Unauthenticated,
}

impl Code {
    pub fn as_str(self) -> &'static str {
        match self {
            Code::Canceled => "canceled",
            Code::InvalidArgument => "invalid_argument",
            Code::DeadlineExceeded => "deadline_exceeded",
            Code::NotFound => "not_found",
            Code::AlreadyExists => "already_exists",
            Code::PermissionDenied => "permission_denied",
            Code::ResourceExhausted => "resource_exhausted",
            Code::FailedPrecondition => "failed_precondition",
            Code::Unimplemented => "unimplemented",
            Code::Internal => "internal",
            Code::Unavailable => "unavailable",
            Code::Unauthenticated => "unauthenticated",
        }
    }

    /// The HTTP status of a unary error with this code (the Connect specification's table).
    pub fn status(self) -> StatusCode {
        match self {
            Code::Canceled => StatusCode::from_u16(499).unwrap_or(StatusCode::BAD_REQUEST),
            Code::InvalidArgument => StatusCode::BAD_REQUEST,
            Code::DeadlineExceeded => StatusCode::GATEWAY_TIMEOUT,
            Code::NotFound => StatusCode::NOT_FOUND,
            Code::AlreadyExists => StatusCode::CONFLICT,
            Code::PermissionDenied => StatusCode::FORBIDDEN,
            Code::ResourceExhausted => StatusCode::TOO_MANY_REQUESTS,
            Code::FailedPrecondition => StatusCode::BAD_REQUEST,
            Code::Unimplemented => StatusCode::NOT_IMPLEMENTED,
            Code::Internal => StatusCode::INTERNAL_SERVER_ERROR,
            Code::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
            Code::Unauthenticated => StatusCode::UNAUTHORIZED,
        }
    }
}

impl ConnectError {
    pub fn new(code: Code, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }

    fn body(&self) -> Value {
        json!({"code": self.code.as_str(), "message": self.message})
    }
}

impl From<ServiceError> for ConnectError {
    /// The one error map's answer in Connect's codes; a 5xx's cause is logged under a
    /// reference, as the REST API's are, and only the reference is said.
    fn from(e: ServiceError) -> Self {
        let api = crate::error::ApiError::from(e);
        let status = api.status();
        let message = match api.body()["detail"].take() {
            Value::String(s) => s,
            other => other.to_string(),
        };
        let code = match status.as_u16() {
            400 | 422 => Code::InvalidArgument,
            401 => Code::Unauthenticated,
            403 => Code::PermissionDenied,
            404 => Code::NotFound,
            409 => Code::AlreadyExists,
            402 | 413 | 429 => Code::ResourceExhausted,
            503 => Code::Unavailable,
            _ => Code::Internal,
        };
        Self { code, message }
    }
}

impl IntoResponse for ConnectError {
    /// A unary call's error.
    fn into_response(self) -> Response {
        (self.code.status(), axum::Json(self.body())).into_response()
    }
}

/// One envelope around `message`.
pub fn envelope(flags: u8, message: &[u8]) -> Bytes {
    Bytes::from(envelope::wrap(flags, message))
}

/// The one message of a server-streaming call's request body.
pub fn single_message(body: &[u8]) -> Result<&[u8], ConnectError> {
    envelope::single(body).map_err(|why| {
        ConnectError::new(
            Code::InvalidArgument,
            format!("the request's envelope: {why}"),
        )
    })
}

/// A unary call's answer.
pub fn unary(message: Value) -> Response {
    axum::Json(message).into_response()
}

/// A server-streaming call's answer: each message of `messages` in an envelope, a
/// `keepalive` message whenever `every` passes without one, and the end-of-stream envelope
/// (with the error that ended it, if one did).
pub fn stream(
    messages: impl Stream<Item = Result<Value, ConnectError>> + Send + 'static,
    keepalive: Value,
    every: Duration,
) -> Response {
    let every = every.min(MAX_KEEPALIVE).max(Duration::from_secs(1));
    let body = async_stream::stream! {
        let mut messages = std::pin::pin!(messages);
        let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut end = json!({});
        loop {
            tokio::select! {
                next = messages.next() => match next {
                    Some(Ok(m)) => {
                        tick.reset();
                        yield Ok::<_, std::io::Error>(envelope(0, &serde_json::to_vec(&m).unwrap_or_default()));
                    }
                    Some(Err(e)) => {
                        end = json!({"error": e.body()});
                        break;
                    }
                    None => break,
                },
                _ = tick.tick() => {
                    yield Ok(envelope(0, &serde_json::to_vec(&keepalive).unwrap_or_default()));
                }
            }
        }
        yield Ok(envelope(END_STREAM, &serde_json::to_vec(&end).unwrap_or_default()));
    };
    let mut response = Response::new(Body::from_stream(body));
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(STREAM_CONTENT_TYPE),
    );
    response
}

/// A streaming call refused before its stream began: still a 200 with the error in the
/// end-of-stream envelope, as Connect clients read streaming errors.
pub fn stream_error(e: ConnectError) -> Response {
    let mut response = Response::new(Body::from(envelope(
        END_STREAM,
        &serde_json::to_vec(&json!({"error": e.body()})).unwrap_or_default(),
    )));
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(STREAM_CONTENT_TYPE),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_round_trips_through_its_envelope() {
        let framed = envelope(0, br#"{"a":1}"#);
        assert_eq!(&framed[..5], &[0, 0, 0, 0, 7]);
        assert_eq!(single_message(&framed).unwrap(), br#"{"a":1}"#);
    }

    #[test]
    fn bad_envelopes_are_refused() {
        let ok = envelope(0, b"{}");
        let mut trailing = ok.to_vec();
        trailing.push(b' ');
        let mut compressed = ok.to_vec();
        compressed[0] = envelope::COMPRESSED;
        let mut huge = vec![0u8, 0xff, 0xff, 0xff, 0xff];
        huge.extend_from_slice(b"{}");
        for bad in [
            &b""[..],
            &b"\0\0\0"[..],
            &trailing,
            &compressed,
            &huge,
            &ok[..6],
        ] {
            let e = single_message(bad).unwrap_err();
            assert_eq!(e.code, Code::InvalidArgument, "{bad:?}");
        }
    }
}
