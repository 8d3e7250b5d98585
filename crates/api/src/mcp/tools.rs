//! The tools `/mcp` offers, each the REST call it mirrors: its input becomes that call's
//! path, query and body, so it is validated by the same handler and its errors carry the same
//! `detail`. Inputs the REST body takes beyond the listed properties are passed on as they
//! are (`additionalProperties`).

use axum::http::Method;
use serde_json::{json, Map, Value};

/// One tool: its name, what it does, its input's JSON Schema.
pub struct ToolDef {
    pub name: &'static str,
    pub description: &'static str,
    pub schema: fn() -> Value,
}

/// The REST call a tool's input stands for.
#[derive(Debug, PartialEq)]
pub struct Call {
    pub method: Method,
    /// The path and query, percent-encoded.
    pub uri: String,
    pub body: Option<Value>,
}

fn session_id() -> Value {
    json!({"type": "string", "description": "The session's id", "maxLength": 64})
}

/// Every tool, in the order `tools/list` gives them.
pub const TOOLS: &[ToolDef] = &[
    ToolDef {
        name: "list_agents",
        description: "List the project's agents (GET /api/agents).",
        schema: || json!({"type": "object", "properties": {"include_archived": {"type": "boolean", "description": "Also list archived agents"}}}),
    },
    ToolDef {
        name: "create_session",
        description: "Create a session of an agent (POST /api/sessions). With wait (the default) the call lasts until its sandbox runs, so a message can follow at once. Takes every field of the REST body.",
        schema: || json!({"type": "object", "properties": {
            "agent_id": {"type": "string", "description": "The agent's id or slug", "maxLength": 200},
            "title": {"type": "string", "maxLength": 200},
            "wait": {"type": "boolean", "default": true, "description": "Wait until the sandbox runs"},
            "timeout_seconds": {"type": "integer", "minimum": 1, "maximum": 3600, "default": 600},
        }, "required": ["agent_id"], "additionalProperties": true}),
    },
    ToolDef {
        name: "send_message",
        description: "Send a message to a session, starting a turn (POST /api/sessions/{id}/messages). With wait (the default) the call lasts until the turn ends or parks, sending each event as a progress notification, and answers with the agent's last message and how the turn ended.",
        schema: || json!({"type": "object", "properties": {
            "session_id": session_id(),
            "prompt": {"type": "string", "description": "The message"},
            "max_turns": {"type": "integer", "minimum": 1},
            "wait": {"type": "boolean", "default": true, "description": "Wait for the turn's end"},
            "timeout_seconds": {"type": "integer", "minimum": 1, "maximum": 3600, "default": 600, "description": "How long to wait; the turn goes on after it"},
        }, "required": ["session_id", "prompt"], "additionalProperties": true}),
    },
    ToolDef {
        name: "answer_tool_call",
        description: "Answer a client tool call the session waits on (POST /api/sessions/{id}/tool-results).",
        schema: || json!({"type": "object", "properties": {
            "session_id": session_id(),
            "call_id": {"type": "string"},
            "output": {"type": "string"},
            "is_error": {"type": "boolean", "default": false},
        }, "required": ["session_id", "call_id", "output"]}),
    },
    ToolDef {
        name: "answer_approval",
        description: "Allow or deny a call the agent's permissions ask a person about (POST /api/sessions/{id}/tool-confirmations).",
        schema: || json!({"type": "object", "properties": {
            "session_id": session_id(),
            "call_id": {"type": "string"},
            "decision": {"type": "string", "enum": ["allow", "deny"]},
            "message": {"type": "string", "description": "Why, for the model (a denial's reason)"},
        }, "required": ["session_id", "call_id", "decision"]}),
    },
    ToolDef {
        name: "read_events",
        description: "Read a page of a session's event log after a cursor (GET /api/sessions/{id}/events).",
        schema: || json!({"type": "object", "properties": {
            "session_id": session_id(),
            "after": {"type": "integer", "minimum": 0, "description": "The seq to read after (0: from the start)"},
            "limit": {"type": "integer", "minimum": 1, "maximum": 1000},
        }, "required": ["session_id"]}),
    },
    ToolDef {
        name: "list_files",
        description: "List the files of a session's workspace (GET /api/sessions/{id}/files).",
        schema: || json!({"type": "object", "properties": {
            "session_id": session_id(),
            "path": {"type": "string", "description": "A directory under the workspace; default its root"},
        }, "required": ["session_id"]}),
    },
    ToolDef {
        name: "read_file",
        description: "Read a file of a session's workspace (GET /api/sessions/{id}/files/content); binary content is described, not returned.",
        schema: || json!({"type": "object", "properties": {
            "session_id": session_id(),
            "path": {"type": "string"},
        }, "required": ["session_id", "path"]}),
    },
    ToolDef {
        name: "stop_session",
        description: "Stop a session's sandbox, archiving its workspace (POST /api/sessions/{id}/stop).",
        schema: || json!({"type": "object", "properties": {"session_id": session_id()}, "required": ["session_id"]}),
    },
];

