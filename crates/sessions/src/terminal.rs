//! Terminals: an interactive shell on a pseudo-terminal in a running session's sandbox, run
//! by its daemon. The API carries one over a WebSocket; this module opens it, bounds how many
//! a session has, and keeps the session's idle clock moving while someone types.

use crate::processes::daemon_error;
use crate::Sessions;
use sandbox_agents_domain::{ProjectId, SessionId};
use sandbox_agents_errors::{Result, ServiceError};
use sandbox_agents_sandbox::sandboxd::client::{Client, Execution};
use sandbox_agents_sandbox::sandboxd::proto::{self, ExecSpec, PtySize};
use sandbox_agents_sandbox::WORKDIR;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Most terminals one session has open at once through one server process.
pub const MAX_TERMINALS_PER_SESSION: usize = 8;
/// Largest terminal, in rows and in columns.
pub const MAX_TERMINAL_SIDE: u16 = 1000;
/// Input moves the idle clock at most this often (one UPDATE per keystroke would be a write
/// per character typed).
const TOUCH_EVERY: Duration = Duration::from_secs(30);

/// The shell a terminal runs: bash when the image has it, sh otherwise; interactive, not a
/// login shell, so `/etc/profile` does not reset the PATH the environment set.
const SHELL: &str = "if command -v bash >/dev/null 2>&1; then exec bash -i; else exec sh -i; fi";

/// Open terminals per session in this process.
#[derive(Default)]
pub(crate) struct TerminalCounts(Arc<Mutex<HashMap<SessionId, usize>>>);

/// One counted terminal; dropping it frees its place.
pub struct TerminalSlot {
    counts: Arc<Mutex<HashMap<SessionId, usize>>>,
    session: SessionId,
}

impl Drop for TerminalSlot {
    fn drop(&mut self) {
        let mut counts = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = counts.get_mut(&self.session) {
            *n -= 1;
            if *n == 0 {
                counts.remove(&self.session);
            }
        }
    }
}

impl TerminalCounts {
    fn take(&self, session: SessionId) -> Result<TerminalSlot> {
        let mut counts = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let n = counts.entry(session).or_default();
        if *n >= MAX_TERMINALS_PER_SESSION {
            return Err(ServiceError::Conflict(format!(
                "this session has {MAX_TERMINALS_PER_SESSION} terminals open already; close one first"
            )));
        }
        *n += 1;
        Ok(TerminalSlot {
            counts: self.0.clone(),
            session,
        })
    }
}

/// A session's sandbox that may get a terminal: checked to be running, with a daemon, and
/// with a place free. [`TerminalTarget::open`] starts the shell.
pub struct TerminalTarget {
    sessions: Sessions,
    session: SessionId,
    client: Client,
    env: Vec<(String, String)>,
    slot: TerminalSlot,
}

/// An open terminal: the shell's frames and its input (see [`Execution`]; dropping it kills
/// the shell and everything it started).
pub struct Terminal {
    pub execution: Execution,
    pub session: SessionId,
    sessions: Sessions,
    last_touch: Instant,
    _slot: TerminalSlot,
}

/// A terminal size within bounds.
pub fn terminal_size(rows: Option<u16>, cols: Option<u16>) -> Result<PtySize> {
    let rows = rows.unwrap_or(24);
    let cols = cols.unwrap_or(80);
    for (what, n) in [("rows", rows), ("cols", cols)] {
        if n == 0 || n > MAX_TERMINAL_SIDE {
            return Err(ServiceError::field(
                &[what],
                format!("{what} is between 1 and {MAX_TERMINAL_SIDE}"),
                serde_json::Value::from(n),
            ));
        }
    }
    Ok(PtySize { rows, cols })
}

impl Sessions {
    /// The session's sandbox for a terminal: 404 for no such session (another project's
    /// included), 409 when it is not running, has no daemon, or has all its terminals open.
    #[tracing::instrument(skip_all, fields(session.id = %id))]
    pub async fn terminal(&self, project: ProjectId, id: SessionId) -> Result<TerminalTarget> {
        let (session, client) = self.daemon_of(project, id).await?;
        let slot = self.inner.terminals.take(id)?;
        let mut env = self.command_env(&session)?;
        env.retain(|(k, _)| k != "TERM");
        env.push(("TERM".into(), "xterm-256color".into()));
        Ok(TerminalTarget {
            sessions: self.clone(),
            session: id,
            client,
            env,
            slot,
        })
    }
}

impl TerminalTarget {
    /// Starts the shell in the workspace, with the session's environment (bound secrets
    /// included, as every command the caller runs has them) and no time or output limit.
    pub async fn open(self, size: PtySize) -> Result<Terminal> {
        let spec = ExecSpec {
            argv: vec!["sh".into(), "-c".into(), SHELL.into()],
            cwd: Some(WORKDIR.into()),
            env: self.env,
            timeout_ms: None,
            max_output: u64::MAX,
            stdin: true,
            pty: Some(size),
            ..ExecSpec::default()
        };
        proto::check_command(&spec.argv, &spec.env)
            .map_err(|e| ServiceError::BadRequest(e.detail))?;
        let execution = self.client.exec(spec).await.map_err(daemon_error)?;
        let _ = sandbox_agents_store::sessions::touch(&self.sessions.inner.db, self.session).await;
        tracing::info!(session.id = %self.session, rows = size.rows, cols = size.cols, "opened a terminal");
        Ok(Terminal {
            execution,
            session: self.session,
            sessions: self.sessions,
            last_touch: Instant::now(),
            _slot: self.slot,
        })
    }
}

impl Terminal {
    /// Someone typed: the session is in use (recorded at most every [`TOUCH_EVERY`]).
    pub async fn used(&mut self) {
        if self.last_touch.elapsed() < TOUCH_EVERY {
            return;
        }
        self.last_touch = Instant::now();
        if let Err(e) =
            sandbox_agents_store::sessions::touch(&self.sessions.inner.db, self.session).await
        {
            tracing::warn!(error = %e, "could not record the use of a terminal's sandbox");
        }
    }

    /// The server is shutting down.
    pub fn shutdown(&self) -> &tokio_util::sync::CancellationToken {
        &self.sessions.inner.shutdown
    }
}
