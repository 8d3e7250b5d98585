//! Sessions, runs, snapshots and the workspace as the API shows them.

use crate::agent::Agent;
use crate::network::{NetworkLayer, NetworkPolicy};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use time::OffsetDateTime;
use utoipa::ToSchema;

pub use crate::state::{RunStatus, RunStopReason, SessionActivity, SessionStatus, StoppedReason};

/// One conversation with an agent and the sandbox (container) it owns. `status` is the
/// sandbox's state and `activity` the conversation's: a running session may be idle. Every
/// change of either is announced by an event in the session's log, written in the same
/// transaction.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct Session {
    /// The session's id (a UUID).
    pub id: String,
    /// The id of the agent it runs (always the id, even when it was created with a slug).
    pub agent_id: String,
    /// A title for people; `""` when none was given.
    pub title: String,
    /// `provisioning` | `running` | `stopped` | `error`. `error` means a boot failed, with the
    /// reason in `error`; `start` tries again.
    pub status: SessionStatus,
    /// `idle` | `busy`: `busy` from a message until its run's terminal event.
    pub activity: SessionActivity,
    /// Why the last boot failed, while `status` is `error`; otherwise null.
    pub error: Option<String>,
    /// Why the sandbox is stopped, only while `status` is `stopped`: `requested` (a stop),
    /// `idle` (released after `idle_ttl_seconds` unused; asleep, the next message wakes it),
    /// `restart` (the server restarted without it) or `lifetime` (its `max_lifetime_seconds`
    /// passed; it cannot be started again). Null otherwise.
    pub stopped_reason: Option<StoppedReason>,
    /// The compute plane it runs on, e.g. `docker`.
    pub backend: String,
    /// The sandbox's id on the backend while one exists; null otherwise.
    pub container_id: Option<String>, // public name (openapi/openapi.json); `sandbox_id` inside
    /// Ports published for previews, from the agent.
    pub exposed_ports: Vec<i32>,
    /// The workspace root inside the container, e.g. `/workspace`.
    pub workdir: String,
    /// The model its turns use: the session's override, else the agent's, else the server's
    /// default, resolved when the session was created.
    pub model: Option<String>,
    /// What the whole conversation has spent so far: tokens (`input_tokens`,
    /// `output_tokens`, `total_tokens`), `requests`, `active_seconds`, and the same split
    /// `by_model` and `by_agent`. `{}` before the first turn.
    #[schema(schema_with = crate::openapi::session_usage)]
    pub usage: Map<String, Value>,
    /// The caller's own JSON values, never read by the server; PATCH merges into it.
    #[schema(value_type = Object)]
    pub metadata: Map<String, Value>,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339")]
    pub updated_at: OffsetDateTime,
    /// When the last event was written to its log; null before any.
    #[serde(with = "time::serde::rfc3339::option")]
    pub last_event_at: Option<OffsetDateTime>,
    /// The session's own idle TTL (see `SessionCreate`); null: the agent's, else the
    /// server's default. An addition to the contract.
    pub idle_ttl_seconds: Option<i64>,
    /// The session's lifetime limit in seconds from `created_at`; null: none. An addition.
    pub max_lifetime_seconds: Option<i64>,
    /// When the lifetime limit stops the sandbox: `created_at + max_lifetime_seconds`; null
    /// without a limit. An addition.
    #[serde(with = "time::serde::rfc3339::option")]
    pub expires_at: Option<OffsetDateTime>,
    /// The sandbox's own resources; null: the server's defaults. An addition.
    pub resources: Option<SandboxResources>,
    /// The id of the environment the session was created in (its own `environment_id`, else
    /// its agent's); null when it boots in the server's default image. An addition to the
    /// published contract.
    pub environment_id: Option<String>,
    /// That environment's name; null with it. An addition.
    pub environment_name: Option<String>,
    /// The session's own network policy (set at create or by PATCH); null: none of its own.
    /// An addition.
    pub network: Option<NetworkPolicy>,
    /// Every network policy that applies to the sandbox, in order: the agent's and the
    /// environment's (copied when the session was created) and the session's own. A
    /// connection is allowed only when every layer permits it, so a session can narrow what
    /// its agent and environment allow, never widen it. `[]` for a session from before
    /// policies (open). An addition.
    pub network_layers: Vec<NetworkLayer>,
    /// Limits on what the session's turns spend, checked before every model call (a turn
    /// that reaches one stops with `stop_reason: "budget_reached"`); null: none. Set at
    /// create (else copied from the agent's `budget`) and by PATCH. An addition.
    pub budget: Option<crate::budget::Budget>,
    /// The version of its agent the session runs: a number (pinned: edits of the agent do
    /// not change what it does; its subagents run as they were when it pinned), or
    /// `"latest"` (every turn runs the agent as it is then). An addition.
    pub agent_version: crate::agent_version::VersionPin,
    /// The names of its agent's MCP servers it uses; null: all of them. An addition.
    #[schema(value_type = Option<Vec<crate::mcp::ServerName>>)]
    pub mcp_servers: Option<Vec<String>>,
}

