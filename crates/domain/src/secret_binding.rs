//! Secret bindings ([`SecretBinding`]): a secret of the project made a sandbox variable, or,
//! for egress (issue 36), a secret the sandbox never holds, added to its requests by the
//! egress proxy (`inject`), or held by the sandbox only as a placeholder that the proxy swaps
//! for the value in requests to the bound hosts (`placeholder`); and [`EgressCredential`],
//! what a boot resolves them into for the proxy. (`tools` re-exports the binding, where it
//! was first.)

use crate::manifest::is_env_name;
use crate::network::is_host_name;
use crate::validation::Violations;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

/// What `format` must hold exactly once: where the secret goes.
pub const VALUE_SLOT: &str = "{value}";
/// Most hosts a placeholder may be swapped for.
pub const MAX_PLACEHOLDER_HOSTS: usize = 16;
/// The longest host name.
pub const MAX_HOST: usize = 253;
/// The longest header name an inject binding may set.
pub const MAX_HEADER_NAME: usize = 256;
/// The longest `format` of an inject binding (the secret aside).
pub const MAX_FORMAT: usize = 1024;

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
    /// The host names the placeholder is swapped on: 1 to 16, each at most 253 characters.
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
    if i.header.len() > MAX_HEADER_NAME || !is_header_name(&i.header) {
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
    if i.format.len() > MAX_FORMAT {
        v.push(
            "too_long",
            &field("format"),
            format!("format is at most {MAX_FORMAT} characters"),
            Value::from(i.format.len()),
        );
    } else if i.format.matches(VALUE_SLOT).count() != 1 {
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

/// A secret of the project, by name, bound into the sandbox one of three ways: as an
/// environment variable of every command the sandbox runs (`exec` and the agent's shell
/// tool; `env` alone), as a header the egress proxy adds to requests to one host (`inject`:
/// the sandbox never holds the secret), or as a placeholder in a variable that the proxy
/// swaps for the secret in requests to the bound hosts (`placeholder`). Values are resolved
/// when the sandbox boots, so a rotation reaches a session at its next boot. A session bound
/// to a secret that does not exist is a 422, and a bound secret cannot be deleted (409).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(from = "RawSecretBinding")]
pub struct SecretBinding {
    /// The secret's `name` (not its id); not blank.
    #[schema(
        min_length = 1,
        pattern = "[^\\t\\n\\u000b\\f\\r \\u0085\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000]"
    )]
    pub secret: String,
    /// The environment variable it becomes: letters, digits and `_`, not starting with a
    /// digit. Where an agent and a session bind the same variable, the session's wins. With
    /// `placeholder`: left out or equal to `placeholder.env`, and shown equal to it. With
    /// `inject`: left out or `""`, and shown as `""` (the binding puts nothing in the
    /// environment; the field stays because clients published before `inject` require it).
    ///
    /// Required here because every binding shows it; a request may leave it out where the
    /// binding has `inject` or `placeholder`.
    #[serde(default)]
    #[schema(pattern = "^([A-Za-z_][A-Za-z0-9_]*)?$", required = true)]
    pub env: String,
    /// Bind the secret as a header the egress proxy adds (needs `--egress-proxy`); every
    /// inject binding of the agent and the session applies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inject: Option<SecretInject>,
    /// Bind the secret as a placeholder the egress proxy swaps for it (needs
    /// `--egress-proxy`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placeholder: Option<SecretPlaceholder>,
}

/// A binding as it arrives (or was stored): a placeholder binding that leaves `env` out
/// takes `placeholder.env`, so that every binding read has the variable it sets in `env`.
#[derive(Deserialize)]
struct RawSecretBinding {
    secret: String,
    #[serde(default)]
    env: String,
    #[serde(default)]
    inject: Option<SecretInject>,
    #[serde(default)]
    placeholder: Option<SecretPlaceholder>,
}

impl From<RawSecretBinding> for SecretBinding {
    fn from(r: RawSecretBinding) -> Self {
        let env = match (&r.placeholder, r.env.is_empty()) {
            (Some(p), true) => p.env.clone(),
            _ => r.env,
        };
        SecretBinding {
            secret: r.secret,
            env,
            inject: r.inject,
            placeholder: r.placeholder,
        }
    }
}

impl SecretBinding {
    /// A binding of `secret` as the variable `env` (the original form).
    pub fn env(secret: impl Into<String>, env: impl Into<String>) -> Self {
        SecretBinding {
            secret: secret.into(),
            env: env.into(),
            inject: None,
            placeholder: None,
        }
    }

    /// What the binding sets, for messages: the variable, or the header and host.
    pub fn target(&self) -> String {
        match &self.inject {
            Some(i) => format!("the {} header for {}", i.header, i.host),
            None => self.env.clone(),
        }
    }
}

/// Most bindings an agent, or a session, may have. Every sandbox command carries every bound
/// value (each up to 32 KiB), and the kernel bounds a command's environment.
pub const MAX_SECRET_BINDINGS: usize = 32;

pub fn validate_secret_bindings(bindings: &[SecretBinding], loc: &str, v: &mut Violations) {
    if bindings.len() > MAX_SECRET_BINDINGS {
        v.push(
            "too_long",
            &[loc],
            format!("at most {MAX_SECRET_BINDINGS} secret bindings"),
            Value::from(bindings.len()),
        );
    }
    for (i, b) in bindings.iter().enumerate() {
        let idx = i.to_string();
        if b.secret.trim().is_empty() {
            v.push(
                "value_error",
                &[loc, &idx, "secret"],
                "secret must name a secret",
                Value::from(""),
            );
        }
        if b.inject.is_some() || b.placeholder.is_some() {
            crate::secret_binding::validate_egress(b, loc, &idx, v);
        } else if !is_env_name(&b.env) {
            v.push(
                "value_error",
                &[loc, &idx, "env"],
                format!("'{}' is not a valid environment variable name", b.env),
                Value::from(b.env.as_str()),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
