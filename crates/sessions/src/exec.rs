//! `exec`: a shell command in a running sandbox, bounded in time and output.

use crate::lease::not_found;
use crate::Sessions;
use sandbox_agents_credentials::secrets;
use sandbox_agents_domain::session::{ExecExit, ExecResult};
use sandbox_agents_domain::{ProjectId, SessionId};
use sandbox_agents_errors::{Result, ServiceError};
use sandbox_agents_sandbox::{ExecRequest, OutputStream, SandboxError};
use sandbox_agents_store::sessions::{self, SessionRecord};

/// The plain environment of a session's sandbox: the manifest's `environment` as it was when
/// the sandbox booted. It is passed with each exec rather than baked into the sandbox, so a
/// sandbox taken from the warm pool (created before the session existed) and one created for
/// the session behave the same, and the variables never appear in the sandbox's
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

    /// The values of the sandbox's secret variables (none when it has none).
    pub(crate) fn secret_values(&self, s: &SessionRecord) -> Result<Vec<String>> {
        Ok(match &s.sandbox_secrets {
            Some(sealed) => {
                secrets::open_env(self.inner.credentials.master_key(), s.session_id(), sealed)?
                    .into_values()
                    .collect()
            }
            None => Vec::new(),
        })
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
        let sandbox = crate::require_running(&s)?.to_owned();
        Ok((s, sandbox))
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
        let prepared = self.prepare_exec(project, id, command, timeout).await?;
        Ok(prepared.run(|_, _| {}).await?.result)
    }

    /// Checks an exec (the timeout, the session running) without starting it, so a caller
    /// that streams can answer a refusal as an ordinary error before its stream begins.
    pub async fn prepare_exec(
        &self,
        project: ProjectId,
        id: SessionId,
        command: String,
        timeout: Option<f64>,
    ) -> Result<PreparedExec> {
        let secs = timeout.unwrap_or(DEFAULT_TIMEOUT_SECS);
        if !(secs > 0.0 && secs <= MAX_TIMEOUT_SECS) {
            return Err(ServiceError::field(
                &["timeout"],
                "timeout is more than 0 and at most 600 seconds",
                Value::from(secs),
            ));
        }
        let (session, sandbox) = self.running(project, id).await?;
        let req = ExecRequest {
            argv: vec!["sh".into(), "-c".into(), command],
            workdir: None,
            env: self.command_env(&session)?,
            timeout: Duration::from_secs_f64(secs),
            max_output: MAX_OUTPUT_BYTES,
            stdin: None,
        };
        Ok(PreparedExec {
            sessions: self.clone(),
            id,
            sandbox,
            req,
            secs,
        })
    }
}

/// An exec checked and ready to run (see [`Sessions::prepare_exec`]).
pub struct PreparedExec {
    sessions: Sessions,
    id: SessionId,
    sandbox: String,
    req: ExecRequest,
    secs: f64,
}

/// What an exec gives: the whole answer, and how it ended.
pub struct ExecOutcome {
    pub result: ExecResult,
    pub exit: ExecExit,
}

impl PreparedExec {
    /// Runs the command; each piece of its output also goes to `on_output` as text (invalid
    /// UTF-8 replaced, a character split between chunks kept whole) as the command writes it,
    /// where the sandbox's daemon carries it, or at the end otherwise. A timeout's note comes
    /// last, on stderr. Dropping the future abandons the command (its tree is killed).
    pub async fn run(
        self,
        mut on_output: impl FnMut(OutputStream, &str) + Send,
    ) -> Result<ExecOutcome> {
        let PreparedExec {
            sessions,
            id,
            sandbox,
            req,
            secs,
        } = self;
        let (mut out_text, mut err_text) = (Utf8Chunks::default(), Utf8Chunks::default());
        let mut each = |stream: OutputStream, chunk: &[u8]| {
            let decoder = match stream {
                OutputStream::Stdout => &mut out_text,
                OutputStream::Stderr => &mut err_text,
            };
            let text = decoder.push(chunk);
            if !text.is_empty() {
                on_output(stream, &text);
            }
        };
        // The idle clock is moved while the command runs, not before it: the UPDATE (a
        // commit) overlaps the backend's round trips instead of adding to them. It has committed
        // by the time the caller gets the answer, so a use that was answered is always on
        // record; a reaper that decided just before it re-checks under the session lock
        // (see `stop_locked`).
        let started = std::time::Instant::now();
        let (touched, out) = tokio::join!(
            sessions::touch(&sessions.inner.db, id),
            sessions
                .inner
                .backend
                .exec_streaming(&sandbox, &req, &mut each)
        );
        if let Err(e) = touched {
            tracing::warn!(error = %e, "could not record the use of the sandbox");
        }
        let outcome = match &out {
            Ok(o) if o.timed_out => "timed_out",
            Ok(_) => "exited",
            Err(_) => "failed",
        };
        metrics::histogram!("sandbox_agents_exec_duration_seconds", "outcome" => outcome)
            .record(started.elapsed());
        let out = out.map_err(|e| match e {
            SandboxError::NotFound(_) => ServiceError::Conflict(
                "the sandbox is gone; stop and start the session to get a new one".into(),
            ),
            e @ SandboxError::DaemonLost => ServiceError::Conflict(e.to_string()),
            other => other.into(),
        })?;
        for (stream, decoder) in [
            (OutputStream::Stdout, &mut out_text),
            (OutputStream::Stderr, &mut err_text),
        ] {
            let rest = decoder.finish();
            if !rest.is_empty() {
                on_output(stream, &rest);
            }
        }
        let mut stderr = text(&out.stderr, out.stderr_truncated, "stderr");
        if out.timed_out {
            let note = format!("\n[timed out after {secs} s: the command was killed]\n");
            on_output(OutputStream::Stderr, &note);
            stderr.push_str(&note);
        }
        let exit_code = if out.timed_out { 124 } else { out.exit_code };
        Ok(ExecOutcome {
            result: ExecResult {
                exit_code,
                stdout: text(&out.stdout, out.stdout_truncated, "stdout"),
                stderr,
            },
            exit: ExecExit {
                exit_code,
                timed_out: out.timed_out,
                stdout_truncated: out.stdout_truncated,
                stderr_truncated: out.stderr_truncated,
            },
        })
    }
}

