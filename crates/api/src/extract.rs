//! Extractors that answer bad input the way the published client expects: a 422 whose
//! `detail` is a list of FastAPI-style field errors, with `loc` pointing at the field.

use crate::error::ApiError;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::StatusCode;
use bytes::Bytes;
use sandbox_agents_domain::FieldError;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer};
use serde_json::Value;

/// A JSON body. Unknown fields are ignored; every error becomes a 422 with a `loc`.
pub struct ApiJson<T>(pub T);

/// A JSON body that carries a write-only value (a secret): like [`ApiJson`], but a 422 never
/// echoes any part of the body, neither as `input` nor inside the message.
pub struct WriteOnlyJson<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for WriteOnlyJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let ApiJson(value) = ApiJson::<Value>::from_request(req, state).await?;
        serde_path_to_error::deserialize(&value)
            .map(WriteOnlyJson)
            .map_err(|e| {
                let mut err = field_error("body", &value, &e);
                err.input = Value::Null;
                if err.kind == "type_error" {
                    err.msg = "Input has the wrong type".into();
                }
                ApiError::Validation(vec![err])
            })
    }
}

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for ApiJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let json_type = is_json_content_type(req.headers());
        let bytes = Bytes::from_request(req, state).await.map_err(|e| {
            if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
                ApiError::PayloadTooLarge(format!(
                    "the request body is too large: {}",
                    e.body_text()
                ))
            } else {
                ApiError::BadRequest(format!(
                    "the request body could not be read: {}",
                    e.body_text()
                ))
            }
        })?;
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Err(ApiError::Validation(vec![FieldError {
                kind: "missing".into(),
                loc: vec!["body".into()],
                msg: "Field required: this endpoint takes a JSON body".into(),
                input: Value::Null,
            }]));
        }
        // A page of another origin can send `text/plain` (or a form type) without a CORS
        // preflight, never `application/json`: refusing other types keeps such pages out.
        if !json_type {
            return Err(ApiError::UnsupportedMediaType(
                "this endpoint takes a JSON body: send it with Content-Type: application/json"
                    .into(),
            ));
        }
        let value: Value = serde_json::from_slice(&bytes).map_err(|e| {
            ApiError::Validation(vec![FieldError {
                kind: "json_invalid".into(),
                loc: vec!["body".into(), Value::from(e.column())],
                msg: format!("JSON decode error: {e}"),
                input: Value::Null,
            }])
        })?;
        // Every body is an object of named fields. serde would also fill a struct from an
        // array, field by field in declaration order: `[]` would be an empty PATCH, and
        // `["a", "b"]` an agent with slug "a" and name "b".
        if !value.is_object() {
            return Err(ApiError::Validation(vec![FieldError {
                kind: "type_error".into(),
                loc: vec!["body".into()],
                msg: "Input should be a JSON object: this endpoint takes its fields by name, \
                      as {\"field\": value, ...}"
                    .into(),
                input: Value::Null,
            }]));
        }
        crate::nul::in_body(&value)?;
        from_value("body", value).map(ApiJson)
    }
}

/// `application/json` or `application/<anything>+json`, parameters allowed.
fn is_json_content_type(h: &axum::http::HeaderMap) -> bool {
    let Some(v) = h
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
    else {
        return false;
    };
    let essence = v
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    essence == "application/json"
        || essence
            .strip_prefix("application/")
            .is_some_and(|sub| sub.ends_with("+json"))
}

/// Deserializes `value`, turning the first error into a FastAPI-style field error under `root`.
pub fn from_value<T: DeserializeOwned>(root: &str, value: Value) -> Result<T, ApiError> {
    serde_path_to_error::deserialize(&value)
        .map_err(|e| ApiError::Validation(vec![field_error(root, &value, &e)]))
}

fn field_error(
    root: &str,
    input: &Value,
    e: &serde_path_to_error::Error<serde_json::Error>,
) -> FieldError {
    use serde_path_to_error::Segment;
    let mut loc = vec![Value::from(root)];
    let mut at = Some(input);
    for seg in e.path().iter() {
        match seg {
            Segment::Seq { index } => {
                loc.push(Value::from(*index));
                at = at.and_then(|v| v.get(*index));
            }
            Segment::Map { key } => {
                loc.push(Value::from(key.as_str()));
                at = at.and_then(|v| v.get(key));
            }
            Segment::Enum { .. } | Segment::Unknown => {}
        }
    }
    let raw = e.inner().to_string();
    // serde appends " at line 1 column 2" to some messages; the loc says where already.
    let msg = raw.split(" at line ").next().unwrap_or(&raw).to_owned();
    let (kind, msg) = if let Some(field) = msg
        .strip_prefix("missing field `")
        .and_then(|s| s.strip_suffix('`'))
    {
        loc.push(Value::from(field));
        ("missing", "Field required".to_owned())
    } else if let Some(rest) = msg.strip_prefix("unknown variant ") {
        let expected = rest
            .split("expected ")
            .nth(1)
            .unwrap_or("")
            .replace('`', "'");
        ("literal_error", format!("Input should be {expected}"))
    } else if msg.contains("should not be null") || msg.starts_with("invalid type: null") {
        ("null_not_allowed", "Input should not be null".to_owned())
    } else if msg.starts_with("invalid type") {
        ("type_error", format!("Input has the wrong type: {msg}"))
    } else {
        ("value_error", msg)
    };
    FieldError {
        kind: kind.into(),
        loc,
        msg,
        input: at.cloned().unwrap_or(Value::Null),
    }
}

