//! The one error type every handler returns, mapped to `{"detail": ...}` and the right status
//! (a 422 carries a list of field errors). 5xx causes are logged with their chain under a
//! reference, and only the reference is shown to clients. A service's error takes the
//! status and detail its own map gives ([`ServiceError::for_user`]), the one the event log
//! uses too.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use sandbox_agents_domain::FieldError;
use sandbox_agents_errors::{Detail, ServiceError, Status, UserError};
use serde_json::json;
use utoipa::ToSchema;

/// Every error answer but a 422: what went wrong, and what to do, for a person.
#[derive(ToSchema)]
#[allow(dead_code)] // the document's shape of [`ApiError::body`]
pub struct ErrorBody {
    /// What went wrong and what to do. A 500 says only `internal error (reference <id>)`:
    /// the server's log has the cause under that reference.
    detail: String,
}

/// A 422: every field error of the request at once, FastAPI-style.
#[derive(ToSchema)]
#[allow(dead_code)] // the document's shape of [`ApiError::body`] for [`ApiError::Validation`]
pub struct ValidationErrorBody {
    detail: Vec<FieldError>,
}

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("{0}")]
    BadRequest(String),
    #[error("{0}")]
    NotFound(String),
    /// 401 with `WWW-Authenticate: Bearer`: no credential, or one that is not accepted.
    #[error("{0}")]
    Unauthorized(String),
    /// 403: the caller is known but may not do this.
    #[error("{0}")]
    Forbidden(String),
    #[error("{0}")]
    Conflict(String),
    /// A 422 whose `detail` is a list of field errors.
    #[error("validation failed")]
    Validation(Vec<FieldError>),
    #[error("{0}")]
    PayloadTooLarge(String),
    /// 402: a spending limit is reached (the project's monthly spend); retrying does not help.
    #[error("{0}")]
    PaymentRequired(String),
    /// 415: a body in a format the endpoint does not take (JSON bodies need
    /// `Content-Type: application/json`).
    #[error("{0}")]
    UnsupportedMediaType(String),
    /// 421: the request names a host this server does not answer for.
    #[error("{0}")]
    MisdirectedRequest(String),
    /// An upstream (the model proxy) failed or is not there.
    #[error("{0}")]
    BadGateway(String),
    /// 429 with `Retry-After` (whole seconds): the caller's request rate is over its limit;
    /// nothing was done.
    #[error("too many requests: slow down and retry after {0} s")]
    TooManyRequests(u64),
    /// 429 with `Retry-After` (whole seconds), saying which limit: a project's own
    /// `limits.requests_per_minute`.
    #[error("{1}")]
    TooManyRequestsFor(u64, String),
    /// 503 with `Retry-After`: try again shortly (the server is busy, or the database is
    /// unreachable).
    #[error("{0}")]
    Unavailable(String),
    #[error(transparent)]
    Internal(#[from] anyhow::Error),
    /// A 500 whose cause is already in the log under the reference this text names
    /// (`internal error (reference <id>)`): a service's error, through its map.
    #[error("{0}")]
    InternalReference(String),
}

pub type ApiResult<T> = Result<T, ApiError>;

impl ApiError {
    pub fn not_found(what: impl Into<String>) -> Self {
        ApiError::NotFound(what.into())
    }

