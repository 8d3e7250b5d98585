//! Environments: named sandbox configurations of a project (a backend, an image, packages)
//! that sessions start in. On a backend that builds images (Docker's does) the packages are
//! baked into an image when the configuration is saved; a session boots that image once its
//! build is ready.

use crate::network::NetworkPolicy;
use crate::validation::Violations;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use time::OffsetDateTime;
use utoipa::ToSchema;

/// Longest name, in characters.
pub const MAX_NAME_LEN: usize = 128;
/// Longest description, in characters.
pub const MAX_DESCRIPTION_LEN: usize = 4_000;
/// Most packages one manager may list.
pub const MAX_PACKAGES: usize = 200;
/// Longest package entry, in characters.
pub const MAX_PACKAGE_LEN: usize = 200;
/// Most metadata keys.
pub const MAX_METADATA_KEYS: usize = 64;
/// The longest metadata key, in bytes.
pub const MAX_METADATA_KEY_BYTES: usize = 256;
/// The longest metadata value, in bytes.
pub const MAX_METADATA_VALUE_BYTES: usize = 4096;
/// The longest image reference, in bytes.
pub const MAX_IMAGE_LEN: usize = 255;
/// The only networking a server runs today.
pub const NETWORKING_UNRESTRICTED: &str = "unrestricted";
/// Networking the contract names and this server refuses (400): `network` says what a
/// sandbox may reach instead.
pub const NETWORKING_LIMITED: &str = "limited";

/// What is installed before the agent starts, per manager, each entry in that manager's own
/// syntax (`express@4.18.0`, `sqlalchemy==2.0.30`, `rails:7.1.0`). They install in the order
/// of the fields: apt, cargo, gem, go, npm, pip.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
pub struct Packages {
    /// Debian packages (`jq`, `curl=7.88.1-10+deb12u5`), installed as root.
    #[serde(default, deserialize_with = "crate::patch::non_null")]
    pub apt: Vec<String>,
    /// Crates installed with `cargo install` (`ripgrep`, `ripgrep@14.1.0`); the image must
    /// have cargo.
    #[serde(default, deserialize_with = "crate::patch::non_null")]
    pub cargo: Vec<String>,
    /// Gems (`rails`, `rails:7.1.0`); the image must have gem.
    #[serde(default, deserialize_with = "crate::patch::non_null")]
    pub gem: Vec<String>,
    /// Go programs installed with `go install` (`golang.org/x/tools/cmd/goimports@latest`;
    /// `@latest` when no version is given); the image must have go.
    #[serde(default, deserialize_with = "crate::patch::non_null")]
    pub go: Vec<String>,
    /// npm packages installed globally (`express@4.18.0`); the image must have npm.
    #[serde(default, deserialize_with = "crate::patch::non_null")]
    pub npm: Vec<String>,
    /// Python packages installed with `pip install --user` as the sandbox user
    /// (`sqlalchemy==2.0.30`).
    #[serde(default, deserialize_with = "crate::patch::non_null")]
    pub pip: Vec<String>,
}

