//! Rendering a scripted [`Reply`] in the OpenAI chat-completions wire format.
//!
//! Streaming follows OpenAI's order: a first chunk with `role`, then `reasoning_content`
//! deltas, then `content` deltas (text split at word boundaries, so there are several), then
//! each tool call (a first chunk with `index`, `id`, `type` and `function.name`, then its
//! `function.arguments` in pieces), then a chunk with `finish_reason`, then, when the request
//! asked for `stream_options.include_usage`, a chunk with `usage` and empty `choices`.

use serde_json::{json, Value};

use crate::matching::Conversation;
use crate::script::Reply;

/// A reply made concrete for one request: ids, argument strings, finish reason and usage.
#[derive(Clone, Debug)]
pub struct Answer {
    pub id: String,
    pub model: String,
    pub created: u64,
    pub text: Option<String>,
    pub reasoning: Option<String>,
    pub tool_calls: Vec<AnswerToolCall>,
    pub finish_reason: String,
    pub usage: Value,
}

#[derive(Clone, Debug)]
pub struct AnswerToolCall {
    pub id: String,
    pub name: String,
    pub arguments: String,
}

impl Answer {
    /// `request_no` numbers the requests the server has answered; it makes ids unique.
    pub fn new(reply: &Reply, conversation: &Conversation, request_no: u64) -> Answer {
        let tool_calls: Vec<AnswerToolCall> = reply
            .tool_calls
            .iter()
            .enumerate()
            .map(|(i, call)| AnswerToolCall {
                id: call
                    .id
                    .clone()
                    .unwrap_or_else(|| format!("call_{request_no}_{i}")),
                name: call.name.clone(),
                arguments: match &call.arguments {
                    // A string is taken as already-encoded arguments (lets a test send bad JSON).
                    Value::String(raw) => raw.clone(),
                    other => other.to_string(),
                },
            })
            .collect();
        let finish_reason = reply.finish_reason.clone().unwrap_or_else(|| {
            if tool_calls.is_empty() {
                "stop"
            } else {
                "tool_calls"
            }
            .to_owned()
        });
        let usage = match reply.usage {
            Some(u) => {
                let mut usage = json!({
                    "prompt_tokens": u.prompt_tokens,
                    "completion_tokens": u.completion_tokens,
                    "total_tokens": u.total_tokens.unwrap_or(u.prompt_tokens + u.completion_tokens),
                });
                if let Some(cost) = u.cost {
                    usage["cost"] = json!(cost);
                }
                usage
            }
            None => {
                let output_chars = [&reply.text, &reply.reasoning]
                    .iter()
                    .filter_map(|t| t.as_deref())
                    .map(|t| t.chars().count())
                    .sum::<usize>()
                    + tool_calls
                        .iter()
                        .map(|c| c.name.len() + c.arguments.chars().count())
                        .sum::<usize>();
                let prompt = tokens(conversation.prompt_chars());
                let completion = tokens(output_chars);
                json!({
                    "prompt_tokens": prompt,
                    "completion_tokens": completion,
                    "total_tokens": prompt + completion,
                })
            }
        };
        Answer {
            id: format!("chatcmpl-fake-{request_no}"),
            model: conversation.model.clone(),
            created: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or_default(),
            text: reply.text.clone(),
            reasoning: reply.reasoning.clone(),
            tool_calls,
            finish_reason,
            usage,
        }
    }

    /// The non-streaming `chat.completion` object.
    pub fn completion(&self) -> Value {
        let mut message = json!({ "role": "assistant", "content": self.text });
        if let Some(reasoning) = &self.reasoning {
            message["reasoning_content"] = json!(reasoning);
        }
        if !self.tool_calls.is_empty() {
            message["tool_calls"] = self
                .tool_calls
                .iter()
                .map(|c| {
                    json!({
                        "id": c.id,
                        "type": "function",
                        "function": { "name": c.name, "arguments": c.arguments },
                    })
                })
                .collect();
        }
        json!({
            "id": self.id,
            "object": "chat.completion",
            "created": self.created,
            "model": self.model,
            "choices": [{ "index": 0, "message": message, "finish_reason": self.finish_reason }],
            "usage": self.usage,
        })
    }

    /// The `chat.completion.chunk` objects of a streamed answer, in order (without `[DONE]`).
    pub fn chunks(&self, include_usage: bool) -> Vec<Value> {
        let mut chunks = vec![self.chunk(json!({ "role": "assistant", "content": "" }), None)];
        for piece in self.reasoning.iter().flat_map(|r| split_words(r)) {
            chunks.push(self.chunk(json!({ "reasoning_content": piece }), None));
        }
        for piece in self.text.iter().flat_map(|t| split_words(t)) {
            chunks.push(self.chunk(json!({ "content": piece }), None));
        }
        for (index, call) in self.tool_calls.iter().enumerate() {
            chunks.push(self.chunk(
                json!({ "tool_calls": [{
                    "index": index,
                    "id": call.id,
                    "type": "function",
                    "function": { "name": call.name, "arguments": "" },
                }]}),
                None,
            ));
            for piece in split_even(&call.arguments, 3) {
                chunks.push(self.chunk(
                    json!({ "tool_calls": [{ "index": index, "function": { "arguments": piece } }] }),
                    None,
                ));
            }
        }
        chunks.push(self.chunk(json!({}), Some(&self.finish_reason)));
        if include_usage {
            chunks.push(json!({
                "id": self.id,
                "object": "chat.completion.chunk",
                "created": self.created,
                "model": self.model,
                "choices": [],
                "usage": self.usage,
            }));
        }
        chunks
    }

    fn chunk(&self, delta: Value, finish_reason: Option<&str>) -> Value {
        json!({
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": [{ "index": 0, "delta": delta, "finish_reason": finish_reason }],
        })
    }
}

/// About four characters a token, at least one.
fn tokens(chars: usize) -> u64 {
    u64::try_from(chars.div_ceil(4).max(1)).unwrap_or(u64::MAX)
}

/// Splits after each space, so `"a b c"` streams as `"a "`, `"b "`, `"c"`. Joined, the pieces
/// are the input exactly.
pub fn split_words(text: &str) -> Vec<String> {
    text.split_inclusive(' ').map(str::to_owned).collect()
}

/// Splits into at most `parts` non-empty pieces at character boundaries (none for "").
pub fn split_even(text: &str, parts: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    if chars.is_empty() {
        return Vec::new();
    }
    let size = chars.len().div_ceil(parts.max(1));
    chars.chunks(size).map(|c| c.iter().collect()).collect()
}

/// An OpenAI-style error body: `{"error": {"message", "type", "code"}}`.
pub fn error_body(status: u16, message: &str) -> Value {
    let kind = match status {
        400 | 404 | 422 => "invalid_request_error",
        401 | 403 => "authentication_error",
        429 => "rate_limit_error",
        _ => "server_error",
    };
    json!({ "error": { "message": message, "type": kind, "code": status.to_string() } })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_join_back_to_the_input() {
        assert_eq!(split_words("a b  c").concat(), "a b  c");
        assert_eq!(split_words("a b c").len(), 3);
        assert_eq!(split_even(r#"{"k":"vé"}"#, 3).concat(), r#"{"k":"vé"}"#);
        assert_eq!(split_even("ab", 3), vec!["a", "b"]);
        assert!(split_even("", 3).is_empty());
    }
}
