//! Scripts: "when the conversation looks like X, answer Y".
//!
//! A [`Script`] is an ordered list of [`Rule`]s. For each chat-completions request the server
//! takes the **first** rule whose [`When`] holds and whose `times` budget is not used up; a rule
//! with `times: N` answers at most N requests and then falls through to the next rule, which is
//! how a test scripts "fail twice with 503, then succeed". No matching rule is a 400 that names
//! the last user message, so a test sees what it forgot to script.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A whole script: the rules, plus the models the server lists.
///
/// In JSON either `{"rules": [...], "models": [...], "model_info": true}` or a bare array of
/// rules. Unknown fields are refused, so a misspelt matcher fails loudly instead of matching
/// everything.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Script {
    /// Tried in order; the first that matches (and has budget left) answers.
    #[serde(default)]
    pub rules: Vec<Rule>,
    /// What `GET /v1/models` and `GET /model/info` list. Empty means one model, `fake-model`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub models: Vec<ModelEntry>,
    /// When false, `GET /model/info` answers 404, like an OpenAI-compatible server that is not
    /// a LiteLLM proxy.
    #[serde(default = "yes")]
    pub model_info: bool,
}

impl Default for Script {
    fn default() -> Self {
        Script::new([])
    }
}

impl Script {
    /// Parses a script from JSON text: an object with `rules`, or a bare array of rules.
    pub fn from_json(text: &str) -> Result<Script, serde_json::Error> {
        let value: Value = serde_json::from_str(text)?;
        Script::from_value(value)
    }

    /// Like [`Script::from_json`], from a parsed value.
    pub fn from_value(value: Value) -> Result<Script, serde_json::Error> {
        match value {
            Value::Array(_) => Ok(Script::new(serde_json::from_value::<Vec<Rule>>(value)?)),
            other => serde_json::from_value(other),
        }
    }
}

fn yes() -> bool {
    true
}

impl Script {
    /// A script with these rules, the default model list and `/model/info` served.
    pub fn new(rules: impl IntoIterator<Item = Rule>) -> Self {
        Script {
            rules: rules.into_iter().collect(),
            models: Vec::new(),
            model_info: true,
        }
    }

    /// Appends a rule (tried after the ones already there).
    pub fn rule(mut self, rule: Rule) -> Self {
        self.rules.push(rule);
        self
    }

    /// Adds a model to the listing (replacing the default `fake-model`).
    pub fn model(mut self, model: ModelEntry) -> Self {
        self.models.push(model);
        self
    }

    /// Makes `GET /model/info` answer 404.
    pub fn without_model_info(mut self) -> Self {
        self.model_info = false;
        self
    }

    /// The models to list: the scripted ones, or the default one.
    pub fn listed_models(&self) -> Vec<ModelEntry> {
        if self.models.is_empty() {
            vec![ModelEntry::new("fake-model").limits(Some(128_000), Some(16_384))]
        } else {
            self.models.clone()
        }
    }
}

/// One model in `GET /v1/models` and `GET /model/info`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ModelEntry {
    pub id: String,
    #[serde(default = "default_owner")]
    pub owned_by: String,
    #[serde(default)]
    pub max_input_tokens: Option<u64>,
    #[serde(default)]
    pub max_output_tokens: Option<u64>,
    /// Prices per token in US dollars, in `/model/info` as LiteLLM names them; both, or the
    /// model is listed without prices.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_cost_per_token: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_cost_per_token: Option<f64>,
}

fn default_owner() -> String {
    "fake-model".to_owned()
}

impl ModelEntry {
    pub fn new(id: impl Into<String>) -> Self {
        ModelEntry {
            id: id.into(),
            owned_by: default_owner(),
            max_input_tokens: None,
            max_output_tokens: None,
            input_cost_per_token: None,
            output_cost_per_token: None,
        }
    }

    /// Lists the model with these per-token prices (US dollars) in `/model/info`.
    pub fn prices(mut self, input: f64, output: f64) -> Self {
        self.input_cost_per_token = Some(input);
        self.output_cost_per_token = Some(output);
        self
    }