impl Packages {
    /// Each manager's name and its entries, in install order.
    pub fn by_manager(&self) -> [(&'static str, &[String]); 6] {
        [
            ("apt", &self.apt),
            ("cargo", &self.cargo),
            ("gem", &self.gem),
            ("go", &self.go),
            ("npm", &self.npm),
            ("pip", &self.pip),
        ]
    }

    pub fn is_empty(&self) -> bool {
        self.by_manager().iter().all(|(_, p)| p.is_empty())
    }

    fn validate(&self, v: &mut Violations) {
        for (manager, entries) in self.by_manager() {
            if entries.len() > MAX_PACKAGES {
                v.push(
                    "too_long",
                    &["config", "packages", manager],
                    format!("at most {MAX_PACKAGES} {manager} packages are accepted"),
                    Value::Null,
                );
            }
            for (i, entry) in entries.iter().enumerate() {
                if let Err(msg) = check_package(entry) {
                    let index = i.to_string();
                    v.push(
                        "value_error",
                        &["config", "packages", manager, &index],
                        format!("{manager} package '{entry}' {msg}"),
                        Value::from(entry.as_str()),
                    );
                }
            }
        }
    }
}

/// A package entry goes into a shell command of the build, single-quoted: it must be one
/// word of printable ASCII without quotes, backslashes or `$`, and not look like an option.
fn check_package(entry: &str) -> Result<(), String> {
    if entry.is_empty() {
        return Err("is empty".into());
    }
    if entry.chars().count() > MAX_PACKAGE_LEN {
        return Err(format!("is longer than {MAX_PACKAGE_LEN} characters"));
    }
    if entry.starts_with('-') {
        return Err("starts with '-'; options are not accepted, only package names".into());
    }
    if let Some(c) = entry.chars().find(|c| {
        !c.is_ascii_graphic() || matches!(c, '\'' | '"' | '\\' | '`' | '$' | ';' | '&' | '|')
    }) {
        return Err(format!(
            "holds {c:?}; a package is one word in its manager's syntax (e.g. express@4.18.0, sqlalchemy==2.0.30, rails:7.1.0)"
        ));
    }
    Ok(())
}

/// The contract's networking switch. Only `unrestricted` runs; `limited` is refused with a
/// 400: to limit what a sandbox reaches, set the configuration's `network` (`egress:
/// "allowlist"` with its `allow` entries and `presets`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
pub struct Networking {
    /// `unrestricted` (`limited` is refused by this server; use `config.network`).
    #[serde(rename = "type", default = "unrestricted")]
    #[schema(example = "unrestricted")]
    pub kind: String,
}

fn unrestricted() -> String {
    NETWORKING_UNRESTRICTED.to_owned()
}

impl Default for Networking {
    fn default() -> Self {
        Networking {
            kind: unrestricted(),
        }
    }
}

/// What a session of the environment boots: the backend, the image, the packages baked in.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
pub struct EnvironmentConfig {
    /// One of `GET /api/backends` (400 otherwise); null: the server's default.
    #[serde(default)]
    pub backend: Option<String>,
    /// The container image to start from; null: the server's default image. On Docker the
    /// packages are installed on top of it.
    #[serde(default)]
    pub image: Option<String>,
    #[serde(default, deserialize_with = "crate::patch::non_null")]
    pub packages: Packages,
    /// Default `{"type": "unrestricted"}`.
    #[serde(default, deserialize_with = "crate::patch::non_null")]
    pub networking: Networking,
    /// What its sessions' sandboxes may connect to, besides what their agent's policy
    /// permits: both must (layers narrow). A session copies it when it is created; an edit
    /// applies to sessions created afterwards and builds nothing. Default
    /// `{"egress": "open"}`; not null.
    #[serde(default, deserialize_with = "crate::patch::non_null")]
    pub network: NetworkPolicy,
    /// The runtime its sessions' sandboxes run under (a Kubernetes RuntimeClass: gVisor,
    /// Kata), one of those the server offers (`runtime_classes` in `GET /api/backends`, 422
    /// otherwise), unless their agent names one; null: the server's default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(
        min_length = 1,
        max_length = 253,
        pattern = "^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"
    )]
    pub runtime_class: Option<String>,
}

impl EnvironmentConfig {
    /// The 422s: a blank image, bad package entries, an unknown networking type, a bad
    /// network policy. A backend
    /// the server cannot run and `limited` networking are 400s ([`EnvironmentConfig::refusal`]).
    pub fn validate(&self, v: &mut Violations) {
        if let Some(image) = &self.image {
            if image.trim().is_empty()
                || image.chars().any(|c| c.is_whitespace())
                || image.len() > MAX_IMAGE_LEN
            {
                v.push(
                    "value_error",
                    &["config", "image"],
                    "image must be an image reference such as python:3.12-slim (no spaces, at most 255 characters); send null for the server's default",
                    Value::from(image.as_str()),
                );
            }
        }
        if let Some(backend) = &self.backend {
            if backend.trim().is_empty() {
                v.push(
                    "value_error",
                    &["config", "backend"],
                    "backend must not be empty; send null for the server's default",
                    Value::from(backend.as_str()),
                );
            }
        }
        let kind = self.networking.kind.as_str();
        if kind != NETWORKING_UNRESTRICTED && kind != NETWORKING_LIMITED {
            v.literal(
                &["config", "networking", "type"],
                &[NETWORKING_UNRESTRICTED, NETWORKING_LIMITED],
                kind,
            );
        }
        self.packages.validate(v);
        self.network.validate(v, &["config", "network"]);
        crate::runtime_class::validate(
            self.runtime_class.as_deref(),
            v,
            &["config", "runtime_class"],
        );
    }

