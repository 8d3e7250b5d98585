//! FastAPI-shaped validation errors. The published client expects a 422 body of
//! `{"detail": [{"type", "loc", "msg", "input"}, ...]}` and shows `str(list)` to users, so every
//! message is written for a person and `loc` points at the offending field.

use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

/// One field error, as FastAPI/pydantic render it.
#[derive(Clone, Debug, PartialEq, Serialize, ToSchema)]
pub struct FieldError {
    /// A machine-readable kind: `missing`, `value_error`, `literal_error`, `json_invalid`, ...
    #[serde(rename = "type")]
    pub kind: String,
    /// Where the error is: `["body", "manifest", "entries", "a.txt", "kind"]`.
    #[schema(schema_with = crate::openapi::field_error_loc)]
    pub loc: Vec<Value>,
    /// What is wrong, for a person.
    pub msg: String,
    /// The offending input, when there is one.
    #[serde(skip_serializing_if = "Value::is_null")]
    #[schema(schema_with = crate::openapi::field_error_input)]
    pub input: Value,
}

/// Collects field errors while a request body is checked, so that one response lists them all.
#[derive(Debug, Default)]
pub struct Violations {
    errors: Vec<FieldError>,
}

impl Violations {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn push(&mut self, kind: &str, loc: &[&str], msg: impl Into<String>, input: Value) {
        let mut full = vec![Value::from("body")];
        full.extend(loc.iter().map(|s| Value::from(*s)));
        self.errors.push(FieldError {
            kind: kind.to_owned(),
            loc: full,
            msg: msg.into(),
            input,
        });
    }

    /// A value outside a closed set of literals.
    pub fn literal(&mut self, loc: &[&str], allowed: &[&str], got: &str) {
        let quoted: Vec<String> = allowed.iter().map(|a| format!("'{a}'")).collect();
        self.push(
            "literal_error",
            loc,
            format!("Input should be {}", quoted.join(", ")),
            Value::from(got),
        );
    }

    /// A field that may be left out but was sent as `null`.
    pub fn null(&mut self, loc: &[&str]) {
        self.push(
            "null_not_allowed",
            loc,
            "Input should not be null",
            Value::Null,
        );
    }

    pub fn is_empty(&self) -> bool {
        self.errors.is_empty()
    }

    pub fn into_result(self) -> Result<(), Vec<FieldError>> {
        if self.errors.is_empty() {
            Ok(())
        } else {
            Err(self.errors)
        }
    }
}
