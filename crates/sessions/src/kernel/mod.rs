//! The `python` capability's kernel: one IPython kernel per session, started on first use and
//! kept, with its variables, imports and installed packages, across tool calls and turns for
//! as long as the sandbox runs.
//!
//! The kernel is run by `controller.py` (this folder), written into the sandbox's `/tmp` and
//! started as one of the daemon's background processes, as the sandbox user with the
//! session's environment. Each cell is one command through the daemon (`controller.py call`),
//! whose stdout carries the cell's outputs as JSON lines while it runs: a stream's text goes
//! out live, and the command's end is the cell's end. Dropping the future kills that command,
//! and the controller interrupts the cell when its caller goes away, so interrupting a run
//! interrupts the cell and keeps the kernel.
//!
//! A sandbox that stops takes the kernel with it. The controller names each kernel it starts
//! with an epoch; every cell is journaled (`store::notebook`) with the epoch it ran in, so a
//! cell that finds a kernel other than the one the session's last cell ran in says plainly
//! that the kernel restarted and earlier state is gone.

use crate::processes::daemon_error;
use crate::Sessions;
use bytes::Bytes;
mod contexts;

use contexts::Kernel;
pub use contexts::{KernelContext, MAX_CONTEXTS};

use sandbox_agents_domain::notebook::{CellStatus, NotebookCell};
use sandbox_agents_domain::{ProjectId, RunId, SessionId};
use sandbox_agents_errors::{Result, ServiceError};
use sandbox_agents_sandbox::sandboxd::proto::{ProcessSpec, ProcessState};
use sandbox_agents_sandbox::{ExecRequest, OutputStream, WORKDIR};
use sandbox_agents_store::notebook;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::time::Duration;

/// Where the controller lives in the sandbox (the sandbox user's; gone with the sandbox).
pub const KERNEL_ROOT: &str = "/tmp/sandbox-agents-kernel";
/// The workspace folder images are saved in.
pub const OUTPUTS_DIR: &str = "outputs";
/// A cell's time limit when the call gives none.
pub const DEFAULT_CELL_TIMEOUT: Duration = Duration::from_secs(600);
/// The longest time limit a cell may ask for.
pub const MAX_CELL_TIMEOUT: Duration = Duration::from_secs(3600);
/// The most bytes of JSON lines one cell's command may print (images are in them, base64);
/// past it the rest is drained and the cell's outputs say so.
const MAX_CELL_OUTPUT: usize = 48 * 1024 * 1024;
/// How long a kernel may take to start.
const START_DEADLINE: Duration = Duration::from_secs(120);
/// The command's own margin over the cell's limit: the controller interrupts the cell at
/// the limit and answers; the command is killed only if that answer never comes.
const ANSWER_MARGIN: Duration = Duration::from_secs(30);

const CONTROLLER_PY: &str = include_str!("controller.py");

/// The controller's file in the sandbox.
fn controller_path() -> String {
    format!("{KERNEL_ROOT}/controller.py")
}

/// What one cell gave.
#[derive(Clone, Debug)]
pub struct CellRun {
    pub cell: NotebookCell,
    /// The kernel is not the one the session's previous cell ran in: what earlier cells
    /// defined is gone (the sandbox stopped, or the kernel died or was replaced).
    pub restarted: bool,
    /// Images saved from the cell's outputs, workspace-relative (`outputs/<cell>-1.png`).
    pub files: Vec<String>,
    /// Why the cell ended as it did, when that needs saying (a time limit, a dead kernel).
    pub detail: Option<String>,
}

/// Which kernel a cell runs in, and how (the python tool's defaults: the session's own kernel,
/// journaled, images saved under `outputs/`).
#[derive(Clone, Debug)]
pub struct CellOptions {
    /// `None`: the session's kernel, whose cells are journaled in its notebook. `Some`: one of
    /// the session's other kernels (`contexts.rs`), whose cells are not.
    pub context: Option<String>,
    /// Environment variables set in the kernel for this cell only.
    pub env: BTreeMap<String, String>,
    /// Whether images are also saved as files under the workspace's `outputs/`.
    pub save_images: bool,
}

