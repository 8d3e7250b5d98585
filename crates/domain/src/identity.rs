//! Projects, API keys and people as the wire shows them, and the rules for their inputs. A key's secret appears exactly once, in [`ApiKeyCreated`].

use crate::validation::Violations;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use time::OffsetDateTime;
use utoipa::ToSchema;

/// A project: the unit of tenancy. Agents, sessions, secrets, git keys and webhooks belong
/// to exactly one; a request names it with `X-Project` (id or slug), or the server works it
/// out when only one is possible.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct Project {
    /// The project's id (a UUID).
    pub id: String,
    /// The stable name `X-Project` and `{ref}` take; immutable.
    pub slug: String,
    /// The display name.
    pub name: String,
    /// For people; may be `""`.
    pub description: String,
    #[serde(with = "time::serde::rfc3339::option")]
    pub created_at: Option<OffsetDateTime>,
    #[serde(with = "time::serde::rfc3339::option")]
    pub updated_at: Option<OffsetDateTime>,
    /// The caller's role in it: `admin` or `member` for a person, null for a credential that
    /// reaches projects without a membership (the shared token, an API key, open mode).
    pub role: Option<String>,
    /// Its limits, set by operators; `{}` for none. An addition.
    pub limits: crate::budget::ProjectLimits,
}

/// A project's spend this calendar month (UTC) and what it runs now, against its limits.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct ProjectSpend {
    /// `YYYY-MM`.
    pub month: String,
    /// What its priced model calls cost this month, every server process together.
    pub cost_usd: f64,
    /// Its model calls this month.
    pub requests: i64,
    /// Of them, those without a price (not in `cost_usd`).
    pub unpriced_requests: i64,
    pub limits: crate::budget::ProjectLimits,
    /// When this month's 80 % warning went out; null before.
    #[serde(with = "time::serde::rfc3339::option")]
    pub warned_at: Option<OffsetDateTime>,
    /// Its sandboxes now, every server process together: running or booting (what
    /// `limits.max_sandboxes` counts).
    pub sandboxes: i64,
    /// Its sessions waiting in the queue for a sandbox (`session.queued`).
    pub sandboxes_queued: i64,
    /// Its turns in flight now (what `limits.max_runs` counts; a turn parked on client tools
    /// is not in flight).
    pub runs: i64,
    /// Its turns waiting in the queue for a slot (`session.run_queued`).
    pub runs_queued: i64,
}

/// The body of `POST /api/projects`. The creator, when a person, becomes its admin.
#[derive(Debug, Deserialize, ToSchema)]
pub struct ProjectCreate {
    /// The display name; not blank.
    #[schema(
        min_length = 1,
        pattern = "[^\\t\\n\\u000b\\f\\r \\u0085\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000]"
    )]
    pub name: String,
    /// `""` (the default): derived from the name (lowercased, other characters as `-`, a
    /// numeric suffix when taken). Otherwise a slug: 1 to 63 lowercase letters, digits and
    /// `-`, starting with a letter or digit, not shaped like a UUID, and not taken (409).
    /// Immutable afterwards.
    #[serde(default)]
    #[schema(
        default = "",
        max_length = 63,
        pattern = "^([a-z0-9][a-z0-9-]{0,62})?$"
    )]
    pub slug: String,
    /// For people. Default `""`.
    #[serde(default)]
    #[schema(default = "")]
    pub description: String,
}