    pub fn limits(mut self, max_input: Option<u64>, max_output: Option<u64>) -> Self {
        self.max_input_tokens = max_input;
        self.max_output_tokens = max_output;
        self
    }
}

/// A rule: a matcher, a reply, and an optional budget.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    #[serde(default)]
    pub when: When,
    pub reply: Reply,
    /// Answer at most this many requests, then fall through. None = no limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub times: Option<u32>,
}

/// Conditions on the request; all that are set must hold. None set matches everything.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct When {
    /// The last `user` message contains this text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_user_contains: Option<String>,
    /// The last message has this role (`tool` = the model is being given tool results).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_message_role: Option<String>,
    /// The last `tool` message contains this text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_tool_result_contains: Option<String>,
    /// Some message (any role) contains this text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub any_message_contains: Option<String>,
    /// The first `system` message contains this text (which agent, or which kind of call,
    /// is speaking: its instructions are there).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_contains: Option<String>,
    /// The request's `model` is exactly this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// A tool with this name was offered in `tools`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub has_tool: Option<String>,
    /// The conversation already holds exactly this many assistant messages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn: Option<u32>,
    /// No tool with this name was offered in `tools`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lacks_tool: Option<String>,
}

/// What to answer.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Reply {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ScriptedToolCall>,
    /// Sent as `reasoning_content` ("thinking").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<String>,
    /// Default: `tool_calls` when there are any, else `stop`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finish_reason: Option<String>,
    /// Default: derived from lengths (about four characters a token).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<ScriptedUsage>,
    /// Answer this HTTP error instead of a completion.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ScriptedError>,
    /// Wait this long before answering (before the status line).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay_ms: Option<u64>,
    /// Wait this long between streamed chunks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chunk_delay_ms: Option<u64>,
    /// Streaming only: send this many chunks, then break the connection without `[DONE]`
    /// (a provider dying mid-answer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disconnect_after_chunks: Option<usize>,
}

/// A tool call the model makes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptedToolCall {
    pub name: String,
    /// Any JSON value; sent on the wire as a JSON-encoded string, as OpenAI does.
    #[serde(default = "empty_object")]
    pub arguments: Value,
    /// Default: `call_<request number>_<index>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
}

fn empty_object() -> Value {
    Value::Object(Default::default())
}

/// Token counts to report instead of the derived ones.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptedUsage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    /// Default: the sum.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_tokens: Option<u64>,
    /// The call's cost in US dollars, reported as `usage.cost` (as LiteLLM does with
    /// `include_cost_in_streaming_usage`); absent, no cost is reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<f64>,
}

/// An HTTP error answer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptedError {
    pub status: u16,
    /// A JSON object is sent as is; a string becomes the message of an OpenAI-style
    /// `{"error": {"message", "type", "code"}}`; absent gives a generic message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<Value>,
    /// Seconds, sent as `Retry-After`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after: Option<u64>,
}

impl Rule {
    /// Starts a rule: chain conditions on the returned [`When`], then a `reply_*`.
    pub fn when() -> When {
        When::default()
    }

    /// A rule that matches every request.
    pub fn always() -> When {
        When::default()
    }

    /// Answer at most `n` requests, then fall through.
    pub fn times(mut self, n: u32) -> Self {
        self.times = Some(n);
        self
    }

    /// Adds (or sets) the answer's text.
    pub fn text(mut self, text: impl Into<String>) -> Self {
        self.reply.text = Some(text.into());
        self
    }

    /// Adds one more tool call to the same step.
    pub fn tool_call(mut self, name: impl Into<String>, arguments: Value) -> Self {
        self.reply.tool_calls.push(ScriptedToolCall {
            name: name.into(),
            arguments,
            id: None,
        });
        self
    }

