//! What the server sends that no request's answer describes, in the OpenAPI document: the
//! deliveries it POSTs to webhook subscriptions (OpenAPI 3.1's top-level `webhooks`), and the
//! frames of its Server-Sent Events answers (a `text/event-stream` content's `itemSchema`:
//! one frame's `event`, `id` and `data`, the data's JSON schema named).
//!
//! Written from the code that sends them: the header names are `sandbox_agents_webhooks::
//! signing`'s, the body is `payload::event_body`'s, the event types are the catalogue's.

use sandbox_agents_domain::event::subscribable;
use sandbox_agents_webhooks::payload::PING;
use sandbox_agents_webhooks::signing::{DELIVERY_HEADER, EVENT_HEADER, SIGNATURE_HEADER};
use serde_json::{json, Value};
use utoipa::openapi::{OpenApi, RefOr};

/// `doc` with its webhooks and the schemas of its event streams' frames.
pub fn document(mut doc: OpenApi) -> OpenApi {
    // utoipa 5 has no field for 3.1's `webhooks`; its extensions are flattened into the
    // document's top level as they are (only their parsing insists on `x-`).
    doc.extensions
        .get_or_insert_with(Default::default)
        .insert("webhooks".into(), webhooks());
    for (path, frame) in [
        (
            "/api/sessions/{session_id}/events/stream",
            sse_frame(
                "The event's `type` (`agent.text_delta`, `session.status_running`, ...)",
                "The event's `seq`; absent for an ephemeral event (`seq: 0`)",
                "#/components/schemas/SessionEvent",
            ),
        ),
        ("/api/sessions/{session_id}/exec", exec_frame()),
    ] {
        let item = doc
            .paths
            .paths
            .get_mut(path)
            .unwrap_or_else(|| panic!("stream_docs: no path {path}"));
        for operation in crate::error_docs::operations_mut(item) {
            if let Some(RefOr::T(ok)) = operation.responses.responses.get_mut("200") {
                if let Some(content) = ok.content.get_mut("text/event-stream") {
                    // `itemSchema`: one event of the stream, as OpenAPI 3.2 writes it (and
                    // schemathesis validates each event it reads against it); utoipa 5 has no
                    // field for it, so it goes in as an extension's key.
                    content
                        .extensions
                        .get_or_insert_with(Default::default)
                        .insert("itemSchema".into(), frame.clone());
                }
            }
        }
    }
    doc
}

/// One frame of an SSE answer whose `data:` is JSON of `schema`.
fn sse_frame(event: &str, id: &str, schema: &str) -> Value {
    json!({
        "type": "object",
        "description": "One Server-Sent Events frame (`event:`, `id:` and `data:` lines, then a blank line); `: ping` comment frames come between them after 15 s of silence",
        "required": ["event", "data"],
        "properties": {
            "event": {"type": "string", "description": event},
            "id": {"type": "string", "pattern": "^[0-9]+$", "description": id},
            "data": {
                "type": "string",
                "contentMediaType": "application/json",
                "contentSchema": {"$ref": schema},
                "description": "The JSON of the frame's object, on one line"
            }
        }
    })
}

/// An exec's frames: `stdout` and `stderr` of `{"text"}`, then `exit` or `error`.
fn exec_frame() -> Value {
    json!({
        "type": "object",
        "description": "One Server-Sent Events frame of an exec: `stdout` and `stderr` frames as the command writes, then one `exit` (or `error`, `{\"detail\"}`) frame",
        "required": ["event", "data"],
        "properties": {
            "event": {"type": "string", "enum": ["stdout", "stderr", "exit", "error"]},
            "data": {
                "type": "string",
                "contentMediaType": "application/json",
                "contentSchema": {"oneOf": [
                    {"type": "object", "required": ["text"], "properties": {"text": {"type": "string"}}},
                    {"$ref": "#/components/schemas/ExecExit"},
                    {"$ref": "#/components/schemas/ErrorBody"}
                ]},
                "description": "The JSON of the frame's object, on one line"
            }
        }
    })
}

/// The delivery every subscription gets: one operation, `sessionEvent`.
fn webhooks() -> Value {
    let mut types: Vec<&str> = subscribable().map(|t| t.as_str()).collect();
    types.push(PING);
    json!({
        "sessionEvent": {
            "post": {
                "summary": "A session event, delivered to a subscription",
                "description": "POSTed to the subscription's `url` for every stored event of a type it subscribes to (and for `POST /api/webhooks/{webhook_id}/ping`, type `ping`, with no session or event). Retried with backoff until a 2xx answer or the attempts run out; the same delivery id may arrive more than once. Verify the signature over the exact bytes of the body before trusting it.",
                "parameters": [
                    {
                        "name": SIGNATURE_HEADER, "in": "header",
                        "required": true,
                        "description": "`t=<unix seconds>,v1=<lowercase hex HMAC-SHA256(secret, \"<t>.\" + body)>`, keyed with the subscription's secret; reject a `t` more than 300 s from your clock",
                        "schema": {"type": "string", "pattern": "^t=[0-9]+,v1=[0-9a-f]{64}$"}
                    },
                    {
                        "name": EVENT_HEADER, "in": "header",
                        "required": true,
                        "description": "The event's type (the body's `type`)",
                        "schema": {"type": "string", "enum": types}
                    },
                    {
                        "name": DELIVERY_HEADER, "in": "header",
                        "required": true,
                        "description": "The delivery's id (the body's `id`), the same on every attempt",
                        "schema": {"type": "string", "format": "uuid"}
                    }
                ],
                "requestBody": {
                    "required": true,
                    "content": {"application/json": {"schema": {
                        "type": "object",
                        "required": ["id", "type", "session_id", "event"],
                        "properties": {
                            "id": {"type": "string", "format": "uuid", "description": "The delivery's id"},
                            "type": {"type": "string", "enum": types},
                            "session_id": {"type": "string", "description": "The session's id; `\"\"` for a ping"},
                            "event": {
                                "oneOf": [{"$ref": "#/components/schemas/SessionEvent"}, {"type": "null"}],
                                "description": "The event, as the event stream's `data:` carries it; null for a ping"
                            }
                        }
                    }}}
                },
                "responses": {
                    "2XX": {"description": "Delivered: no more attempts"},
                    "default": {"description": "Not delivered: attempted again later"}
                }
            }
        }
    })
}