/// One turn of the tool-calling loop, started by a message. Every event of the turn carries
/// its id as `run_id`, and exactly one terminal event (`session.status_idle` or
/// `session.status_error`) ends it; the row changes in that event's transaction.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct Run {
    /// The run's id (a UUID), the `run_id` of its events.
    pub id: String,
    /// The session it ran in.
    pub session_id: String,
    /// The message that started it.
    pub prompt: String,
    /// `running` | `completed` | `failed` | `cancelled`. A run parked on deferrable client
    /// tools stays `running`.
    pub status: RunStatus,
    /// How it ended: `end_turn` (the model finished), `cancelled` (interrupt or stop),
    /// `max_turns` (the step limit), `error`; null while running.
    pub stop_reason: Option<RunStopReason>,
    /// The model's answer, once it completed; otherwise null.
    pub final_output: Option<String>,
    /// Why it failed; null unless `status` is `failed`.
    pub error: Option<String>,
    /// Model steps taken so far.
    pub turns: i32,
    /// What this turn spent, in the shape of `Session.usage`.
    #[schema(schema_with = crate::openapi::run_usage)]
    pub usage: Map<String, Value>,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
    /// When its terminal event was written; null while running or parked.
    #[serde(with = "time::serde::rfc3339::option")]
    pub finished_at: Option<OffsetDateTime>,
}

/// A session with the agent it resolves, its runs and how long its sandbox has been up, as
/// `GET /api/sessions/{session_id}` returns it.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct SessionDetail {
    #[serde(flatten)]
    pub session: Session,
    /// The session's agent at the version the session runs (`agent_version`: the pinned one,
    /// else as it is now), archived or not.
    pub agent: Option<Agent>,
    /// Every run of the session, oldest first.
    pub runs: Vec<Run>,
    /// Seconds the sandbox has been up, summed over every boot and counted up to now while it
    /// is up, read off the log's status events.
    pub sandbox_seconds: f64,
    /// What the last boot staged of the agent's `skills_source` (where it came from, each
    /// skill's name, description and workspace path); null when it staged none. An addition
    /// to the published contract.
    pub skills: Option<crate::skills::SessionSkills>,
    /// The slug of the agent that holds the conversation, which the next prompt goes to: the
    /// session's agent, or the one the last `agent.handoff` gave it to. An addition to the
    /// published contract.
    pub conversation_agent: String,
}