/// A query string; errors are 422s with `loc: ["query", name]`.
pub struct ApiQuery<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for ApiQuery<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        let query = parts.uri.query().unwrap_or("");
        crate::nul::in_query(query)?;
        let de = serde_urlencoded::Deserializer::new(form_urlencoded::parse(query.as_bytes()));
        serde_path_to_error::deserialize(de)
            .map(ApiQuery)
            .map_err(|e| {
                let msg = e.inner().to_string();
                let mut loc = vec![Value::from("query")];
                let path = e.path().to_string();
                if let Some(field) = msg
                    .strip_prefix("missing field `")
                    .and_then(|s| s.strip_suffix('`'))
                {
                    loc.push(Value::from(field));
                    return ApiError::Validation(vec![FieldError {
                        kind: "missing".into(),
                        loc,
                        msg: "Field required".into(),
                        input: Value::Null,
                    }]);
                }
                if path != "." {
                    loc.push(Value::from(path));
                }
                ApiError::Validation(vec![FieldError {
                    kind: "value_error".into(),
                    loc,
                    msg,
                    input: Value::Null,
                }])
            })
    }
}

/// Booleans in query strings: `true`/`false` as the client sends them, and FastAPI's other
/// spellings (`1/0`, `yes/no`, `on/off`, any case) too.
pub fn lenient_bool<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    let s = String::deserialize(d)?;
    match s.to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" | "on" | "t" | "y" => Ok(true),
        "false" | "0" | "no" | "off" | "f" | "n" => Ok(false),
        _ => Err(serde::de::Error::custom(format!(
            "Input should be a valid boolean, not '{s}'"
        ))),
    }
}

/// The most rows one page of a list returns (`limit` ≤ this).
pub const MAX_PAGE: i64 = 1000;

/// A 422 for one query parameter, shaped like FastAPI's.
pub fn query_error(field: &str, msg: &str, input: serde_json::Value) -> ApiError {
    ApiError::Validation(vec![sandbox_agents_domain::FieldError {
        kind: "value_error".into(),
        loc: vec!["query".into(), field.into()],
        msg: msg.into(),
        input,
    }])
}

/// `limit` (default `default`, 1..=[`MAX_PAGE`]) and `offset` (default 0, not negative) of a
/// paged list, or the 422 that names the bad one.
pub fn page_window(
    limit: Option<i64>,
    offset: Option<i64>,
    default: i64,
) -> Result<(i64, i64), ApiError> {
    let limit = limit.unwrap_or(default);
    if !(1..=MAX_PAGE).contains(&limit) {
        return Err(query_error(
            "limit",
            "limit is between 1 and 1000",
            serde_json::Value::from(limit),
        ));
    }
    let offset = offset.unwrap_or(0);
    if offset < 0 {
        return Err(query_error(
            "offset",
            "offset is 0 or more",
            serde_json::Value::from(offset),
        ));
    }
    Ok((limit, offset))
}

/// Parses a session id from a path; anything that is not an id names no session.
pub fn session_id(raw: &str) -> Result<sandbox_agents_domain::SessionId, ApiError> {
    sandbox_agents_domain::SessionId::parse(raw)
        .ok_or_else(|| ApiError::NotFound(format!("session '{raw}' not found")))
}

/// The named 404 of a session, for `or_not_found`.
pub fn session_not_found(raw: &str) -> impl FnOnce() -> String + '_ {
    move || format!("session '{raw}' not found")
}

/// The `{session_id}` of a route's path, parsed: anything that is not a session id is the
/// same named 404 as a session of another project or none at all. `raw` is the path's text,
/// for messages and traces.
pub struct SessionPath {
    pub id: sandbox_agents_domain::SessionId,
    pub raw: String,
}

impl<S: Send + Sync> FromRequestParts<S> for SessionPath {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let params = axum::extract::RawPathParams::from_request_parts(parts, state)
            .await
            .map_err(|e| ApiError::Internal(anyhow::anyhow!("path parameters: {e}")))?;
        let raw = params
            .iter()
            .find(|(name, _)| *name == "session_id")
            .map(|(_, v)| v.to_owned())
            .ok_or_else(|| {
                ApiError::Internal(anyhow::anyhow!("the route has no {{session_id}}"))
            })?;
        let id = session_id(&raw)?;
        Ok(SessionPath { id, raw })
    }
}

/// Whether the request's `Accept` names one of `types` (parameters and case aside; `*/*`
/// names none of them).
pub fn accepts_any(headers: &axum::http::HeaderMap, types: &[&str]) -> bool {
    headers
        .get_all(axum::http::header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|t| {
            let t = t.split(';').next().unwrap_or("").trim();
            types.iter().any(|want| t.eq_ignore_ascii_case(want))
        })
}
