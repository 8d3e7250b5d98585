//! The daemon's one error: an [`ErrorBody`] with the status its kind maps to.

use crate::proto::{ErrorBody, ErrorKind};
use axum::response::{IntoResponse, Response};

#[derive(Debug)]
pub struct Failure(pub ErrorBody);

impl Failure {
    pub fn new(kind: ErrorKind, detail: impl Into<String>) -> Self {
        Failure(ErrorBody {
            kind,
            detail: detail.into(),
        })
    }

    pub fn invalid(detail: impl Into<String>) -> Self {
        Self::new(ErrorKind::Invalid, detail)
    }

    /// An OS error on `path`, in words that name it.
    pub fn io(path: &str, e: &std::io::Error) -> Self {
        let kind = ErrorKind::of_io(e);
        let detail = match kind {
            ErrorKind::NotFound => format!("no such file or directory: {path}"),
            ErrorKind::PermissionDenied => format!("permission denied: {path}"),
            ErrorKind::IsADirectory => format!("{path} is a directory"),
            ErrorKind::NotADirectory => format!("{path}: not a directory"),
            ErrorKind::Exists => format!("{path} exists already"),
            ErrorKind::NotEmpty => format!("{path} is a directory that is not empty"),
            _ => format!("{path}: {e}"),
        };
        Self::new(kind, detail)
    }
}

impl From<ErrorBody> for Failure {
    fn from(body: ErrorBody) -> Self {
        Failure(body)
    }
}

impl IntoResponse for Failure {
    fn into_response(self) -> Response {
        let status = axum::http::StatusCode::from_u16(self.0.kind.status())
            .unwrap_or(axum::http::StatusCode::INTERNAL_SERVER_ERROR);
        (status, axum::Json(self.0)).into_response()
    }
}

/// A JSON body of at most `MAX_JSON` bytes, refused with an [`ErrorBody`].
pub struct Json<T>(pub T);

impl<S, T> axum::extract::FromRequest<S> for Json<T>
where
    S: Send + Sync,
    T: serde::de::DeserializeOwned,
{
    type Rejection = Failure;

    async fn from_request(req: axum::extract::Request, state: &S) -> Result<Self, Failure> {
        let bytes = axum::body::Bytes::from_request(
            req.map(|b| {
                axum::body::Body::new(http_body_util::Limited::new(b, crate::proto::MAX_JSON))
            }),
            state,
        )
        .await
        .map_err(|_| Failure::new(ErrorKind::TooLarge, "a request body is at most 256 KiB"))?;
        serde_json::from_slice(&bytes)
            .map(Json)
            .map_err(|e| Failure::invalid(format!("a malformed request: {e}")))
    }
}

impl<T: serde::Serialize> IntoResponse for Json<T> {
    fn into_response(self) -> Response {
        axum::Json(self.0).into_response()
    }
}