/// Output pieces as [`PreparedExec::run_to_channel`] hands them on.
pub type OutputPieces = tokio::sync::mpsc::UnboundedReceiver<(OutputStream, String)>;

impl PreparedExec {
    /// [`PreparedExec::run`] with each piece of output sent to the returned receiver, for a
    /// caller that forwards it while the command runs. The receiver ends once the command
    /// has (the sender is dropped with the future). Unbounded, and still bounded: the output
    /// is capped at [`MAX_OUTPUT_BYTES`] a stream.
    pub fn run_to_channel(
        self,
    ) -> (
        impl std::future::Future<Output = Result<ExecOutcome>> + Send,
        OutputPieces,
    ) {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let run = self.run(move |stream, text: &str| {
            let _ = tx.send((stream, text.to_owned()));
        });
        (run, rx)
    }
}

/// Bytes to text chunk by chunk: a UTF-8 character split between two chunks is held until
/// it is whole; bytes that can never be valid become U+FFFD, as `from_utf8_lossy` does.
#[derive(Default)]
pub(crate) struct Utf8Chunks {
    held: Vec<u8>,
}

impl Utf8Chunks {
    pub(crate) fn push(&mut self, chunk: &[u8]) -> String {
        self.held.extend_from_slice(chunk);
        let mut out = String::new();
        let mut rest: &[u8] = &self.held;
        loop {
            match std::str::from_utf8(rest) {
                Ok(s) => {
                    out.push_str(s);
                    rest = &[];
                    break;
                }
                Err(e) => {
                    let (valid, after) = rest.split_at(e.valid_up_to());
                    out.push_str(std::str::from_utf8(valid).unwrap_or_default());
                    match e.error_len() {
                        Some(n) => {
                            out.push(char::REPLACEMENT_CHARACTER);
                            rest = &after[n..];
                        }
                        // An incomplete character at the end: wait for its other bytes.
                        None => {
                            rest = after;
                            break;
                        }
                    }
                }
            }
        }
        self.held = rest.to_vec();
        out
    }

    /// What is held at the end: an incomplete character, replaced.
    pub(crate) fn finish(&mut self) -> String {
        let rest = String::from_utf8_lossy(&self.held).into_owned();
        self.held.clear();
        rest
    }
}

#[cfg(test)]
mod tests {
    use super::Utf8Chunks;

    #[test]
    fn characters_split_between_chunks_come_out_whole() {
        let text = "héllo — 日本 ✓";
        let bytes = text.as_bytes();
        for size in 1..=4 {
            let mut d = Utf8Chunks::default();
            let mut out = String::new();
            for chunk in bytes.chunks(size) {
                let piece = d.push(chunk);
                assert!(!piece.contains('\u{fffd}'), "chunks of {size}: {piece:?}");
                out.push_str(&piece);
            }
            out.push_str(&d.finish());
            assert_eq!(out, text, "chunks of {size}");
        }
    }

    #[test]
    fn invalid_bytes_are_replaced_as_lossy_decoding_does() {
        let bytes = b"ok\xff\xfeend\xe6\x97";
        let mut d = Utf8Chunks::default();
        let mut out = d.push(&bytes[..5]);
        out.push_str(&d.push(&bytes[5..]));
        out.push_str(&d.finish());
        assert_eq!(out, String::from_utf8_lossy(bytes));
    }
}
