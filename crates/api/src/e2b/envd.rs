//! The sandbox's data plane as the E2B SDKs reach it (`E2B_SANDBOX_URL=<public url>/e2b-sandbox`):
//! every request names its sandbox and port in the `E2b-Sandbox-Id` and `E2b-Sandbox-Port`
//! headers and proves itself with the sandbox's `X-Access-Token`. Port 49983 is envd: its
//! Connect services `process.Process` and `filesystem.Filesystem`, `/files` and `/health`,
//! served from the control plane over our daemon (no E2B code in the sandbox).
//!
//! Paths: E2B's home directory, `/home/user`, is the sandbox's workspace (`/workspace`), and
//! a relative path is relative to it, so code written for E2B finds its files.

use super::connect::{self, Code, ConnectError};
use super::errors::answer as http_error;
use super::target::Target;
use crate::state::AppState;
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use futures::StreamExt;
use sandbox_agents_domain::e2b::{sandbox_path, INTERPRETER_PORT};
use sandbox_agents_domain::SessionId;
use sandbox_agents_e2b::envd::{signal_number, ProcessConfig, ProcessEvent};
use sandbox_agents_sandbox::sandboxd::proto::{FileKind, FileStat};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::time::Duration;

/// The prefix of the data plane's paths.
pub const PREFIX: &str = "/e2b-sandbox";
/// envd's port in the SDKs' terms.
pub const ENVD_PORT: u16 = 49983;
fn b64() -> base64::engine::GeneralPurpose {
    base64::engine::general_purpose::STANDARD
}

/// A signed file URL's fields (`download_url`, `upload_url`): the query of a `/files` request
/// that carries a `signature`.
struct Signed {
    path: String,
    operation: &'static str,
    user: String,
    signature: String,
    expiration: Option<i64>,
}

impl Signed {
    fn of(method: &Method, path: &str, query: Option<&str>) -> Option<Self> {
        if path != "/files" {
            return None;
        }
        let operation = match *method {
            Method::GET => "read",
            Method::POST => "write",
            _ => return None,
        };
        let mut fields: BTreeMap<String, String> = BTreeMap::new();
        for (k, v) in form_urlencoded::parse(query.unwrap_or("").as_bytes()).into_owned() {
            // A field given twice is no signed URL: the signature would be checked against
            // one value and the handler could act on the other.
            if fields.insert(k, v).is_some() {
                return None;
            }
        }
        Some(Self {
            path: fields.get("path")?.clone(),
            operation,
            user: fields.get("username").cloned().unwrap_or_default(),
            signature: fields.get("signature")?.clone(),
            expiration: fields
                .get("signature_expiration")
                .and_then(|e| e.parse().ok()),
        })
    }
}

/// The sandbox the headers name, opened by its access token (or, for the code interpreter,
/// its traffic token; or, for a signed file URL, which carries no token, its signature).
async fn target(
    st: &AppState,
    headers: &HeaderMap,
    interpreter: bool,
    signed: Option<Signed>,
) -> Result<Target, ConnectError> {
    let text = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    };
    let raw = text("e2b-sandbox-id").ok_or_else(|| {
        ConnectError::new(
            Code::InvalidArgument,
            "the request names no sandbox (the E2b-Sandbox-Id header)",
        )
    })?;
    let id = uuid::Uuid::try_parse(raw).map(SessionId).map_err(|_| {
        ConnectError::new(
            Code::Unauthenticated,
            format!("sandbox {raw} was not found"),
        )
    })?;
    let access = text("x-access-token");
    // A signature opens the one file it signs, nothing else.
    let only_path = signed
        .as_ref()
        .filter(|_| !interpreter && access.is_none())
        .map(|s| s.path.clone());
    let opened = match (interpreter, signed) {
        (true, _) => {
            st.e2b
                .authorize_interpreter(id, access, text("e2b-traffic-access-token"))
                .await
        }
        (false, Some(s)) if access.is_none() => {
            st.e2b
                .authorize_signed(
                    id,
                    &s.path,
                    s.operation,
                    &s.user,
                    &s.signature,
                    s.expiration,
                )
                .await
        }
        (false, _) => st.e2b.authorize(id, access).await,
    };
    let project = opened.map_err(|e| match e {
        sandbox_agents_errors::ServiceError::Forbidden(m) => {
            ConnectError::new(Code::Unauthenticated, m)
        }
        other => other.into(),
    })?;
    // Outside the auth layer, so its rate limit is applied here: one bucket per sandbox.
    st.settings
        .auth
        .check_rate(&format!("e2b-sandbox:{}", id.0))
        .map_err(|e| ConnectError::new(Code::ResourceExhausted, e.to_string()))?;
    Ok(Target {
        project,
        id,
        only_path,
    })
}