/// The body of `PATCH /api/sessions/{session_id}`: works in any sandbox state. A field left
/// out is unchanged; `title` and `metadata` may not be null (422).
#[derive(Debug, Deserialize, ToSchema)]
pub struct SessionPatch {
    /// A new title.
    #[serde(default)]
    #[schema(value_type = String)]
    pub title: crate::Patch<String>,
    /// Merged into the stored metadata key by key: a key with a value is set, a key with
    /// null is removed, keys not mentioned are kept.
    #[serde(default)]
    #[schema(value_type = Object)]
    pub metadata: crate::Patch<Map<String, Value>>,
    /// A new policy of the session's own, replacing the one it has; null removes it (the
    /// agent's and the environment's still apply). It can only narrow them. A running
    /// sandbox keeps its connections; the next one is decided by the new policy, without a
    /// restart. An addition to the contract.
    #[serde(default)]
    #[schema(value_type = Option<NetworkPolicy>)]
    pub network: crate::Patch<NetworkPolicy>,
    /// A new budget, replacing the whole one; null removes it. It applies from the session's
    /// next turn: raising a limit a turn stopped at lets the next message go on. An addition.
    #[serde(default)]
    #[schema(value_type = Option<crate::budget::Budget>)]
    pub budget: crate::Patch<crate::budget::Budget>,
    /// Another version of the agent to run (a version number it has, 422 otherwise), or
    /// `"latest"` to follow every edit; not null. The session's next turn (or its parked
    /// turn, when it continues) runs it, with its subagents as they are now; the next boot of
    /// its sandbox boots it (image, manifest).
    /// What was copied at creation (network policy, budget) stays. An addition.
    #[serde(default)]
    #[schema(value_type = crate::agent_version::VersionPin)]
    pub agent_version: crate::Patch<crate::agent_version::VersionPin>,
}

/// The body of `POST /api/sessions`: a new session of an agent. Only `agent_id` is required;
/// null in an optional field means "the agent's" (or the server's default). `metadata` and
/// `secret_bindings` may be left out but not sent as null (422).
#[derive(Debug, Deserialize, ToSchema)]
pub struct SessionCreate {
    /// The agent's id or slug. An unknown agent is a 404, an archived one a 409.
    pub agent_id: String,
    /// A title for people. Default `""`.
    #[serde(default)]
    #[schema(default = "")]
    pub title: String,
    /// The caller's own JSON values, kept with the session. Default `{}`; not null.
    #[serde(default, deserialize_with = "crate::patch::non_null")]
    #[schema(value_type = Object)]
    pub metadata: Map<String, Value>,
    /// The model for this session's turns, not blank; null: the agent's.
    #[serde(default)]
    #[schema(
        min_length = 1,
        pattern = "[^\\t\\n\\u000b\\f\\r \\u0085\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000]"
    )]
    pub model: Option<String>,
    /// Instructions for this session, replacing the agent's; null: the agent's.
    #[serde(default)]
    pub instructions: Option<String>,
    /// Merged into the agent's manifest, entry by entry (the session wins per path) and
    /// variable by variable; null: the agent's alone.
    #[serde(default)]
    pub manifest: Option<crate::manifest::ManifestSpec>,
    /// Bindings besides the agent's; the session's win per variable. Each must name a secret
    /// of the project (422 otherwise). At most 32. Default `[]`; not null.
    #[serde(default, deserialize_with = "crate::patch::non_null")]
    #[schema(max_items = 32)]
    pub secret_bindings: Vec<crate::tools::SecretBinding>,
    /// Boot from this snapshot's workspace (and its image, with the packages installed in
    /// it): a fork. The snapshot may be any session's of the project; an unknown one is a
    /// 404. Null: a fresh workspace from the manifest.
    #[serde(default)]
    pub from_snapshot_id: Option<String>,
    /// The environment to boot in, by id or name; null: the agent's `environment_id`, else the
    /// server's default. Unknown: 404; archived: 409. While its image builds the session
    /// waits in `provisioning`; a failed build puts it in `error` with the build's reason.
    #[serde(default)]
    pub environment_id: Option<String>,
    /// A first prompt, whose turn starts as soon as the sandbox is up (recorded with the
    /// boot, so it is the session's first run); no run id comes back. Null: none.
    #[serde(default)]
    pub prompt: Option<String>,
    /// Seconds the sandbox may sit unused before it is released (asleep; the next message
    /// wakes it). Null: the agent's `idle_ttl_seconds`, else the server's default; `0`:
    /// never. An addition to the contract.
    #[serde(default)]
    #[schema(minimum = 0, maximum = 31536000)]
    pub idle_ttl_seconds: Option<i64>,
    /// The longest this session's sandbox may exist, in seconds from the session's creation.
    /// Past it the sandbox is stopped (`stopped_reason: "lifetime"`, its workspace archived as
    /// by a stop) and cannot be started again; its files, transcript and notebook stay
    /// readable. Null: no limit. An addition to the contract.
    #[serde(default)]
    #[schema(minimum = 1, maximum = 31536000)]
    pub max_lifetime_seconds: Option<i64>,
    /// CPUs and memory of this session's sandbox instead of the server's defaults, within the
    /// server's maxima. Null: the defaults. An addition to the contract.
    #[serde(default)]
    pub resources: Option<SandboxResources>,
    /// A network policy of the session's own, on top of its agent's and its environment's
    /// (which it copies now): a connection must be permitted by all of them, so this can only
    /// narrow them. Null: none of its own. PATCH changes it later. An addition to the
    /// contract.
    #[serde(default)]
    pub network: Option<NetworkPolicy>,
    /// Limits on what the session's turns spend (see `Session.budget`); absent or null: the
    /// agent's `budget`, copied now. `{}` sets none even when the agent has one. An addition.
    #[serde(default)]
    pub budget: Option<crate::budget::Budget>,
    /// Which version of the agent to run: a version number it has (422 otherwise), or
    /// `"latest"` to follow every edit. Absent or null: the agent's current version, pinned.
    /// The definition checked and copied now (manifest, budget, network) is that version's.
    /// An addition.
    #[serde(default)]
    pub agent_version: Option<crate::agent_version::VersionPin>,
    /// The names of the agent's MCP servers this session uses, narrowing them (each must be
    /// one of the agent's, 422 otherwise; its subagents keep theirs). Absent or null: all of
    /// the agent's; `[]`: none. An addition.
    #[serde(default)]
    #[schema(max_items = 16, value_type = Option<Vec<crate::mcp::ServerName>>)]
    pub mcp_servers: Option<Vec<String>>,
}

