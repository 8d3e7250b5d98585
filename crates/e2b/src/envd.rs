//! The sandbox side of the E2B API (envd's services, in our terms): who may reach a sandbox
//! (its access token), its processes (started through the daemon's exec stream, each kept in
//! this process's table while it runs so a signal, input or a list can reach it), and its
//! files by absolute path.
//!
//! Invariants:
//! * a request names its sandbox and proves it with that sandbox's token (compared in
//!   constant time); a killed sandbox, or another's token, is refused the same way;
//! * a process is in the table from its start until its exit: pids are the sandbox's own,
//!   keyed by sandbox. As envd's, a process outlives the stream that started it (a client
//!   that disconnects leaves it running, to `connect` to again, or to kill); it ends at its
//!   exit, its time limit, a kill, or its sandbox's stop;
//! * the stream that started a process gets all its output (it is waited for, as the daemon
//!   waits for us); a stream connected later gets what comes after it connected, and loses
//!   what it falls more than [`WATCH_BACKLOG`] chunks behind on, rather than slow the process;
//! * output is masked with the session's secret values before it leaves.

use crate::E2b;
use futures::stream::{BoxStream, StreamExt};
use sandbox_agents_domain::{ProjectId, SessionId};
use sandbox_agents_errors::{Result, ServiceError};
use sandbox_agents_sandbox::sandboxd::proto::{Frame, PtySize};
use sandbox_agents_sessions::CommandSpec;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{broadcast, mpsc};

/// How many events a connected stream may fall behind before it loses some.
pub const WATCH_BACKLOG: usize = 1024;
/// How many events the starting stream's reader may leave unread before the process waits.
const PRIMARY_BACKLOG: usize = 64;

/// What to start (envd's `ProcessConfig`).
#[derive(Clone, Debug, Default)]
pub struct ProcessConfig {
    pub cmd: String,
    pub args: Vec<String>,
    pub envs: BTreeMap<String, String>,
    pub cwd: Option<String>,
    pub tag: Option<String>,
    /// A pseudo-terminal of this size (rows, columns): the process's output is then the
    /// terminal's ([`ProcessEvent::Pty`]), and its input the terminal's.
    pub pty: Option<(u16, u16)>,
}

/// One event of a process's stream (envd's `ProcessEvent`).
#[derive(Clone, Debug, PartialEq)]
pub enum ProcessEvent {
    Start {
        pid: u32,
    },
    Stdout(Vec<u8>),
    Stderr(Vec<u8>),
    /// What a process on a pseudo-terminal wrote to it.
    Pty(Vec<u8>),
    End {
        exit_code: i32,
        status: String,
    },
}

/// A running process, as a list shows it.
#[derive(Clone, Debug)]
pub struct RunningProcess {
    pub pid: u32,
    pub config: ProcessConfig,
}

struct Entry {
    config: ProcessConfig,
    input: mpsc::Sender<Frame>,
    /// The process's events for streams connected after its start.
    watchers: broadcast::Sender<ProcessEvent>,
    /// Which start made the entry: a pid the sandbox reuses (after a pause and resume) is
    /// another process, which the old one's end must not remove.
    nonce: u64,
}

/// This process's table of the processes E2B clients started, by sandbox and pid.
#[derive(Clone, Default)]
pub struct Processes {
    table: Arc<Mutex<HashMap<(SessionId, u32), Entry>>>,
    nonces: Arc<std::sync::atomic::AtomicU64>,
}

impl Processes {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(SessionId, u32), Entry>> {
        self.table.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn next_nonce(&self) -> u64 {
        self.nonces
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    }
}

/// Removes a process from the table when its output ends, however it ends.
struct Forget {
    table: Processes,
    key: Option<(SessionId, u32)>,
    nonce: u64,
}

impl Forget {
    fn release(&mut self) {
        if let Some(k) = self.key.take() {
            let mut table = self.table.lock();
            if table.get(&k).is_some_and(|e| e.nonce == self.nonce) {
                table.remove(&k);
            }
        }
    }
}

impl Drop for Forget {
    fn drop(&mut self) {
        self.release();
    }
}

/// Masks a byte stream's secret values across its chunks. Output is bytes: without secrets it
/// passes untouched; with them it is read as UTF-8 (a character cut between chunks is carried
/// to the next; bytes that are not UTF-8 are replaced), since a value can only be found in
/// text.
struct ByteMask {
    mask: Option<sandbox_agents_credentials::secrets::StreamMask>,
    carry: Vec<u8>,
}

impl ByteMask {
    fn new(secrets: &[String]) -> Self {
        Self {
            mask: (!secrets.is_empty())
                .then(|| sandbox_agents_credentials::secrets::StreamMask::new(secrets)),
            carry: Vec::new(),
        }
    }

