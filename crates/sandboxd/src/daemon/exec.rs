//! `POST /v1/exec`: one command, its output streamed as it comes.
//!
//! The request body is a stream of frames (the spec first, then stdin, signals, resizes);
//! the response body is one too (the pid, output, then the exit or an error). The command
//! ends in one of four ways:
//! - it exits: the exit frame follows once its output is read (a pipe a background process
//!   holds open is not waited for, `output::LINGER`);
//! - its timeout passes: its tree gets TERM, then KILL `kill_grace_ms` later, and the exit
//!   says 124 and `timed_out` (what GNU `timeout` did on the Docker exec path);
//! - the client goes away (the stream is reset, the connection drops): its tree is killed,
//!   since nobody will read the result; background processes are another resource
//!   (`processes`) and outlive connections;
//! - the stream breaks the protocol: the tree is killed and the connection closed.

use super::error::Failure;
use super::{kill, output, pty, ConnectionGuard, Daemon};
use crate::proto::{check_command, check_path, ErrorKind, ExecSpec, ExitInfo, Frame, FrameCodec};
use axum::body::Body;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::Extension;
use bytes::Bytes;
use futures::StreamExt;
use nix::sys::signal::Signal;
use std::process::{ExitStatus, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::AsyncWriteExt;
use tokio::sync::{mpsc, watch};
use tokio_util::codec::FramedRead;

/// The exit code of a command that timed out.
pub const TIMEOUT_EXIT: i32 = 124;

type Input = FramedRead<
    tokio_util::io::StreamReader<
        futures::stream::BoxStream<'static, std::io::Result<Bytes>>,
        Bytes,
    >,
    FrameCodec,
>;

/// The frames of a request body.
pub(crate) fn frames(body: Body) -> Input {
    let stream = body
        .into_data_stream()
        .map(|r| r.map_err(std::io::Error::other))
        .boxed();
    FramedRead::new(tokio_util::io::StreamReader::new(stream), FrameCodec)
}

pub async fn exec(
    State(_daemon): State<Arc<Daemon>>,
    Extension(guard): Extension<ConnectionGuard>,
    body: Body,
) -> Response {
    let mut input = frames(body);
    let spec = match input.next().await {
        Some(Ok(Frame::Spec(spec))) => *spec,
        Some(Err(e)) => {
            guard.close();
            return Failure::invalid(e.to_string()).into_response();
        }
        _ => return Failure::invalid("an exec stream starts with its spec").into_response(),
    };
    match start(&spec).await {
        Ok(started) => {
            let (tx, rx) = mpsc::channel::<Bytes>(16);
            let _ = tx.try_send(Frame::Started(started.pid).encode_to_bytes());
            tokio::spawn(supervise(started, spec, input, tx, guard));
            let body = tokio_stream::wrappers::ReceiverStream::new(rx)
                .map(Ok::<_, std::convert::Infallible>);
            Body::from_stream(body).into_response()
        }
        Err(Start::Refused(f)) => f.into_response(),
        Err(Start::CannotRun { code, message }) => {
            let frames = [
                Frame::Stderr(Bytes::from(message)),
                Frame::Exit(Box::new(ExitInfo {
                    code,
                    ..Default::default()
                })),
            ];
            let bytes: Vec<u8> = frames.iter().flat_map(|f| f.encode_to_bytes()).collect();
            Body::from(bytes).into_response()
        }
    }
}

/// A running command and how to talk to it.
pub(crate) struct Started {
    pub child: tokio::process::Child,
    pub pid: u32,
    pub mark: String,
    pub io: Io,
    pub at: Instant,
}

pub(crate) enum Io {
    Pipes {
        stdin: Option<tokio::process::ChildStdin>,
        stdout: tokio::process::ChildStdout,
        stderr: tokio::process::ChildStderr,
    },
    Pty(pty::Terminal),
}

pub(crate) enum Start {
    /// The request is wrong (its working directory is missing, ...): an error answer.
    Refused(Failure),
    /// The program cannot run (missing, not executable): an exit code and a message on
    /// stderr, as a shell or `timeout` would give them.
    CannotRun { code: i32, message: String },
}

/// Checks the spec and starts the command in a process group (or session, on a
/// terminal) of its own, marked for `kill::tree`.
pub(crate) async fn start(spec: &ExecSpec) -> Result<Started, Start> {
    check_command(&spec.argv, &spec.env).map_err(|e| Start::Refused(e.into()))?;
    if let Some(cwd) = &spec.cwd {
        check_path(cwd).map_err(|e| Start::Refused(e.into()))?;
        match tokio::fs::metadata(cwd).await {
            Ok(m) if m.is_dir() => {}
            Ok(_) => {
                return Err(Start::Refused(Failure::new(
                    ErrorKind::NotADirectory,
                    format!("the working directory {cwd} is not a directory"),
                )))
            }
            Err(e) => return Err(Start::Refused(Failure::io(cwd, &e))),
        }
    }
    let mark = kill::new_mark();
    let mut cmd = tokio::process::Command::new(&spec.argv[0]);
    cmd.args(&spec.argv[1..])
        .envs(spec.env.iter().map(|(k, v)| (k, v)))
        .env(kill::MARK, &mark)
        .kill_on_drop(false);
    if let Some(cwd) = &spec.cwd {
        cmd.current_dir(cwd);
    }
    let spawned = match spec.pty {
        Some(size) => pty::spawn(&mut cmd, size).map(|(child, t)| (child, Io::Pty(t))),
        None => {
            cmd.process_group(0)
                .stdin(if spec.stdin {
                    Stdio::piped()
                } else {
                    Stdio::null()
                })
                .stdout(Stdio::piped())
                .stderr(Stdio::piped());
            cmd.spawn().map(|mut child| {
                let io = Io::Pipes {
                    stdin: child.stdin.take(),
                    stdout: child.stdout.take().expect("piped"),
                    stderr: child.stderr.take().expect("piped"),
                };
                (child, io)
            })
        }
    };
    match spawned {
        Ok((child, io)) => Ok(Started {
            pid: child.id().unwrap_or_default(),
            child,
            mark,
            io,
            at: Instant::now(),
        }),
        Err(e) => {
            let code = if e.kind() == std::io::ErrorKind::NotFound {
                127
            } else {
                126
            };
            Err(Start::CannotRun {
                code,
                message: format!("sandboxd: failed to run command '{}': {e}\n", spec.argv[0]),
            })
        }
    }
}

/// The exit code of a status: its code, or 128 + the signal that ended it.
pub(crate) fn code_of(status: &ExitStatus) -> (i32, Option<i32>) {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => (code, None),
        (None, Some(sig)) => (128 + sig, Some(sig)),
        (None, None) => (-1, None),
    }
}

