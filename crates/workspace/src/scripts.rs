//! The confinement scripts run in the sandbox (every path resolved there and kept under
//! `/workspace`), running them, and what their exit codes mean.

use crate::paths::{escapes, gone, is_dir, missing, shown, Op};
use sandbox_agents_errors::{Result, ServiceError};
use sandbox_agents_sandbox::path::WorkspacePath;
use sandbox_agents_sandbox::{ExecOutput, ExecRequest, SandboxBackend};
use std::time::Duration;

// The scripts' exit codes, chosen clear of those of `sh`, `timeout` and the tools.
const EXIT_UNRESOLVABLE: i64 = 80;
const EXIT_ESCAPES: i64 = 81;
const EXIT_MISSING: i64 = 82;
const EXIT_IS_DIR: i64 = 83;
const EXIT_NOT_REGULAR: i64 = 84;
const EXIT_PARENT_NOT_DIR: i64 = 85;
const EXIT_IS_LINK: i64 = 86;
const EXIT_RM_FAILED: i64 = 87;

/// Resolves `$1` and refuses what leaves the workspace; shared by every script.
const RESOLVE: &str = r#"r=$(realpath -m -- "$1") || exit 80
case "$r" in /workspace|/workspace/*) ;; *) exit 81 ;; esac
"#;

/// `$1`: the absolute path. Lists a directory's entries, or the file itself, NUL-separated.
pub const LIST_SCRIPT: &str = r#"[ -e "$r" ] || exit 82
if [ -d "$r" ]; then
  exec find "$r" -mindepth 1 -maxdepth 1 -printf '%y\t%s\t%M\t%u\t%g\t%P\0'
fi
exec find "$r" -maxdepth 0 -printf '%y\t%s\t%M\t%u\t%g\t\0'
"#;

/// `$1`: the absolute path. Prints the resolved path of a regular file.
pub const READ_SCRIPT: &str = r#"[ -e "$r" ] || exit 82
[ -d "$r" ] && exit 83
[ -f "$r" ] || exit 84
printf '%s' "$r"
"#;

/// `$1`: the parent directory, `$2`: the file name. Prints the deepest existing ancestor of
/// the resolved parent and the resolved parent, NUL-separated; writes nothing.
pub const UPLOAD_SCRIPT: &str = r#"d=$r
while [ ! -e "$d" ] && [ ! -L "$d" ]; do d=$(dirname -- "$d"); done
{ [ -d "$d" ] && [ ! -L "$d" ]; } || exit 85
t=$r/$2
[ -L "$t" ] && exit 86
[ -d "$t" ] && exit 83
printf '%s\0%s' "$d" "$r"
"#;

/// `$1`: the parent directory, `$2`: the name, `$3`: `1` to remove directories. The last
/// component is never followed: a link is removed, not what it points at.
pub const DELETE_SCRIPT: &str = r#"t=$r/$2
[ -e "$t" ] || [ -L "$t" ] || exit 82
if [ -d "$t" ] && [ ! -L "$t" ]; then
  [ "$3" = 1 ] || exit 83
  rm -rf -- "$t" || exit 87
else
  rm -f -- "$t" || exit 87
fi
"#;

/// What a failed script means.
pub fn script_failed(out: &ExecOutput, p: &WorkspacePath, op: Op) -> ServiceError {
    let stderr = String::from_utf8_lossy(&out.stderr).trim().to_owned();
    let name = shown(p);
    if out.timed_out {
        return ServiceError::Conflict(format!(
            "the sandbox did not answer in time for '{name}'; try again"
        ));
    }
    match out.exit_code {
        EXIT_UNRESOLVABLE => ServiceError::BadRequest(format!(
            "'{name}' cannot be resolved in the sandbox: {stderr}"
        )),
        EXIT_ESCAPES => escapes(p),
        EXIT_MISSING => missing(p),
        EXIT_IS_DIR => is_dir(p, op),
        EXIT_NOT_REGULAR => ServiceError::BadRequest(format!("'{name}' is not a regular file")),
        EXIT_PARENT_NOT_DIR => ServiceError::BadRequest(format!(
            "'{name}' cannot be written: one of its parents is not a directory"
        )),
        EXIT_IS_LINK => ServiceError::BadRequest(format!(
            "'{name}' is a symbolic link; uploads do not write through links"
        )),
        EXIT_RM_FAILED => {
            ServiceError::Conflict(format!("'{name}' could not be deleted: {stderr}"))
        }
        code => ServiceError::Internal(anyhow::anyhow!(
            "a workspace script failed for '{name}' (exit {code}): {stderr}"
        )),
    }
}

/// Runs `sh -c RESOLVE+script sh args...` in `container` as the sandbox user, with the
/// session's environment like every other command in its sandbox.
pub async fn run_script(
    backend: &dyn SandboxBackend,
    container: &str,
    env: &[(String, String)],
    script: &str,
    args: &[&str],
    timeout: Duration,
    max_output: usize,
) -> Result<ExecOutput> {
    let mut argv = vec![
        "sh".to_owned(),
        "-c".to_owned(),
        format!("{RESOLVE}{script}"),
        "sh".to_owned(),
    ];
    argv.extend(args.iter().map(|a| (*a).to_owned()));
    let req = ExecRequest {
        argv,
        workdir: None,
        env: env.to_vec(),
        timeout,
        max_output,
        stdin: None,
    };
    backend.exec(container, &req).await.map_err(gone)
}
