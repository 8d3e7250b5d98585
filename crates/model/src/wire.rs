//! The OpenAI chat-completions wire format: the request body, and assembling streamed chunks
//! into a [`Completion`].
//!
//! Tool calls arrive as indexed deltas: the first delta for an `index` carries `id` and
//! `function.name`, later ones append to `function.arguments`. The assembler keys on `index`
//! (not on `id`, which later deltas omit) and returns the calls in index order.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::{json, Value};

use crate::error::ModelError;
use crate::types::{ChatRequest, Completion, Message, StreamEvent, ToolCall, Usage};

/// The JSON body of a streamed chat-completions request.
pub fn request_body(req: &ChatRequest) -> Value {
    let messages: Vec<Value> = req.messages.iter().map(message).collect();
    let mut body = json!({
        "model": req.model,
        "messages": messages,
        "stream": true,
        "stream_options": { "include_usage": true },
    });
    if !req.tools.is_empty() {
        body["tools"] = req
            .tools
            .iter()
            .map(|t| {
                json!({
                    "type": "function",
                    "function": {
                        "name": t.name,
                        "description": t.description,
                        "parameters": t.parameters,
                    },
                })
            })
            .collect();
    }
    if let Some(effort) = &req.reasoning_effort {
        body["reasoning_effort"] = json!(effort);
    }
    if let Some(max_tokens) = req.max_tokens {
        body["max_tokens"] = json!(max_tokens);
    }
    body
}