    /// Why the server refuses to run this configuration (a 400), given the backends it runs.
    pub fn refusal(&self, backends: &[String]) -> Option<String> {
        if let Some(b) = &self.backend {
            if !backends.iter().any(|n| n == b) {
                return Some(format!(
                    "backend '{b}' is not available on this server; use one of: {} (GET /api/backends), or null for the default",
                    backends.join(", ")
                ));
            }
        }
        if self.networking.kind == NETWORKING_LIMITED {
            return Some(
                "networking type 'limited' is not supported by this server; keep 'unrestricted' and limit the network with config.network, e.g. {\"egress\": \"allowlist\", \"allow\": [\"pypi.org\"], \"presets\": [\"github\"]}"
                    .into(),
            );
        }
        None
    }
}

/// `none` (nothing to build: no packages, or not on Docker), `building`, `ready` (the image
/// exists) or `failed` (see `error`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum EnvironmentBuildStatus {
    None,
    Building,
    Ready,
    Failed,
}

/// The image build of the environment's current configuration.
#[derive(Clone, Debug, PartialEq, Serialize, ToSchema)]
pub struct EnvironmentBuild {
    pub status: EnvironmentBuildStatus,
    /// The built image, once `ready` (the one sessions boot).
    pub image: Option<String>,
    /// Why the build failed: which package manager, and its output's last lines.
    pub error: Option<String>,
}

impl EnvironmentBuild {
    pub fn none() -> Self {
        EnvironmentBuild {
            status: EnvironmentBuildStatus::None,
            image: None,
            error: None,
        }
    }
}

/// A named sandbox configuration of the project.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct Environment {
    /// The environment's id (a UUID).
    pub id: String,
    /// Unique in the project.
    pub name: String,
    pub description: String,
    pub config: EnvironmentConfig,
    /// The caller's own string values.
    pub metadata: BTreeMap<String, String>,
    pub build: EnvironmentBuild,
    /// Set once archived (one-way): new sessions in it are refused, running ones go on.
    #[serde(with = "time::serde::rfc3339::option")]
    pub archived_at: Option<OffsetDateTime>,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339")]
    pub updated_at: OffsetDateTime,
}

/// The body of `POST /api/environments`.
#[derive(Debug, Deserialize, ToSchema)]
pub struct EnvironmentCreate {
    /// Unique in the project (409 when taken): 1 to 128 characters, no `/`, not blank.
    #[schema(min_length = 1, max_length = 128)]
    pub name: String,
    /// For people. Default `""`.
    #[serde(default, deserialize_with = "crate::patch::non_null")]
    #[schema(default = "", max_length = 4000)]
    pub description: String,
    /// Default: the server's backend and image, no packages.
    #[serde(default, deserialize_with = "config_object")]
    pub config: EnvironmentConfig,
    /// String values only. Default `{}`.
    #[serde(default, deserialize_with = "crate::patch::non_null")]
    pub metadata: BTreeMap<String, String>,
}

impl EnvironmentCreate {
    pub fn validate(&self, v: &mut Violations) {
        validate_name(&self.name, v);
        validate_description(&self.description, v);
        validate_metadata(&self.metadata, v);
        self.config.validate(v);
    }
}

/// The body of `PATCH /api/environments/{ref}`: every field optional, none nullable.
/// `config` replaces the whole configuration (and builds again when it changed); `metadata`
/// replaces the whole map (keys left out are removed), as `config` does.
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct EnvironmentPatch {
    // Not nullable (null is a 422): documented as the plain type.
    #[serde(default, deserialize_with = "some_non_null")]
    #[schema(value_type = String, min_length = 1, max_length = 128)]
    pub name: Option<String>,
    #[serde(default, deserialize_with = "some_non_null")]
    #[schema(value_type = String)]
    pub description: Option<String>,
    /// Replaces the whole configuration.
    #[serde(default, deserialize_with = "some_config_object")]
    #[schema(value_type = EnvironmentConfig)]
    pub config: Option<EnvironmentConfig>,
    /// Replaces the whole map.
    #[serde(default, deserialize_with = "some_non_null")]
    #[schema(value_type = BTreeMap<String, String>)]
    pub metadata: Option<BTreeMap<String, String>>,
}

/// A configuration as the document describes it: a JSON object. serde's derived struct
/// parsing also takes an array of the fields in order (so `[]` was every default, and a
/// 201), which the document never promised and no client means.
fn config_object<'de, D>(d: D) -> Result<EnvironmentConfig, D::Error>
where
    D: serde::Deserializer<'de>,
{
    match crate::patch::non_null::<D, Value>(d)? {
        v @ Value::Object(_) => serde_json::from_value(v).map_err(serde::de::Error::custom),
        _ => Err(serde::de::Error::custom("Input should be an object")),
    }
}