    /// The `{"detail": ...}` a caller is shown (also inside streams that fail after they
    /// began). An internal cause goes to the log under a reference, never to the caller.
    pub fn body(&self) -> serde_json::Value {
        match self {
            ApiError::Validation(errors) => json!({ "detail": errors }),
            ApiError::Internal(e) => {
                json!({ "detail": sandbox_agents_errors::internal_reference(e.as_ref()) })
            }
            other => json!({ "detail": other.to_string() }),
        }
    }

    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::BadRequest(_) => StatusCode::BAD_REQUEST,
            ApiError::NotFound(_) => StatusCode::NOT_FOUND,
            ApiError::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            ApiError::Forbidden(_) => StatusCode::FORBIDDEN,
            ApiError::Conflict(_) => StatusCode::CONFLICT,
            ApiError::Validation(_) => StatusCode::UNPROCESSABLE_ENTITY,
            ApiError::PayloadTooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::PaymentRequired(_) => StatusCode::PAYMENT_REQUIRED,
            ApiError::UnsupportedMediaType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ApiError::MisdirectedRequest(_) => StatusCode::MISDIRECTED_REQUEST,
            ApiError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::TooManyRequests(_) | ApiError::TooManyRequestsFor(..) => {
                StatusCode::TOO_MANY_REQUESTS
            }
            ApiError::BadGateway(_) => StatusCode::BAD_GATEWAY,
            ApiError::Internal(_) | ApiError::InternalReference(_) => {
                StatusCode::INTERNAL_SERVER_ERROR
            }
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status();
        let mut resp = (status, Json(self.body())).into_response();
        if matches!(self, ApiError::Unavailable(_)) {
            resp.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("2"));
        }
        if let ApiError::TooManyRequests(secs) | ApiError::TooManyRequestsFor(secs, _) = self {
            resp.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(secs.max(1)));
        }
        if matches!(self, ApiError::Unauthorized(_)) {
            resp.headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        resp
    }
}

impl From<sandbox_agents_store::Error> for ApiError {
    /// Handlers name what was not found with [`NotFoundExt::or_not_found`]; this is the
    /// fallback for everything else, through the services' map.
    fn from(e: sandbox_agents_store::Error) -> Self {
        ServiceError::Store(e).into()
    }
}

/// A database error outside the store's functions (beginning or committing a transaction):
/// `?` works on it as on the store's own errors.
impl From<sqlx::Error> for ApiError {
    fn from(e: sqlx::Error) -> Self {
        sandbox_agents_store::Error::from(e).into()
    }
}

impl From<ServiceError> for ApiError {
    fn from(e: ServiceError) -> Self {
        let UserError { status, detail } = e.for_user();
        let text = match detail {
            Detail::Fields(errors) => return ApiError::Validation(errors),
            Detail::Text(text) => text,
        };
        match status {
            Status::BadRequest => ApiError::BadRequest(text),
            Status::Forbidden => ApiError::Forbidden(text),
            Status::NotFound => ApiError::NotFound(text),
            Status::Conflict => ApiError::Conflict(text),
            Status::PayloadTooLarge => ApiError::PayloadTooLarge(text),
            Status::PaymentRequired => ApiError::PaymentRequired(text),
            // The map gives a 422 only with field errors; a sentence alone still is one.
            Status::UnprocessableEntity => ApiError::Validation(vec![FieldError {
                kind: "value_error".into(),
                loc: vec!["body".into()],
                msg: text,
                input: serde_json::Value::Null,
            }]),
            Status::InternalServerError => ApiError::InternalReference(text),
            Status::ServiceUnavailable => ApiError::Unavailable(text),
        }
    }
}

/// Names the missing thing in a store `NotFound`.
pub trait NotFoundExt<T> {
    fn or_not_found(self, what: impl FnOnce() -> String) -> ApiResult<T>;
}

impl<T> NotFoundExt<T> for Result<T, ServiceError> {
    fn or_not_found(self, what: impl FnOnce() -> String) -> ApiResult<T> {
        match self {
            Err(ServiceError::Store(sandbox_agents_store::Error::NotFound)) => {
                Err(ApiError::NotFound(what()))
            }
            other => other.map_err(Into::into),
        }
    }
}

impl<T> NotFoundExt<T> for Result<T, sandbox_agents_store::Error> {
    fn or_not_found(self, what: impl FnOnce() -> String) -> ApiResult<T> {
        match self {
            Err(sandbox_agents_store::Error::NotFound) => Err(ApiError::NotFound(what())),
            other => other.map_err(Into::into),
        }
    }
}

#[cfg(test)]
mod tests;
