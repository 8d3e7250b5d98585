//! The one multipart shape the API takes (file uploads and skill-bundle pushes): a
//! `multipart/form-data` body whose part named `file` carries the bytes, streamed to the
//! service as they arrive and bounded by a limit.

use crate::error::{ApiError, ApiResult};
use axum::extract::Request;
use axum::http::header;
use futures::StreamExt;
use sandbox_agents_domain::FieldError;
use serde_json::Value;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// The `file` part of a request, as a stream.
pub struct FilePart {
    /// The part's filename, when it has one.
    pub filename: Option<String>,
    /// The part's bytes; an error once more than the limit has arrived.
    pub data: futures::stream::BoxStream<'static, std::io::Result<bytes::Bytes>>,
    /// Whether the stream went past the limit.
    pub overflow: Overflow,
}

/// Set once the part's bytes went past the limit. The service sees only a failed stream; the
/// handler turns that failure into the 413 that names the limit.
pub struct Overflow(Arc<AtomicBool>);

impl Overflow {
    /// The 413 when the body went past the limit, else `result` as it is.
    pub fn or_too_large<T>(
        &self,
        result: ApiResult<T>,
        too_large: impl FnOnce() -> ApiError,
    ) -> ApiResult<T> {
        if self.0.load(Ordering::Relaxed) {
            return Err(too_large());
        }
        result
    }
}

/// Reads a request's multipart framing up to the `file` part. `body_limit` bounds the whole
/// body (a declared `Content-Length` over it is refused before anything is read), `file_limit`
/// the part's bytes; `too_large` is the 413 that names the limit.
pub async fn file_part(
    req: Request,
    body_limit: u64,
    file_limit: u64,
    too_large: fn() -> ApiError,
) -> ApiResult<FilePart> {
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if declared.is_some_and(|n| n > body_limit) {
        return Err(too_large());
    }
    let boundary = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|ct| multer::parse_boundary(ct).ok())
        .ok_or_else(|| {
            missing_file("the body must be multipart/form-data with a part named 'file'")
        })?;
    let constraints =
        multer::Constraints::new().size_limit(multer::SizeLimit::new().whole_stream(body_limit));
    let mut form = multer::Multipart::with_constraints(
        req.into_body().into_data_stream(),
        boundary,
        constraints,
    );
    let field = loop {
        match form
            .next_field()
            .await
            .map_err(|e| multipart_error(e, too_large))?
        {
            Some(f) if f.name() == Some("file") => break f,
            Some(_) => continue,
            None => {
                return Err(missing_file(
                    "Field required: a multipart part named 'file'",
                ))
            }
        }
    };
    let filename = field.file_name().map(str::to_owned);
    let over = Arc::new(AtomicBool::new(false));
    let flag = over.clone();
    let mut seen: u64 = 0;
    let data = field
        .map(move |chunk| match chunk {
            Ok(bytes) => {
                seen += bytes.len() as u64;
                if seen > file_limit {
                    flag.store(true, Ordering::Relaxed);
                    return Err(std::io::Error::other("the file is over the limit"));
                }
                Ok(bytes)
            }
            Err(e) => {
                if is_size_error(&e) {
                    flag.store(true, Ordering::Relaxed);
                }
                Err(std::io::Error::other(e.to_string()))
            }
        })
        .boxed();
    Ok(FilePart {
        filename,
        data,
        overflow: Overflow(over),
    })
}

fn missing_file(msg: &str) -> ApiError {
    ApiError::Validation(vec![FieldError {
        kind: "missing".into(),
        loc: vec!["body".into(), "file".into()],
        msg: msg.into(),
        input: Value::Null,
    }])
}

fn is_size_error(e: &multer::Error) -> bool {
    matches!(
        e,
        multer::Error::StreamSizeExceeded { .. } | multer::Error::FieldSizeExceeded { .. }
    )
}

fn multipart_error(e: multer::Error, too_large: fn() -> ApiError) -> ApiError {
    if is_size_error(&e) {
        too_large()
    } else {
        ApiError::BadRequest(format!("the multipart body could not be read: {e}"))
    }
}