/// The body of `PATCH /api/projects/{ref}`: a field left out is unchanged; neither may be
/// null (422). The slug cannot change.
#[derive(Debug, Deserialize, ToSchema)]
pub struct ProjectPatch {
    /// A new display name; not blank.
    #[serde(default, deserialize_with = "crate::patch::non_null")]
    #[schema(value_type = String, min_length = 1, pattern = "[^\\t\\n\\u000b\\f\\r \\u0085\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000]")]
    pub name: Option<String>,
    /// A new description.
    #[serde(default, deserialize_with = "crate::patch::non_null")]
    #[schema(value_type = String)]
    pub description: Option<String>,
    /// New limits, replacing the whole set (`{}` removes them). Operators only: a limit a
    /// project's own admins could lift would not limit them (403 otherwise). Not null.
    #[serde(default, deserialize_with = "crate::patch::non_null")]
    #[schema(value_type = crate::budget::ProjectLimits)]
    pub limits: Option<crate::budget::ProjectLimits>,
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

/// An API key, a credential for services (`Authorization: Bearer ak_…`), without the key
/// itself: only its SHA-256 and `prefix` are stored. A key works until it is revoked or
/// expires (then 401); the client works out "active" from `revoked_at` and `expires_at`.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct ApiKey {
    /// The key's id (a UUID).
    pub id: String,
    /// A name to recognise it by.
    pub name: String,
    /// For people; may be `""`.
    pub description: String,
    /// The project the key is bound to, and the only one it reaches; null: unbound, it
    /// reaches every project.
    pub project_id: Option<String>,
    /// The key's first characters, to recognise it (`ak_1a2b3c4d`).
    pub prefix: String,
    /// Who made it: the maker's key or person id, `token` for the shared token, `open` in
    /// open mode.
    pub created_by: Option<String>,
    #[serde(with = "time::serde::rfc3339::option")]
    pub created_at: Option<OffsetDateTime>,
    /// When a request last authenticated with it; null if never.
    #[serde(with = "time::serde::rfc3339::option")]
    pub last_used_at: Option<OffsetDateTime>,
    /// When it stops working; null: never.
    #[serde(with = "time::serde::rfc3339::option")]
    pub expires_at: Option<OffsetDateTime>,
    /// When it was revoked; null while it is not.
    #[serde(with = "time::serde::rfc3339::option")]
    pub revoked_at: Option<OffsetDateTime>,
}

/// An API key with its secret: the one response that carries the whole key (create).
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct ApiKeyCreated {
    #[serde(flatten)]
    pub key_info: ApiKey,
    /// The full secret, starting with `ak_`. Shown once; only its hash is stored.
    pub key: String,
}

/// The body of `POST /api/api-keys`. A key made while a project resolves is bound to it.
#[derive(Debug, Deserialize, ToSchema)]
pub struct ApiKeyCreate {
    /// A name to recognise it by; not blank.
    #[schema(
        min_length = 1,
        pattern = "[^\\t\\n\\u000b\\f\\r \\u0085\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000]"
    )]
    pub name: String,
    /// For people. Default `""`.
    #[serde(default)]
    #[schema(default = "")]
    pub description: String,
    /// When the key stops working: an ISO 8601 date and time (`2030-01-01T00:00:00+00:00`;
    /// without an offset it is UTC; a date alone is its midnight UTC). Null: never expires.
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

/// A person who can sign in to the web UI (`/login`). People reach projects through
/// memberships.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct User {
    /// The person's id (a UUID).
    pub id: String,
    /// Unique; what they sign in with.
    pub email: String,
    /// The display name; may be `""`.
    pub name: String,
    /// `active` or `inactive`.
    pub state: String,
    /// Whether the email address has been verified.
    pub verified: bool,
    /// May manage people, keys and projects deployment-wide, like the shared token. An
    /// addition to the client's `User` (which keeps unknown fields).
    pub operator: bool,
    #[serde(with = "time::serde::rfc3339::option")]
    pub created_at: Option<OffsetDateTime>,
}

/// A new account, with the single-use recovery secret when it has no password yet: the only
/// place that secret appears.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct UserCreated {
    #[serde(flatten)]
    pub user: User,
    /// The link (`/recovery?code=…`, valid 24 h) that sets the first password; null when the
    /// account was made with one.
    pub recovery_url: Option<String>,
    /// The same secret, to type in at `/recovery`; null when the account has a password.
    pub recovery_code: Option<String>,
}

/// A fresh single-use recovery secret, valid 24 h (the link alone works; the code is the same
/// secret, to type in).
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct Recovery {
    /// The link that sets a password.
    pub recovery_url: String,
    /// The same secret, to type in at `/recovery`.
    pub recovery_code: String,
}

