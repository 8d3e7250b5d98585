//! The code interpreter's HTTP surface (`E2b-Sandbox-Port: 49999`): `POST /execute` answered
//! as newline-delimited JSON while the cell runs, and `/contexts` (create, list, restart,
//! delete). Thin: the `e2b` service's `interpreter` module does the work.

use super::errors::service_error;
use super::target::Target;
use crate::state::AppState;
use axum::body::Body;
use axum::extract::Request;
use axum::http::{header, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use sandbox_agents_domain::e2b::{Execute, NewContext, MAX_CODE_BYTES};
use sandbox_agents_errors::ServiceError;

/// The largest request body: the code, JSON-escaped, and its variables.
const MAX_BODY: usize = 2 * MAX_CODE_BYTES + 64 * 1024;

/// One request to the code interpreter of the sandbox `t`.
pub(super) async fn serve(st: &AppState, t: &Target, path: &str, req: Request) -> Response {
    let method = req.method().clone();
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    let e2b = &st.e2b;
    let done = |r: Result<(), ServiceError>| match r {
        Ok(()) => StatusCode::NO_CONTENT.into_response(),
        Err(e) => service_error(e),
    };
    match (method, segments.as_slice()) {
        (Method::GET, ["health"]) => StatusCode::NO_CONTENT.into_response(),
        (Method::POST, ["execute"]) => {
            let body: Execute = match json_body(req).await {
                Ok(b) => b,
                Err(e) => return service_error(e),
            };
            match e2b.execute(t.project, t.id, body).await {
                Ok(lines) => {
                    let body = lines.map(|line| {
                        let mut bytes = serde_json::to_vec(&line).unwrap_or_default();
                        bytes.push(b'\n');
                        Ok::<_, std::io::Error>(bytes::Bytes::from(bytes))
                    });
                    Response::builder()
                        .header(header::CONTENT_TYPE, "application/x-ndjson")
                        .header(header::CACHE_CONTROL, "no-store")
                        .body(Body::from_stream(body))
                        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
                }
                Err(e) => service_error(e),
            }
        }
        (Method::POST, ["contexts"]) => {
            let body: NewContext = match json_body(req).await {
                Ok(b) => b,
                Err(e) => return service_error(e),
            };
            match e2b.create_context(t.project, t.id, body).await {
                Ok(c) => axum::Json(c).into_response(),
                Err(e) => service_error(e),
            }
        }
        (Method::GET, ["contexts"]) => match e2b.contexts(t.project, t.id).await {
            Ok(list) => axum::Json(list).into_response(),
            Err(e) => service_error(e),
        },
        (Method::POST, ["contexts", id, "restart"]) => {
            done(e2b.restart_context(t.project, t.id, id).await)
        }
        (Method::DELETE, ["contexts", id]) => done(e2b.delete_context(t.project, t.id, id).await),
        _ => super::errors::answer(
            StatusCode::NOT_FOUND,
            format!("the code interpreter serves no {path}"),
        ),
    }
}

/// The body as JSON (an empty body is `{}`), at most [`MAX_BODY`] bytes.
async fn json_body<T: serde::de::DeserializeOwned>(req: Request) -> Result<T, ServiceError> {
    let bytes = axum::body::to_bytes(req.into_body(), MAX_BODY)
        .await
        .map_err(|_| ServiceError::TooLarge(format!("the request is over {MAX_BODY} bytes")))?;
    let bytes = if bytes.iter().all(u8::is_ascii_whitespace) {
        bytes::Bytes::from_static(b"{}")
    } else {
        bytes
    };
    serde_json::from_slice(&bytes)
        .map_err(|e| ServiceError::BadRequest(format!("the request body: {e}")))
}
