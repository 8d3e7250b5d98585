//! `exec`: a shell command in a running sandbox, bounded in time and output.

use crate::lock::not_found;
use crate::Sessions;
use sandbox_agents_credentials::secrets;
use sandbox_agents_domain::session::ExecResult;
use sandbox_agents_domain::{ProjectId, SessionId};
use sandbox_agents_errors::{Result, ServiceError};
use sandbox_agents_sandbox::{ExecRequest, SandboxError};
use sandbox_agents_store::sessions::{self, SessionRecord};

/// The plain environment of a session's sandbox: the manifest's `environment` as it was when
/// the sandbox booted. It is passed with each exec rather than baked into the container, so a
/// sandbox taken from the warm pool (created before the session existed) and one created for
/// the session behave the same, and the variables never appear in the container's
/// configuration (or a snapshot's). The server's own file scripts run with this; commands run
/// for the caller or the agent also get the secrets (see [`Sessions::command_env`]).
pub(crate) fn sandbox_env(s: &SessionRecord) -> Vec<(String, String)> {
    s.sandbox_env
        .0
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}
use serde_json::Value;
use std::time::Duration;

/// Most bytes of stdout, and of stderr, an exec returns; the rest is cut with a note.
pub const MAX_OUTPUT_BYTES: usize = 1024 * 1024;
/// Seconds an exec runs when the caller does not say.
pub const DEFAULT_TIMEOUT_SECS: f64 = 60.0;
/// Longest an exec may run.
pub const MAX_TIMEOUT_SECS: f64 = 600.0;

/// Text for a caller: invalid UTF-8 is replaced, a cut is said out loud.
fn text(bytes: &[u8], truncated: bool, what: &str) -> String {
    let mut s = String::from_utf8_lossy(bytes).into_owned();
    if truncated {
        s.push_str(&format!(
            "\n[{what} truncated: only the first {} bytes are kept]\n",
            MAX_OUTPUT_BYTES
        ));
    }
    s
}

impl Sessions {
    /// What a command run for the caller or the agent gets: [`sandbox_env`] plus the secret
    /// variables resolved at boot (a secret wins over a manifest variable of the same name).
    pub(crate) fn command_env(&self, s: &SessionRecord) -> Result<Vec<(String, String)>> {
        let mut env: std::collections::BTreeMap<String, String> = s.sandbox_env.0.clone();
        if let Some(sealed) = &s.sandbox_secrets {
            env.extend(secrets::open_env(
                self.inner.credentials.master_key(),
                s.session_id(),
                sealed,
            )?);
        }
        Ok(env.into_iter().collect())
    }

    /// The session, which must have a running sandbox; 409 otherwise.
    pub(crate) async fn running(
        &self,
        project: ProjectId,
        id: SessionId,
    ) -> Result<(SessionRecord, String)> {
        let s = sessions::get(&self.inner.db, project, id)
            .await
            .map_err(|e| not_found(e, id))?;
        let container = crate::require_running(&s)?.to_owned();
        Ok((s, container))
    }

    /// Runs `sh -c command` in the workspace. A timeout kills only that command's process
    /// tree (exit code 124, with a note in stderr), never the sandbox.
    #[tracing::instrument(skip_all, fields(session.id = %id))]
    pub async fn exec(
        &self,
        project: ProjectId,
        id: SessionId,
        command: String,
        timeout: Option<f64>,
    ) -> Result<ExecResult> {
        let secs = timeout.unwrap_or(DEFAULT_TIMEOUT_SECS);
        if !(secs > 0.0 && secs <= MAX_TIMEOUT_SECS) {
            return Err(ServiceError::field(
                &["timeout"],
                "timeout is more than 0 and at most 600 seconds",
                Value::from(secs),
            ));
        }
        let (session, container) = self.running(project, id).await?;
        let req = ExecRequest {
            argv: vec!["sh".into(), "-c".into(), command],
            workdir: None,
            env: self.command_env(&session)?,
            timeout: Duration::from_secs_f64(secs),
            max_output: MAX_OUTPUT_BYTES,
            stdin: None,
        };
        // The idle clock is moved while the command runs, not before it: the UPDATE (a
        // commit) overlaps the Docker round trips instead of adding to them. It has committed
        // by the time the caller gets the answer, so a use that was answered is always on
        // record; a reaper that decided just before it re-checks under the session lock
        // (see `stop_locked`).
        let (touched, out) = tokio::join!(
            sessions::touch(&self.inner.db, id),
            self.inner.backend.exec(&container, &req)
        );
        if let Err(e) = touched {
            tracing::warn!(error = %e, "could not record the use of the sandbox");
        }
        let out = out.map_err(|e| match e {
            SandboxError::NotFound(_) => ServiceError::Conflict(
                "the sandbox is gone; stop and start the session to get a new one".into(),
            ),
            other => other.into(),
        })?;
        let mut stderr = text(&out.stderr, out.stderr_truncated, "stderr");
        if out.timed_out {
            stderr.push_str(&format!(
                "\n[timed out after {secs} s: the command was killed]\n"
            ));
        }
        Ok(ExecResult {
            exit_code: if out.timed_out { 124 } else { out.exit_code },
            stdout: text(&out.stdout, out.stdout_truncated, "stdout"),
            stderr,
        })
    }
}
