//! The event log's vocabulary: the types, which are stored, and the shape every
//! reader sees (`GET .../events`, each SSE `data:`, a webhook body's `event`).

use crate::ids::{RunId, SessionId};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use time::OffsetDateTime;
use utoipa::ToSchema;

/// Every event type the published client knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EventType {
    SessionCreated,
    SessionStatusRunning,
    SessionStatusIdle,
    SessionStatusError,
    SessionStatusStopped,
    /// An addition: a boot waits for room under the sandbox limits.
    SessionQueued,
    /// An addition: a turn waits for room under the limits on turns in flight.
    SessionRunQueued,
    /// An addition: a write-back found files of an `s3_mount` changed in the bucket too.
    SessionS3Conflict,
    /// An addition: the egress proxy refused a connection of the session's sandbox.
    SandboxEgressDenied,
    /// An addition: a turn stopped at a limit of the session's budget.
    SessionBudgetReached,
    /// An addition: the project's month passed 80 % of its spend limit.
    SessionSpendWarning,
    UserMessage,
    UserFile,
    AgentMessage,
    AgentTextDelta,
    AgentThinking,
    AgentToolUse,
    /// An addition: a person's decision on a call that waited for one (`permissions: ask`).
    AgentToolConfirmation,
    AgentToolResult,
    AgentClientToolCall,
    AgentClientToolResult,
    AgentHandoff,
    AgentCompaction,
    /// An addition: an MCP server of the agent could not be listed or called.
    AgentMcpServerError,
    /// An addition to the client's vocabulary: streamed only to readers that ask for it
    /// (`?tool_output=true`), so the published client's streams never see it.
    AgentToolOutputDelta,
    StreamGap,
}

