//! Projects, API keys and people as the wire shows them, and the rules for their inputs. A key's secret appears exactly once, in [`ApiKeyCreated`].

use crate::validation::Violations;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use time::OffsetDateTime;
use utoipa::ToSchema;

/// `Project`. `role` is the caller's: `admin`/`member` for a person, null for a credential
/// that reaches projects without a membership (the shared token, an API key, open mode).
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct Project {
    pub id: String,
    pub slug: String,
    pub name: String,
    pub description: String,
    #[serde(with = "time::serde::rfc3339::option")]
    pub created_at: Option<OffsetDateTime>,
    #[serde(with = "time::serde::rfc3339::option")]
    pub updated_at: Option<OffsetDateTime>,
    pub role: Option<String>,
}

/// `POST /api/projects`.
#[derive(Debug, Deserialize, ToSchema)]
pub struct ProjectCreate {
    pub name: String,
    /// Empty: derived from the name. Immutable afterwards.
    #[serde(default)]
    pub slug: String,
    #[serde(default)]
    pub description: String,
}

/// `PATCH /api/projects/{ref}`: absent fields are unchanged; null is refused.
#[derive(Debug, Deserialize, ToSchema)]
pub struct ProjectPatch {
    #[serde(default, deserialize_with = "crate::patch::non_null")]
    pub name: Option<String>,
    #[serde(default, deserialize_with = "crate::patch::non_null")]
    pub description: Option<String>,
}

/// Lowercase, runs of anything else as one `-`, trimmed, at most 63 characters; `project`
/// when nothing is left, and never shaped like a UUID. Collisions get a numeric suffix from
/// the caller.
pub fn slug_from_name(name: &str) -> String {
    let mut s = String::new();
    for c in name.trim().chars().flat_map(char::to_lowercase) {
        if c.is_ascii_alphanumeric() {
            s.push(c);
        } else if !s.ends_with('-') {
            s.push('-');
        }
    }
    let mut s = s.trim_matches('-').to_owned();
    s.truncate(56); // room for a "-NNNNNN" suffix
    let s = s.trim_end_matches('-').to_owned();
    if s.is_empty() || uuid::Uuid::try_parse(&s).is_ok() {
        "project".into()
    } else {
        s
    }
}

impl ProjectCreate {
    pub fn validate(&self, v: &mut Violations) {
        if self.name.trim().is_empty() {
            v.push(
                "string_too_short",
                &["name"],
                "name must not be empty",
                Value::from(self.name.as_str()),
            );
        }
        if !self.slug.is_empty() {
            if let Err(e) = crate::Slug::parse(&self.slug) {
                v.push("value_error", &["slug"], e, Value::from(self.slug.as_str()));
            }
        }
    }
}

/// `ApiKey`: never the key itself.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct ApiKey {
    pub id: String,
    pub name: String,
    pub description: String,
    /// The project the key is bound to; null = every project.
    pub project_id: Option<String>,
    /// The key's first characters, to recognise it (`ak_1a2b3c4d`).
    pub prefix: String,
    pub created_by: Option<String>,
    #[serde(with = "time::serde::rfc3339::option")]
    pub created_at: Option<OffsetDateTime>,
    #[serde(with = "time::serde::rfc3339::option")]
    pub last_used_at: Option<OffsetDateTime>,
    #[serde(with = "time::serde::rfc3339::option")]
    pub expires_at: Option<OffsetDateTime>,
    #[serde(with = "time::serde::rfc3339::option")]
    pub revoked_at: Option<OffsetDateTime>,
}

/// `ApiKeyCreated`: the one response that carries the whole key.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct ApiKeyCreated {
    #[serde(flatten)]
    pub key_info: ApiKey,
    /// The full secret, starting with `ak_`. Shown once; only its hash is stored.
    pub key: String,
}

/// `POST /api/api-keys`.
#[derive(Debug, Deserialize, ToSchema)]
pub struct ApiKeyCreate {
    pub name: String,
    #[serde(default)]
    pub description: String,
    /// ISO 8601; without an offset it is UTC. Null = never expires.
    #[serde(default)]
    pub expires_at: Option<String>,
}

/// Parses `expires_at` as the client sends it (`isoformat()`, with or without an offset;
/// naive means UTC).
pub fn parse_timestamp(s: &str) -> Result<OffsetDateTime, String> {
    use time::format_description::well_known::Rfc3339;
    if let Ok(t) = OffsetDateTime::parse(s, &Rfc3339) {
        return Ok(t);
    }
    let naive = time::macros::format_description!(
        version = 2,
        "[year]-[month]-[day][first [T] [ ]][hour]:[minute][optional [:[second][optional [.[subsecond]]]]]"
    );
    time::PrimitiveDateTime::parse(s, &naive)
        .map(|t| t.assume_utc())
        .or_else(|_| {
            time::Date::parse(s, time::macros::format_description!("[year]-[month]-[day]"))
                .map(|d| d.midnight().assume_utc())
        })
        .map_err(|_| format!("'{s}' is not an ISO 8601 date and time"))
}