/// The most seconds `idle_ttl_seconds` and `max_lifetime_seconds` take (a year).
pub const MAX_SESSION_SECONDS: i64 = 365 * 24 * 3600;

/// A sandbox's resources, each null for the server's default. A sandbox with CPUs or memory of
/// its own is always created for its session (the warm pool's sandboxes have the defaults); a
/// disk limit of its own is measured like the server's, so such a session still takes a pooled
/// sandbox.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SandboxResources {
    /// CPUs (fractional, e.g. `0.5`); more than 0, at most the server's `--sandbox-max-cpus`.
    #[serde(default)]
    #[schema(exclusive_minimum = 0)]
    pub cpus: Option<f64>,
    /// Memory in MiB (no extra swap); at least 64, at most the server's
    /// `--sandbox-max-memory-mb`.
    #[serde(default)]
    #[schema(minimum = 64)]
    pub memory_mb: Option<i64>,
    /// GPUs. Only `0` (or null) is accepted: the Docker backend gives sandboxes no GPUs, and a
    /// request for one is refused (422) rather than quietly run without.
    #[serde(default)]
    #[schema(minimum = 0, maximum = 0)]
    pub gpus: Option<i64>,
    /// MiB the sandbox may write to its own filesystem before it is stopped
    /// (`stopped_reason: "disk"`, its workspace archived first), measured as the server's
    /// `--sandbox-disk-mb` is, every `--sandbox-disk-check-seconds`. At least 16, and at most
    /// the server's limit when it has one: a session may only lower it. Enforced even when
    /// the server's own limit is off.
    // Left out when null (unlike the fields above): the value is stored as this JSON, and a
    // server process from before the field refuses a key it does not know, so during a
    // rolling upgrade sessions without one stay readable to it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 16)]
    pub disk_mb: Option<i64>,
}