impl Default for CellOptions {
    fn default() -> Self {
        Self {
            context: None,
            env: BTreeMap::new(),
            save_images: true,
        }
    }
}

/// A cell's command ended without its answer.
enum Called {
    Answered(Value),
    /// The controller is not running (or its file is gone): start it and ask again.
    NoController,
}

impl Sessions {
    /// The session's notebook (any state; 404 for another project's session).
    pub async fn notebook(
        &self,
        project: ProjectId,
        id: SessionId,
    ) -> Result<sandbox_agents_domain::notebook::Notebook> {
        sandbox_agents_store::sessions::get(&self.inner.db, project, id)
            .await
            .map_err(|e| crate::lease::not_found(e, id))?;
        let cells = notebook::list(&self.inner.db, id).await?;
        Ok(sandbox_agents_domain::notebook::Notebook::of(&cells))
    }

    /// Runs `code` in the session's kernel (started first when it is not running), handing
    /// each piece of stream output (stdout, stderr) to `on_text` as the kernel sends it.
    /// The cell is journaled before it starts (status `running`) and completed when it
    /// ends, so the notebook shows every cell even when its run was interrupted.
    pub async fn run_cell(
        &self,
        project: ProjectId,
        id: SessionId,
        run: Option<RunId>,
        code: &str,
        timeout: Duration,
        on_text: impl FnMut(OutputStream, &str) + Send,
    ) -> Result<CellRun> {
        let options = CellOptions::default();
        self.run_cell_with(project, id, run, code, timeout, &options, on_text)
            .await
    }

    /// [`Sessions::run_cell`] in the kernel and with the settings `options` names. A context's
    /// cell is not journaled: its `cell` is built here, and `restarted` is always false.
    #[tracing::instrument(skip_all, fields(session.id = %id, context = ?options.context))]
    #[allow(clippy::too_many_arguments)]
    pub async fn run_cell_with(
        &self,
        project: ProjectId,
        id: SessionId,
        run: Option<RunId>,
        code: &str,
        timeout: Duration,
        options: &CellOptions,
        mut on_text: impl FnMut(OutputStream, &str) + Send,
    ) -> Result<CellRun> {
        if timeout.is_zero() || timeout > MAX_CELL_TIMEOUT {
            return Err(ServiceError::BadRequest(format!(
                "a cell's timeout is more than 0 and at most {} seconds",
                MAX_CELL_TIMEOUT.as_secs()
            )));
        }
        let (session, sandbox) = self.running(project, id).await?;
        let env = self.command_env(&session)?;
        // The journal is read by people and the UI, like the event log: the sandbox's secret
        // values are masked in it as they are in tool results.
        let secrets = self.secret_values(&session)?;
        let db = &self.inner.db;
        let kernel = match &options.context {
            None => Kernel::session(),
            Some(context) => Kernel::context(context)?,
        };
        let journaled = options.context.is_none();
        let previous = match journaled {
            true => notebook::last_epoch(db, id).await?,
            false => None,
        };
        let cell_id = uuid::Uuid::now_v7().simple().to_string()[20..].to_owned();
        let started_at = time::OffsetDateTime::now_utc();
        if journaled {
            notebook::begin(db, id, run, &cell_id, code).await?;
        }
        let request = json!({
            "op": "execute",
            "code": code,
            "timeout": timeout.as_secs_f64(),
            "outputs_dir": format!("{WORKDIR}/{OUTPUTS_DIR}"),
            "cell": cell_id,
            "save_images": options.save_images,
            "env": options.env,
        });
        let mut answer = Answer::default();
        let done = match self
            .answer_cell(
                &sandbox,
                &env,
                &kernel,
                &request,
                timeout,
                &mut answer,
                &mut on_text,
            )
            .await
        {
            Ok(done) => done,
            Err(e) if journaled => {
                // The cell is journaled as what happened to it, not left `running`.
                let said =
                    json!([{"output_type": "stream", "name": "stderr", "text": e.to_string()}]);
                let outputs = said.as_array().cloned().unwrap_or_default();
                let _ = notebook::finish(db, id, &cell_id, &outputs, None, CellStatus::Error, None)
                    .await;
                return Err(e);
            }
            Err(e) => return Err(e),
        };
        let status = match done["status"].as_str() {
            Some("ok") => CellStatus::Ok,
            Some("error") => CellStatus::Error,
            Some("timeout") => CellStatus::Timeout,
            Some("died") => CellStatus::Died,
            _ => CellStatus::Interrupted,
        };
        let epoch = done["epoch"].as_str().map(str::to_owned);
        let restarted = match (&previous, &epoch) {
            (Some(before), Some(now)) => before != now,
            _ => false,
        };
        let mut detail = done["detail"].as_str().map(str::to_owned);
        if answer.cut {
            let note = format!(
                "the cell's outputs passed {} MiB and the rest were dropped",
                MAX_CELL_OUTPUT / (1024 * 1024)
            );
            detail = Some(match detail {
                Some(d) => format!("{d}; {note}"),
                None => note,
            });
        }
        mask_outputs(&mut answer.outputs, &secrets);
        let cell = match journaled {
            true => {
                notebook::finish(
                    db,
                    id,
                    &cell_id,
                    &answer.outputs,
                    done["execution_count"].as_i64(),
                    status,
                    epoch.as_deref(),
                )
                .await?
            }
            false => NotebookCell {
                id: cell_id.clone(),
                code: code.to_owned(),
                outputs: std::mem::take(&mut answer.outputs),
                execution_count: done["execution_count"].as_i64(),
                status,
                epoch: epoch.clone(),
                started_at,
                finished_at: Some(time::OffsetDateTime::now_utc()),
            },
        };
        let _ = sandbox_agents_store::sessions::touch(db, id).await;
        tracing::info!(cell = %cell_id, status = status.as_str(), restarted, "cell ran");
        Ok(CellRun {
            cell,
            restarted,
            files: answer.files,
            detail,
        })
    }