/// Every request of the data plane.
pub async fn data_plane(State(st): State<AppState>, req: Request) -> Response {
    let port = req
        .headers()
        .get("e2b-sandbox-port")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u16>().ok())
        .unwrap_or(ENVD_PORT);
    let path = req
        .uri()
        .path()
        .strip_prefix(PREFIX)
        .unwrap_or("")
        .to_owned();
    let interpreter = port == INTERPRETER_PORT;
    if port != ENVD_PORT && !interpreter {
        return http_error(
            StatusCode::BAD_GATEWAY,
            format!("port {port} is not open: this server serves envd (port {ENVD_PORT}) and the code interpreter (port {INTERPRETER_PORT}) of E2B sandboxes"),
        );
    }
    let method = req.method().clone();
    let rpc = path.strip_prefix('/').and_then(|p| p.split_once('/'));
    let signed = Signed::of(&method, &path, req.uri().query());
    let target = match target(&st, req.headers(), interpreter, signed).await {
        Ok(t) => t,
        Err(e) => {
            return match rpc {
                _ if interpreter => http_error(e.code.status(), e.message),
                Some(_) if is_stream(&req) => connect::stream_error(e),
                Some(_) => e.into_response(),
                None => http_error(e.code.status(), e.message),
            }
        }
    };
    if interpreter {
        return super::interpreter::serve(&st, &target, &path, req).await;
    }
    match (method, path.as_str(), rpc) {
        (Method::GET, "/health", _) => StatusCode::NO_CONTENT.into_response(),
        (Method::GET, "/files", _) => super::files::download(&st, &target, req).await,
        (Method::POST, "/files", _) => super::files::upload(&st, &target, req).await,
        (Method::POST, _, Some((service, method))) => {
            let (service, method) = (service.to_owned(), method.to_owned());
            rpc_call(&st, &target, &service, &method, req).await
        }
        _ => http_error(StatusCode::NOT_FOUND, format!("envd serves no {path}")),
    }
}

fn is_stream(req: &Request) -> bool {
    req.headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| t.starts_with(connect::STREAM_CONTENT_TYPE))
}

async fn read_body(req: Request) -> Result<(HeaderMap, bytes::Bytes), ConnectError> {
    let (parts, body) = req.into_parts();
    let bytes = axum::body::to_bytes(body, connect::MAX_MESSAGE + 5)
        .await
        .map_err(|_| ConnectError::new(Code::ResourceExhausted, "the request is over 1 MiB"))?;
    Ok((parts.headers, bytes))
}

fn parse<T: serde::de::DeserializeOwned>(message: &[u8]) -> Result<T, ConnectError> {
    serde_json::from_slice(message)
        .map_err(|e| ConnectError::new(Code::InvalidArgument, format!("the request: {e}")))
}

/// `Connect-Timeout-Ms`, when the client set one.
fn deadline(headers: &HeaderMap) -> Option<Duration> {
    headers
        .get("connect-timeout-ms")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .filter(|ms| *ms > 0)
        .map(Duration::from_millis)
}

/// `Keepalive-Ping-Interval` (seconds), else 50.
fn keepalive(headers: &HeaderMap) -> Duration {
    headers
        .get("keepalive-ping-interval")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(Duration::from_secs)
        .unwrap_or(connect::MAX_KEEPALIVE)
}