impl EventType {
    pub const ALL: [EventType; 26] = [
        Self::SessionCreated,
        Self::SessionStatusRunning,
        Self::SessionStatusIdle,
        Self::SessionStatusError,
        Self::SessionStatusStopped,
        Self::SessionQueued,
        Self::SessionRunQueued,
        Self::SessionS3Conflict,
        Self::SandboxEgressDenied,
        Self::SessionBudgetReached,
        Self::SessionSpendWarning,
        Self::UserMessage,
        Self::UserFile,
        Self::AgentMessage,
        Self::AgentTextDelta,
        Self::AgentThinking,
        Self::AgentToolUse,
        Self::AgentToolConfirmation,
        Self::AgentToolResult,
        Self::AgentClientToolCall,
        Self::AgentClientToolResult,
        Self::AgentHandoff,
        Self::AgentCompaction,
        Self::AgentMcpServerError,
        Self::AgentToolOutputDelta,
        Self::StreamGap,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::SessionCreated => "session.created",
            Self::SessionStatusRunning => "session.status_running",
            Self::SessionStatusIdle => "session.status_idle",
            Self::SessionStatusError => "session.status_error",
            Self::SessionStatusStopped => "session.status_stopped",
            Self::SessionQueued => "session.queued",
            Self::SessionRunQueued => "session.run_queued",
            Self::SessionS3Conflict => "session.s3_conflict",
            Self::SandboxEgressDenied => "sandbox.egress_denied",
            Self::SessionBudgetReached => "session.budget_reached",
            Self::SessionSpendWarning => "session.spend_warning",
            Self::UserMessage => "user.message",
            Self::UserFile => "user.file",
            Self::AgentMessage => "agent.message",
            Self::AgentTextDelta => "agent.text_delta",
            Self::AgentThinking => "agent.thinking",
            Self::AgentToolUse => "agent.tool_use",
            Self::AgentToolConfirmation => "agent.tool_confirmation",
            Self::AgentToolResult => "agent.tool_result",
            Self::AgentClientToolCall => "agent.client_tool_call",
            Self::AgentClientToolResult => "agent.client_tool_result",
            Self::AgentHandoff => "agent.handoff",
            Self::AgentCompaction => "agent.compaction",
            Self::AgentMcpServerError => "agent.mcp_server_error",
            Self::AgentToolOutputDelta => "agent.tool_output_delta",
            Self::StreamGap => "stream_gap",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.as_str() == s)
    }

    /// Ephemeral events (`seq = 0`) are streamed live and never stored.
    pub fn is_ephemeral(self) -> bool {
        matches!(
            self,
            Self::AgentTextDelta | Self::AgentToolOutputDelta | Self::StreamGap
        )
    }

    /// Ephemeral types a stream sends only to readers that ask for them: the published
    /// client knows `agent.text_delta` and `stream_gap` as its only ephemeral types, and
    /// would keep anything else among a run's events.
    pub fn is_opt_in(self) -> bool {
        matches!(self, Self::AgentToolOutputDelta)
    }

    /// The two types that end a turn.
    pub fn is_terminal(self) -> bool {
        matches!(self, Self::SessionStatusIdle | Self::SessionStatusError)
    }

    /// `session`, `user` or `agent`: the catalogue's grouping (the contract's recommended
    /// values; a `sandbox.*` event is about the session's sandbox, so `session`).
    pub fn group(self) -> &'static str {
        self.as_str()
            .split('.')
            .next()
            .filter(|g| *g != "stream_gap" && *g != "sandbox")
            .unwrap_or("session")
    }

    pub fn description(self) -> &'static str {
        match self {
            Self::SessionCreated => "The conversation was opened; the container is not up yet.",
            Self::SessionStatusRunning => {
                "The container is up and takes messages. Written on every boot."
            }
            Self::SessionStatusIdle => {
                "A turn finished or paused; carries the run's result and usage."
            }
            Self::SessionStatusError => "A turn or a boot failed; carries the error.",
            Self::SessionStatusStopped => "The container was stopped and the workspace archived.",
            Self::SessionQueued => {
                "The boot waits for room under the sandbox limits (`limit`: `deployment`, `project` or `queue`; `position` in the queue); `session.status_running` follows when it gets a sandbox."
            }
            Self::SessionRunQueued => {
                "The turn waits for room under the limits on turns in flight (`limit`: `deployment`, `project` or `queue`; `position` in the queue; carries the run id); its steps follow when it gets a slot."
            }
            Self::SessionS3Conflict => {
                "Writing an `s3_mount` back found files changed in the bucket since they were staged: the bucket's versions were kept, and the sandbox's uploaded beside them (`mount`, `bucket`, `prefix`, `conflicts`: `key`, `kind` (`changed`, `created`, `deleted`), `sandbox_copy`)."
            }
            Self::SandboxEgressDenied => {
                "The egress proxy refused a connection of the sandbox (`host`, `port`, `reason`: what refused it, e.g. the allowlist of one policy layer or a private address)."
            }
            Self::SessionBudgetReached => {
                "A turn stopped before a model call because the session reached a limit of its budget (`limit`: `max_cost_usd`, `max_total_tokens`, `max_turns` or `max_sandbox_seconds`; `max`; `used`; `budget`: the whole budget). The run's `session.status_idle` follows, with `stop_reason: \"budget_reached\"` and `run_status: \"completed\"`; raising the limit lets the next message go on."
            }
            Self::SessionSpendWarning => {
                "The project's model calls this month passed 80 % of its monthly spend limit, with this session's call (`limit`: `monthly_cost_usd`, `max`, `spent`, `month`: `YYYY-MM` in UTC, `at`: 0.8). Once a month per project; at the limit no turn starts (402) and turns in flight stop before their next call."
            }
            Self::UserMessage => "A prompt that started a turn.",
            Self::UserFile => "A file uploaded into the workspace.",
            Self::AgentMessage => "The model's full message.",
            Self::AgentTextDelta => "A token delta, streamed only.",
            Self::AgentThinking => "The model's reasoning summary.",
            Self::AgentToolUse => "A sandbox tool call (or a subagent, MCP (`mcp_server`: the server's name) or client call), with `awaiting_approval: true` when the agent's permissions say to ask a person first: the run then parks (`session.status_idle`, `stop_reason: \"requires_action\"`, the call in `call_ids`) until `POST /api/sessions/{id}/tool-confirmations`.",
            Self::AgentToolConfirmation => "A person's decision on a call that waited for one (`call_id`, `tool`, `decision`: `allow` or `deny`, `message`, `by`). Allowed, the call runs when the run continues (a client call goes to the caller); denied, the model gets the denial as the tool's error.",
            Self::AgentToolResult => "A sandbox, subagent or MCP tool call's result (`mcp_server` on an MCP tool's).",
            Self::AgentClientToolCall => "The model called a tool the caller runs.",
            Self::AgentClientToolResult => "The answer the model received for a client tool call.",
            Self::AgentHandoff => "The conversation changed hands between agents.",
            Self::AgentCompaction => {
                "The conversation the model sees was compacted into a summary (the log keeps it whole); carries the token counts before and after."
            }
            Self::AgentMcpServerError => {
                "An MCP server of the speaking agent could not be reached (`mcp_server`, `error`, `required`, and `call_id` when a call failed): its tools are left out of the step (a call fails as a tool error); a `required` server fails the turn instead."
            }
            Self::AgentToolOutputDelta => {
                "Output of a running sandbox tool as it is written (`call_id`, `stream`, `text`), streamed only, to streams opened with `tool_output=true`."
            }
            Self::StreamGap => "The reader fell behind; re-read the log.",
        }
    }
}

