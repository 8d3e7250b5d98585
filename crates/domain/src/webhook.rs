//! Webhook subscriptions and deliveries on the wire, and the checks that
//! need no IO: names, event types against the catalogue, the URL's scheme.

use crate::event::EventType;
use crate::patch::{non_null, Patch};
use crate::validation::Violations;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use time::OffsetDateTime;
use utoipa::ToSchema;

/// Longest name and URL accepted.
pub const MAX_NAME: usize = 200;
pub const MAX_URL: usize = 2048;

pub use crate::event::subscribable;

/// A webhook subscription: stored events of the project's sessions, POSTed to `url` signed
/// with the subscription's secret (`X-Anecdote-Signature`), at least once and retried with
/// backoff. The secret is never part of it.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct Webhook {
    /// The subscription's id (a UUID).
    pub id: String,
    /// A name for people.
    pub name: String,
    /// Where deliveries are POSTed.
    pub url: String,
    /// The event types delivered; empty means every type.
    pub event_types: Vec<String>,
    /// Only events of this agent's sessions (the agent's id), when set; null: every agent.
    pub agent_id: Option<String>,
    /// Whether new events are delivered. The server turns it off after too many failures
    /// in a row (see `deactivated_reason`); PATCH `active: true` resumes.
    pub active: bool,
    /// Failed attempts since the last success.
    pub consecutive_failures: i32,
    /// Why the server deactivated this subscription (too many failures in a row); null when
    /// it did not. Cleared when the subscription is activated again.
    pub deactivated_reason: Option<String>,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339")]
    pub updated_at: OffsetDateTime,
}

/// A subscription with its signing secret: the only response that carries it (create and
/// rotate-secret).
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct WebhookCreated {
    #[serde(flatten)]
    pub webhook: Webhook,
    /// Signs every delivery: `X-Anecdote-Signature: t=<unix>,v1=<hex HMAC-SHA256(secret,
    /// "<t>." + body)>`. Shown once: store it now.
    pub secret: String,
}

/// One event to one subscription, across all its attempts: written in the same transaction
/// as the event, then sent by any server's dispatcher. Shows the latest attempt's outcome.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct Delivery {
    /// Also the body's `id` and the `X-Anecdote-Delivery` header, the same on every retry.
    pub id: String,
    /// The webhook's id.
    pub subscription_id: String,
    /// The `seq` of the event delivered.
    pub event_seq: i64,
    /// The session the event belongs to.
    pub session_id: String,
    /// The event's type (`X-Anecdote-Event`).
    pub event_type: String,
    /// `pending` (waiting for its next attempt), `delivered` (a 2xx answer) or `failed` (out
    /// of attempts; redeliver queues it again).
    pub status: DeliveryStatus,
    /// Attempts made so far.
    pub attempt: i32,
    /// The receiver's HTTP status at the latest attempt; null when there was no response.
    pub status_code: Option<i32>,
    /// The latest attempt's transport error or the reason its answer did not count.
    pub error: Option<String>,
    /// When the next attempt is due; null once delivered or failed.
    #[serde(with = "time::serde::rfc3339::option")]
    pub next_attempt_at: Option<OffsetDateTime>,
    /// When a 2xx answer came; null until then.
    #[serde(with = "time::serde::rfc3339::option")]
    pub delivered_at: Option<OffsetDateTime>,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
}

/// One attempt of a delivery, oldest first in the attempt log.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct DeliveryAttempt {
    /// Its number, from 1.
    pub attempt: i32,
    /// When the request was sent.
    #[serde(with = "time::serde::rfc3339")]
    pub started_at: OffsetDateTime,
    /// How long the request took, response included, in milliseconds.
    pub duration_ms: i32,
    /// The receiver's HTTP status; null when there was no response.
    pub status_code: Option<i32>,
    /// The transport error or the reason the response did not count; null on success.
    pub error: Option<String>,
    /// When the next attempt was scheduled; null when this was the last one.
    #[serde(with = "time::serde::rfc3339::option")]
    pub next_attempt_at: Option<OffsetDateTime>,
}

/// The outcome of a test ping, which is sent once and not recorded.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct PingResult {
    /// The receiver answered 2xx.
    pub delivered: bool,
    /// The receiver's HTTP status; null when there was no response.
    pub status_code: Option<i32>,
    /// The transport error or the reason the answer did not count; null on success.
    pub error: Option<String>,
    /// How long the request took, in milliseconds.
    pub duration_ms: i64,
}

pub use crate::state::DeliveryStatus;

fn yes() -> bool {
    true
}