/// The least `disk_mb` a session may ask for: a sandbox's own boot writes a few MiB.
pub const MIN_DISK_MB: i64 = 16;

impl SandboxResources {
    /// Whether every field is the default (null, or no GPUs).
    pub fn is_default(&self) -> bool {
        self.cpus.is_none()
            && self.memory_mb.is_none()
            && self.gpus.unwrap_or(0) == 0
            && self.disk_mb.is_none()
    }
}

/// The body of `POST /api/sessions/{session_id}/exec`: a shell command for the sandbox.
#[derive(Debug, Deserialize, ToSchema)]
pub struct ExecBody {
    /// Run as `sh -c <command>` in the workspace, with the session's bound secrets in its
    /// environment.
    pub command: String,
    /// Seconds the command may run: more than 0 and at most 600; null: 60. On timeout only
    /// the command's processes are killed (exit code 124).
    #[serde(default)]
    #[schema(exclusive_minimum = 0, maximum = 600)]
    pub timeout: Option<f64>,
}

/// What a command printed and how it exited. Output is not masked: a caller who may run
/// commands can read the environment anyway.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct ExecResult {
    /// The exit status; 124 when the command timed out.
    pub exit_code: i64,
    /// Standard output, up to 1 MiB.
    pub stdout: String,
    /// Standard error, up to 1 MiB; a timeout adds a note here.
    pub stderr: String,
}

/// The last event of an exec streamed as SSE (`event: exit`): how the command ended; its
/// output came before, as `stdout` and `stderr` events of `{"text": ...}`.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct ExecExit {
    /// The exit status; 124 when the command timed out.
    pub exit_code: i64,
    pub timed_out: bool,
    /// Whether stdout went over 1 MiB (the rest was not sent).
    pub stdout_truncated: bool,
    pub stderr_truncated: bool,
}

/// One file, directory or link of a session's workspace.
#[derive(Clone, Debug, PartialEq, Serialize, ToSchema)]
pub struct WorkspaceEntry {
    /// Relative to the workspace root, e.g. `output/report.md`.
    pub path: String,
    /// `directory` | `file` | `symlink` | `other`.
    pub kind: String,
    /// Size in bytes.
    pub size: i64,
    /// `ls -l` style, e.g. `-rw-r--r--`.
    pub permissions: String,
    /// The owning user.
    pub owner: String,
    /// The owning group.
    pub group: String,
}

/// Where an uploaded file landed.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct UploadResult {
    /// Workspace-relative path of the file written.
    pub path: String,
    /// Bytes written.
    pub size: i64,
}

/// A saved copy of a session's workspace (mounted buckets excluded) and of its container's
/// image, so that installed packages survive too. A session restores it in place, or a new
/// session forks from it (`from_snapshot_id`).
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct Snapshot {
    /// The snapshot's id (a UUID).
    pub id: String,
    /// The session it was taken from.
    pub session_id: String,
    /// The caller's label; may be `""`.
    pub label: String,
    /// Size of the workspace archive, in bytes.
    pub size_bytes: i64,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
}

/// The body of `POST /api/sessions/{session_id}/snapshots`.
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct SnapshotCreate {
    /// A label for people. Default `""`.
    #[serde(default)]
    #[schema(default = "")]
    pub label: String,
}

/// A URL that reaches a port the session exposes, for a browser.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct PortPreview {
    /// The port inside the sandbox.
    pub port: u16,
    /// The preview URL, on the preview listener (never the API's origin). It is signed for
    /// this session and port and needs no other credential; it serves while the session runs.
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