async fn rpc_call(
    st: &AppState,
    t: &Target,
    service: &str,
    method: &str,
    req: Request,
) -> Response {
    let stream = is_stream(&req);
    let (headers, body) = match read_body(req).await {
        Ok(b) => b,
        Err(e) if stream => return connect::stream_error(e),
        Err(e) => return e.into_response(),
    };
    match (service, method) {
        ("process.Process", "Start") => start(st, t, &headers, &body).await,
        ("process.Process", "Connect") => connect_to(st, t, &headers, &body).await,
        _ if stream => connect::stream_error(ConnectError::new(
            Code::Unimplemented,
            format!("{service}/{method} is not served as a stream"),
        )),
        _ => match unary(st, t, service, method, &body).await {
            Ok(v) => connect::unary(v),
            Err(e) => e.into_response(),
        },
    }
}

#[derive(serde::Deserialize, Default)]
struct ProcessConfigWire {
    cmd: String,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    envs: BTreeMap<String, String>,
    #[serde(default)]
    cwd: Option<String>,
}

#[derive(serde::Deserialize)]
struct StartRequest {
    process: ProcessConfigWire,
    #[serde(default)]
    stdin: Option<bool>,
    #[serde(default)]
    tag: Option<String>,
    #[serde(default)]
    pty: Option<PtyWire>,
}

/// envd's `PTY`: `{"size": {"rows": R, "cols": C}}`.
#[derive(serde::Deserialize)]
struct PtyWire {
    size: PtySizeWire,
}

#[derive(serde::Deserialize)]
struct PtySizeWire {
    rows: u32,
    cols: u32,
}

impl PtyWire {
    /// Rows and columns, each from 1 to the terminals' largest side.
    fn size(&self) -> Result<(u16, u16), ConnectError> {
        let max = u32::from(sandbox_agents_sessions::MAX_TERMINAL_SIDE);
        let side = |n: u32| {
            u16::try_from(n)
                .ok()
                .filter(|n| (1..=max).contains(&u32::from(*n)))
        };
        match (side(self.size.rows), side(self.size.cols)) {
            (Some(rows), Some(cols)) => Ok((rows, cols)),
            _ => Err(ConnectError::new(
                Code::InvalidArgument,
                format!("a terminal's rows and cols are from 1 to {max}"),
            )),
        }
    }
}

/// `process.Process/Start`: the process's events as they happen.
async fn start(st: &AppState, t: &Target, headers: &HeaderMap, body: &[u8]) -> Response {
    let request = match connect::single_message(body).and_then(parse::<StartRequest>) {
        Ok(r) => r,
        Err(e) => return connect::stream_error(e),
    };
    let pty = match request.pty.as_ref().map(PtyWire::size).transpose() {
        Ok(p) => p,
        Err(e) => return connect::stream_error(e),
    };
    let config = ProcessConfig {
        pty,
        cmd: request.process.cmd,
        args: request.process.args,
        envs: request.process.envs,
        cwd: request.process.cwd.map(|c| sandbox_path(&c)),
        tag: request.tag,
    };
    let events = match st
        .e2b
        .start_process(
            t.project,
            t.id,
            config,
            request.stdin.unwrap_or(false),
            deadline(headers),
        )
        .await
    {
        Ok(s) => s,
        Err(e) => return connect::stream_error(e.into()),
    };
    events_response(events, headers)
}

/// A process's events as envd's stream of `{"event": ...}` messages, with keepalives.
fn events_response(
    events: futures::stream::BoxStream<'static, sandbox_agents_errors::Result<ProcessEvent>>,
    headers: &HeaderMap,
) -> Response {
    let messages = events.map(|e| {
        e.map(|event| {
            let event = match event {
                ProcessEvent::Start { pid } => json!({"start": {"pid": pid}}),
                ProcessEvent::Stdout(b) => json!({"data": {"stdout": b64().encode(b)}}),
                ProcessEvent::Stderr(b) => json!({"data": {"stderr": b64().encode(b)}}),
                ProcessEvent::Pty(b) => json!({"data": {"pty": b64().encode(b)}}),
                ProcessEvent::End { exit_code, status } => {
                    let mut end = json!({"exitCode": exit_code, "exited": true, "status": status});
                    if exit_code != 0 {
                        end["error"] = Value::String(status);
                    }
                    json!({"end": end})
                }
            };
            json!({"event": event})
        })
        .map_err(ConnectError::from)
    });
    connect::stream(
        messages,
        json!({"event": {"keepalive": {}}}),
        keepalive(headers),
    )
}