    /// The cell's answer from the controller, started first when none runs.
    #[allow(clippy::too_many_arguments)]
    async fn answer_cell(
        &self,
        sandbox: &str,
        env: &[(String, String)],
        kernel: &Kernel,
        request: &Value,
        timeout: Duration,
        answer: &mut Answer,
        on_text: &mut (impl FnMut(OutputStream, &str) + Send),
    ) -> Result<Value> {
        let mut started = false;
        loop {
            match self
                .call_controller(sandbox, env, kernel, request, timeout, answer, on_text)
                .await?
            {
                Called::Answered(done) => return Ok(done),
                Called::NoController if !started => {
                    let cwd = self.kernel_cwd(sandbox, kernel).await?;
                    self.start_controller(sandbox, env, kernel, &cwd).await?;
                    started = true;
                }
                Called::NoController => {
                    return Err(ServiceError::Conflict(
                        "the Python kernel's controller stopped answering; try again (a new kernel starts)".into(),
                    ))
                }
            }
        }
    }

    /// One `controller.py call`: its JSON lines go to `answer` (and stream text to
    /// `on_text`) as they come; the last one is the answer.
    #[allow(clippy::too_many_arguments)]
    async fn call_controller(
        &self,
        sandbox: &str,
        env: &[(String, String)],
        kernel: &Kernel,
        request: &Value,
        timeout: Duration,
        answer: &mut Answer,
        on_text: &mut (impl FnMut(OutputStream, &str) + Send),
    ) -> Result<Called> {
        let req = ExecRequest {
            argv: vec![
                "python3".into(),
                controller_path(),
                "call".into(),
                kernel.root.clone(),
            ],
            workdir: None,
            env: env.to_vec(),
            timeout: timeout + ANSWER_MARGIN,
            max_output: MAX_CELL_OUTPUT,
            stdin: Some(Bytes::from(request.to_string())),
        };
        let mut each = |stream: OutputStream, chunk: &[u8]| {
            if stream == OutputStream::Stdout {
                answer.push(chunk, on_text);
            }
        };
        let out = self
            .inner
            .backend
            .exec_streaming(sandbox, &req, &mut each)
            .await
            .map_err(|e| match e {
                e @ sandbox_agents_sandbox::SandboxError::DaemonLost => {
                    ServiceError::Conflict(e.to_string())
                }
                other => other.into(),
            })?;
        answer.cut |= out.stdout_truncated;
        if let Some(done) = answer.done.take() {
            return Ok(Called::Answered(done));
        }
        // 3: the controller's socket does not answer; 2: python3 cannot open the file.
        if matches!(out.exit_code, 2 | 3) && !out.timed_out {
            return Ok(Called::NoController);
        }
        if out.timed_out {
            return Ok(Called::Answered(json!({
                "status": "timeout",
                "detail": "the kernel did not answer within the cell's time limit",
            })));
        }
        Err(ServiceError::Internal(anyhow::anyhow!(
            "the kernel's controller ended without an answer (exit {}): {}",
            out.exit_code,
            String::from_utf8_lossy(&out.stderr).trim()
        )))
    }

