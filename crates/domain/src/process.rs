//! Background processes of a session's sandbox as the API shows them: started by one
//! request, running on after it (run by the sandbox's daemon), ended with the sandbox.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use time::OffsetDateTime;
use utoipa::ToSchema;

/// The body of `POST /api/sessions/{session_id}/processes`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct StartProcess {
    /// Run as `sh -c <command>`, with the session's bound secrets in its environment.
    #[schema(min_length = 1)]
    pub command: String,
    /// Variables added to the environment (they win over the session's). At most 256.
    #[serde(default)]
    pub env: Option<BTreeMap<String, String>>,
    /// The working directory: absolute, or relative to the workspace; null: the workspace.
    #[serde(default)]
    pub cwd: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ProcessStatus {
    Running,
    Exited,
}

/// A background process.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct Process {
    /// Its id in the session (`proc_...`), for the other process endpoints.
    pub id: String,
    /// Its pid inside the sandbox.
    pub pid: u32,
    pub command: String,
    pub cwd: String,
    pub status: ProcessStatus,
    /// Once it exited: its code, 128 + the signal when a signal ended it.
    pub exit_code: Option<i32>,
    /// The signal that ended it, if one did.
    pub signal: Option<i32>,
    #[serde(with = "time::serde::rfc3339")]
    pub started_at: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339::option")]
    pub ended_at: Option<OffsetDateTime>,
}

/// A background process with its recent output.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct ProcessDetail {
    #[serde(flatten)]
    pub process: Process,
    /// The last 64 KiB of its standard output (invalid UTF-8 replaced).
    pub stdout: String,
    /// The last 64 KiB of its standard error.
    pub stderr: String,
    /// Bytes of standard output written before what `stdout` holds (not kept).
    pub stdout_dropped: u64,
    pub stderr_dropped: u64,
}

/// A file written through `PUT /api/sessions/{session_id}/sandbox-files`.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct SandboxFile {
    /// The absolute path inside the sandbox.
    pub path: String,
    pub size: u64,
    /// The permission bits, e.g. 420 (0o644).
    pub mode: u32,
    #[serde(with = "time::serde::rfc3339")]
    pub modified_at: OffsetDateTime,
}