/// `process.Process/Connect`: a running process's events from now on. Its deadline
/// (`Connect-Timeout-Ms`) ends the stream, not the process.
async fn connect_to(st: &AppState, t: &Target, headers: &HeaderMap, body: &[u8]) -> Response {
    let request = match connect::single_message(body).and_then(parse::<Selected>) {
        Ok(r) => r,
        Err(e) => return connect::stream_error(e),
    };
    let pid = match pid_of(st, t, &request.process) {
        Ok(p) => p,
        Err(e) => return connect::stream_error(e),
    };
    let events = match st.e2b.connect_process(t.id, pid) {
        Ok(s) => s,
        Err(e) => return connect::stream_error(e.into()),
    };
    let events = match deadline(headers) {
        Some(d) => events.take_until(tokio::time::sleep(d)).boxed(),
        None => events,
    };
    events_response(events, headers)
}

/// The pid a selector names: its pid, or the running process with its tag.
fn pid_of(st: &AppState, t: &Target, process: &ProcessSelector) -> Result<u32, ConnectError> {
    match (process.pid, process.tag.as_deref()) {
        (Some(pid), _) => Ok(pid),
        (None, Some(tag)) => st.e2b.pid_of_tag(t.id, tag).ok_or_else(|| {
            ConnectError::new(Code::NotFound, format!("process with tag {tag} not found"))
        }),
        (None, None) => Err(ConnectError::new(
            Code::InvalidArgument,
            "process names no pid or tag",
        )),
    }
}

#[derive(serde::Deserialize)]
struct ProcessSelector {
    #[serde(default)]
    pid: Option<u32>,
    #[serde(default)]
    tag: Option<String>,
}

#[derive(serde::Deserialize)]
struct Selected {
    process: ProcessSelector,
    #[serde(default)]
    signal: Option<String>,
    #[serde(default)]
    input: Option<BTreeMap<String, String>>,
    /// `Update`'s new terminal size.
    #[serde(default)]
    pty: Option<PtyWire>,
}

#[derive(serde::Deserialize)]
struct PathRequest {
    path: String,
}

#[derive(serde::Deserialize)]
struct MoveRequest {
    source: String,
    destination: String,
}

