//! Reading a chat-completions request leniently, and deciding whether a [`When`] holds.
//!
//! The request is read as loose JSON: unknown fields are ignored and a message's `content` may
//! be a string, null, or an array of `{"type": "text", "text": ...}` parts (as OpenAI allows).

use serde_json::Value;

use crate::script::When;

/// The parts of a chat-completions request the matchers and the answer look at.
#[derive(Clone, Debug, Default)]
pub struct Conversation {
    pub model: String,
    pub messages: Vec<Msg>,
    pub tools: Vec<String>,
    pub stream: bool,
    pub include_usage: bool,
}

/// One message: its role and its text (content parts joined).
#[derive(Clone, Debug)]
pub struct Msg {
    pub role: String,
    pub text: String,
}

impl Conversation {
    /// Reads the request body. Only a body that is not a JSON object, or has no `messages`
    /// array, is refused: the message says what is wrong.
    pub fn parse(body: &Value) -> Result<Conversation, String> {
        let object = body
            .as_object()
            .ok_or("the request body must be a JSON object")?;
        let messages = object
            .get("messages")
            .and_then(Value::as_array)
            .ok_or("the request has no `messages` array")?;
        let messages = messages
            .iter()
            .map(|m| Msg {
                role: m
                    .get("role")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned(),
                text: content_text(m.get("content")),
            })
            .collect();
        let tools = object
            .get("tools")
            .and_then(Value::as_array)
            .map(|tools| {
                tools
                    .iter()
                    .filter_map(|t| {
                        t.pointer("/function/name")
                            .or_else(|| t.get("name"))
                            .and_then(Value::as_str)
                            .map(str::to_owned)
                    })
                    .collect()
            })
            .unwrap_or_default();
        Ok(Conversation {
            model: object
                .get("model")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
            messages,
            tools,
            stream: object.get("stream").and_then(Value::as_bool) == Some(true),
            include_usage: body
                .pointer("/stream_options/include_usage")
                .and_then(Value::as_bool)
                == Some(true),
        })
    }

    fn last_with_role(&self, role: &str) -> Option<&Msg> {
        self.messages.iter().rev().find(|m| m.role == role)
    }

    /// The last user message's text, for error messages.
    pub fn last_user_text(&self) -> Option<&str> {
        self.last_with_role("user").map(|m| m.text.as_str())
    }

    /// Assistant messages already in the conversation.
    pub fn turn(&self) -> u32 {
        let turns = self
            .messages
            .iter()
            .filter(|m| m.role == "assistant")
            .count();
        u32::try_from(turns).unwrap_or(u32::MAX)
    }

    /// All the text the model was given, for the derived prompt token count.
    pub fn prompt_chars(&self) -> usize {
        self.messages.iter().map(|m| m.text.chars().count()).sum()
    }

    /// Whether every condition that is set holds.
    pub fn matches(&self, when: &When) -> bool {
        let contains =
            |msg: Option<&Msg>, needle: &str| msg.is_some_and(|m| m.text.contains(needle));
        when.last_user_contains
            .as_deref()
            .is_none_or(|n| contains(self.last_with_role("user"), n))
            && when
                .last_message_role
                .as_deref()
                .is_none_or(|role| self.messages.last().is_some_and(|m| m.role == role))
            && when
                .last_tool_result_contains
                .as_deref()
                .is_none_or(|n| contains(self.last_with_role("tool"), n))
            && when
                .any_message_contains
                .as_deref()
                .is_none_or(|n| self.messages.iter().any(|m| m.text.contains(n)))
            && when
                .system_contains
                .as_deref()
                .is_none_or(|n| contains(self.messages.iter().find(|m| m.role == "system"), n))
            && when
                .model
                .as_deref()
                .is_none_or(|model| self.model == model)
            && when
                .has_tool
                .as_deref()
                .is_none_or(|name| self.tools.iter().any(|t| t == name))
            && when.turn.is_none_or(|turn| self.turn() == turn)
            && when
                .lacks_tool
                .as_deref()
                .is_none_or(|name| !self.tools.iter().any(|t| t == name))
    }
}

/// A message's text: a string, or the `text` of each content part, joined.
fn content_text(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join(""),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn conversation() -> Conversation {
        Conversation::parse(&json!({
            "model": "m1",
            "messages": [
                {"role": "system", "content": "be brief"},
                {"role": "user", "content": [{"type": "text", "text": "list the files"}]},
                {"role": "assistant", "content": null, "tool_calls": []},
                {"role": "tool", "tool_call_id": "c1", "content": "a.txt b.txt"}
            ],
            "tools": [{"type": "function", "function": {"name": "shell"}}]
        }))
        .unwrap()
    }

    #[test]
    fn every_condition_that_is_set_must_hold() {
        let c = conversation();
        assert!(c.matches(&When::default()));
        let all = When::default()
            .last_user_contains("files")
            .last_message_role("tool")
            .last_tool_result_contains("b.txt")
            .any_message_contains("brief")
            .model("m1")
            .has_tool("shell")
            .turn(1)
            .system_contains("brief")
            .lacks_tool("python");
        assert!(c.matches(&all));
        assert!(!c.matches(&all.clone().system_contains("files")));
        assert!(!c.matches(&all.clone().lacks_tool("shell")));
        assert!(!c.matches(&all.clone().turn(0)));
        assert!(!c.matches(&all.clone().has_tool("python")));
        assert!(!c.matches(&all.model("m2")));
    }

    #[test]
    fn system_contains_looks_at_the_first_system_message_only() {
        let c = Conversation::parse(&json!({
            "messages": [
                {"role": "system", "content": "You consolidate memory."},
                {"role": "user", "content": "the store"},
                {"role": "system", "content": "a later note"}
            ]
        }))
        .unwrap();
        assert!(c.matches(&When::default().system_contains("consolidate")));
        assert!(!c.matches(&When::default().system_contains("later note")));
        assert!(!c.matches(&When::default().system_contains("the store")));
        let none =
            Conversation::parse(&json!({"messages": [{"role": "user", "content": "hi"}]})).unwrap();
        assert!(!none.matches(&When::default().system_contains("hi")));
    }
}
