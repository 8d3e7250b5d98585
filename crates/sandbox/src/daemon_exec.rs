//! A command through the daemon, on every backend that has one, with what the Docker exec
//! path gives (`docker::exec`):
//! the same exit codes (124 on a timeout, after TERM then KILL of the whole tree), the same
//! output caps, the same errors for a missing working directory. Dropping the future
//! abandons the command, and the daemon kills its tree.

use crate::{ExecOutput, ExecRequest, Result, SandboxError, HOST_GRACE, TIMEOUT_EXIT, WORKDIR};
use sandboxd::client::{Client, ClientError, Stream};
use sandboxd::proto::{ErrorKind, ExecSpec};

/// Seconds between the timeout's TERM and its KILL, as `timeout -k 5s` on the exec path.
const KILL_GRACE_MS: u64 = 5_000;

/// The spec of a request.
pub(crate) fn spec_of(req: &ExecRequest) -> ExecSpec {
    ExecSpec {
        argv: req.argv.clone(),
        cwd: Some(req.workdir.clone().unwrap_or_else(|| WORKDIR.to_owned())),
        env: req.env.clone(),
        timeout_ms: Some(req.timeout.as_millis().max(1) as u64),
        kill_grace_ms: KILL_GRACE_MS,
        max_output: req.max_output as u64,
        stdin: req.stdin.is_some(),
        pty: None,
    }
}

/// Runs `req`; each chunk of output also goes to `on_output` as it arrives.
pub(crate) async fn exec(
    client: &Client,
    req: &ExecRequest,
    mut on_output: impl FnMut(Stream, &[u8]) + Send,
) -> Result<ExecOutput> {
    if req.argv.is_empty() {
        return Err(SandboxError::Backend("exec: the argv is empty".into()));
    }
    let mut out = ExecOutput::default();
    let run = client.run(spec_of(req), req.stdin.clone(), |stream, chunk| {
        on_output(stream, &chunk);
        match stream {
            Stream::Stdout => out.stdout.extend_from_slice(&chunk),
            Stream::Stderr => out.stderr.extend_from_slice(&chunk),
        }
    });
    let deadline = req.timeout.saturating_add(HOST_GRACE);
    let exit = match tokio::time::timeout(deadline, run).await {
        Ok(Ok(exit)) => exit,
        Ok(Err(ClientError::Daemon(e))) if e.kind == ErrorKind::NotFound => {
            return Err(SandboxError::NoSuchPath(
                req.workdir.clone().unwrap_or_else(|| WORKDIR.to_owned()),
            ))
        }
        Ok(Err(e)) if e.is_transport() => {
            tracing::warn!(error = %e, "exec: the daemon's connection broke while a command ran");
            return Err(SandboxError::DaemonLost);
        }
        Ok(Err(e)) => return Err(SandboxError::Backend(format!("exec: {e}"))),
        Err(_) => {
            tracing::warn!(
                "exec: no exit from the daemon {HOST_GRACE:?} past the timeout; giving up"
            );
            gave_up()
        }
    };
    out.exit_code = i64::from(exit.code);
    out.timed_out = exit.timed_out;
    out.stdout_truncated = exit.stdout_truncated;
    out.stderr_truncated = exit.stderr_truncated;
    Ok(out)
}

/// The exit of a command the host stopped waiting for.
fn gave_up() -> sandboxd::proto::ExitInfo {
    sandboxd::proto::ExitInfo {
        code: TIMEOUT_EXIT as i32,
        timed_out: true,
        ..Default::default()
    }
}
