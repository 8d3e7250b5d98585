//! Running one command in a sandbox: one create, one attached start, one inspect.
//!
//! The command runs under GNU `timeout`, which puts itself and the command in a new process
//! group and signals the whole group when time is up (TERM, then KILL 5 s later): the
//! command's process tree dies, the container does not. A process that leaves the group
//! (`setsid`) escapes; the host also stops waiting `HOST_GRACE` after the timeout.
//!
//! Every command also carries `SA_EXEC=<id>` in its environment, which its children inherit
//! (`setsid` or not). When the caller stops waiting before the command ended (a run was
//! interrupted and dropped the future, or the host gave up), a guard kills every process of
//! the sandbox user that carries that id, so nothing the command started keeps running.

use super::{error, SANDBOX_GID, SANDBOX_UID};
use crate::{ExecOutput, ExecRequest, Result, SandboxError, WORKDIR};
use backon::{BackoffBuilder, ExponentialBuilder};
use bollard::container::LogOutput;
use bollard::exec::{CreateExecOptions, StartExecOptions, StartExecResults};
use bollard::Docker;
use futures::StreamExt;
use std::time::{Duration, Instant};
use tokio::io::AsyncWriteExt;

pub use crate::{HOST_GRACE, TIMEOUT_EXIT};
/// `timeout` exits 128 + 9 when it had to KILL the command.
const KILLED_EXIT: i64 = 137;
/// Seconds between `timeout`'s TERM and its KILL.
const KILL_AFTER: &str = "5s";
/// The variable that marks a command's processes.
const EXEC_MARK: &str = "SA_EXEC";
/// Kills the processes whose environment holds `SA_EXEC=$0`.
const KILL_MARKED: &str = r#"for p in /proc/[0-9]*; do if grep -qxz "SA_EXEC=$0" "$p/environ" 2>/dev/null; then kill -KILL "${p#/proc/}" 2>/dev/null; fi; done; exit 0"#;

/// Kills a command's processes when dropped while armed (see the module docs).
struct KillOnDrop {
    docker: Docker,
    container: String,
    mark: String,
    armed: bool,
}

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let Ok(handle) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let (docker, container, mark) = (
            self.docker.clone(),
            self.container.clone(),
            self.mark.clone(),
        );
        handle.spawn(async move {
            match kill_marked(&docker, &container, &mark).await {
                Ok(()) => tracing::info!(container.id = %container, exec = %mark, "killed an abandoned command's processes"),
                Err(e) => tracing::warn!(container.id = %container, exec = %mark, error = %e, "could not kill an abandoned command's processes"),
            }
        });
    }
}

async fn kill_marked(docker: &Docker, container: &str, mark: &str) -> Result<()> {
    let argv = ["sh", "-c", KILL_MARKED, mark];
    run_quietly(
        docker,
        container,
        &argv,
        &format!("{SANDBOX_UID}:{SANDBOX_GID}"),
    )
    .await?;
    Ok(())
}

/// Runs `argv` as `user` (unprivileged either way), output discarded, and waits for it;
/// returns its exit code.
async fn run_quietly(
    docker: &Docker,
    container: &str,
    argv: &[&str],
    user: &str,
) -> Result<Option<i64>> {
    let options = CreateExecOptions {
        attach_stdout: Some(true),
        attach_stderr: Some(true),
        cmd: Some(argv.iter().map(|a| (*a).to_owned()).collect()),
        privileged: Some(false),
        user: Some(user.to_owned()),
        ..Default::default()
    };
    let created = docker
        .create_exec(container, options)
        .await
        .map_err(error::container(container))?;
    if let StartExecResults::Attached { mut output, .. } = docker
        .start_exec(&created.id, None)
        .await
        .map_err(error::container(container))?
    {
        while output.next().await.is_some() {}
    }
    let done = docker
        .inspect_exec(&created.id)
        .await
        .map_err(error::container(container))?;
    Ok(done.exit_code)
}