/// The body of `POST /api/sessions/{session_id}/messages`: one turn.
#[derive(Debug, Deserialize, ToSchema)]
pub struct MessageCreate {
    /// What the user says; the `user.message` event carries it.
    pub prompt: String,
    /// The most model steps this turn may take: 1 to 1000; null: 25. Reaching it fails the
    /// run with `stop_reason: max_turns`.
    #[serde(default)]
    #[schema(minimum = 1, maximum = 1000)]
    pub max_turns: Option<i64>,
    /// Client tools for this turn only, added to the agent's; on a name clash the turn's
    /// declaration wins. The same rules as the agent's apply.
    #[serde(default)]
    pub client_tools: Option<Vec<crate::tools::ClientTool>>,
}

/// The body of `POST /api/sessions/{session_id}/tool-results`: the answer to a client tool
/// call.
#[derive(Debug, Deserialize, ToSchema)]
pub struct ToolResultCreate {
    /// The `call_id` of the `agent.client_tool_call` event being answered.
    pub call_id: String,
    /// What the model gets back, always a string (JSON-encode structured results). Default
    /// `""`.
    #[serde(default)]
    #[schema(default = "")]
    pub output: String,
    /// The tool failed and `output` says why. Default false.
    #[serde(default)]
    #[schema(default = false)]
    pub is_error: bool,
}

/// A client tool call the session waits on now: an ordinary call held open, or a parked
/// deferrable one.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct ClientToolCall {
    /// Answer it with this id (`POST .../tool-results`).
    pub call_id: String,
    /// The client tool's name.
    pub tool: String,
    /// The arguments the model passed, JSON-encoded (a string, not an object).
    pub arguments: String,
    /// The run waiting on it.
    pub run_id: Option<String>,
    /// The seq of its `agent.client_tool_call` event.
    pub seq: i64,
    /// Whether the call parked the run (a deferrable tool) rather than holding it open.
    pub deferrable: bool,
}

/// Where the control plane reaches one exposed port of a running sandbox, as the lifecycle
/// recorded it when the sandbox started (never taken from a request).
///
/// Stored per port in `sessions.port_map`. A bare number is what every row held before
/// `--docker-network` existed, and is still what a control plane outside a container writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum PortTarget {
    /// A host port published on the sandboxes' loopback address (`sandbox::PUBLISH_IP`).
    Published(u16),
    /// The sandbox's own address on the network it shares with the control plane.
    Network(std::net::SocketAddr),
}

impl PortTarget {
    /// What a sandbox backend reported for a port: an address on `publish_ip` is a published
    /// host port, anything else an address on the sandbox network.
    pub fn from_addr(addr: std::net::SocketAddr, publish_ip: std::net::Ipv4Addr) -> Self {
        if addr.ip() == std::net::IpAddr::V4(publish_ip) {
            PortTarget::Published(addr.port())
        } else {
            PortTarget::Network(addr)
        }
    }

    /// The address to connect to.
    pub fn addr(self, publish_ip: std::net::Ipv4Addr) -> std::net::SocketAddr {
        match self {
            PortTarget::Published(port) => (publish_ip, port).into(),
            PortTarget::Network(addr) => addr,
        }
    }
}

#[cfg(test)]
mod port_target_tests {
    use super::PortTarget;
    use std::net::Ipv4Addr;

    const PUBLISH: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 2);

    #[test]
    fn rows_from_before_the_network_still_read_and_both_forms_round_trip() {
        let old: PortTarget = serde_json::from_str("49153").unwrap();
        assert_eq!(old, PortTarget::Published(49153));
        assert_eq!(old.addr(PUBLISH), "127.0.0.2:49153".parse().unwrap());
        let net = PortTarget::from_addr("172.18.0.5:8080".parse().unwrap(), PUBLISH);
        assert_eq!(serde_json::to_string(&net).unwrap(), "\"172.18.0.5:8080\"");
        assert_eq!(
            serde_json::from_str::<PortTarget>("\"172.18.0.5:8080\"").unwrap(),
            net
        );
        let published = PortTarget::from_addr("127.0.0.2:40000".parse().unwrap(), PUBLISH);
        assert_eq!(serde_json::to_string(&published).unwrap(), "40000");
    }
}
