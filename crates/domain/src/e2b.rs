//! The wire shapes of the E2B-compatible API (issue 40), as the E2B SDKs send and read them
//! (`docs/e2b-wire.md` records what was seen on the wire from `e2b` 2.46 and 2.64 and npm
//! `e2b` 2.51). Field names are E2B's (`templateID`, `envVars`, snake-case
//! `allow_internet_access`), not ours.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use time::OffsetDateTime;

/// The template every SDK asks for by default: the project's default image.
pub const BASE_TEMPLATE: &str = "base";
/// The code interpreter's template: the built-in `analysis` environment.
pub const CODE_INTERPRETER_TEMPLATE: &str = "code-interpreter-v1";
/// The envd version we say we serve: the lowest that turns on every default code path of
/// the SDKs (the default user, octet-stream uploads), and nothing we do not serve.
pub const ENVD_VERSION: &str = "0.5.7";
/// A sandbox's lifetime when create names none (E2B's default).
pub const DEFAULT_TIMEOUT_SECONDS: i64 = 300;
/// The longest `timeout` taken: a day, as E2B's paid plans allow.
pub const MAX_TIMEOUT_SECONDS: i64 = 24 * 3600;
/// Most sandboxes one page of a list holds, and the default.
pub const MAX_LIST_LIMIT: i64 = 100;

/// `POST /sandboxes` and `POST /v2/sandboxes`.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct NewSandbox {
    #[serde(rename = "templateID", default)]
    pub template_id: Option<String>,
    /// Seconds the sandbox lives; absent: [`DEFAULT_TIMEOUT_SECONDS`].
    #[serde(default)]
    pub timeout: Option<i64>,
    #[serde(default)]
    pub metadata: Option<BTreeMap<String, String>>,
    #[serde(rename = "envVars", default)]
    pub env_vars: Option<BTreeMap<String, String>>,
    /// False: the sandbox reaches no network (its own policy denies every destination).
    #[serde(default)]
    pub allow_internet_access: Option<bool>,
    /// Sent by 2.46 (always true); v2 sandboxes are always secure.
    #[serde(default)]
    pub secure: Option<bool>,
    /// Pausing at the timeout instead of killing is not served; refused when true.
    #[serde(rename = "autoPause", default)]
    pub auto_pause: Option<bool>,
}

/// What create and connect answer (`201` / `200`).
#[derive(Clone, Debug, Serialize)]
pub struct SandboxCreated {
    #[serde(rename = "templateID")]
    pub template_id: String,
    #[serde(rename = "sandboxID")]
    pub sandbox_id: String,
    #[serde(rename = "clientID")]
    pub client_id: String,
    #[serde(rename = "envdVersion")]
    pub envd_version: String,
    #[serde(rename = "envdAccessToken")]
    pub envd_access_token: String,
    #[serde(rename = "trafficAccessToken")]
    pub traffic_access_token: Option<String>,
    pub alias: String,
    /// The domain of its sandbox hosts (`--e2b-domain`), or null for the SDK's own.
    pub domain: Option<String>,
}

/// `running` or `paused`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SandboxState {
    Running,
    Paused,
}

impl SandboxState {
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "running" => Some(Self::Running),
            "paused" => Some(Self::Paused),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Running => "running",
            Self::Paused => "paused",
        }
    }
}

/// `GET /sandboxes/{id}` and each item of `GET /v2/sandboxes`.
#[derive(Clone, Debug, Serialize)]
pub struct SandboxDetail {
    #[serde(rename = "templateID")]
    pub template_id: String,
    #[serde(rename = "sandboxID")]
    pub sandbox_id: String,
    #[serde(rename = "clientID")]
    pub client_id: String,
    pub alias: String,
    #[serde(rename = "startedAt", with = "time::serde::rfc3339")]
    pub started_at: OffsetDateTime,
    #[serde(rename = "endAt", with = "time::serde::rfc3339")]
    pub end_at: OffsetDateTime,
    #[serde(rename = "envdVersion")]
    pub envd_version: String,
    #[serde(rename = "cpuCount")]
    pub cpu_count: i64,
    #[serde(rename = "memoryMB")]
    pub memory_mb: i64,
    #[serde(rename = "diskSizeMB")]
    pub disk_size_mb: i64,
    pub state: SandboxState,
    pub metadata: Map<String, Value>,
    /// Only in `GET /sandboxes/{id}`.
    #[serde(rename = "envdAccessToken", skip_serializing_if = "Option::is_none")]
    pub envd_access_token: Option<String>,
    pub domain: Option<String>,
}

/// `POST /sandboxes/{id}/timeout`.
#[derive(Clone, Debug, Deserialize)]
pub struct SandboxTimeout {
    pub timeout: i64,
}

/// `POST /sandboxes/{id}/connect` and `/v2/...`: the timeout from now, when given.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct ConnectSandbox {
    #[serde(default)]
    pub timeout: Option<i64>,
}

/// E2B's error body: every non-2xx answer of the E2B API.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct E2bError {
    pub code: u16,
    pub message: String,
}