/// How the command's wait ended.
enum Ended {
    Exited(ExitStatus),
    TimedOut(Option<ExitStatus>),
    /// The client went away, or broke the protocol.
    Abandoned,
}

async fn supervise(
    started: Started,
    spec: ExecSpec,
    input: Input,
    tx: mpsc::Sender<Bytes>,
    guard: ConnectionGuard,
) {
    let Started {
        mut child,
        pid,
        mark,
        io,
        at,
    } = started;
    let (exited_tx, exited) = watch::channel(false);
    let (abandon_tx, mut abandoned) = mpsc::channel::<()>(1);
    let (pumps, feeder) = match io {
        Io::Pipes {
            stdin,
            stdout,
            stderr,
        } => {
            let out = output::pump(
                stdout,
                spec.max_output,
                Frame::Stdout,
                tx.clone(),
                exited.clone(),
            );
            let err = output::pump(
                stderr,
                spec.max_output,
                Frame::Stderr,
                tx.clone(),
                exited.clone(),
            );
            let pumps = tokio::spawn(async move { tokio::join!(out, err) });
            let feeder = tokio::spawn(feed(input, Sink::Pipe(stdin), pid, abandon_tx, guard));
            (pumps, feeder)
        }
        Io::Pty(terminal) => {
            let (reader, sink) = (terminal.reader, terminal.input);
            let out = output::pump(
                reader,
                spec.max_output,
                Frame::Stdout,
                tx.clone(),
                exited.clone(),
            );
            let pumps = tokio::spawn(async move { (out.await, output::Counted::default()) });
            let feeder = tokio::spawn(feed(input, Sink::Pty(sink), pid, abandon_tx, guard));
            (pumps, feeder)
        }
    };
    let deadline = spec
        .timeout_ms
        .map(|ms| tokio::time::Instant::from_std(at) + Duration::from_millis(ms));
    let ended = tokio::select! {
        status = child.wait() => match status {
            Ok(s) => Ended::Exited(s),
            Err(_) => Ended::Abandoned,
        },
        () = sleep_until(deadline) => {
            kill::tree(pid, &mark, Signal::SIGTERM).await;
            let grace = Duration::from_millis(spec.kill_grace_ms);
            let status = match tokio::time::timeout(grace, child.wait()).await {
                Ok(s) => s.ok(),
                Err(_) => None,
            };
            Ended::TimedOut(status)
        }
        () = tx.closed() => Ended::Abandoned,
        Some(()) = abandoned.recv() => Ended::Abandoned,
    };
    feeder.abort();
    let (code, signal, timed_out) = match ended {
        Ended::Exited(status) => {
            let (code, signal) = code_of(&status);
            (code, signal, false)
        }
        Ended::TimedOut(status) => {
            // Whatever ignored the TERM, or was left behind, goes now.
            kill::tree(pid, &mark, Signal::SIGKILL).await;
            if status.is_none() {
                let _ = child.wait().await;
            }
            (TIMEOUT_EXIT, None, true)
        }
        Ended::Abandoned => {
            kill::tree(pid, &mark, Signal::SIGKILL).await;
            let _ = child.wait().await;
            pumps.abort();
            return;
        }
    };
    let _ = exited_tx.send(true);
    let (out, err) = pumps.await.unwrap_or_default();
    let exit = ExitInfo {
        code,
        signal,
        timed_out,
        stdout_bytes: out.bytes,
        stderr_bytes: err.bytes,
        stdout_truncated: out.truncated,
        stderr_truncated: err.truncated,
        duration_ms: at.elapsed().as_millis() as u64,
    };
    let _ = tx.send(Frame::Exit(Box::new(exit)).encode_to_bytes()).await;
}

