//! U+0000 in a request: refused before any handler runs, so nothing changes. PostgreSQL's
//! `text` and `jsonb` cannot store the character (a statement holding it fails, after the
//! handler may have done other work), no name, id, command or path of ours holds it, and binary
//! data travels as files, never inside JSON strings or URLs.
//!
//! * in the URL's path: a 404, since no resource can be named by it ([`layer`]);
//! * in a query parameter or a JSON body (a string or an object key): a 422 naming the field
//!   ([`in_query`], [`in_body`]), without echoing the value, which may be a secret.

use crate::error::ApiError;
use axum::extract::Request;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use sandbox_agents_domain::FieldError;
use serde_json::Value;

/// Answers a request whose path holds `%00` with a 404.
pub async fn layer(req: Request, next: Next) -> Response {
    if req.uri().path().to_ascii_lowercase().contains("%00") {
        return ApiError::NotFound(
            "nothing is named with the NUL character (%00): check the URL".into(),
        )
        .into_response();
    }
    next.run(req).await
}

/// The 422 for the first query parameter whose name or value holds U+0000, if any.
pub fn in_query(query: &str) -> Result<(), ApiError> {
    let found = form_urlencoded::parse(query.as_bytes())
        .find(|(name, value)| name.contains('\0') || value.contains('\0'));
    match found {
        Some((name, _)) => Err(refused(vec!["query".into(), Value::from(name.as_ref())])),
        None => Ok(()),
    }
}

/// The 422 for the first string (or object key) of a JSON body that holds U+0000, if any.
pub fn in_body(body: &Value) -> Result<(), ApiError> {
    let mut loc = vec![Value::from("body")];
    if nul_at(body, &mut loc) {
        return Err(refused(loc));
    }
    Ok(())
}

fn refused(loc: Vec<Value>) -> ApiError {
    ApiError::Validation(vec![FieldError {
        kind: "string_nul".into(),
        loc,
        msg: "Input should not contain the NUL character (\\u0000): no text the API keeps or \
              runs can hold it; remove it, or send binary data as a file"
            .into(),
        input: Value::Null,
    }])
}

/// Whether `value` holds U+0000 in a string or a key; `loc` is left pointing at it.
fn nul_at(value: &Value, loc: &mut Vec<Value>) -> bool {
    match value {
        Value::String(s) => s.contains('\0'),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .any(|(i, item)| descend(loc, Value::from(i), |loc| nul_at(item, loc))),
        Value::Object(fields) => fields.iter().any(|(key, item)| {
            descend(loc, Value::from(key.as_str()), |loc| {
                key.contains('\0') || nul_at(item, loc)
            })
        }),
        Value::Null | Value::Bool(_) | Value::Number(_) => false,
    }
}

/// `found` with `key` pushed on `loc`, popped again unless it found something.
fn descend(loc: &mut Vec<Value>, key: Value, found: impl FnOnce(&mut Vec<Value>) -> bool) -> bool {
    loc.push(key);
    let hit = found(loc);
    if !hit {
        loc.pop();
    }
    hit
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn loc_of(e: ApiError) -> Vec<Value> {
        match e {
            ApiError::Validation(errors) => errors[0].loc.clone(),
            other => panic!("expected a 422, got {other:?}"),
        }
    }

    #[test]
    fn a_nul_deep_in_a_body_is_named_by_its_path() {
        let body = json!({"name": "ok", "manifest": {"entries": {"a.txt": ["x", "b\u{0}"]}}});
        let loc = loc_of(in_body(&body).unwrap_err());
        assert_eq!(
            loc,
            json!(["body", "manifest", "entries", "a.txt", 1])
                .as_array()
                .unwrap()
                .clone()
        );
    }

    #[test]
    fn a_nul_in_a_key_is_named_by_the_key() {
        let loc = loc_of(in_body(&json!({"metadata": {"k\u{0}": 1}})).unwrap_err());
        assert_eq!(loc, vec![json!("body"), json!("metadata"), json!("k\u{0}")]);
    }

    #[test]
    fn bodies_and_queries_without_nul_pass() {
        assert!(in_body(&json!({"a": [1, "two", {"three": null}], "b": "\u{1}"})).is_ok());
        assert!(in_query("path=a%01b&x=").is_ok());
    }

    #[test]
    fn a_nul_in_a_query_value_or_name_is_named() {
        assert_eq!(
            loc_of(in_query("a=1&path=x%00").unwrap_err()),
            vec![json!("query"), json!("path")]
        );
        assert_eq!(
            loc_of(in_query("p%00=1").unwrap_err()),
            vec![json!("query"), json!("p\u{0}")]
        );
    }
}