fn message(m: &Message) -> Value {
    match m {
        Message::System { content } => json!({ "role": "system", "content": content }),
        Message::User { content } => json!({ "role": "user", "content": content }),
        Message::Assistant {
            content,
            tool_calls,
        } => {
            let mut v = json!({ "role": "assistant", "content": content });
            if !tool_calls.is_empty() {
                v["tool_calls"] = tool_calls
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
            v
        }
        Message::Tool {
            tool_call_id,
            content,
        } => json!({ "role": "tool", "tool_call_id": tool_call_id, "content": content }),
    }
}

#[derive(Deserialize)]
struct Chunk {
    #[serde(default)]
    choices: Vec<Choice>,
    #[serde(default)]
    usage: Option<WireUsage>,
    #[serde(default)]
    error: Option<Value>,
}

#[derive(Deserialize)]
struct Choice {
    #[serde(default)]
    delta: Option<Delta>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct Delta {
    #[serde(default)]
    content: Option<String>,
    /// DeepSeek, vLLM and LiteLLM call it `reasoning_content`; some servers `reasoning`.
    #[serde(default, alias = "reasoning")]
    reasoning_content: Option<String>,
    #[serde(default)]
    tool_calls: Vec<ToolCallDelta>,
}

#[derive(Deserialize)]
struct ToolCallDelta {
    #[serde(default)]
    index: Option<usize>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    function: Option<FunctionDelta>,
}

#[derive(Deserialize)]
struct FunctionDelta {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    arguments: Option<String>,
}

#[derive(Deserialize)]
struct WireUsage {
    #[serde(default)]
    prompt_tokens: u64,
    #[serde(default)]
    completion_tokens: u64,
    #[serde(default)]
    total_tokens: Option<u64>,
    #[serde(default)]
    prompt_tokens_details: Option<PromptDetails>,
    #[serde(default)]
    completion_tokens_details: Option<CompletionDetails>,
    /// The call's cost in US dollars, where the provider reports it (LiteLLM with
    /// `include_cost_in_streaming_usage`, OpenRouter).
    #[serde(default)]
    cost: Option<f64>,
}

#[derive(Deserialize)]
struct PromptDetails {
    #[serde(default)]
    cached_tokens: Option<u64>,
}

#[derive(Deserialize)]
struct CompletionDetails {
    #[serde(default)]
    reasoning_tokens: Option<u64>,
}

/// Folds streamed chunks into deltas for the caller and, at the end, a [`Completion`].
#[derive(Debug, Default)]
pub struct Assembler {
    text: String,
    reasoning: Option<String>,
    calls: BTreeMap<usize, ToolCall>,
    finish_reason: Option<String>,
    usage: Option<Usage>,
    /// The provider's figure for the call: the usage chunk's `cost`, else the response's
    /// `x-litellm-response-cost` header (`header_cost`).
    reported_cost: Option<f64>,
    pub(crate) header_cost: Option<f64>,
}

impl Assembler {
    /// Takes one `data:` payload (not `[DONE]`) and returns the deltas it carries.
    pub fn push(&mut self, data: &str) -> Result<Vec<StreamEvent>, ModelError> {
        let chunk: Chunk = serde_json::from_str(data).map_err(|e| {
            ModelError::Protocol(format!(
                "the model provider sent a streamed chunk that is not a chat-completions chunk \
                 ({e}): {}",
                data.chars().take(200).collect::<String>()
            ))
        })?;
        if let Some(error) = chunk.error {
            let message = crate::error::provider_message(&json!({ "error": error }).to_string());
            return Err(ModelError::Protocol(format!(
                "the model provider reported an error in the middle of its answer: {message}"
            )));
        }
        if let Some(u) = chunk.usage {
            self.reported_cost = u.cost;
            self.usage = Some(Usage {
                input_tokens: u.prompt_tokens,
                output_tokens: u.completion_tokens,
                total_tokens: u
                    .total_tokens
                    .unwrap_or(u.prompt_tokens + u.completion_tokens),
                requests: 1,
                cached_input_tokens: u
                    .prompt_tokens_details
                    .and_then(|d| d.cached_tokens)
                    .unwrap_or(0),
                reasoning_tokens: u
                    .completion_tokens_details
                    .and_then(|d| d.reasoning_tokens)
                    .unwrap_or(0),
                ..Usage::default()
            });
        }
        let mut events = Vec::new();
        for choice in chunk.choices {
            if let Some(reason) = choice.finish_reason {
                self.finish_reason = Some(reason);
            }
            let Some(delta) = choice.delta else { continue };
            if let Some(text) = delta.reasoning_content.filter(|t| !t.is_empty()) {
                self.reasoning
                    .get_or_insert_with(String::new)
                    .push_str(&text);
                events.push(StreamEvent::ReasoningDelta(text));
            }
            if let Some(text) = delta.content.filter(|t| !t.is_empty()) {
                self.text.push_str(&text);
                events.push(StreamEvent::TextDelta(text));
            }
            for call in delta.tool_calls {
                // Servers that send each call whole may leave out `index`: one call per delta.
                let index = call.index.unwrap_or(self.calls.len());
                let entry = self.calls.entry(index).or_insert_with(|| ToolCall {
                    id: String::new(),
                    name: String::new(),
                    arguments: String::new(),
                });
                if let Some(id) = call.id.filter(|id| !id.is_empty()) {
                    entry.id = id;
                }
                if let Some(function) = call.function {
                    if let Some(name) = function.name.filter(|n| !n.is_empty()) {
                        entry.name = name;
                    }
                    if let Some(arguments) = function.arguments {
                        entry.arguments.push_str(&arguments);
                    }
                }
            }
        }
        Ok(events)
    }

    /// Whether the provider has said why it stopped (its last content chunk arrived).
    pub fn finished(&self) -> bool {
        self.finish_reason.is_some()
    }

    /// The completion so far. A tool call without a name is a protocol error; one without an
    /// id gets `call_<index>` so the conversation can still refer to it.
    pub fn finish(self) -> Result<Completion, ModelError> {
        let mut tool_calls = Vec::with_capacity(self.calls.len());
        for (index, mut call) in self.calls {
            if call.name.is_empty() {
                return Err(ModelError::Protocol(format!(
                    "the model provider streamed a tool call (index {index}) without a name"
                )));
            }
            if call.id.is_empty() {
                call.id = format!("call_{index}");
            }
            tool_calls.push(call);
        }
        let finish_reason = self.finish_reason.unwrap_or_else(|| {
            if tool_calls.is_empty() {
                "stop"
            } else {
                "tool_calls"
            }
            .to_owned()
        });
        let mut usage = self.usage.unwrap_or(Usage {
            requests: 1,
            ..Usage::default()
        });
        // Unpriced until a figure is found: the provider's here, the catalogue's later
        // (`ModelClient::stream`).
        match self
            .reported_cost
            .or(self.header_cost)
            .and_then(|c| crate::pricing::reported(c, &usage))
        {
            Some(cost) => usage.cost_usd = cost,
            None => usage.unpriced_requests = 1,
        }
        Ok(Completion {
            text: self.text,
            reasoning: self.reasoning,
            tool_calls,
            finish_reason,
            usage,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::ToolSpec;

    #[test]
    fn the_request_carries_tools_effort_and_the_conversation() {
        let req = ChatRequest {
            model: "m".into(),
            messages: vec![
                Message::system("s"),
                Message::Assistant {
                    content: None,
                    tool_calls: vec![ToolCall {
                        id: "c1".into(),
                        name: "shell".into(),
                        arguments: "{}".into(),
                    }],
                },
                Message::tool("c1", "ok"),
            ],
            tools: vec![ToolSpec {
                name: "shell".into(),
                description: "run".into(),
                parameters: json!({"type": "object"}),
            }],
            reasoning_effort: Some("high".into()),
            max_tokens: Some(10),
        };
        let body = request_body(&req);
        assert_eq!(body["stream_options"]["include_usage"], true);
        assert_eq!(body["tools"][0]["function"]["name"], "shell");
        assert_eq!(body["reasoning_effort"], "high");
        assert_eq!(body["max_tokens"], 10);
        assert_eq!(
            body["messages"][1]["tool_calls"][0]["function"]["arguments"],
            "{}"
        );
        assert_eq!(body["messages"][2]["tool_call_id"], "c1");
        let plain = request_body(&ChatRequest::new("m", vec![Message::user("hi")]));
        assert!(plain.get("tools").is_none() && plain.get("reasoning_effort").is_none());
    }

    #[test]
    fn the_usage_chunk_gives_the_details_and_the_providers_cost() {
        let mut a = Assembler::default();
        a.push(r#"{"choices":[{"delta":{"content":"hi"},"finish_reason":"stop"}]}"#)
            .unwrap();
        a.push(
            r#"{"choices":[],"usage":{"prompt_tokens":100,"completion_tokens":20,"total_tokens":120,
                "prompt_tokens_details":{"cached_tokens":40},"completion_tokens_details":{"reasoning_tokens":5},
                "cost":0.0125}}"#,
        )
        .unwrap();
        a.header_cost = Some(9.0);
        let u = a.finish().unwrap().usage;
        assert_eq!((u.cached_input_tokens, u.reasoning_tokens), (40, 5));
        assert_eq!((u.cost_usd, u.unpriced_requests), (0.0125, 0));

        // Without a figure the call stays unpriced (the client asks the catalogue next).
        let mut b = Assembler::default();
        b.push(r#"{"choices":[{"delta":{"content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1}}"#)
            .unwrap();
        let u = b.finish().unwrap().usage;
        assert_eq!((u.cost_usd, u.unpriced_requests), (0.0, 1));

        // The header stands in for a usage without a cost.
        let mut c = Assembler {
            header_cost: Some(0.5),
            ..Assembler::default()
        };
        c.push(r#"{"choices":[{"delta":{"content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1}}"#)
            .unwrap();
        assert_eq!(c.finish().unwrap().usage.cost_usd, 0.5);
    }

    #[test]
    fn an_error_chunk_is_a_protocol_error_with_the_providers_message() {
        let mut a = Assembler::default();
        let err = a.push(r#"{"error":{"message":"overloaded"}}"#).unwrap_err();
        assert!(err.to_string().contains("overloaded"), "{err}");
    }
}