async fn unary(
    st: &AppState,
    t: &Target,
    service: &str,
    method: &str,
    body: &[u8],
) -> Result<Value, ConnectError> {
    let e2b = &st.e2b;
    let sessions = e2b.sessions();
    match (service, method) {
        ("process.Process", "List") => Ok(
            json!({"processes": e2b.list_processes(t.id).into_iter().map(|p| json!({
            "config": {"cmd": p.config.cmd, "args": p.config.args, "envs": p.config.envs, "cwd": p.config.cwd},
            "pid": p.pid,
            "tag": p.config.tag,
        })).collect::<Vec<_>>()}),
        ),
        ("process.Process", "SendSignal" | "SendInput" | "CloseStdin" | "Update") => {
            let req: Selected = parse(body)?;
            let pid = pid_of(st, t, &req.process)?;
            match method {
                "SendSignal" => {
                    let raw = req.signal.unwrap_or_default();
                    let signal = signal_number(&raw).ok_or_else(|| {
                        ConnectError::new(Code::InvalidArgument, format!("unknown signal '{raw}'"))
                    })?;
                    e2b.signal_process(t.id, pid, signal).await?;
                }
                "SendInput" => {
                    let input = req.input.unwrap_or_default();
                    let data =
                        input
                            .get("stdin")
                            .or_else(|| input.get("pty"))
                            .ok_or_else(|| {
                                ConnectError::new(Code::InvalidArgument, "input has no stdin")
                            })?;
                    let bytes = b64().decode(data).map_err(|e| {
                        ConnectError::new(
                            Code::InvalidArgument,
                            format!("input.stdin is not base64: {e}"),
                        )
                    })?;
                    e2b.write_stdin(t.id, pid, bytes).await?;
                }
                "Update" => {
                    let (rows, cols) = req
                        .pty
                        .as_ref()
                        .ok_or_else(|| {
                            ConnectError::new(Code::InvalidArgument, "Update names no pty size")
                        })?
                        .size()?;
                    e2b.resize_pty(t.id, pid, rows, cols).await?;
                }
                _ => e2b.close_stdin(t.id, pid).await?,
            }
            Ok(json!({}))
        }
        ("filesystem.Filesystem", "Stat") => {
            let req: PathRequest = parse(body)?;
            let path = sandbox_path(&req.path);
            let stat = sessions.stat_sandbox_path(t.project, t.id, &path).await?;
            Ok(json!({"entry": entry(&path, &stat)}))
        }
        ("filesystem.Filesystem", "ListDir") => {
            let req: PathRequest = parse(body)?;
            let path = sandbox_path(&req.path);
            let listing = sessions.list_sandbox_dir(t.project, t.id, &path).await?;
            let entries: Vec<Value> = listing
                .entries
                .iter()
                .map(|s| entry(&format!("{}/{}", path.trim_end_matches('/'), s.name), s))
                .collect();
            Ok(json!({"entries": entries}))
        }
        ("filesystem.Filesystem", "MakeDir") => {
            let req: PathRequest = parse(body)?;
            let path = sandbox_path(&req.path);
            let stat = sessions.make_sandbox_dir(t.project, t.id, &path).await?;
            Ok(json!({"entry": entry(&path, &stat)}))
        }
        ("filesystem.Filesystem", "Remove") => {
            let req: PathRequest = parse(body)?;
            sessions
                .remove_sandbox_path(t.project, t.id, &sandbox_path(&req.path))
                .await?;
            Ok(json!({}))
        }
        ("filesystem.Filesystem", "Move") => {
            let req: MoveRequest = parse(body)?;
            let to = sandbox_path(&req.destination);
            let stat = sessions
                .rename_sandbox_path(t.project, t.id, &sandbox_path(&req.source), &to)
                .await?;
            Ok(json!({"entry": entry(&to, &stat)}))
        }
        _ => Err(ConnectError::new(
            Code::Unimplemented,
            format!("{service}/{method} is not served (docs/e2b.md lists what is)"),
        )),
    }
}

/// envd's `EntryInfo` of `stat` at `path`.
fn entry(path: &str, stat: &FileStat) -> Value {
    let kind = match stat.kind {
        FileKind::Dir => "FILE_TYPE_DIRECTORY",
        FileKind::Symlink => "FILE_TYPE_SYMLINK",
        FileKind::File | FileKind::Other => "FILE_TYPE_FILE",
    };
    let modified =
        time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(stat.mtime_ms) * 1_000_000)
            .ok()
            .and_then(|t| {
                t.format(&time::format_description::well_known::Rfc3339)
                    .ok()
            });
    json!({
        "name": stat.name,
        "type": kind,
        "path": path,
        "size": stat.size.to_string(),
        "mode": stat.mode,
        "permissions": permissions(stat),
        "owner": "user",
        "group": "user",
        "modifiedTime": modified,
    })
}

/// `-rw-r--r--`, as `ls` shows the mode.
fn permissions(stat: &FileStat) -> String {
    let first = match stat.kind {
        FileKind::Dir => 'd',
        FileKind::Symlink => 'l',
        _ => '-',
    };
    let mut out = String::from(first);
    for shift in [6, 3, 0] {
        let bits = (stat.mode >> shift) & 0o7;
        out.push(if bits & 4 != 0 { 'r' } else { '-' });
        out.push(if bits & 2 != 0 { 'w' } else { '-' });
        out.push(if bits & 1 != 0 { 'x' } else { '-' });
    }
    out
}
