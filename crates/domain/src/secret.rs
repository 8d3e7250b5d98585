//! Secrets as the wire shows them and the rules for their inputs.
//! A value is write-only: it is in the create and update bodies and in no response, and a
//! body's `Debug` never prints it.

use crate::manifest::is_env_name;
use crate::tools::SecretBinding;
use crate::validation::Violations;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::fmt;
use time::OffsetDateTime;
use utoipa::ToSchema;

/// Secret values shorter than this are not masked: they would hide ordinary text.
pub const MIN_MASKED_LEN: usize = 4;

/// `text` with every secret value replaced by `***` (longest values first, so one that
/// contains another is hidden whole).
pub fn mask(text: String, values: &[String]) -> String {
    let mut values: Vec<&String> = values
        .iter()
        .filter(|v| v.len() >= MIN_MASKED_LEN)
        .collect();
    if values.is_empty() {
        return text;
    }
    values.sort_by_key(|v| std::cmp::Reverse(v.len()));
    let mut out = text;
    for v in values {
        if out.contains(v.as_str()) {
            out = out.replace(v.as_str(), "***");
        }
    }
    out
}

/// Longest secret name.
pub const MAX_NAME: usize = 128;
/// Largest value: an environment variable, and every sandbox command carries all of them.
pub const MAX_VALUE_BYTES: usize = 32 * 1024;
/// Longest description.
pub const MAX_DESCRIPTION: usize = 2000;

/// A secret of the project, as every secret endpoint returns it: there is no value field,
/// and no response, log line or event ever carries the value. Agents and sessions use it by
/// `name` through `secret_bindings`.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct Secret {
    /// The secret's id (a UUID); `{secret_id}` in paths takes it or the name.
    pub id: String,
    /// Unique in the project; what bindings name.
    pub name: String,
    /// For people; may be `""`.
    pub description: String,
    #[serde(with = "time::serde::rfc3339::option")]
    pub created_at: Option<OffsetDateTime>,
    /// The last change of the description or the value.
    #[serde(with = "time::serde::rfc3339::option")]
    pub updated_at: Option<OffsetDateTime>,
    /// When a boot last resolved the secret into a sandbox's environment; null if never.
    #[serde(with = "time::serde::rfc3339::option")]
    pub last_used_at: Option<OffsetDateTime>,
}

/// A secret's value: write-only, never returned or printed. 1 byte to 32 KiB of UTF-8,
/// without NUL characters (an environment variable cannot hold one).
#[derive(Clone, Deserialize, ToSchema)]
#[schema(value_type = String)]
#[serde(transparent)]
pub struct SecretValue(pub String);

impl fmt::Debug for SecretValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SecretValue(***)")
    }
}

/// The body of `POST /api/secrets`: a new secret, sealed at rest (AES-256-GCM under the
/// server's master key). The body is at most 256 KiB (413 above).
#[derive(Debug, Deserialize, ToSchema)]
pub struct SecretCreate {
    /// Unique in the project (409 when taken): an identifier of 1 to 128 letters, digits and
    /// `_`, not starting with a digit.
    #[schema(pattern = "^[A-Za-z_][A-Za-z0-9_]*$", min_length = 1, max_length = 128)]
    pub name: String,
    /// The value: 1 byte to 32 KiB of UTF-8, no NUL. Write-only: never returned, and a 422
    /// about it never echoes it.
    #[schema(value_type = String, min_length = 1, pattern = "^[^\\u0000]*$", write_only)]
    pub value: SecretValue,
    /// For people: at most 2000 characters. Default `""`.
    #[serde(default)]
    #[schema(max_length = 2000, default = "")]
    pub description: String,
}

/// The body of `PUT /api/secrets/{secret_id}`: a partial update despite the verb. A field
/// left out is unchanged; neither may be null (422). A `value` rotates the secret: each
/// session gets it at its next boot, running sandboxes keep the value they booted with. The
/// body is at most 256 KiB (413 above).
#[derive(Debug, Deserialize, ToSchema)]
pub struct SecretUpdate {
    /// The new value: 1 byte to 32 KiB of UTF-8, no NUL. Write-only.
    #[serde(default, deserialize_with = "crate::patch::non_null")]
    #[schema(value_type = String, min_length = 1, pattern = "^[^\\u0000]*$", write_only)]
    pub value: Option<SecretValue>,
    /// The new description: at most 2000 characters.
    #[serde(default, deserialize_with = "crate::patch::non_null")]
    #[schema(value_type = String, max_length = 2000)]
    pub description: Option<String>,
}

