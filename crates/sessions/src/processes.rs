//! Background processes of a running session's sandbox, run by its daemon: started by one
//! request, listed, read and killed by others, ended with the sandbox.

use crate::Sessions;
use sandbox_agents_domain::process::{Process, ProcessDetail, ProcessStatus, StartProcess};
use sandbox_agents_domain::{ProjectId, SessionId};
use sandbox_agents_errors::{Result, ServiceError};
use sandbox_agents_sandbox::sandboxd::client::{Client, ClientError};
use sandbox_agents_sandbox::sandboxd::proto::{self, ErrorKind, ProcessSpec, ProcessState};
use sandbox_agents_sandbox::WORKDIR;
use time::OffsetDateTime;

/// The most variables a start may add.
pub const MAX_ENV: usize = 256;

/// A daemon's error in the service's terms: what the caller did wrong, or ours.
pub(crate) fn daemon_error(e: ClientError) -> ServiceError {
    match e {
        ClientError::Daemon(b) => match b.kind {
            ErrorKind::NotFound => ServiceError::NotFound(b.detail),
            ErrorKind::PermissionDenied => ServiceError::Forbidden(b.detail),
            ErrorKind::TooLarge => ServiceError::TooLarge(b.detail),
            ErrorKind::Invalid => ServiceError::BadRequest(b.detail),
            ErrorKind::IsADirectory
            | ErrorKind::NotADirectory
            | ErrorKind::Exists
            | ErrorKind::NotEmpty => ServiceError::Conflict(b.detail),
            ErrorKind::Internal => {
                ServiceError::Internal(anyhow::anyhow!("the sandbox daemon failed: {}", b.detail))
            }
        },
        ClientError::Transport(m) => ServiceError::Conflict(format!(
            "the sandbox's daemon could not be reached ({m}); try again"
        )),
        ClientError::Unsupported(op) => ServiceError::Conflict(format!(
            "the sandbox's daemon is older than this server and lacks {op}; stop and start the session to get the current one"
        )),
        ClientError::Protocol(m) => ServiceError::Internal(anyhow::anyhow!(
            "the sandbox daemon broke the protocol: {m}"
        )),
    }
}

fn time_of(ms: u64) -> OffsetDateTime {
    OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
        .unwrap_or(OffsetDateTime::UNIX_EPOCH)
}

/// The command a process was started with (`sh -c <command>`).
fn command_of(argv: &[String]) -> String {
    match argv {
        [sh, c, command] if sh == "sh" && c == "-c" => command.clone(),
        other => other.join(" "),
    }
}

fn process_of(p: proto::ProcessInfo) -> Process {
    Process {
        command: command_of(&p.argv),
        id: p.id,
        pid: p.pid,
        cwd: p.cwd,
        status: match p.state {
            ProcessState::Running => ProcessStatus::Running,
            ProcessState::Exited => ProcessStatus::Exited,
        },
        exit_code: p.exit_code,
        signal: p.signal,
        started_at: time_of(p.started_at_ms),
        ended_at: p.ended_at_ms.map(time_of),
    }
}

/// A working directory as the API takes it: absolute, or relative to the workspace.
pub(crate) fn sandbox_dir(cwd: Option<String>) -> Result<String> {
    let Some(cwd) = cwd.filter(|c| !c.is_empty()) else {
        return Ok(WORKDIR.to_owned());
    };
    let path = if cwd.starts_with('/') {
        cwd
    } else {
        format!("{WORKDIR}/{cwd}")
    };
    proto::check_path(&path).map_err(|e| ServiceError::BadRequest(e.detail))?;
    Ok(path)
}

impl Sessions {
    /// The daemon of the session's running sandbox; 409 when the session is not running or
    /// its sandbox has no daemon.
    pub(crate) async fn daemon_of(
        &self,
        project: ProjectId,
        id: SessionId,
    ) -> Result<(sandbox_agents_store::sessions::SessionRecord, Client)> {
        let (session, sandbox) = self.running(project, id).await?;
        let client = self.inner.backend.daemon(&sandbox).await.ok_or_else(|| {
            ServiceError::Conflict(
                "this session's sandbox has no daemon (its image cannot run it, or the server runs without one), so it has no background processes, terminals or absolute-path files".into(),
            )
        })?;
        Ok((session, client))
    }

    #[tracing::instrument(skip_all, fields(session.id = %id))]
    pub async fn start_process(
        &self,
        project: ProjectId,
        id: SessionId,
        body: StartProcess,
    ) -> Result<Process> {
        // The session first: another project's is a 404 whatever the body.
        let (session, client) = self.daemon_of(project, id).await?;
        if body.command.trim().is_empty() {
            return Err(ServiceError::BadRequest("the command is empty".into()));
        }
        let extra = body.env.unwrap_or_default();
        if extra.len() > MAX_ENV {
            return Err(ServiceError::BadRequest(format!(
                "at most {MAX_ENV} variables"
            )));
        }
        let cwd = sandbox_dir(body.cwd)?;
        let mut env: std::collections::BTreeMap<String, String> =
            self.command_env(&session)?.into_iter().collect();
        env.extend(extra);
        let spec = ProcessSpec {
            argv: vec!["sh".into(), "-c".into(), body.command],
            cwd: Some(cwd),
            env: env.into_iter().collect(),
        };
        proto::check_command(&spec.argv, &spec.env)
            .map_err(|e| ServiceError::BadRequest(e.detail))?;
        let _ = sandbox_agents_store::sessions::touch(&self.inner.db, id).await;
        let started = client.start_process(&spec).await.map_err(daemon_error)?;
        tracing::info!(process = %started.id, pid = started.pid, "started a background process");
        Ok(process_of(started))
    }

    pub async fn processes(&self, project: ProjectId, id: SessionId) -> Result<Vec<Process>> {
        let (_, client) = self.daemon_of(project, id).await?;
        let all = client.processes().await.map_err(daemon_error)?;
        Ok(all.into_iter().map(process_of).collect())
    }

    pub async fn process(
        &self,
        project: ProjectId,
        id: SessionId,
        process: &str,
    ) -> Result<ProcessDetail> {
        let (_, client) = self.daemon_of(project, id).await?;
        let d = client.process(process).await.map_err(daemon_error)?;
        Ok(detail_of(d))
    }

    /// TERM to the process's tree, KILL two seconds later; once it ended it is forgotten (a
    /// later read is 404, as for anything deleted) and the answer is the last of it: its final
    /// state and output.
    #[tracing::instrument(skip_all, fields(session.id = %id, process = %process))]
    pub async fn kill_process(
        &self,
        project: ProjectId,
        id: SessionId,
        process: &str,
    ) -> Result<ProcessDetail> {
        let (_, client) = self.daemon_of(project, id).await?;
        let killed = client.kill_process(process).await.map_err(daemon_error)?;
        tracing::info!(exit_code = ?killed.info.exit_code, "killed a background process");
        Ok(detail_of(killed))
    }
}

fn detail_of(d: proto::ProcessDetail) -> ProcessDetail {
    ProcessDetail {
        process: process_of(d.info),
        stdout: d.stdout,
        stderr: d.stderr,
        stdout_dropped: d.stdout_dropped,
        stderr_dropped: d.stderr_dropped,
    }
}