/// `rm -rf -- <path>`, waited for (see `SandboxBackend::remove_system_path`): as root, and
/// as the sandbox user when root cannot (sandboxes run without capabilities, so root may not
/// remove what the sandbox user owns in the sandbox user's directories).
pub(crate) async fn remove_as_root(docker: &Docker, container: &str, path: &str) -> Result<()> {
    if !path.starts_with('/')
        || path.split('/').any(|c| c == "..")
        || path.trim_end_matches('/').is_empty()
    {
        return Err(SandboxError::Backend(format!(
            "remove_system_path: '{path}' is not an absolute path"
        )));
    }
    let mut last = None;
    for user in ["0:0".to_owned(), format!("{SANDBOX_UID}:{SANDBOX_GID}")] {
        last = run_quietly(docker, container, &["rm", "-rf", "--", path], &user).await?;
        if last == Some(0) {
            return Ok(());
        }
    }
    Err(SandboxError::Backend(format!(
        "removing {path} exited with {last:?}"
    )))
}

/// `timeout`'s duration argument; never 0, which would mean "no timeout".
pub(crate) fn timeout_arg(d: Duration) -> String {
    let d = d.max(Duration::from_millis(1));
    format!("{}.{:03}s", d.as_secs(), d.subsec_millis())
}

/// The argv actually run: the request's, under `timeout`.
pub(crate) fn wrapped_argv(req: &ExecRequest) -> Vec<String> {
    // `timeout` stops parsing options at the duration, so the command may start with `-`.
    let mut argv = vec![
        "timeout".to_owned(),
        "-k".to_owned(),
        KILL_AFTER.to_owned(),
        "--".to_owned(),
    ];
    argv.push(timeout_arg(req.timeout));
    argv.extend(req.argv.iter().cloned());
    argv
}

/// Up to `max` bytes of one stream; the rest is counted as truncated and dropped.
#[derive(Default)]
struct Capped {
    buf: Vec<u8>,
    truncated: bool,
}

impl Capped {
    fn push(&mut self, chunk: &[u8], max: usize) {
        let room = max.saturating_sub(self.buf.len());
        if chunk.len() > room {
            self.truncated = true;
        }
        self.buf.extend_from_slice(&chunk[..chunk.len().min(room)]);
    }
}

pub(crate) async fn exec(docker: &Docker, id: &str, req: &ExecRequest) -> Result<ExecOutput> {
    if req.argv.is_empty() {
        return Err(SandboxError::Backend("exec: the argv is empty".into()));
    }
    let mark = uuid::Uuid::new_v4().simple().to_string();
    let mut env: Vec<String> = req.env.iter().map(|(k, v)| format!("{k}={v}")).collect();
    env.push(format!("{EXEC_MARK}={mark}"));
    let options = CreateExecOptions {
        attach_stdin: Some(req.stdin.is_some()),
        attach_stdout: Some(true),
        attach_stderr: Some(true),
        tty: Some(false),
        env: Some(env),
        cmd: Some(wrapped_argv(req)),
        privileged: Some(false),
        user: Some(format!("{SANDBOX_UID}:{SANDBOX_GID}")),
        working_dir: Some(req.workdir.clone().unwrap_or_else(|| WORKDIR.to_owned())),
        ..Default::default()
    };
    let created = docker
        .create_exec(id, options)
        .await
        .map_err(error::container(id))?;
    tracing::debug!(exec.id = %created.id, "exec created");
    // From here on, a caller that stops waiting takes the command's processes down with it.
    let mut guard = KillOnDrop {
        docker: docker.clone(),
        container: id.to_owned(),
        mark,
        armed: true,
    };

    let started_at = Instant::now();
    let start = StartExecOptions {
        detach: false,
        tty: false,
        output_capacity: Some(64 * 1024),
    };
    let (mut output, mut input) = match docker
        .start_exec(&created.id, Some(start))
        .await
        .map_err(error::container(id))?
    {
        StartExecResults::Attached { output, input } => (output, input),
        StartExecResults::Detached => {
            return Err(SandboxError::Backend(
                "exec: the Engine did not attach".into(),
            ))
        }
    };

    let max = req.max_output;
    let mut stdout = Capped::default();
    let mut stderr = Capped::default();
    let stdin = req.stdin.clone();
    let write_stdin = async move {
        if let Some(data) = stdin {
            // A command that exits without reading all of it is not an error.
            let _ = input.write_all(&data).await;
            let _ = input.shutdown().await;
        }
        // Without stdin the write half is simply dropped (it is not attached).
    };
    let read_output = async {
        while let Some(item) = output.next().await {
            match item.map_err(error::backend)? {
                LogOutput::StdOut { message } | LogOutput::Console { message } => {
                    stdout.push(&message, max)
                }
                LogOutput::StdErr { message } => stderr.push(&message, max),
                LogOutput::StdIn { .. } => {}
            }
        }
        Ok::<(), SandboxError>(())
    };
    let host_deadline = req.timeout.saturating_add(HOST_GRACE);
    let finished = tokio::time::timeout(host_deadline, async {
        let ((), read) = tokio::join!(write_stdin, read_output);
        read
    })
    .await;
    let mut out = ExecOutput::default();
    match finished {
        Ok(read) => {
            read?;
            guard.armed = false;
            let elapsed = started_at.elapsed();
            let code = exit_code(docker, &created.id).await?;
            // The runtime could not even start the command (it reports that on stdout).
            if code == 126 && stdout.buf.starts_with(b"OCI runtime exec failed") {
                let message = String::from_utf8_lossy(&stdout.buf).trim().to_owned();
                if message.contains("chdir to cwd") {
                    return Err(SandboxError::NoSuchPath(
                        req.workdir.clone().unwrap_or_else(|| WORKDIR.to_owned()),
                    ));
                }
                return Err(SandboxError::Backend(message));
            }
            let timed_out = (code == TIMEOUT_EXIT || code == KILLED_EXIT) && elapsed >= req.timeout;
            out.exit_code = if timed_out { TIMEOUT_EXIT } else { code };
            out.timed_out = timed_out;
        }
        Err(_) => {
            tracing::warn!(exec.id = %created.id, "exec: output still open {HOST_GRACE:?} past the timeout; giving up");
            out.exit_code = TIMEOUT_EXIT;
            out.timed_out = true;
        }
    }
    out.stdout = stdout.buf;
    out.stdout_truncated = stdout.truncated;
    out.stderr = stderr.buf;
    out.stderr_truncated = stderr.truncated;
    Ok(out)
}

