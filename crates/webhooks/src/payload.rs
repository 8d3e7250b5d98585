//! The body of a delivery: `{id, type, session_id, event}`, where `event` is the
//! same JSON as the event stream's `data:`. Serialized once: the signature covers these bytes.

use sandbox_agents_domain::event::SessionEvent;
use sandbox_agents_domain::DeliveryId;
use serde::Serialize;

#[derive(Serialize)]
struct Body<'a> {
    id: String,
    #[serde(rename = "type")]
    kind: &'a str,
    session_id: String,
    event: Option<&'a SessionEvent>,
}

/// The body announcing `event` in delivery `id`.
pub fn event_body(id: DeliveryId, event: &SessionEvent) -> Vec<u8> {
    serde_json::to_vec(&Body {
        id: id.to_string(),
        kind: &event.kind,
        session_id: event.session_id.to_string(),
        event: Some(event),
    })
    .expect("a delivery body always serializes")
}

/// The type of a test ping; no stored event has it.
pub const PING: &str = "ping";

/// A test ping's body: no session, no event.
pub fn ping_body(id: DeliveryId) -> Vec<u8> {
    serde_json::to_vec(&Body {
        id: id.to_string(),
        kind: PING,
        session_id: String::new(),
        event: None,
    })
    .expect("a ping body always serializes")
}