    fn push(&mut self, bytes: &[u8]) -> Vec<u8> {
        let Some(mask) = &mut self.mask else {
            return bytes.to_vec();
        };
        self.carry.extend_from_slice(bytes);
        let whole = match std::str::from_utf8(&self.carry) {
            Ok(_) => self.carry.len(),
            // An incomplete character at the end waits for the next chunk.
            Err(e) if e.error_len().is_none() => e.valid_up_to(),
            Err(_) => self.carry.len(),
        };
        let text = String::from_utf8_lossy(&self.carry[..whole]).into_owned();
        self.carry.drain(..whole);
        mask.push(&text).into_bytes()
    }

    fn finish(&mut self) -> Vec<u8> {
        let Some(mask) = &mut self.mask else {
            return Vec::new();
        };
        let rest = String::from_utf8_lossy(&std::mem::take(&mut self.carry)).into_owned();
        let mut out = mask.push(&rest);
        out.push_str(&mask.finish());
        out.into_bytes()
    }
}

/// The event, unless it carries no bytes.
fn nonempty(event: ProcessEvent) -> Vec<Result<ProcessEvent>> {
    match &event {
        ProcessEvent::Stdout(b) | ProcessEvent::Stderr(b) | ProcessEvent::Pty(b)
            if b.is_empty() =>
        {
            Vec::new()
        }
        _ => vec![Ok(event)],
    }
}

/// The signature of a file URL as the SDKs make it: `v1_` and the unpadded base64 of the
/// sha256 of `path:operation:user:token[:expiration]`.
pub fn file_signature(
    path: &str,
    operation: &str,
    user: &str,
    token: &str,
    expiration: Option<i64>,
) -> String {
    use base64::Engine;
    use sha2::Digest;
    let mut raw = format!("{path}:{operation}:{user}:{token}");
    if let Some(e) = expiration {
        raw.push_str(&format!(":{e}"));
    }
    let hash = sha2::Sha256::digest(raw.as_bytes());
    format!(
        "v1_{}",
        base64::engine::general_purpose::STANDARD_NO_PAD.encode(hash)
    )
}

/// Whether two tokens are the same, compared in constant time.
fn same(token: &str, expected: &str) -> bool {
    token.len() == expected.len()
        && token
            .bytes()
            .zip(expected.bytes())
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0
}

/// envd's signals: SIGTERM and SIGKILL.
pub fn signal_number(name: &str) -> Option<i32> {
    match name {
        "SIGNAL_SIGTERM" | "SIGTERM" | "15" => Some(15),
        "SIGNAL_SIGKILL" | "SIGKILL" | "9" => Some(9),
        _ => None,
    }
}

impl E2b {
    /// The project of sandbox `id` when `token` is its access token; `Forbidden`
    /// otherwise (no token, a wrong one, a killed sandbox, no such sandbox: one answer).
    pub async fn authorize(&self, id: SessionId, token: Option<&str>) -> Result<ProjectId> {
        self.authorize_either(id, token, None).await
    }

    /// [`E2b::authorize`] for the code interpreter, which the SDKs call with the access token
    /// (`/execute`) or the traffic token only (`/contexts`): either opens it.
    pub async fn authorize_interpreter(
        &self,
        id: SessionId,
        access: Option<&str>,
        traffic: Option<&str>,
    ) -> Result<ProjectId> {
        self.authorize_either(id, access, traffic).await
    }

    /// The project of sandbox `id` when `signature` signs this file URL (`download_url` and
    /// `upload_url`): `path` as the URL names it, `operation` `read` or `write`, `user` the
    /// URL's `username` (empty when none), `expiration` its `signature_expiration` (unix
    /// seconds), which must not have passed. The same refusal as a wrong token otherwise.
    pub async fn authorize_signed(
        &self,
        id: SessionId,
        path: &str,
        operation: &str,
        user: &str,
        signature: &str,
        expiration: Option<i64>,
    ) -> Result<ProjectId> {
        let expected = file_signature(path, operation, user, &self.access_token(id), expiration);
        let live = expiration.is_none_or(|e| e > time::OffsetDateTime::now_utc().unix_timestamp());
        if !(live && same(signature, &expected)) {
            return Err(ServiceError::Forbidden(format!(
                "the signature does not open sandbox {} (wrong, or expired)",
                id.0
            )));
        }
        self.authorize(id, Some(&self.access_token(id))).await
    }

