//! Request body limits per route, so that no body is read into memory unbounded. Most bodies
//! are a few fields; only agent definitions and session creates carry manifests with file
//! contents inline, and uploads stream under limits of their own (`routes::files`, `routes::skill_bundles`). A body
//! over its route's limit is a 413 before any handler runs, whether or not it declared its
//! length.

use crate::error::ApiError;
use axum::body::Body;
use axum::extract::Request;
use axum::http::{header, Method};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

/// Agent definitions and session creates: manifests with file contents inline.
pub const MANIFEST_BODY_LIMIT: usize = crate::JSON_BODY_LIMIT;
/// Answers to client tools: tool output, possibly long.
pub const TOOL_RESULT_BODY_LIMIT: usize = 4 * 1024 * 1024;
/// Prompts and commands.
pub const PROMPT_BODY_LIMIT: usize = 1024 * 1024;
/// Secrets: a value of up to 32 KiB, which JSON escaping can grow up to six times.
pub const SECRET_BODY_LIMIT: usize = 256 * 1024;
/// Everything else: a handful of fields.
pub const SMALL_BODY_LIMIT: usize = 64 * 1024;

/// The limit for a request, or None where the route enforces its own (uploads) or the path is
/// not the API's (the preview proxy passes bodies through).
pub fn body_limit(method: &Method, path: &str) -> Option<usize> {
    if !path.starts_with("/api/") || matches!(*method, Method::GET | Method::HEAD | Method::DELETE)
    {
        return None;
    }
    let parts: Vec<&str> = path.trim_end_matches('/').split('/').skip(2).collect();
    Some(match parts.as_slice() {
        ["agents", ..] => MANIFEST_BODY_LIMIT,
        ["sessions"] => MANIFEST_BODY_LIMIT,
        ["sessions", _, "files"] => return None,
        // Streamed to the sandbox under its own limit (`SANDBOX_FILE_MAX_BYTES`).
        ["sessions", _, "sandbox-files"] => return None,
        ["sessions", _, "processes"] => PROMPT_BODY_LIMIT,
        ["skill-bundles", _, "versions"] => return None,
        ["sessions", _, "tool-results"] => TOOL_RESULT_BODY_LIMIT,
        ["sessions", _, "messages" | "exec"] => PROMPT_BODY_LIMIT,
        ["secrets", ..] => SECRET_BODY_LIMIT,
        _ => SMALL_BODY_LIMIT,
    })
}

fn too_large(limit: usize) -> Response {
    ApiError::PayloadTooLarge(format!(
        "the request body is too large: this endpoint takes at most {limit} bytes"
    ))
    .into_response()
}

/// Refuses declared lengths over the limit at once and caps undeclared ones while they are read.
pub async fn layer(req: Request, next: Next) -> Response {
    let Some(limit) = body_limit(req.method(), req.uri().path()) else {
        return next.run(req).await;
    };
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return too_large(limit);
    }
    let (parts, body) = req.into_parts();
    let limited = Body::new(http_body_util::Limited::new(body, limit));
    next.run(Request::from_parts(parts, limited)).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_get_the_limit_of_what_they_carry() {
        let post = Method::POST;
        assert_eq!(body_limit(&post, "/api/agents"), Some(MANIFEST_BODY_LIMIT));
        assert_eq!(
            body_limit(&Method::PATCH, "/api/agents/x"),
            Some(MANIFEST_BODY_LIMIT)
        );
        assert_eq!(
            body_limit(&post, "/api/sessions"),
            Some(MANIFEST_BODY_LIMIT)
        );
        assert_eq!(body_limit(&post, "/api/sessions/s/files"), None);
        assert_eq!(
            body_limit(&Method::PUT, "/api/sessions/s/sandbox-files"),
            None
        );
        assert_eq!(body_limit(&post, "/api/skill-bundles/b/versions"), None);
        assert_eq!(
            body_limit(&post, "/api/skill-bundles"),
            Some(SMALL_BODY_LIMIT)
        );
        assert_eq!(
            body_limit(&post, "/api/sessions/s/messages"),
            Some(PROMPT_BODY_LIMIT)
        );
        assert_eq!(
            body_limit(&post, "/api/sessions/s/tool-results"),
            Some(TOOL_RESULT_BODY_LIMIT)
        );
        assert_eq!(body_limit(&post, "/api/secrets"), Some(SECRET_BODY_LIMIT));
        assert_eq!(body_limit(&post, "/api/webhooks"), Some(SMALL_BODY_LIMIT));
        assert_eq!(
            body_limit(&Method::PATCH, "/api/sessions/s"),
            Some(SMALL_BODY_LIMIT)
        );
        assert_eq!(body_limit(&Method::GET, "/api/agents"), None);
        assert_eq!(body_limit(&post, "/preview/t/upload"), None);
    }
}