fn some_config_object<'de, D>(d: D) -> Result<Option<EnvironmentConfig>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    config_object(d).map(Some)
}

fn some_non_null<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    crate::patch::non_null(d).map(Some)
}

impl EnvironmentPatch {
    pub fn validate(&self, v: &mut Violations) {
        if let Some(n) = &self.name {
            validate_name(n, v);
        }
        if let Some(d) = &self.description {
            validate_description(d, v);
        }
        if let Some(m) = &self.metadata {
            validate_metadata(m, v);
        }
        if let Some(c) = &self.config {
            c.validate(v);
        }
    }
}

/// What [`validate_name`] takes, but its length and the UUID shape, as a regular expression
/// (for the OpenAPI document): no `/`, no control character (Unicode's Cc), not blank
/// (Rust's `char::is_whitespace`).
pub const NAME_PATTERN: &str = "^[^/\\u0000-\\u001f\\u007f-\\u009f]*[^/\\u0000-\\u0020\\u007f-\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000][^/\\u0000-\\u001f\\u007f-\\u009f]*$";

fn validate_name(name: &str, v: &mut Violations) {
    let msg = if name.trim().is_empty() {
        Some("name must not be blank".to_owned())
    } else if name.chars().count() > MAX_NAME_LEN {
        Some(format!("name must be at most {MAX_NAME_LEN} characters"))
    } else if name.contains('/') || name.chars().any(|c| c.is_control()) {
        Some("name must not contain '/' or control characters (it appears in URLs)".to_owned())
    } else if uuid::Uuid::try_parse(name).is_ok() {
        Some(
            "name must not be shaped like a UUID (environments are named by id or name)".to_owned(),
        )
    } else {
        None
    };
    if let Some(msg) = msg {
        v.push("value_error", &["name"], msg, Value::from(name));
    }
}

fn validate_description(d: &str, v: &mut Violations) {
    if d.chars().count() > MAX_DESCRIPTION_LEN {
        v.push(
            "value_error",
            &["description"],
            format!("the description must be at most {MAX_DESCRIPTION_LEN} characters"),
            Value::Null,
        );
    }
}

fn validate_metadata(m: &BTreeMap<String, String>, v: &mut Violations) {
    if m.len() > MAX_METADATA_KEYS {
        v.push(
            "value_error",
            &["metadata"],
            format!("metadata may hold at most {MAX_METADATA_KEYS} keys"),
            Value::Null,
        );
    }
    if m.iter()
        .any(|(k, val)| k.len() > MAX_METADATA_KEY_BYTES || val.len() > MAX_METADATA_VALUE_BYTES)
    {
        v.push(
            "value_error",
            &["metadata"],
            "metadata keys must be at most 256 bytes and values at most 4096",
            Value::Null,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_fill_a_missing_config_and_null_is_refused() {
        let c: EnvironmentCreate = serde_json::from_str(r#"{"name":"py"}"#).unwrap();
        assert_eq!(c.config.networking.kind, "unrestricted");
        assert!(c.config.packages.is_empty());
        assert!(
            serde_json::from_str::<EnvironmentCreate>(r#"{"name":"py","config":null}"#).is_err()
        );
        assert!(serde_json::from_str::<EnvironmentPatch>(r#"{"metadata":null}"#).is_err());
        let p: EnvironmentPatch = serde_json::from_str("{}").unwrap();
        assert!(p.config.is_none() && p.metadata.is_none());
    }

    #[test]
    fn package_entries_are_single_safe_words() {
        for ok in [
            "express@4.18.0",
            "sqlalchemy==2.0.30",
            "rails:7.1.0",
            "requests[socks]>=2",
            "@scope/pkg@1",
        ] {
            assert!(check_package(ok).is_ok(), "{ok}");
        }
        for bad in ["", "-e .", "a b", "x;rm", "it's", "$(id)", "a\nb"] {
            assert!(check_package(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn limited_networking_and_unknown_backends_are_refusals_not_violations() {
        let mut c = EnvironmentConfig::default();
        c.networking.kind = "limited".into();
        let mut v = Violations::new();
        c.validate(&mut v);
        assert!(v.is_empty());
        let refusal = c.refusal(&["docker".into()]).unwrap();
        assert!(refusal.contains("limited"), "{refusal}");
        assert!(refusal.contains("config.network"), "{refusal}");
        assert!(refusal.contains("\"allowlist\""), "{refusal}");
        c.networking.kind = "unrestricted".into();
        c.backend = Some("e2b".into());
        assert!(c.refusal(&["docker".into()]).unwrap().contains("e2b"));
    }
}
