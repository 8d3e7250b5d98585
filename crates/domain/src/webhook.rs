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

/// The types a subscription can name: every stored type. Ephemeral ones (text deltas,
/// `stream_gap`) are never delivered, so naming them would be a subscription that never fires.
pub fn subscribable() -> impl Iterator<Item = EventType> {
    EventType::ALL.into_iter().filter(|t| !t.is_ephemeral())
}

/// `Webhook`. The secret is never part of it.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct Webhook {
    pub id: String,
    pub name: String,
    pub url: String,
    /// Empty means every type.
    pub event_types: Vec<String>,
    /// Only events of this agent's sessions, when set.
    pub agent_id: Option<String>,
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

/// `WebhookCreated`: the only response that carries the signing secret (create, rotate).
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct WebhookCreated {
    #[serde(flatten)]
    pub webhook: Webhook,
    /// Signs every delivery (`X-Anecdote-Signature`). Shown once: store it now.
    pub secret: String,
}

/// `Delivery`: one row per (subscription, event); the latest attempt's outcome.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct Delivery {
    /// Also the body's `id` and the `X-Anecdote-Delivery` header, the same on every retry.
    pub id: String,
    pub subscription_id: String,
    pub event_seq: i64,
    pub session_id: String,
    pub event_type: String,
    /// `pending` | `delivered` | `failed`.
    pub status: String,
    pub attempt: i32,
    pub status_code: Option<i32>,
    pub error: Option<String>,
    #[serde(with = "time::serde::rfc3339::option")]
    pub next_attempt_at: Option<OffsetDateTime>,
    #[serde(with = "time::serde::rfc3339::option")]
    pub delivered_at: Option<OffsetDateTime>,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
}

/// One attempt of a delivery, oldest first in the attempt log.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct DeliveryAttempt {
    pub attempt: i32,
    #[serde(with = "time::serde::rfc3339")]
    pub started_at: OffsetDateTime,
    pub duration_ms: i32,
    /// The receiver's HTTP status; null when there was no response.
    pub status_code: Option<i32>,
    /// The transport error or the reason the response did not count; null on success.
    pub error: Option<String>,
    /// When the next attempt was scheduled; null when this was the last one.
    #[serde(with = "time::serde::rfc3339::option")]
    pub next_attempt_at: Option<OffsetDateTime>,
}

/// The outcome of a test ping.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct PingResult {
    /// The receiver answered 2xx.
    pub delivered: bool,
    pub status_code: Option<i32>,
    pub error: Option<String>,
    pub duration_ms: i64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeliveryStatus {
    Pending,
    Delivered,
    Failed,
}

impl DeliveryStatus {
    pub const ALL: [DeliveryStatus; 3] = [Self::Pending, Self::Delivered, Self::Failed];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Delivered => "delivered",
            Self::Failed => "failed",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|d| d.as_str() == s)
    }
}

fn yes() -> bool {
    true
}

/// `POST /api/webhooks`.
#[derive(Debug, Deserialize, ToSchema)]
pub struct WebhookCreate {
    pub name: String,
    /// An http(s) URL the server POSTs deliveries to.
    pub url: String,
    /// Event types from the catalogue; left out or `[]` means every type.
    #[serde(default, deserialize_with = "non_null")]
    pub event_types: Vec<String>,
    /// An agent (id or slug) whose sessions' events alone are delivered; null means all.
    #[serde(default)]
    pub agent_id: Option<String>,
    #[serde(default = "yes", deserialize_with = "non_null")]
    pub active: bool,
}

/// `PATCH /api/webhooks/{id}`: absent leaves a field alone; `event_types: null` means every
/// type (the same as `[]`), `agent_id: null` clears the filter.
#[derive(Debug, Deserialize, ToSchema)]
pub struct WebhookPatch {
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub name: Patch<String>,
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub url: Patch<String>,
    #[serde(default)]
    #[schema(value_type = Option<Vec<String>>)]
    pub event_types: Patch<Vec<String>>,
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub agent_id: Patch<String>,
    #[serde(default)]
    #[schema(value_type = Option<bool>)]
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
        assert_eq!(subscribable().count(), 14);
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