/// The body of `POST /api/users`: a new account.
#[derive(Debug, Deserialize, ToSchema)]
pub struct UserCreate {
    /// The address they sign in with: `local@domain.tld`, no whitespace, at most 254 bytes
    /// (surrounding whitespace is trimmed). Unique (409 when taken).
    pub email: String,
    /// The display name (trimmed). Default `""`.
    #[serde(default)]
    #[schema(default = "")]
    pub name: String,
    /// At least 10 characters. Null: no password; the answer carries a recovery link instead,
    /// so that no operator ever sets anyone's password.
    #[serde(default)]
    #[schema(min_length = 10)]
    pub password: Option<String>,
    /// An operator (an addition; the client never sends it). The first person made while the
    /// deployment is open is one whatever this says, so that closing it never locks everyone
    /// out.
    #[serde(default)]
    pub operator: bool,
}

/// The body of `PATCH /api/users/{identity_id}` (an addition to the client's routes): a
/// field left out is unchanged; neither may be null (422).
#[derive(Debug, Deserialize, ToSchema)]
pub struct UserPatch {
    /// A new display name (trimmed).
    #[serde(default, deserialize_with = "crate::patch::non_null")]
    #[schema(value_type = String)]
    pub name: Option<String>,
    /// Make them an operator, or not. Without a shared token the last operator cannot stop
    /// being one (409).
    #[serde(default, deserialize_with = "crate::patch::non_null")]
    #[schema(value_type = bool)]
    pub operator: Option<bool>,
}

/// Passwords are at least this long.
pub const MIN_PASSWORD_CHARS: usize = 10;

/// The longest email address accepted, in bytes.
pub const MAX_EMAIL_LEN: usize = 254;

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
        && s.len() <= MAX_EMAIL_LEN
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

/// A project the signed-in person is a member of.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct ProfileProject {
    /// The project's id.
    pub id: String,
    /// The project's slug.
    pub slug: String,
    /// The project's name.
    pub name: String,
    /// Their role in it: `admin` or `member`.
    pub role: String,
}

/// The signed-in person's own account and the projects they reach.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct Profile {
    /// The person's id.
    pub id: String,
    /// What they sign in with.
    pub email: String,
    /// The display name; PATCH changes it.
    pub name: String,
    /// Whether the email address has been verified.
    pub verified: bool,
    #[serde(with = "time::serde::rfc3339::option")]
    pub created_at: Option<OffsetDateTime>,
    /// Their memberships.
    pub projects: Vec<ProfileProject>,
    /// The page where they change their password.
    pub settings_url: Option<String>,
}

/// The body of `PATCH /api/me/profile`.
#[derive(Debug, Deserialize, ToSchema)]
pub struct ProfilePatch {
    /// The new display name (trimmed).
    pub name: String,
}

/// A person's membership of a project.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct ProjectMember {
    /// The membership's id (`{member_id}` in paths).
    pub id: String,
    /// The person's id.
    pub subject: String,
    /// Their email.
    pub label: String,
    /// `admin` (may manage the project and its members) or `member`.
    pub role: String,
    #[serde(with = "time::serde::rfc3339::option")]
    pub created_at: Option<OffsetDateTime>,
}

/// The body of `POST /api/projects/{ref}/members`.
#[derive(Debug, Deserialize, ToSchema)]
pub struct MemberCreate {
    /// The email of an existing person (trimmed); an unknown one is a 404, never a new
    /// account.
    pub email: String,
    /// `admin` or `member` (the default); anything else is a 422.
    #[serde(default = "member_role")]
    #[schema(default = "member", pattern = "^(admin|member)$")]
    pub role: String,
}

fn member_role() -> String {
    "member".into()
}

/// The body of `POST /api/auth/login`. Ten attempts a minute per account and per address,
/// then 429.
#[derive(Debug, Deserialize, ToSchema)]
pub struct LoginBody {
    /// The account's email.
    pub email: String,
    /// The account's password. Any wrong pair is the same 401.
    #[schema(write_only)]
    pub password: String,
}

/// The body of `POST /api/auth/recovery`: sets a password with a recovery code, and signs in.
#[derive(Debug, Deserialize, ToSchema)]
pub struct RecoveryBody {
    /// The recovery code (the `code` of the recovery link); single-use.
    pub code: String,
    /// The new password: at least 10 characters.
    #[schema(min_length = 10, write_only)]
    pub password: String,
}