/// The body of `POST /api/webhooks`: a new subscription. The answer carries its signing
/// secret, once.
#[derive(Debug, Deserialize, ToSchema)]
pub struct WebhookCreate {
    /// 1 to 200 characters, not blank.
    #[schema(
        min_length = 1,
        max_length = 200,
        pattern = "[^\\t\\n\\u000b\\f\\r \\u0085\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000]"
    )]
    pub name: String,
    /// An `http://` or `https://` URL without whitespace, at most 2048 bytes. Loopback,
    /// private, link-local and other internal addresses are refused (unless the server allows
    /// them), checked on what the name resolves to at every send as well.
    #[schema(
        min_length = 1,
        pattern = "^[Hh][Tt][Tt][Pp][Ss]?://[^\\t\\n\\u000b\\f\\r \\u0085\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000]*$"
    )]
    pub url: String,
    #[serde(default, deserialize_with = "non_null")]
    #[schema(schema_with = crate::openapi::event_types)]
    pub event_types: Vec<String>,
    /// An agent of the project (id or slug; 422 when there is none) whose sessions' events
    /// alone are delivered; null: every agent.
    #[serde(default)]
    pub agent_id: Option<String>,
    /// Whether events are delivered from now on. Default true; not null.
    #[serde(default = "yes", deserialize_with = "non_null")]
    #[schema(default = true)]
    pub active: bool,
}

/// The body of `PATCH /api/webhooks/{webhook_id}`: a field left out is unchanged. `name`,
/// `url` and `active` may not be null (422); `event_types: null` means every type (the same
/// as `[]`), `agent_id: null` clears the filter.
#[derive(Debug, Deserialize, ToSchema)]
pub struct WebhookPatch {
    /// A new name: 1 to 200 characters, not blank.
    #[serde(default)]
    #[schema(value_type = String, min_length = 1, max_length = 200, pattern = "[^\\t\\n\\u000b\\f\\r \\u0085\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000]")]
    pub name: Patch<String>,
    /// A new URL, with the same rules as on create.
    #[serde(default)]
    #[schema(value_type = String, min_length = 1, pattern = "^[Hh][Tt][Tt][Pp][Ss]?://[^\\t\\n\\u000b\\f\\r \\u0085\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000]*$")]
    pub url: Patch<String>,
    #[serde(default)]
    #[schema(schema_with = crate::openapi::event_types_patch)]
    pub event_types: Patch<Vec<String>>,
    /// A new agent filter (id or slug); null: every agent.
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub agent_id: Patch<String>,
    /// `true` resumes deliveries (also after the server deactivated it, clearing
    /// `deactivated_reason` and the failure count); `false` pauses them.
    #[serde(default)]
    #[schema(value_type = bool)]
    pub active: Patch<bool>,
}

/// A name: 1 to [`MAX_NAME`] characters, not blank.
pub fn check_name(errors: &mut Violations, name: &str) {
    if name.trim().is_empty() || name.chars().count() > MAX_NAME {
        errors.push(
            "value_error",
            &["name"],
            format!("the name must be 1 to {MAX_NAME} characters and not blank"),
            Value::from(name),
        );
    }
}

/// The URL's shape: http(s), at most [`MAX_URL`] characters. Whether its host may be reached
/// is the webhooks crate's question (it resolves names).
pub fn check_url_shape(errors: &mut Violations, url: &str) -> bool {
    let lower = url.to_ascii_lowercase();
    let ok = (lower.starts_with("http://") || lower.starts_with("https://"))
        && url.len() <= MAX_URL
        && !url.chars().any(char::is_whitespace);
    if !ok {
        errors.push(
            "value_error",
            &["url"],
            format!("the url must be an http:// or https:// URL of at most {MAX_URL} characters"),
            Value::from(url),
        );
    }
    ok
}

/// Event types, each from the catalogue, deduplicated in the order given. Unknown or
/// ephemeral ones are reported at `loc: ["body", "event_types", i]`.
pub fn parse_event_types(errors: &mut Violations, types: &[String]) -> Vec<EventType> {
    let mut out = Vec::new();
    for (i, t) in types.iter().enumerate() {
        match EventType::parse(t).filter(|t| !t.is_ephemeral()) {
            Some(kind) => {
                if !out.contains(&kind) {
                    out.push(kind);
                }
            }
            None => errors.push(
                "value_error",
                &["event_types", &i.to_string()],
                format!(
                    "'{t}' is not a subscribable event type; GET /api/webhooks/event-types lists them"
                ),
                Value::from(t.as_str()),
            ),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_and_ephemeral_types_are_refused_and_duplicates_folded() {
        let mut errors = Violations::new();
        let got = parse_event_types(
            &mut errors,
            &[
                "session.status_idle".into(),
                "agent.text_delta".into(),
                "nope".into(),
                "session.status_idle".into(),
            ],
        );
        assert_eq!(got, vec![EventType::SessionStatusIdle]);
        let errors = errors.into_result().unwrap_err();
        assert_eq!(errors.len(), 2);
        assert_eq!(
            errors[0].loc,
            vec![Value::from("body"), "event_types".into(), "1".into()]
        );
        assert_eq!(subscribable().count(), 23);
        assert!(subscribable().any(|t| t == EventType::SessionBudgetReached));
        assert!(subscribable().any(|t| t == EventType::AgentToolConfirmation));
    }

    #[test]
    fn only_http_urls_pass_the_shape_check() {
        for (url, ok) in [
            ("https://example.com/hook", true),
            ("HTTP://example.com", true),
            ("ftp://example.com", false),
            ("example.com", false),
            ("http://exa mple.com", false),
        ] {
            let mut errors = Violations::new();
            assert_eq!(check_url_shape(&mut errors, url), ok, "{url}");
        }
    }
}