    async fn authorize_either(
        &self,
        id: SessionId,
        access: Option<&str>,
        traffic: Option<&str>,
    ) -> Result<ProjectId> {
        let refused =
            || ServiceError::Forbidden(format!("the access token does not open sandbox {}", id.0));
        let opens = access.is_some_and(|t| same(t, &self.access_token(id)))
            || traffic.is_some_and(|t| same(t, &self.traffic_token(id)));
        if !opens {
            return Err(refused());
        }
        match sandbox_agents_store::e2b::project_of(&self.db, id).await {
            Ok(p) => Ok(p),
            Err(sandbox_agents_store::Error::NotFound) => Err(refused()),
            Err(e) => Err(e.into()),
        }
    }

    /// Starts a process; its events follow until it exits (a dropped stream ends it).
    pub async fn start_process(
        &self,
        project: ProjectId,
        id: SessionId,
        config: ProcessConfig,
        stdin: bool,
        timeout: Option<Duration>,
    ) -> Result<BoxStream<'static, Result<ProcessEvent>>> {
        if config.cmd.is_empty() {
            return Err(ServiceError::BadRequest("process.cmd is empty".into()));
        }
        let mut argv = vec![config.cmd.clone()];
        argv.extend(config.args.iter().cloned());
        let command = self
            .sessions
            .start_command(
                project,
                id,
                CommandSpec {
                    argv,
                    env: config.envs.clone(),
                    cwd: config.cwd.clone(),
                    stdin,
                    timeout_ms: timeout.map(|t| t.as_millis() as u64),
                    pty: config.pty.map(|(rows, cols)| PtySize { rows, cols }),
                },
            )
            .await?;
        let pty = config.pty.is_some();
        let input = command.execution.input;
        let table = self.processes.clone();
        let nonce = table.next_nonce();
        let mut forget = Forget {
            table: table.clone(),
            key: None,
            nonce,
        };
        // One mask per stream, across its chunks: a secret split between two of them is
        // still hidden whole.
        let mut masks = [
            ByteMask::new(&command.secrets),
            ByteMask::new(&command.secrets),
        ];
        let (watchers, _) = broadcast::channel(WATCH_BACKLOG);
        let (primary_tx, primary_rx) = mpsc::channel::<Result<ProcessEvent>>(PRIMARY_BACKLOG);
        let mut frames = command.execution.frames;
        // The process's output is read here, not by the caller's stream, so that the process
        // outlives that stream (see the module's invariants).
        tokio::spawn(async move {
            let mut primary = Some(primary_tx);
            while let Some(frame) = frames.next().await {
                let events = match frame {
                    Ok(Frame::Started(pid)) => {
                        table.lock().insert(
                            (id, pid),
                            Entry {
                                config: config.clone(),
                                input: input.clone(),
                                watchers: watchers.clone(),
                                nonce,
                            },
                        );
                        forget.key = Some((id, pid));
                        vec![Ok(ProcessEvent::Start { pid })]
                    }
                    Ok(Frame::Stdout(b)) if pty => nonempty(ProcessEvent::Pty(masks[0].push(&b))),
                    Ok(Frame::Stdout(b)) => nonempty(ProcessEvent::Stdout(masks[0].push(&b))),
                    Ok(Frame::Stderr(b)) => nonempty(ProcessEvent::Stderr(masks[1].push(&b))),
                    Ok(Frame::Exit(exit)) => {
                        forget.release();
                        let status = match exit.signal {
                            Some(s) => format!("signal: {s}"),
                            None => format!("exit status {}", exit.code),
                        };
                        let rest = masks[0].finish();
                        let mut out = match pty {
                            true => nonempty(ProcessEvent::Pty(rest)),
                            false => nonempty(ProcessEvent::Stdout(rest)),
                        };
                        out.extend(nonempty(ProcessEvent::Stderr(masks[1].finish())));
                        out.push(Ok(ProcessEvent::End {
                            exit_code: exit.code,
                            status,
                        }));
                        out
                    }
                    Ok(Frame::Error(e)) => vec![Err(ServiceError::BadRequest(e.detail))],
                    Ok(_) => Vec::new(),
                    // The sandbox went away under the process (paused or killed): what
                    // happens to a process then, not a fault of ours.
                    Err(e) => vec![Err(ServiceError::Conflict(format!(
                        "the sandbox stopped while the process ran (paused or killed?): {e}"
                    )))],
                };
                for event in events {
                    if let Ok(e) = &event {
                        // None connected is no error.
                        let _ = watchers.send(e.clone());
                    }
                    if let Some(tx) = &primary {
                        if tx.send(event).await.is_err() {
                            primary = None; // its client went away; the process goes on
                        }
                    }
                }
            }
            forget.release();
        });
        let mut rx = primary_rx;
        Ok(futures::stream::poll_fn(move |cx| rx.poll_recv(cx)).boxed())
    }