/// A secret name: an identifier of at most [`MAX_NAME`] characters.
pub fn check_name(v: &mut Violations, name: &str) {
    if !is_env_name(name) || name.len() > MAX_NAME {
        v.push(
            "value_error",
            &["name"],
            format!(
                "a secret name is an identifier of 1 to {MAX_NAME} characters: letters, digits \
                 and '_', not starting with a digit"
            ),
            Value::from(name),
        );
    }
}

/// A value: not empty, at most [`MAX_VALUE_BYTES`], no NUL (an environment variable cannot
/// hold one). The value itself is never echoed in the error.
pub fn check_value(v: &mut Violations, value: &SecretValue) {
    let msg = if value.0.is_empty() {
        Some("the value must not be empty".to_owned())
    } else if value.0.len() > MAX_VALUE_BYTES {
        Some(format!("the value must be at most {MAX_VALUE_BYTES} bytes"))
    } else if value.0.contains('\0') {
        Some("the value must not contain NUL characters".to_owned())
    } else {
        None
    };
    if let Some(msg) = msg {
        v.push("value_error", &["value"], msg, Value::Null);
    }
}

pub fn check_description(v: &mut Violations, description: &str) {
    if description.chars().count() > MAX_DESCRIPTION {
        v.push(
            "value_error",
            &["description"],
            format!("the description must be at most {MAX_DESCRIPTION} characters"),
            Value::Null,
        );
    }
}

impl SecretCreate {
    pub fn validate(&self, v: &mut Violations) {
        check_name(v, &self.name);
        check_value(v, &self.value);
        check_description(v, &self.description);
    }
}

impl SecretUpdate {
    pub fn validate(&self, v: &mut Violations) {
        if let Some(value) = &self.value {
            check_value(v, value);
        }
        if let Some(d) = &self.description {
            check_description(v, d);
        }
    }
}

/// The bindings a session's sandbox gets: the agent's plus the session's,
/// the session's winning per environment variable (variables by name, then every inject).
pub fn effective_bindings(
    agent: &[SecretBinding],
    session: &[SecretBinding],
) -> Vec<SecretBinding> {
    // Inject bindings set no variable, so none replaces another: all of them apply.
    let mut by_env = std::collections::BTreeMap::new();
    let mut injects = Vec::new();
    for b in agent.iter().chain(session) {
        if b.inject.is_some() {
            injects.push(b.clone());
        } else {
            by_env.insert(b.env.clone(), b.clone());
        }
    }
    by_env.into_values().chain(injects).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(secret: &str, env: &str) -> SecretBinding {
        SecretBinding::env(secret, env)
    }

    #[test]
    fn the_session_wins_per_variable() {
        let got = effective_bindings(&[b("a", "X"), b("b", "Y")], &[b("c", "Y"), b("d", "Z")]);
        assert_eq!(got, vec![b("a", "X"), b("c", "Y"), b("d", "Z")]);
    }

    #[test]
    fn every_inject_binding_applies_and_a_placeholder_wins_by_its_variable() {
        let inject = |secret: &str| -> SecretBinding {
            serde_json::from_value(serde_json::json!({"secret": secret,
                "inject": {"host": "a.test", "header": "X-Key"}}))
            .unwrap()
        };
        let placeholder: SecretBinding = serde_json::from_value(serde_json::json!({"secret": "p",
            "placeholder": {"env": "X", "hosts": ["a.test"]}}))
        .unwrap();
        let got = effective_bindings(
            &[b("a", "X"), inject("i1")],
            &[placeholder.clone(), inject("i2")],
        );
        assert_eq!(got, vec![placeholder, inject("i1"), inject("i2")]);
    }

    #[test]
    fn values_are_never_printed_or_echoed() {
        let body: SecretCreate = serde_json::from_str(r#"{"name":"K","value":"hunter2"}"#).unwrap();
        assert!(!format!("{body:?}").contains("hunter2"));
        let mut v = Violations::new();
        check_value(&mut v, &SecretValue("x\0y".into()));
        let errors = v.into_result().unwrap_err();
        assert_eq!(errors[0].input, Value::Null);
    }

    #[test]
    fn names_are_identifiers() {
        for ok in ["OPENAI_API_KEY", "_x", "a1"] {
            let mut v = Violations::new();
            check_name(&mut v, ok);
            assert!(v.into_result().is_ok(), "{ok}");
        }
        for bad in ["", "1a", "has-dash", "sp ace", &"x".repeat(MAX_NAME + 1)] {
            let mut v = Violations::new();
            check_name(&mut v, bad);
            assert!(v.into_result().is_err(), "{bad}");
        }
    }
}