/// One event of a session's log, as every reader sees it: a page of `GET .../events`, each
/// SSE `data:` frame, and the `event` of a webhook body.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct SessionEvent {
    /// The event's place in the log: positive for stored events, allocated in commit order
    /// (within a session a reader never sees N+1 before N), and the cursor `after` takes. 0 for
    /// an ephemeral event (`agent.text_delta`, `stream_gap`), which is streamed live and never
    /// stored.
    pub seq: i64,
    /// The session whose log it is in.
    #[schema(value_type = String)]
    pub session_id: SessionId,
    /// The run (turn) the event belongs to; null for session-wide events (`session.created`,
    /// `session.status_running`, `session.status_stopped`, `user.file`, and a boot's
    /// `session.status_error`). A terminal event always carries its run's id.
    #[schema(value_type = Option<String>)]
    pub run_id: Option<RunId>,
    /// The event type, e.g. `agent.message`; `GET /api/webhooks/event-types` lists the stored
    /// ones. `session.status_idle` and `session.status_error` are terminal: they end a run.
    #[serde(rename = "type")]
    pub kind: String,
    /// The type's own fields, always an object (`{}` when there are none): `text` for
    /// messages, `tool`, `call_id` and `arguments` (a JSON-encoded string) for tool calls,
    /// `final_output`, `stop_reason`, `run_status`, `turns`, `usage`, `session_usage`,
    /// `sandbox_seconds` and `call_ids` on terminal events, `error` on errors.
    #[schema(value_type = Object)]
    pub payload: Map<String, Value>,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
}

/// An event about to be appended.
#[derive(Clone, Debug, PartialEq)]
pub struct NewEvent {
    pub run_id: Option<RunId>,
    pub kind: EventType,
    pub payload: Map<String, Value>,
}

impl NewEvent {
    /// `payload` must be a JSON object; anything else is a programming error and becomes `{}`.
    pub fn new(kind: EventType, run_id: Option<RunId>, payload: Value) -> Self {
        let payload = match payload {
            Value::Object(m) => m,
            _ => Map::new(),
        };
        Self {
            run_id,
            kind,
            payload,
        }
    }
}

/// One entry of the catalogue of event types a webhook can subscribe to.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct EventTypeInfo {
    /// The type, as `SessionEvent.type` and `Webhook.event_types` spell it.
    #[serde(rename = "type")]
    pub kind: String,
    /// What the event means, for people.
    pub description: String,
    /// `session`, `user` or `agent`: the type's prefix.
    pub group: String,
}

/// The types a webhook subscription can name: every stored type. Ephemeral ones (text
/// deltas, `stream_gap`) are never delivered, so naming them would be a subscription that
/// never fires.
pub fn subscribable() -> impl Iterator<Item = EventType> {
    EventType::ALL.into_iter().filter(|t| !t.is_ephemeral())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_groups_follow_the_prefix() {
        for t in EventType::ALL {
            assert_eq!(EventType::parse(t.as_str()), Some(t));
        }
        assert_eq!(EventType::UserFile.group(), "user");
        assert_eq!(EventType::AgentHandoff.group(), "agent");
        assert_eq!(EventType::StreamGap.group(), "session");
        assert_eq!(
            EventType::ALL.iter().filter(|t| !t.is_ephemeral()).count(),
            23
        );
        assert_eq!(EventType::SessionBudgetReached.group(), "session");
        assert_eq!(EventType::AgentToolConfirmation.group(), "agent");
        assert_eq!(EventType::SessionSpendWarning.group(), "session");
        assert_eq!(EventType::SandboxEgressDenied.group(), "session");
        assert_eq!(EventType::SessionS3Conflict.group(), "session");
        assert_eq!(EventType::AgentCompaction.group(), "agent");
        assert_eq!(EventType::SessionQueued.group(), "session");
        assert_eq!(EventType::SessionRunQueued.group(), "session");
        assert!(
            !EventType::SessionRunQueued.is_terminal()
                && !EventType::SessionRunQueued.is_ephemeral()
        );
        assert!(
            !EventType::SessionQueued.is_terminal() && !EventType::SessionQueued.is_ephemeral()
        );
    }
}