/// `s` as one segment of a path, percent-encoded.
pub(super) fn segment(s: &str) -> String {
    form_urlencoded::byte_serialize(s.as_bytes())
        .collect::<String>()
        .replace('+', "%20")
}

fn query(pairs: &[(&str, Option<String>)]) -> String {
    let mut q = form_urlencoded::Serializer::new(String::new());
    for (k, v) in pairs {
        if let Some(v) = v {
            q.append_pair(k, v);
        }
    }
    let q = q.finish();
    if q.is_empty() {
        q
    } else {
        format!("?{q}")
    }
}

/// Takes `key` out of the input as text (a string, or a number or boolean as written).
fn take(args: &mut Map<String, Value>, key: &str) -> Option<String> {
    match args.remove(key)? {
        Value::String(s) => Some(s),
        Value::Null => None,
        v => Some(v.to_string()),
    }
}

/// The REST call of tool `name` with `args`; `Err` names what is missing.
pub fn call(name: &str, args: Map<String, Value>) -> Result<Call, String> {
    let mut args = args;
    let mut session = || {
        take(&mut args, "session_id")
            .filter(|s| !s.is_empty())
            .map(|s| format!("/api/sessions/{}", segment(&s)))
            .ok_or_else(|| "session_id is required".to_owned())
    };
    let post = |uri: String, body: Map<String, Value>| Call {
        method: Method::POST,
        uri,
        body: Some(Value::Object(body)),
    };
    let get = |uri: String| Call {
        method: Method::GET,
        uri,
        body: None,
    };
    Ok(match name {
        "list_agents" => {
            let archived = take(&mut args, "include_archived");
            get(format!(
                "/api/agents{}",
                query(&[("include_archived", archived)])
            ))
        }
        "create_session" => {
            args.remove("wait");
            args.remove("timeout_seconds");
            post("/api/sessions".into(), args)
        }
        "send_message" => {
            let s = session()?;
            args.remove("wait");
            args.remove("timeout_seconds");
            post(format!("{s}/messages"), args)
        }
        "answer_tool_call" => {
            let s = session()?;
            post(format!("{s}/tool-results"), args)
        }
        "answer_approval" => {
            let s = session()?;
            post(format!("{s}/tool-confirmations"), args)
        }
        "read_events" => {
            let s = session()?;
            let q = query(&[
                ("after", take(&mut args, "after")),
                ("limit", take(&mut args, "limit")),
            ]);
            get(format!("{s}/events{q}"))
        }
        "list_files" => {
            let s = session()?;
            let q = query(&[("path", take(&mut args, "path"))]);
            get(format!("{s}/files{q}"))
        }
        "read_file" => {
            let s = session()?;
            let q = query(&[("path", take(&mut args, "path"))]);
            get(format!("{s}/files/content{q}"))
        }
        "stop_session" => {
            let s = session()?;
            post(format!("{s}/stop"), Map::new())
        }
        other => return Err(format!("there is no tool named '{other}'")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn inputs_become_the_rest_calls_they_mirror() {
        let c = call(
            "send_message",
            args(
                json!({"session_id": "a b/c", "prompt": "hi", "wait": true, "timeout_seconds": 5}),
            ),
        )
        .unwrap();
        assert_eq!(c.method, Method::POST);
        assert_eq!(c.uri, "/api/sessions/a%20b%2Fc/messages");
        assert_eq!(c.body, Some(json!({"prompt": "hi"})));
        let c = call("read_events", args(json!({"session_id": "s", "after": 7}))).unwrap();
        assert_eq!(c.uri, "/api/sessions/s/events?after=7");
        let c = call(
            "read_file",
            args(json!({"session_id": "s", "path": "a&b.txt"})),
        )
        .unwrap();
        assert_eq!(c.uri, "/api/sessions/s/files/content?path=a%26b.txt");
        assert_eq!(
            call("stop_session", Map::new()).unwrap_err(),
            "session_id is required"
        );
        assert!(call("nope", Map::new()).is_err());
        assert_eq!(TOOLS.len(), 9);
        for t in TOOLS {
            assert_eq!((t.schema)()["type"], "object", "{}", t.name);
        }
    }
}
