//! Commands in an in-memory sandbox: the request checked as Docker checks it (the sandbox
//! exists and runs, the working directory exists), then run by the interpreter (`shell/`)
//! on a blocking thread, with the deadline and output caps `ExecRequest` documents.

use super::fs::normalize;
use super::{shell, MemoryBackend};
use crate::{ExecOutput, ExecRequest, Result, SandboxError, WORKDIR};
use std::collections::BTreeMap;
use std::time::Instant;

/// The exit code of a command that ran out of time (`ExecOutput::exit_code`).
const TIMEOUT_EXIT: i64 = 124;

/// What every command's environment starts with, before the sandbox's and the request's.
fn base_env(cwd: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        ("HOME".to_owned(), "/home/sandbox".to_owned()),
        ("PATH".to_owned(), "/usr/local/bin:/usr/bin:/bin".to_owned()),
        ("USER".to_owned(), "sandbox".to_owned()),
        ("PWD".to_owned(), cwd.to_owned()),
    ])
}

/// At most `max` bytes kept, and whether any were left out.
fn capped(mut data: Vec<u8>, max: usize) -> (Vec<u8>, bool) {
    let truncated = data.len() > max;
    data.truncate(max);
    (data, truncated)
}

pub(super) async fn exec(
    backend: &MemoryBackend,
    id: &str,
    req: &ExecRequest,
) -> Result<ExecOutput> {
    if req.argv.is_empty() {
        return Err(SandboxError::Backend("exec: the command is empty".into()));
    }
    let (fs, env) = {
        let state = backend.state();
        let sb = state
            .sandboxes
            .get(id)
            .ok_or_else(|| SandboxError::NotFound(id.to_owned()))?;
        if !sb.running {
            return Err(SandboxError::Backend(format!(
                "the sandbox {id} is not running: start a new one"
            )));
        }
        (sb.fs.clone(), sb.env.clone())
    };
    let workdir = req.workdir.clone().unwrap_or_else(|| WORKDIR.to_owned());
    let cwd = normalize("/", &workdir);
    if !super::lock(&fs).is_dir(&cwd) {
        return Err(SandboxError::NoSuchPath(workdir));
    }
    let mut all_env = base_env(&cwd);
    all_env.extend(env);
    all_env.extend(req.env.iter().cloned());
    let handlers = backend
        .plane
        .handlers
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .rev()
        .cloned()
        .collect();
    let ctx = shell::Ctx {
        fs,
        handlers,
        deadline: Instant::now() + req.timeout,
    };
    let (argv, stdin) = (req.argv.clone(), req.stdin.clone().unwrap_or_default());
    let (stdout, stderr, status) = tokio::task::spawn_blocking(move || {
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let mut sh = shell::Shell::new(&ctx, all_env, cwd);
        let mut io = shell::Io {
            stdin,
            out: &mut out,
            err: &mut err,
        };
        let status = sh.run_argv(&argv, &mut io);
        (out, err, status)
    })
    .await
    .map_err(|e| SandboxError::Backend(format!("exec: the interpreter failed: {e}")))?;
    let (exit_code, timed_out) = match status {
        Ok(code) | Err(shell::Flow::Exit(code)) => (i64::from(code), false),
        Err(shell::Flow::TimedOut) => (TIMEOUT_EXIT, true),
    };
    let (stdout, stdout_truncated) = capped(stdout, req.max_output);
    let (stderr, stderr_truncated) = capped(stderr, req.max_output);
    Ok(ExecOutput {
        exit_code,
        stdout,
        stderr,
        stdout_truncated,
        stderr_truncated,
        timed_out,
    })
}