/// A `timeout` in range, or why not.
pub fn check_timeout(seconds: i64) -> Result<i64, String> {
    if (1..=MAX_TIMEOUT_SECONDS).contains(&seconds) {
        Ok(seconds)
    } else {
        Err(format!(
            "timeout is 1 to {MAX_TIMEOUT_SECONDS} seconds, not {seconds}"
        ))
    }
}

/// E2B's home directory, which is our workspace.
pub const E2B_HOME: &str = "/home/user";
const WORKSPACE: &str = "/workspace";

/// `path` in the sandbox: E2B's home is the workspace, relative paths are in it.
pub fn sandbox_path(path: &str) -> String {
    if path == E2B_HOME {
        return WORKSPACE.into();
    }
    if let Some(rest) = path.strip_prefix("/home/user/") {
        return format!("{WORKSPACE}/{rest}");
    }
    if path.starts_with('/') {
        return path.into();
    }
    if path.is_empty() || path == "." {
        return WORKSPACE.into();
    }
    format!("{WORKSPACE}/{}", path.trim_start_matches("./"))
}

/// The sandbox's `path` as E2B code sees it (the inverse of [`sandbox_path`]).
pub fn e2b_path(path: &str) -> String {
    if path == WORKSPACE {
        return E2B_HOME.into();
    }
    match path.strip_prefix("/workspace/") {
        Some(rest) => format!("{E2B_HOME}/{rest}"),
        None => path.into(),
    }
}

/// The code interpreter's port in the SDKs' terms (`E2b-Sandbox-Port: 49999`).
pub const INTERPRETER_PORT: u16 = 49999;
/// The code interpreter's one language: Python, in our kernel.
pub const PYTHON: &str = "python";
/// The id of the default context: the session's own kernel, whose cells are journaled in its
/// notebook.
pub const DEFAULT_CONTEXT: &str = "default";
/// The most bytes of code one `/execute` takes.
pub const MAX_CODE_BYTES: usize = 1024 * 1024;

/// `POST /execute`. Python sends every key (null when unset), JavaScript only those set.
#[derive(Clone, Debug, Deserialize)]
pub struct Execute {
    pub code: String,
    #[serde(default)]
    pub context_id: Option<String>,
    #[serde(default)]
    pub language: Option<String>,
    /// Set in the kernel for this execution only.
    #[serde(default)]
    pub env_vars: Option<BTreeMap<String, String>>,
}

/// `POST /contexts`.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct NewContext {
    #[serde(default)]
    pub language: Option<String>,
    /// E2B's view (`/home/user` is the workspace); default `/home/user`.
    #[serde(default)]
    pub cwd: Option<String>,
}

/// A context as the code interpreter answers it (all three keys are required by the SDKs).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CodeContext {
    pub id: String,
    pub language: String,
    pub cwd: String,
}

/// The Connect protocol's envelope, around each message of a streaming call:
/// `[flags: u8][length: u32 big-endian][message]`. Pure, and fuzzed
/// (`crates/sandboxd/fuzz`, target `connect_envelope`): the request's envelope is untrusted.
pub mod envelope {
    /// Flag of a compressed message (never sent by the SDKs; refused).
    pub const COMPRESSED: u8 = 0x01;
    /// Flag of the envelope that ends a stream.
    pub const END_STREAM: u8 = 0x02;
    /// The largest request message taken.
    pub const MAX_MESSAGE: usize = 1 << 20;

    /// One envelope around `message`.
    pub fn wrap(flags: u8, message: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(5 + message.len());
        out.push(flags);
        out.extend_from_slice(&(message.len() as u32).to_be_bytes());
        out.extend_from_slice(message);
        out
    }

    /// The one message of a server-streaming call's request body: exactly one uncompressed
    /// envelope of at most [`MAX_MESSAGE`] bytes, nothing after it; or why not.
    pub fn single(body: &[u8]) -> Result<&[u8], &'static str> {
        if body.len() < 5 {
            return Err("shorter than its 5-byte prefix");
        }
        let flags = body[0];
        if flags & COMPRESSED != 0 {
            return Err("compressed messages are not taken");
        }
        if flags != 0 {
            return Err("unknown flags");
        }
        let len = u32::from_be_bytes([body[1], body[2], body[3], body[4]]) as usize;
        if len > MAX_MESSAGE {
            return Err("the message is over 1 MiB");
        }
        if body.len() - 5 != len {
            return Err("its length does not match the body");
        }
        Ok(&body[5..])
    }
}

#[cfg(test)]
mod path_tests {
    use super::{e2b_path, sandbox_path};

    #[test]
    fn e2b_home_is_the_workspace() {
        assert_eq!(sandbox_path("/home/user"), "/workspace");
        assert_eq!(sandbox_path("/home/user/a/b.txt"), "/workspace/a/b.txt");
        assert_eq!(sandbox_path("a.txt"), "/workspace/a.txt");
        assert_eq!(sandbox_path("./a.txt"), "/workspace/a.txt");
        assert_eq!(sandbox_path("/tmp/x"), "/tmp/x");
        assert_eq!(sandbox_path("/home/username"), "/home/username");
        for p in ["/home/user", "/home/user/a/b.txt", "/tmp/x"] {
            assert_eq!(e2b_path(&sandbox_path(p)), p);
        }
        assert_eq!(e2b_path("/workspaces"), "/workspaces");
    }
}
