//! Sessions as the API shows them (API.md §3.3).

use crate::agent::Agent;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use time::OffsetDateTime;
use utoipa::ToSchema;

/// The compute plane's state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum SessionStatus {
    Provisioning,
    Running,
    Stopped,
    Error,
}

impl SessionStatus {
    pub const ALL: [SessionStatus; 4] = [
        Self::Provisioning,
        Self::Running,
        Self::Stopped,
        Self::Error,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Provisioning => "provisioning",
            Self::Running => "running",
            Self::Stopped => "stopped",
            Self::Error => "error",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|v| v.as_str() == s)
    }
}

/// `Session`: one conversation and the container it owns.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct Session {
    pub id: String,
    /// The agent's id.
    pub agent_id: String,
    pub title: String,
    /// `provisioning` | `running` | `stopped` | `error`.
    pub status: String,
    /// `idle` | `busy`.
    pub activity: String,
    pub error: Option<String>,
    /// `requested` | `idle` | `restart`, only while stopped.
    pub stopped_reason: Option<String>,
    pub backend: String,
    pub container_id: Option<String>,
    pub exposed_ports: Vec<i32>,
    pub workdir: String,
    pub model: Option<String>,
    #[schema(value_type = Object)]
    pub usage: Map<String, Value>,
    #[schema(value_type = Object)]
    pub metadata: Map<String, Value>,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339")]
    pub updated_at: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339::option")]
    pub last_event_at: Option<OffsetDateTime>,
}

/// `Run`: one turn.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct Run {
    pub id: String,
    pub session_id: String,
    pub prompt: String,
    pub status: String,
    pub stop_reason: Option<String>,
    pub final_output: Option<String>,
    pub error: Option<String>,
    pub turns: i32,
    #[schema(value_type = Object)]
    pub usage: Map<String, Value>,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339::option")]
    pub finished_at: Option<OffsetDateTime>,
}

/// `SessionDetail`: the session, the agent it resolves, its runs and how long its sandbox has
/// been up over every boot.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct SessionDetail {
    #[serde(flatten)]
    pub session: Session,
    pub agent: Option<Agent>,
    pub runs: Vec<Run>,
    pub sandbox_seconds: f64,
}

/// `PATCH /api/sessions/{id}`: a new title, and metadata merged key by key (null removes).
#[derive(Debug, Deserialize, ToSchema)]
pub struct SessionPatch {
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub title: crate::Patch<String>,
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub metadata: crate::Patch<Map<String, Value>>,
}

/// `POST /api/sessions`.
#[derive(Debug, Deserialize, ToSchema)]
pub struct SessionCreate {
    /// The agent's id or slug.
    pub agent_id: String,
    #[serde(default)]
    pub title: String,
    #[serde(default, deserialize_with = "crate::patch::non_null")]
    #[schema(value_type = Object)]
    pub metadata: Map<String, Value>,
    /// Override of the agent's model.
    #[serde(default)]
    pub model: Option<String>,
    /// Override of the agent's instructions.
    #[serde(default)]
    pub instructions: Option<String>,
    /// Merged into the agent's manifest, entry by entry (the session wins per path).
    #[serde(default)]
    pub manifest: Option<crate::manifest::ManifestSpec>,
    #[serde(default, deserialize_with = "crate::patch::non_null")]
    pub secret_bindings: Vec<crate::tools::SecretBinding>,
    /// Boot from this snapshot's workspace: a fork.
    #[serde(default)]
    pub from_snapshot_id: Option<String>,
    #[serde(default)]
    pub environment_id: Option<String>,
    /// A first prompt, run as soon as the sandbox is up.
    #[serde(default)]
    pub prompt: Option<String>,
}

/// `POST /api/sessions/{id}/exec`.
#[derive(Debug, Deserialize, ToSchema)]
pub struct ExecBody {
    pub command: String,
    /// Seconds the command may run (default 60, at most 600); null = the default.
    #[serde(default)]
    pub timeout: Option<f64>,
}

