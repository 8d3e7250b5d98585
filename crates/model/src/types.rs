//! What goes to the model and what comes back, independent of the wire format.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One chat-completions call.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ChatRequest {
    pub model: String,
    pub messages: Vec<Message>,
    /// Offered to the model as OpenAI `function` tools; empty = no tools.
    #[serde(default)]
    pub tools: Vec<ToolSpec>,
    /// Passed through as is when set (`low`, `medium`, `high`, ...); the provider judges it.
    #[serde(default)]
    pub reasoning_effort: Option<String>,
    #[serde(default)]
    pub max_tokens: Option<u32>,
}

impl ChatRequest {
    pub fn new(model: impl Into<String>, messages: Vec<Message>) -> Self {
        ChatRequest {
            model: model.into(),
            messages,
            ..ChatRequest::default()
        }
    }

    pub fn tools(mut self, tools: Vec<ToolSpec>) -> Self {
        self.tools = tools;
        self
    }
}

/// A message in the conversation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "lowercase")]
pub enum Message {
    System {
        content: String,
    },
    User {
        content: String,
    },
    /// What the model said: text, tool calls, or both.
    Assistant {
        #[serde(default)]
        content: Option<String>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<ToolCall>,
    },
    /// The result of one tool call, answering the call with `tool_call_id`.
    Tool {
        tool_call_id: String,
        content: String,
    },
}

impl Message {
    pub fn system(content: impl Into<String>) -> Self {
        Message::System {
            content: content.into(),
        }
    }

    pub fn user(content: impl Into<String>) -> Self {
        Message::User {
            content: content.into(),
        }
    }

    pub fn assistant(content: impl Into<String>) -> Self {
        Message::Assistant {
            content: Some(content.into()),
            tool_calls: Vec::new(),
        }
    }

    /// The assistant message that carries a completion's text and tool calls back into the
    /// conversation (empty text becomes no content, as OpenAI expects next to tool calls).
    pub fn from_completion(completion: &Completion) -> Self {
        Message::Assistant {
            content: Some(completion.text.clone()).filter(|t| !t.is_empty()),
            tool_calls: completion.tool_calls.clone(),
        }
    }

    pub fn tool(tool_call_id: impl Into<String>, content: impl Into<String>) -> Self {
        Message::Tool {
            tool_call_id: tool_call_id.into(),
            content: content.into(),
        }
    }
}

/// A tool the model may call. `parameters` is a JSON Schema object.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    pub name: String,
    #[serde(default)]
    pub description: String,
    pub parameters: Value,
}

/// A call the model made. `arguments` is the JSON-encoded string exactly as the model wrote
/// it: it may not even be valid JSON, and the caller decides what to do about that.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    pub arguments: String,
}

/// Tokens spent and what they cost, in the shape of the API's `usage` objects. `requests`
/// counts model calls, so usages of several steps add up (`crate::pricing` says where a
/// call's cost comes from).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub total_tokens: u64,
    #[serde(default)]
    pub requests: u64,
    /// Of `input_tokens`, those the provider read from its prompt cache.
    #[serde(default)]
    pub cached_input_tokens: u64,
    /// Of `output_tokens`, the model's reasoning.
    #[serde(default)]
    pub reasoning_tokens: u64,
    /// What the priced calls cost, in US dollars.
    #[serde(default)]
    pub cost_usd: f64,
    /// Calls no price was found for (their cost is not in `cost_usd`).
    #[serde(default)]
    pub unpriced_requests: u64,
}

impl std::ops::AddAssign for Usage {
    fn add_assign(&mut self, other: Usage) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.total_tokens += other.total_tokens;
        self.requests += other.requests;
        self.cached_input_tokens += other.cached_input_tokens;
        self.reasoning_tokens += other.reasoning_tokens;
        self.cost_usd += other.cost_usd;
        self.unpriced_requests += other.unpriced_requests;
    }
}

/// What a stream yields: deltas as they arrive, then exactly one `Done` (unless it fails).
#[derive(Clone, Debug, PartialEq)]
pub enum StreamEvent {
    TextDelta(String),
    ReasoningDelta(String),
    Done(Completion),
}

/// A finished answer: the deltas joined, the assembled tool calls, why it stopped, the usage.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Completion {
    pub text: String,
    pub reasoning: Option<String>,
    pub tool_calls: Vec<ToolCall>,
    /// `stop`, `tool_calls`, `length`, `content_filter`, ... as the provider said it.
    pub finish_reason: String,
    /// All zeros (but `requests: 1`) when the provider sent no usage. Its cost is the
    /// provider's figure, else the catalogue's prices, else the call is unpriced
    /// (`unpriced_requests: 1`).
    pub usage: Usage,
}

/// A model the proxy serves. The limits are None when the proxy does not say.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelInfo {
    pub id: String,
    pub owned_by: String,
    pub max_input_tokens: Option<u64>,
    pub max_output_tokens: Option<u64>,
}