    /// Adds one more tool call with a fixed id.
    pub fn tool_call_with_id(
        mut self,
        id: impl Into<String>,
        name: impl Into<String>,
        arguments: Value,
    ) -> Self {
        self.reply.tool_calls.push(ScriptedToolCall {
            name: name.into(),
            arguments,
            id: Some(id.into()),
        });
        self
    }

    pub fn reasoning(mut self, text: impl Into<String>) -> Self {
        self.reply.reasoning = Some(text.into());
        self
    }

    pub fn finish_reason(mut self, reason: impl Into<String>) -> Self {
        self.reply.finish_reason = Some(reason.into());
        self
    }

    pub fn usage(mut self, prompt_tokens: u64, completion_tokens: u64) -> Self {
        self.reply.usage = Some(ScriptedUsage {
            prompt_tokens,
            completion_tokens,
            total_tokens: None,
            cost: None,
        });
        self
    }

    /// Reports these tokens and `cost` US dollars as the call's `usage.cost`.
    pub fn usage_costing(mut self, prompt_tokens: u64, completion_tokens: u64, cost: f64) -> Self {
        self.reply.usage = Some(ScriptedUsage {
            prompt_tokens,
            completion_tokens,
            total_tokens: None,
            cost: Some(cost),
        });
        self
    }

    /// Sends `Retry-After: secs` with the scripted error (no effect without one).
    pub fn retry_after(mut self, secs: u64) -> Self {
        if let Some(error) = self.reply.error.as_mut() {
            error.retry_after = Some(secs);
        }
        self
    }

    pub fn delay_ms(mut self, ms: u64) -> Self {
        self.reply.delay_ms = Some(ms);
        self
    }

    pub fn chunk_delay_ms(mut self, ms: u64) -> Self {
        self.reply.chunk_delay_ms = Some(ms);
        self
    }

    pub fn disconnect_after_chunks(mut self, chunks: usize) -> Self {
        self.reply.disconnect_after_chunks = Some(chunks);
        self
    }
}

impl When {
    pub fn last_user_contains(mut self, text: impl Into<String>) -> Self {
        self.last_user_contains = Some(text.into());
        self
    }

    pub fn last_message_role(mut self, role: impl Into<String>) -> Self {
        self.last_message_role = Some(role.into());
        self
    }

    pub fn last_tool_result_contains(mut self, text: impl Into<String>) -> Self {
        self.last_tool_result_contains = Some(text.into());
        self
    }

    pub fn any_message_contains(mut self, text: impl Into<String>) -> Self {
        self.any_message_contains = Some(text.into());
        self
    }

    pub fn system_contains(mut self, text: impl Into<String>) -> Self {
        self.system_contains = Some(text.into());
        self
    }

    pub fn model(mut self, model: impl Into<String>) -> Self {
        self.model = Some(model.into());
        self
    }

    pub fn has_tool(mut self, name: impl Into<String>) -> Self {
        self.has_tool = Some(name.into());
        self
    }

    pub fn turn(mut self, turn: u32) -> Self {
        self.turn = Some(turn);
        self
    }

    pub fn lacks_tool(mut self, name: impl Into<String>) -> Self {
        self.lacks_tool = Some(name.into());
        self
    }

    /// Finishes the rule with this reply.
    pub fn reply(self, reply: Reply) -> Rule {
        Rule {
            when: self,
            reply,
            times: None,
        }
    }

    /// Answers with text.
    pub fn reply_text(self, text: impl Into<String>) -> Rule {
        self.reply(Reply::default()).text(text)
    }

    /// Answers with one tool call (chain `.tool_call(..)` for more in the same step).
    pub fn reply_tool_call(self, name: impl Into<String>, arguments: Value) -> Rule {
        self.reply(Reply::default()).tool_call(name, arguments)
    }

    /// Answers with an HTTP error whose OpenAI-style body carries `message`.
    pub fn reply_error(self, status: u16, message: impl Into<String>) -> Rule {
        self.reply(Reply {
            error: Some(ScriptedError {
                status,
                body: Some(Value::String(message.into())),
                retry_after: None,
            }),
            ..Reply::default()
        })
    }
}