    /// Writes the controller into the sandbox, starts it as a background process and waits
    /// until its kernel answers. A python3 without ipykernel or jupyter_client is a 409 that
    /// names what is missing. Two starts at once are harmless: a controller that finds
    /// another serving exits.
    async fn start_controller(
        &self,
        sandbox: &str,
        env: &[(String, String)],
        kernel: &Kernel,
        cwd: &str,
    ) -> Result<()> {
        let client = self.inner.backend.daemon(sandbox).await.ok_or_else(|| {
            ServiceError::Conflict(
                "the python tool needs the sandbox's daemon, which this sandbox does not have (its image cannot run it, or the server runs without one)".into(),
            )
        })?;
        let body = futures::stream::iter([Ok::<_, std::io::Error>(Bytes::from_static(
            CONTROLLER_PY.as_bytes(),
        ))]);
        client
            .write_file(&controller_path(), Some(0o644), true, Box::pin(body))
            .await
            .map_err(daemon_error)?;
        let spec = ProcessSpec {
            argv: vec![
                "python3".into(),
                controller_path(),
                "serve".into(),
                kernel.root.clone(),
            ],
            cwd: Some(cwd.into()),
            env: env
                .iter()
                .cloned()
                .chain([("SANDBOX_AGENTS_KERNEL_CWD".to_owned(), cwd.to_owned())])
                .collect(),
        };
        let process = client.start_process(&spec).await.map_err(daemon_error)?;
        tracing::info!(process = %process.id, "starting the Python kernel");
        let deadline = tokio::time::Instant::now() + START_DEADLINE;
        let ping = json!({"op": "ping"});
        loop {
            let mut answer = Answer::default();
            let called = self
                .call_controller(
                    sandbox,
                    env,
                    kernel,
                    &ping,
                    Duration::from_secs(10),
                    &mut answer,
                    &mut |_, _| {},
                )
                .await?;
            if matches!(called, Called::Answered(_)) {
                return Ok(());
            }
            let state = client.process(&process.id).await.map_err(daemon_error)?;
            if state.info.state == ProcessState::Exited {
                let said = state.stderr.trim();
                return Err(match said.strip_prefix("missing: ") {
                    Some(module) => ServiceError::Conflict(format!(
                        "the sandbox's python3 lacks the module '{}': the python capability needs ipykernel and jupyter-client (and matplotlib for plots) in the session's environment; add them to its pip packages, or leave the agent without an environment to get the built-in 'analysis' one",
                        module.lines().next().unwrap_or(module)
                    )),
                    None => ServiceError::Conflict(format!(
                        "the Python kernel did not start: {}",
                        tail(said, 2000)
                    )),
                });
            }
            if tokio::time::Instant::now() >= deadline {
                let _ = client.kill_process(&process.id).await;
                return Err(ServiceError::Conflict(format!(
                    "the Python kernel did not start within {} s; try again",
                    START_DEADLINE.as_secs()
                )));
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

/// Secret values out of every text an output carries (images are left as they are).
fn mask_outputs(outputs: &mut [Value], secrets: &[String]) {
    use sandbox_agents_credentials::secrets::mask;
    if secrets.is_empty() {
        return;
    }
    let masked = |v: &mut Value| {
        if let Some(t) = v.as_str() {
            *v = Value::from(mask(t.to_owned(), secrets));
        }
    };
    // `get_mut`, never indexing: an index inserts the key, and nbformat refuses unknown ones.
    for o in outputs {
        for key in ["text", "evalue"] {
            if let Some(v) = o.get_mut(key) {
                masked(v);
            }
        }
        if let Some(lines) = o.get_mut("traceback").and_then(Value::as_array_mut) {
            lines.iter_mut().for_each(masked);
        }
        if let Some(data) = o.get_mut("data").and_then(Value::as_object_mut) {
            for (mime, v) in data.iter_mut() {
                if mime.starts_with("text/") || mime == "application/json" {
                    masked(v);
                }
            }
        }
    }
}

/// The last `max` bytes of `s` (on a character boundary).
fn tail(s: &str, max: usize) -> &str {
    let mut start = s.len().saturating_sub(max);
    while !s.is_char_boundary(start) {
        start += 1;
    }
    &s[start..]
}

/// A cell's answer as its JSON lines arrive.
#[derive(Default)]
struct Answer {
    partial: Vec<u8>,
    outputs: Vec<Value>,
    files: Vec<String>,
    done: Option<Value>,
    /// The command's output passed its cap.
    cut: bool,
}

impl Answer {
    fn push(&mut self, chunk: &[u8], on_text: &mut (impl FnMut(OutputStream, &str) + Send)) {
        self.partial.extend_from_slice(chunk);
        while let Some(end) = self.partial.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = self.partial.drain(..=end).collect();
            let Ok(msg) = serde_json::from_slice::<Value>(&line) else {
                continue;
            };
            match msg["type"].as_str() {
                Some("output") => {
                    let output = msg["output"].clone();
                    if output["output_type"] == "stream" {
                        let stream = if output["name"] == "stderr" {
                            OutputStream::Stderr
                        } else {
                            OutputStream::Stdout
                        };
                        if let Some(text) = output["text"].as_str() {
                            on_text(stream, text);
                        }
                    }
                    self.outputs.push(output);
                }
                Some("file") => {
                    if let Some(p) = msg["path"].as_str() {
                        let relative = p
                            .strip_prefix(WORKDIR)
                            .map(|r| r.trim_start_matches('/'))
                            .unwrap_or(p);
                        self.files.push(relative.to_owned());
                    }
                }
                Some("done") => self.done = Some(msg),
                _ => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_is_read_line_by_line_across_chunks() {
        let mut a = Answer::default();
        let mut seen = Vec::new();
        let lines = concat!(
            r#"{"type":"output","output":{"output_type":"stream","name":"stdout","text":"hi\n"}}"#,
            "\n",
            r#"{"type":"file","path":"/workspace/outputs/c-1.png"}"#,
            "\n",
            r#"{"type":"done","status":"ok","epoch":"e1","execution_count":1}"#,
            "\n"
        );
        for chunk in lines.as_bytes().chunks(7) {
            a.push(chunk, &mut |s, t: &str| seen.push((s, t.to_owned())));
        }
        assert_eq!(seen, vec![(OutputStream::Stdout, "hi\n".to_owned())]);
        assert_eq!(a.outputs.len(), 1);
        assert_eq!(a.files, vec!["outputs/c-1.png".to_owned()]);
        assert_eq!(a.done.unwrap()["epoch"], "e1");
    }
}