impl ApiKeyCreate {
    /// Checks the body; returns the parsed expiry.
    pub fn validate(&self, v: &mut Violations) -> Option<OffsetDateTime> {
        if self.name.trim().is_empty() {
            v.push(
                "string_too_short",
                &["name"],
                "name must not be empty",
                Value::from(self.name.as_str()),
            );
        }
        let raw = self.expires_at.as_deref()?;
        match parse_timestamp(raw) {
            Ok(t) => Some(t),
            Err(e) => {
                v.push("datetime_parsing", &["expires_at"], e, Value::from(raw));
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs_derive_from_names() {
        assert_eq!(slug_from_name("Data Science — EU"), "data-science-eu");
        assert_eq!(slug_from_name("  ***  "), "project");
        assert_eq!(slug_from_name("Ärger"), "rger");
        assert!(slug_from_name(&"x".repeat(200)).len() <= 56);
    }

    #[test]
    fn expiry_accepts_offsets_and_naive_utc() {
        let a = parse_timestamp("2030-01-01T00:00:00+00:00").unwrap();
        let b = parse_timestamp("2030-01-01T00:00:00").unwrap();
        let c = parse_timestamp("2030-01-01T01:00:00.123456+01:00").unwrap();
        assert_eq!(a, b);
        assert_eq!(a.unix_timestamp(), c.unix_timestamp());
        assert!(parse_timestamp("next tuesday").is_err());
    }
}

/// `User`: a person who can sign in.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct User {
    pub id: String,
    pub email: String,
    pub name: String,
    /// `active` or `inactive`.
    pub state: String,
    pub verified: bool,
    /// May manage people, keys and projects deployment-wide, like the shared token. An
    /// addition to the client's `User` (which keeps unknown fields).
    pub operator: bool,
    #[serde(with = "time::serde::rfc3339::option")]
    pub created_at: Option<OffsetDateTime>,
}

/// `UserCreated`: with the single-use recovery secret when the account has no password yet.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct UserCreated {
    #[serde(flatten)]
    pub user: User,
    pub recovery_url: Option<String>,
    pub recovery_code: Option<String>,
}

/// `Recovery`: a fresh single-use recovery secret (the link alone works; the code is the same
/// secret, to type in).
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct Recovery {
    pub recovery_url: String,
    pub recovery_code: String,
}

/// `POST /api/users`.
#[derive(Debug, Deserialize, ToSchema)]
pub struct UserCreate {
    pub email: String,
    #[serde(default)]
    pub name: String,
    /// Null: no password; the answer carries a recovery link instead.
    #[serde(default)]
    pub password: Option<String>,
    /// An operator (an addition; the client never sends it). The first person made while the
    /// deployment is open is one whatever this says, so that closing it never locks everyone
    /// out.
    #[serde(default)]
    pub operator: bool,
}

/// `PATCH /api/users/{identity_id}` (an addition to the client's routes): absent fields are
/// unchanged; null is refused.
#[derive(Debug, Deserialize, ToSchema)]
pub struct UserPatch {
    #[serde(default, deserialize_with = "crate::patch::non_null")]
    pub name: Option<String>,
    #[serde(default, deserialize_with = "crate::patch::non_null")]
    pub operator: Option<bool>,
}

/// Passwords are at least this long.
pub const MIN_PASSWORD_CHARS: usize = 10;

/// Checks an email's shape (something@something.tld, no spaces).
pub fn is_email(s: &str) -> bool {
    let Some((local, domain)) = s.split_once('@') else {
        return false;
    };
    !local.is_empty()
        && domain.contains('.')
        && !domain.starts_with('.')
        && !domain.ends_with('.')
        && !s.chars().any(char::is_whitespace)
        && s.len() <= 254
}

/// A password's problems, if any.
pub fn password_problem(p: &str) -> Option<String> {
    (p.chars().count() < MIN_PASSWORD_CHARS)
        .then(|| format!("a password has at least {MIN_PASSWORD_CHARS} characters"))
}

impl UserCreate {
    pub fn validate(&self, v: &mut Violations) {
        if !is_email(self.email.trim()) {
            v.push(
                "value_error",
                &["email"],
                "email must be an email address",
                Value::from(self.email.as_str()),
            );
        }
        if let Some(problem) = self.password.as_deref().and_then(password_problem) {
            v.push("value_error", &["password"], problem, Value::from("***"));
        }
    }
}

/// `ProfileProject`.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct ProfileProject {
    pub id: String,
    pub slug: String,
    pub name: String,
    pub role: String,
}

/// `Profile`: the signed-in person's own account.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct Profile {
    pub id: String,
    pub email: String,
    pub name: String,
    pub verified: bool,
    #[serde(with = "time::serde::rfc3339::option")]
    pub created_at: Option<OffsetDateTime>,
    pub projects: Vec<ProfileProject>,
    pub settings_url: Option<String>,
}

/// `PATCH /api/me/profile`.
#[derive(Debug, Deserialize, ToSchema)]
pub struct ProfilePatch {
    pub name: String,
}

/// `ProjectMember`.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct ProjectMember {
    pub id: String,
    /// The person's id.
    pub subject: String,
    /// Their email.
    pub label: String,
    pub role: String,
    #[serde(with = "time::serde::rfc3339::option")]
    pub created_at: Option<OffsetDateTime>,
}

/// `POST /api/projects/{ref}/members`.
#[derive(Debug, Deserialize, ToSchema)]
pub struct MemberCreate {
    pub email: String,
    #[serde(default = "member_role")]
    pub role: String,
}

fn member_role() -> String {
    "member".into()
}

/// `POST /api/auth/login`.
#[derive(Debug, Deserialize, ToSchema)]
pub struct LoginBody {
    pub email: String,
    pub password: String,
}

/// `POST /api/auth/recovery`: sets a password with a recovery code, and signs in.
#[derive(Debug, Deserialize, ToSchema)]
pub struct RecoveryBody {
    pub code: String,
    pub password: String,
}