/// How often [`exit_code`] asks: 12 times, 2 ms apart at first and twice that each time up to
/// 250 ms (about 1.5 s in all).
const EXIT_POLL: ExponentialBuilder = ExponentialBuilder::new()
    .with_min_delay(Duration::from_millis(2))
    .with_max_delay(Duration::from_millis(250))
    .with_max_times(12);

/// The exit code once the exec has ended (its output closes just before the Engine records it).
async fn exit_code(docker: &Docker, exec_id: &str) -> Result<i64> {
    for pause in EXIT_POLL.build() {
        let inspected = docker.inspect_exec(exec_id).await.map_err(error::backend)?;
        if inspected.running != Some(true) {
            if let Some(code) = inspected.exit_code {
                return Ok(code);
            }
        }
        tokio::time::sleep(pause).await;
    }
    Err(SandboxError::Backend(format!(
        "exec {exec_id}: output ended but the command is still running"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_timeout_is_never_zero_and_wraps_the_argv() {
        assert_eq!(timeout_arg(Duration::ZERO), "0.001s");
        assert_eq!(timeout_arg(Duration::from_millis(1500)), "1.500s");
        let req = ExecRequest {
            argv: vec!["-x".into(), "y".into()],
            workdir: None,
            env: vec![],
            timeout: Duration::from_secs(30),
            max_output: 10,
            stdin: None,
        };
        assert_eq!(
            wrapped_argv(&req),
            ["timeout", "-k", "5s", "--", "30.000s", "-x", "y"]
        );
    }

    #[test]
    fn output_is_capped() {
        let mut c = Capped::default();
        c.push(b"hello", 3);
        c.push(b"!", 3);
        assert_eq!(c.buf, b"hel");
        assert!(c.truncated);
        let mut c = Capped::default();
        c.push(b"abc", 3);
        assert!(!c.truncated);
    }

    #[test]
    fn the_exit_code_is_asked_for_12_times_from_2_ms_doubling_to_250_ms() {
        let waits: Vec<u128> = EXIT_POLL.build().map(|w| w.as_millis()).collect();
        assert_eq!(waits, [2, 4, 8, 16, 32, 64, 128, 250, 250, 250, 250, 250]);
    }
}