/// `ExecResult`.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct ExecResult {
    pub exit_code: i64,
    pub stdout: String,
    pub stderr: String,
}

/// `WorkspaceEntry`.
#[derive(Clone, Debug, PartialEq, Serialize, ToSchema)]
pub struct WorkspaceEntry {
    /// Workspace-relative path.
    pub path: String,
    /// `directory` | `file` | `symlink` | `other`.
    pub kind: String,
    pub size: i64,
    /// `ls -l` style, e.g. `-rw-r--r--`.
    pub permissions: String,
    pub owner: String,
    pub group: String,
}

/// `UploadResult`.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct UploadResult {
    pub path: String,
    pub size: i64,
}

/// `Snapshot`.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct Snapshot {
    pub id: String,
    pub session_id: String,
    pub label: String,
    pub size_bytes: i64,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
}

/// `POST /api/sessions/{id}/snapshots`.
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct SnapshotCreate {
    #[serde(default)]
    pub label: String,
}

/// `PortPreview`.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct PortPreview {
    pub port: u16,
    pub url: String,
}

/// Seconds a sandbox has been up over every boot, from the log's status events in order:
/// each `session.status_running` opens an interval that the next `session.status_stopped`
/// or session-wide `session.status_error` closes; an open interval counts up to `now`.
pub fn sandbox_seconds(marks: &[(String, OffsetDateTime)], now: OffsetDateTime) -> f64 {
    let mut total = 0.0;
    let mut up_since: Option<OffsetDateTime> = None;
    for (kind, at) in marks {
        match kind.as_str() {
            "session.status_running" => {
                up_since.get_or_insert(*at);
            }
            _ => {
                if let Some(start) = up_since.take() {
                    total += (*at - start).as_seconds_f64().max(0.0);
                }
            }
        }
    }
    if let Some(start) = up_since {
        total += (now - start).as_seconds_f64().max(0.0);
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    #[test]
    fn sandbox_time_sums_every_boot_and_counts_the_open_one_to_now() {
        let marks = vec![
            (
                "session.status_running".to_owned(),
                datetime!(2026-01-01 0:00:00 UTC),
            ),
            (
                "session.status_stopped".to_owned(),
                datetime!(2026-01-01 0:00:10 UTC),
            ),
            (
                "session.status_running".to_owned(),
                datetime!(2026-01-01 0:01:00 UTC),
            ),
        ];
        assert_eq!(
            sandbox_seconds(&marks, datetime!(2026-01-01 0:01:05 UTC)),
            15.0
        );
        assert_eq!(
            sandbox_seconds(&marks[..2], datetime!(2026-01-01 1:00:00 UTC)),
            10.0
        );
        assert_eq!(sandbox_seconds(&[], datetime!(2026-01-01 1:00:00 UTC)), 0.0);
    }
}

/// `POST /api/sessions/{id}/messages`: one turn.
#[derive(Debug, Deserialize, ToSchema)]
pub struct MessageCreate {
    pub prompt: String,
    /// The most model steps this turn may take; null = the server's default (25).
    #[serde(default)]
    pub max_turns: Option<i64>,
    /// Client tools for this turn only (API.md §6).
    #[serde(default)]
    pub client_tools: Option<Vec<crate::tools::ClientTool>>,
}

/// `POST /api/sessions/{id}/tool-results`: the answer to a client tool call (API.md §2.5).
#[derive(Debug, Deserialize, ToSchema)]
pub struct ToolResultCreate {
    pub call_id: String,
    /// Always a string: the client JSON-encodes other results.
    #[serde(default)]
    pub output: String,
    /// The tool failed; `output` says why. Absent = false.
    #[serde(default)]
    pub is_error: bool,
}

/// A client tool call the session waits on (`GET /api/sessions/{id}/tool-calls`).
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct ClientToolCall {
    pub call_id: String,
    pub tool: String,
    /// The JSON-encoded arguments.
    pub arguments: String,
    pub run_id: Option<String>,
    /// The seq of its `agent.client_tool_call` event.
    pub seq: i64,
    pub deferrable: bool,
}