    /// The events of the running process `pid` from now on, first its start (envd's
    /// `Connect`), until it ends; `NotFound` when it is not running.
    pub fn connect_process(
        &self,
        id: SessionId,
        pid: u32,
    ) -> Result<BoxStream<'static, Result<ProcessEvent>>> {
        let rx = self
            .processes
            .lock()
            .get(&(id, pid))
            .map(|e| e.watchers.subscribe())
            .ok_or_else(|| ServiceError::NotFound(format!("process with pid {pid} not found")))?;
        let start = futures::stream::iter([Ok(ProcessEvent::Start { pid })]);
        let rest = futures::stream::unfold(Some(rx), |rx| async move {
            let mut rx = rx?;
            loop {
                match rx.recv().await {
                    Ok(e @ ProcessEvent::End { .. }) => return Some((Ok(e), None)),
                    Ok(e) => return Some((Ok(e), Some(rx))),
                    // Fallen behind: what it missed is gone; it goes on from here.
                    Err(broadcast::error::RecvError::Lagged(_)) => continue,
                    Err(broadcast::error::RecvError::Closed) => return None,
                }
            }
        });
        Ok(start.chain(rest).boxed())
    }

    /// Hands `frame` to the running process `pid` of the sandbox; `NotFound` when it is not
    /// running (any more).
    async fn send_to_process(&self, id: SessionId, pid: u32, frame: Frame) -> Result<()> {
        let gone = || ServiceError::NotFound(format!("process with pid {pid} not found"));
        let input = self
            .processes
            .lock()
            .get(&(id, pid))
            .map(|e| e.input.clone())
            .ok_or_else(gone)?;
        input.send(frame).await.map_err(|_| gone())
    }

    /// Sends `signal` to the process (its group).
    pub async fn signal_process(&self, id: SessionId, pid: u32, signal: i32) -> Result<()> {
        self.send_to_process(id, pid, Frame::Signal(signal)).await
    }

    /// Writes to the process's stdin (it must have been started with stdin).
    pub async fn write_stdin(&self, id: SessionId, pid: u32, data: Vec<u8>) -> Result<()> {
        self.send_to_process(id, pid, Frame::Stdin(data.into()))
            .await
    }

    pub async fn close_stdin(&self, id: SessionId, pid: u32) -> Result<()> {
        self.send_to_process(id, pid, Frame::StdinEnd).await
    }

    /// Resizes the process's pseudo-terminal (rows, columns; 400 for one started without).
    pub async fn resize_pty(&self, id: SessionId, pid: u32, rows: u16, cols: u16) -> Result<()> {
        let on_pty = self
            .processes
            .lock()
            .get(&(id, pid))
            .map(|e| e.config.pty.is_some());
        if on_pty == Some(false) {
            return Err(ServiceError::BadRequest(format!(
                "process {pid} has no pseudo-terminal to resize"
            )));
        }
        self.send_to_process(id, pid, Frame::Resize(PtySize { rows, cols }))
            .await
    }

    /// The sandbox's processes started through the E2B API that still run.
    pub fn list_processes(&self, id: SessionId) -> Vec<RunningProcess> {
        let mut out: Vec<RunningProcess> = self
            .processes
            .lock()
            .iter()
            .filter(|((s, _), _)| *s == id)
            .map(|((_, pid), e)| RunningProcess {
                pid: *pid,
                config: e.config.clone(),
            })
            .collect();
        out.sort_by_key(|p| p.pid);
        out
    }

    /// The pid of the running process tagged `tag`.
    pub fn pid_of_tag(&self, id: SessionId, tag: &str) -> Option<u32> {
        self.list_processes(id)
            .into_iter()
            .find(|p| p.config.tag.as_deref() == Some(tag))
            .map(|p| p.pid)
    }

    /// The sandbox's files, by absolute path.
    pub fn sessions(&self) -> &sandbox_agents_sessions::Sessions {
        &self.sessions
    }
}

#[cfg(test)]
mod tests {
    use super::file_signature;

    #[test]
    fn a_file_signature_is_the_sdks() {
        // The value the SDKs compute for these fields (docs/e2b-wire.md, 5.4).
        assert_eq!(
            file_signature("/home/user/a.txt", "read", "", "envd-tok", None),
            "v1_6dakjGnvKhNSfRNG/dQ2gy2NDm8AyH3/ElC5bYvpqt0"
        );
        assert_ne!(
            file_signature("/home/user/a.txt", "write", "", "envd-tok", None),
            file_signature("/home/user/a.txt", "read", "", "envd-tok", None)
        );
    }
}
