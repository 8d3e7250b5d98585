//! A command in a running session's sandbox, spoken to over its stdin and stdout for as long
//! as the caller keeps both ends: how an agent's MCP servers run in the sandbox (issue 39).
//!
//! Invariants:
//! * it runs as every command of the session does: in the workspace, as the sandbox user,
//!   with the session's variables (those the user bound there) and the caller's, no limit on
//!   its time, and its process tree killed when the ends are dropped (the daemon abandons an
//!   exec whose stream goes away) or the sandbox ends;
//! * its stderr is kept only as the last [`STDERR_TAIL`] bytes, with the session's secret
//!   values masked: it is read to say why a server failed.

use crate::processes::{daemon_error, sandbox_dir};
use crate::Sessions;
use bytes::Bytes;
use futures::StreamExt;
use sandbox_agents_domain::{ProjectId, SessionId};
use sandbox_agents_errors::{Result, ServiceError};
use sandbox_agents_sandbox::sandboxd::proto::{self, ExecSpec, Frame, PtySize};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite};

/// The most bytes of a command's stderr kept.
pub const STDERR_TAIL: usize = 4096;

/// A started command's ends.
pub struct StdioCommand {
    pub stdout: Box<dyn AsyncRead + Send + Unpin>,
    pub stdin: Box<dyn AsyncWrite + Send + Unpin>,
    pub stderr: StderrTail,
}

/// The last of a command's stderr, then how it ended.
#[derive(Clone, Default)]
pub struct StderrTail {
    text: Arc<Mutex<String>>,
    secrets: Arc<Vec<String>>,
}

impl StderrTail {
    fn push(&self, bytes: &[u8]) {
        let mut text = self.text.lock().unwrap_or_else(|e| e.into_inner());
        text.push_str(&String::from_utf8_lossy(bytes));
        if text.len() > STDERR_TAIL {
            let mut cut = text.len() - STDERR_TAIL;
            while !text.is_char_boundary(cut) {
                cut += 1;
            }
            text.drain(..cut);
        }
    }

    /// What it holds, the session's secret values masked.
    pub fn text(&self) -> String {
        let text = self.text.lock().unwrap_or_else(|e| e.into_inner()).clone();
        sandbox_agents_credentials::secrets::mask(text, &self.secrets)
    }
}

/// A command to start in a session's sandbox and keep: its argv, the variables added to the
/// session's own, its directory (absolute; the workspace when None), whether stdin frames
/// follow, its time limit (None: none), and a pseudo-terminal of this size to run on (its
/// output then comes as stdout, its input as stdin, and `Resize` frames change its size).
#[derive(Clone, Debug, Default)]
pub struct CommandSpec {
    pub argv: Vec<String>,
    pub env: BTreeMap<String, String>,
    pub cwd: Option<String>,
    pub stdin: bool,
    pub timeout_ms: Option<u64>,
    pub pty: Option<PtySize>,
}

/// A started command: its frames (pid, output, the exit) and its input, as the daemon's exec
/// stream has them (dropping both ends it), and the session's secret values, for masking.
pub struct Command {
    pub execution: sandbox_agents_sandbox::sandboxd::client::Execution,
    pub secrets: Vec<String>,
}

impl Sessions {
    /// Starts `spec` in the session's running sandbox (409 when it is not running or has no
    /// daemon), as the sandbox user, with the session's variables and `spec.env`.
    #[tracing::instrument(skip_all, fields(session.id = %id))]
    pub async fn start_command(
        &self,
        project: ProjectId,
        id: SessionId,
        spec: CommandSpec,
    ) -> Result<Command> {
        let (session, client) = self.daemon_of(project, id).await?;
        let mut vars: BTreeMap<String, String> = self.command_env(&session)?.into_iter().collect();
        vars.extend(spec.env);
        let exec = ExecSpec {
            argv: spec.argv,
            cwd: Some(sandbox_dir(spec.cwd)?),
            env: vars.into_iter().collect(),
            timeout_ms: spec.timeout_ms,
            // What such a command writes is the caller's to bound (a line, a stream).
            max_output: u64::MAX,
            stdin: spec.stdin || spec.pty.is_some(),
            pty: spec.pty,
            ..ExecSpec::default()
        };
        proto::check_command(&exec.argv, &exec.env)
            .map_err(|e| ServiceError::BadRequest(e.detail))?;
        let execution = client.exec(exec).await.map_err(daemon_error)?;
        let _ = sandbox_agents_store::sessions::touch(&self.inner.db, id).await;
        Ok(Command {
            execution,
            secrets: self.secret_values(&session)?,
        })
    }

    /// Starts `argv` in the session's running sandbox (409 when it is not running or has no
    /// daemon) with `env` added to the session's variables, spoken to over its stdio.
    #[tracing::instrument(skip_all, fields(session.id = %id))]
    pub async fn open_stdio(
        &self,
        project: ProjectId,
        id: SessionId,
        argv: &[String],
        env: &BTreeMap<String, String>,
    ) -> Result<StdioCommand> {
        let Command { execution, secrets } = self
            .start_command(
                project,
                id,
                CommandSpec {
                    argv: argv.to_vec(),
                    env: env.clone(),
                    cwd: None,
                    stdin: true,
                    timeout_ms: None,
                    pty: None,
                },
            )
            .await?;
        let stderr = StderrTail {
            text: Arc::default(),
            secrets: Arc::new(secrets),
        };
        let tail = stderr.clone();
        let stdout = execution.frames.filter_map(move |frame| {
            let tail = tail.clone();
            async move {
                match frame {
                    Ok(Frame::Stdout(b)) => Some(Ok(b)),
                    Ok(Frame::Stderr(b)) => {
                        tail.push(&b);
                        None
                    }
                    Ok(Frame::Exit(exit)) => {
                        tail.push(format!("\n(it exited with code {})", exit.code).as_bytes());
                        None
                    }
                    Ok(Frame::Error(e)) => {
                        tail.push(format!("\n(it could not run: {})", e.detail).as_bytes());
                        None
                    }
                    Ok(_) => None,
                    Err(e) => Some(Err(std::io::Error::other(e.to_string()))),
                }
            }
        });
        let stdout = tokio_util::io::StreamReader::new(Box::pin(stdout));
        // What the caller writes goes to the command's stdin as frames; the caller dropping
        // its end closes stdin and the request, which ends the command.
        let (ours, theirs) = tokio::io::duplex(proto::CHUNK);
        let input = execution.input;
        tokio::spawn(async move {
            let mut ours = ours;
            let mut buf = vec![0u8; proto::CHUNK];
            loop {
                match ours.read(&mut buf).await {
                    Ok(0) | Err(_) => {
                        let _ = input.send(Frame::StdinEnd).await;
                        return;
                    }
                    Ok(n) => {
                        if input
                            .send(Frame::Stdin(Bytes::copy_from_slice(&buf[..n])))
                            .await
                            .is_err()
                        {
                            return;
                        }
                    }
                }
            }
        });
        Ok(StdioCommand {
            stdout: Box::new(stdout),
            stdin: Box::new(theirs),
            stderr,
        })
    }
}
