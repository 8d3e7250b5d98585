//! Secret bindings for egress (issue 36): a secret the sandbox never holds, added to its
//! requests by the egress proxy (`inject`), or held by the sandbox only as a placeholder that
//! the proxy swaps for the value in requests to the bound hosts (`placeholder`); and
//! [`EgressCredential`], what a boot resolves them into for the proxy.

use crate::manifest::is_env_name;
use crate::network::is_host_name;
use crate::tools::SecretBinding;
use crate::validation::Violations;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

/// What `format` must hold exactly once: where the secret goes.
pub const VALUE_SLOT: &str = "{value}";
/// Most hosts a placeholder may be swapped for.
pub const MAX_PLACEHOLDER_HOSTS: usize = 16;

/// Headers the proxy owns or that describe one hop only: a credential set in one of them
/// would be dropped, or would change where the request goes.
const FORBIDDEN_HEADERS: &[&str] = &[
    "host",
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

/// A header the egress proxy sets on every HTTPS request to `host`, from the secret: the
/// sandbox never sees the value (whatever it sends in that header is replaced).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct SecretInject {
    /// The host name the header is for, e.g. `api.github.com` (no port, no wildcard).
    pub host: String,
    /// The header's name, e.g. `Authorization`; not `Host` nor a hop-by-hop header.
    pub header: String,
    /// The header's value, with `{value}` (exactly once) where the secret goes, e.g.
    /// `Bearer {value}`. Default `{value}`.
    #[serde(default = "default_format")]
    #[schema(default = "{value}")]
    pub format: String,
}

fn default_format() -> String {
    VALUE_SLOT.to_owned()
}

/// The sandbox's variable `env` holds a placeholder instead of the secret (the same at every
/// boot of the session, and useless elsewhere); the egress proxy swaps it for the value in
/// the headers of HTTPS requests to `hosts` only, so tools that read a token from their
/// environment work unchanged.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct SecretPlaceholder {
    /// The environment variable that holds the placeholder.
    #[schema(pattern = "^[A-Za-z_][A-Za-z0-9_]*$", min_length = 1)]
    pub env: String,
    /// The host names the placeholder is swapped on: 1 to 16.
    #[schema(min_items = 1, max_items = 16)]
    pub hosts: Vec<String>,
}

/// A credential the egress proxy applies for a session, resolved from its bindings at boot
/// and stored sealed beside the sandbox's variables (never in the sandbox).
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EgressCredential {
    /// Host names (lowercase) the credential is applied on.
    pub hosts: Vec<String>,
    #[serde(flatten)]
    pub kind: EgressCredentialKind,
}

#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum EgressCredentialKind {
    /// Set `header` to `value` (the secret with the binding's `format` applied).
    Inject { header: String, value: String },
    /// Replace `placeholder` with `value` (the secret) in the headers.
    Swap { placeholder: String, value: String },
}

impl std::fmt::Debug for EgressCredential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the value, nor the placeholder (which stands for it).
        let kind = match &self.kind {
            EgressCredentialKind::Inject { header, .. } => format!("inject {header}"),
            EgressCredentialKind::Swap { .. } => "swap".to_owned(),
        };
        f.debug_struct("EgressCredential")
            .field("hosts", &self.hosts)
            .field("kind", &kind)
            .finish()
    }
}

/// An HTTP header name (RFC 9110 token characters).
pub fn is_header_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// The 422s of binding `idx` of the list at `loc` that concern `inject` and `placeholder`
/// (the plain `env` form is checked by `tools::validate_secret_bindings`).
pub(crate) fn validate_egress(b: &SecretBinding, loc: &str, idx: &str, v: &mut Violations) {
    match (&b.inject, &b.placeholder) {
        (Some(_), Some(_)) => v.push(
            "value_error",
            &[loc, idx],
            "a binding is an environment variable, an inject or a placeholder: give inject or placeholder, not both",
            Value::Null,
        ),
        (Some(inject), None) => {
            if !b.env.is_empty() {
                v.push(
                    "value_error",
                    &[loc, idx, "env"],
                    "an inject binding puts nothing in the sandbox's environment; leave env out",
                    Value::from(b.env.as_str()),
                );
            }
            validate_inject(inject, &[loc, idx, "inject"], v);
        }
        (None, Some(placeholder)) => {
            if !b.env.is_empty() && b.env != placeholder.env {
                v.push(
                    "value_error",
                    &[loc, idx, "env"],
                    format!(
                        "env must be left out or equal placeholder.env ('{}')",
                        placeholder.env
                    ),
                    Value::from(b.env.as_str()),
                );
            }
            validate_placeholder(placeholder, &[loc, idx, "placeholder"], v);
        }
        (None, None) => {}
    }
}

