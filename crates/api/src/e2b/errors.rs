//! E2B's error shape. The SDKs read every refusal as `{"code": <status>, "message": ...}`
//! (both required); a body in our `{"detail": ...}` shape would surface as a parse error, not
//! as the refusal. [`layer`] rewrites any non-2xx answer on the E2B paths, whoever made it
//! (a handler, the auth layer's 401, the guard's 421, a body limit's 413), so there is one
//! error map and one place that speaks E2B. A 5xx to a create also says `Should-Retry:
//! false`: the newer SDKs retry 5xx answers, and a retried create would make a second
//! sandbox.

use axum::body::Body;
use axum::extract::Request;
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use sandbox_agents_domain::e2b::E2bError;
use serde_json::Value;

/// The largest error body rewritten (ours are small; anything larger is passed on).
const MAX_ERROR_BODY: usize = 64 * 1024;

/// An E2B error answer.
pub fn answer(status: StatusCode, message: impl Into<String>) -> Response {
    (
        status,
        axum::Json(E2bError {
            code: status.as_u16(),
            message: message.into(),
        }),
    )
        .into_response()
}

/// The one error map's answer in E2B's shape.
pub fn service_error(e: sandbox_agents_errors::ServiceError) -> Response {
    let api = crate::error::ApiError::from(e);
    let message = match api.body()["detail"].take() {
        Value::String(s) => s,
        other => other.to_string(),
    };
    answer(api.status(), message)
}

/// What no route of the E2B API takes.
pub async fn not_found() -> Response {
    answer(
        StatusCode::NOT_FOUND,
        "no such endpoint of the E2B API here (docs/e2b.md lists what is served)",
    )
}

/// Rewrites refusals on the E2B paths into E2B's shape.
pub async fn layer(req: Request, next: Next) -> Response {
    if !super::is_e2b(req.uri().path()) {
        return next.run(req).await;
    }
    let create = req.method() == axum::http::Method::POST
        && matches!(req.uri().path(), "/e2b/sandboxes" | "/e2b/v2/sandboxes");
    let response = next.run(req).await;
    let status = response.status();
    if status.is_success() || status.is_informational() || status.is_redirection() {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let bytes = match axum::body::to_bytes(body, MAX_ERROR_BODY).await {
        Ok(b) => b,
        Err(_) => return answer(status, status.canonical_reason().unwrap_or("error")),
    };
    let message = match serde_json::from_slice::<Value>(&bytes) {
        // Already E2B's shape.
        Ok(v) if v.get("code").is_some() && v.get("message").is_some() => {
            return Response::from_parts(parts, Body::from(bytes));
        }
        Ok(Value::Object(o)) => match o.get("detail") {
            Some(Value::String(s)) => s.clone(),
            // A 422's field errors: each one's place and message.
            Some(Value::Array(errors)) => errors
                .iter()
                .map(|e| {
                    let at: Vec<String> = e["loc"]
                        .as_array()
                        .map(|l| {
                            l.iter()
                                .map(|p| p.as_str().map_or_else(|| p.to_string(), str::to_owned))
                                .collect()
                        })
                        .unwrap_or_default();
                    format!("{}: {}", at.join("."), e["msg"].as_str().unwrap_or(""))
                })
                .collect::<Vec<_>>()
                .join("; "),
            Some(other) => other.to_string(),
            None => String::from_utf8_lossy(&bytes).into_owned(),
        },
        _ => String::from_utf8_lossy(&bytes).into_owned(),
    };
    let body = serde_json::to_vec(&E2bError {
        code: status.as_u16(),
        message,
    })
    .unwrap_or_default();
    parts.headers.remove(header::CONTENT_LENGTH);
    parts.headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    if create && status.is_server_error() {
        parts
            .headers
            .insert("should-retry", HeaderValue::from_static("false"));
    }
    Response::from_parts(parts, Body::from(body))
}