async fn sleep_until(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}

/// Where stdin frames go.
pub(crate) enum Sink {
    Pipe(Option<tokio::process::ChildStdin>),
    Pty(pty::Input),
}

/// Feeds the request's frames to the command until the body ends. A body that breaks off
/// (a reset stream, a dropped connection) or breaks the protocol abandons the command; the
/// latter also closes the connection.
async fn feed(
    mut input: Input,
    mut sink: Sink,
    pid: u32,
    abandon: mpsc::Sender<()>,
    guard: ConnectionGuard,
) {
    while let Some(frame) = input.next().await {
        match frame {
            Ok(Frame::Stdin(data)) => match &mut sink {
                Sink::Pipe(Some(stdin)) => {
                    // A command that exits without reading all of it is not an error.
                    if stdin.write_all(&data).await.is_err() {
                        sink = Sink::Pipe(None);
                    }
                }
                Sink::Pipe(None) => {}
                Sink::Pty(pty) => {
                    let _ = pty.write(&data).await;
                }
            },
            Ok(Frame::StdinEnd) => {
                if let Sink::Pipe(stdin) = &mut sink {
                    *stdin = None;
                } else if let Sink::Pty(pty) = &mut sink {
                    // ^D: end of input for a terminal's reader.
                    let _ = pty.write(&[4]).await;
                }
            }
            Ok(Frame::Signal(n)) => {
                if let Ok(signal) = Signal::try_from(n) {
                    if let Ok(pgid) = i32::try_from(pid) {
                        let _ = nix::sys::signal::killpg(nix::unistd::Pid::from_raw(pgid), signal);
                    }
                }
            }
            Ok(Frame::Resize(size)) => {
                if let Sink::Pty(pty) = &sink {
                    pty.resize(size);
                }
            }
            Ok(_)
            | Err(crate::proto::FrameError::UnknownTag(_))
            | Err(crate::proto::FrameError::TooLarge(_))
            | Err(crate::proto::FrameError::Malformed { .. }) => {
                guard.close();
                let _ = abandon.try_send(());
                return;
            }
            Err(crate::proto::FrameError::Io(_)) => {
                let _ = abandon.try_send(());
                return;
            }
        }
    }
}