fn validate_inject(i: &SecretInject, at: &[&str], v: &mut Violations) {
    let field = |f: &'static str| [at, &[f]].concat();
    if !is_host_name(&i.host) {
        v.push(
            "value_error",
            &field("host"),
            format!(
                "'{}' is not a host name (no scheme, port or wildcard)",
                i.host
            ),
            Value::from(i.host.as_str()),
        );
    }
    if !is_header_name(&i.header) {
        v.push(
            "value_error",
            &field("header"),
            format!("'{}' is not a header name", i.header),
            Value::from(i.header.as_str()),
        );
    } else if FORBIDDEN_HEADERS.contains(&i.header.to_ascii_lowercase().as_str()) {
        v.push(
            "value_error",
            &field("header"),
            format!(
                "'{}' is Host or a hop-by-hop header, which the proxy does not forward as set; bind another header",
                i.header
            ),
            Value::from(i.header.as_str()),
        );
    }
    if i.format.matches(VALUE_SLOT).count() != 1 {
        v.push(
            "value_error",
            &field("format"),
            "format must contain {value} exactly once, where the secret goes (e.g. \"Bearer {value}\")",
            Value::from(i.format.as_str()),
        );
    }
}

fn validate_placeholder(p: &SecretPlaceholder, at: &[&str], v: &mut Violations) {
    let field = |f: &'static str| [at, &[f]].concat();
    if !is_env_name(&p.env) {
        v.push(
            "value_error",
            &field("env"),
            format!("'{}' is not a valid environment variable name", p.env),
            Value::from(p.env.as_str()),
        );
    }
    if p.hosts.is_empty() || p.hosts.len() > MAX_PLACEHOLDER_HOSTS {
        v.push(
            "value_error",
            &field("hosts"),
            format!("a placeholder is swapped on 1 to {MAX_PLACEHOLDER_HOSTS} hosts"),
            Value::from(p.hosts.len()),
        );
    }
    for (j, h) in p.hosts.iter().enumerate() {
        if !is_host_name(h) {
            let j = j.to_string();
            v.push(
                "value_error",
                &[at, &["hosts", j.as_str()]].concat(),
                format!("'{h}' is not a host name (no scheme, port or wildcard)"),
                Value::from(h.as_str()),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::validate_secret_bindings;

    fn binding(json: &str) -> SecretBinding {
        serde_json::from_str(json).unwrap()
    }

    /// The `loc`s of the 422s, without the leading `body`.
    fn errors(json: &str) -> Vec<String> {
        let mut v = Violations::new();
        validate_secret_bindings(&[binding(json)], "secret_bindings", &mut v);
        v.into_result()
            .err()
            .unwrap_or_default()
            .iter()
            .map(|e| {
                e.loc[1..]
                    .iter()
                    .map(|p| p.as_str().map_or(p.to_string(), str::to_owned))
                    .collect::<Vec<_>>()
                    .join(".")
            })
            .collect()
    }

    #[test]
    fn the_three_shapes_are_accepted() {
        assert!(errors(r#"{"secret":"S","env":"TOKEN"}"#).is_empty());
        assert!(errors(
            r#"{"secret":"S","inject":{"host":"api.github.com","header":"Authorization","format":"Bearer {value}"}}"#
        )
        .is_empty());
        assert!(
            errors(r#"{"secret":"S","env":"","inject":{"host":"a.test","header":"X-Key"}}"#)
                .is_empty()
        );
        assert!(
            errors(r#"{"secret":"S","placeholder":{"env":"T","hosts":["a.test"]}}"#).is_empty()
        );
        assert!(
            errors(r#"{"secret":"S","env":"T","placeholder":{"env":"T","hosts":["a.test"]}}"#)
                .is_empty()
        );
    }

    #[test]
    fn a_placeholder_binding_takes_its_variable_from_the_placeholder() {
        let b = binding(r#"{"secret":"S","placeholder":{"env":"T","hosts":["a.test"]}}"#);
        assert_eq!(b.env, "T");
        let shown = serde_json::to_value(&b).unwrap();
        assert_eq!(shown["env"], "T");
        let b = binding(r#"{"secret":"S","inject":{"host":"a.test","header":"X"}}"#);
        assert_eq!(serde_json::to_value(&b).unwrap()["env"], "");
        assert_eq!(b.inject.unwrap().format, "{value}");
        // A binding stored before egress bindings reads as it was, and shows no new fields.
        let old = binding(r#"{"secret":"S","env":"T"}"#);
        assert_eq!(
            serde_json::to_value(&old).unwrap(),
            serde_json::json!({"secret":"S","env":"T"})
        );
    }

    #[test]
    fn each_bad_shape_is_a_422_at_its_field() {
        let inject = |fields: &str| {
            errors(&format!(
                r#"{{"secret":"S","inject":{{"host":"a.test","header":"X",{fields}}}}}"#
            ))
        };
        assert_eq!(
            inject(r#""format":"Bearer""#),
            ["secret_bindings.0.inject.format"]
        );
        assert_eq!(
            inject(r#""format":"{value}{value}""#),
            ["secret_bindings.0.inject.format"]
        );
        assert_eq!(
            errors(r#"{"secret":"S","inject":{"host":"a.test","header":"Proxy-Authorization"}}"#),
            ["secret_bindings.0.inject.header"]
        );
        assert_eq!(
            errors(r#"{"secret":"S","inject":{"host":"a.test","header":"Host"}}"#),
            ["secret_bindings.0.inject.header"]
        );
        assert_eq!(
            errors(r#"{"secret":"S","inject":{"host":"a.test","header":"Bad Header"}}"#),
            ["secret_bindings.0.inject.header"]
        );
        assert_eq!(
            errors(r#"{"secret":"S","inject":{"host":"https://a.test","header":"X"}}"#),
            ["secret_bindings.0.inject.host"]
        );
        assert_eq!(
            errors(r#"{"secret":"S","env":"T","inject":{"host":"a.test","header":"X"}}"#),
            ["secret_bindings.0.env"]
        );
        assert_eq!(
            errors(r#"{"secret":"S","env":"U","placeholder":{"env":"T","hosts":["a.test"]}}"#),
            ["secret_bindings.0.env"]
        );
        assert_eq!(
            errors(r#"{"secret":"S","placeholder":{"env":"1T","hosts":["a.test"]}}"#),
            ["secret_bindings.0.placeholder.env"]
        );
        assert_eq!(
            errors(r#"{"secret":"S","placeholder":{"env":"T","hosts":[]}}"#),
            ["secret_bindings.0.placeholder.hosts"]
        );
        let many: Vec<String> = (0..17).map(|i| format!("\"h{i}.test\"")).collect();
        assert_eq!(
            errors(&format!(
                r#"{{"secret":"S","placeholder":{{"env":"T","hosts":[{}]}}}}"#,
                many.join(",")
            )),
            ["secret_bindings.0.placeholder.hosts"]
        );
        assert_eq!(
            errors(r#"{"secret":"S","placeholder":{"env":"T","hosts":["a.test","*.b.test"]}}"#),
            ["secret_bindings.0.placeholder.hosts.1"]
        );
        assert_eq!(
            errors(
                r#"{"secret":"S","inject":{"host":"a.test","header":"X"},"placeholder":{"env":"T","hosts":["a.test"]}}"#
            ),
            ["secret_bindings.0"]
        );
        assert_eq!(errors(r#"{"secret":"S"}"#), ["secret_bindings.0.env"]);
    }

    #[test]
    fn debug_shows_neither_value_nor_placeholder() {
        let c = EgressCredential {
            hosts: vec!["a.test".into()],
            kind: EgressCredentialKind::Swap {
                placeholder: "sa-ph-abc".into(),
                value: "hunter2".into(),
            },
        };
        let shown = format!("{c:?}");
        assert!(
            !shown.contains("hunter2") && !shown.contains("sa-ph-abc"),
            "{shown}"
        );
    }
}
