//! E2B's code interpreter (port 49999 in the SDKs' terms) over our Python kernel: `/execute`
//! runs code in the session's kernel (the `default` context, journaled in the session's
//! notebook like the python tool's cells) or in one of its contexts (other kernels, each with
//! its own state and working directory), and answers its outputs as E2B's newline-delimited
//! JSON lines.
//!
//! Invariants:
//! * stdout and stderr go out as the kernel prints them; results and errors when the cell
//!   ends; the last line is always `end_of_execution`, also after a failure;
//! * the stream owns the cell: a client that goes away drops it, which interrupts the cell
//!   and keeps the kernel (as the python tool's interruption does);
//! * every text line is masked with the session's secret values (images are left as they
//!   are), as envd's process output is.

use crate::E2b;
use futures::stream::{BoxStream, StreamExt};
use sandbox_agents_credentials::secrets::{mask as mask_secrets, StreamMask};
use sandbox_agents_domain::e2b::{
    e2b_path, sandbox_path, CodeContext, Execute, NewContext, DEFAULT_CONTEXT, E2B_HOME,
    MAX_CODE_BYTES, PYTHON,
};
use sandbox_agents_domain::notebook::CellStatus;
use sandbox_agents_domain::{ProjectId, SessionId};
use sandbox_agents_errors::{Result, ServiceError};
use sandbox_agents_sandbox::OutputStream;
use sandbox_agents_sessions::{CellOptions, MAX_CELL_TIMEOUT};
use serde_json::{json, Map, Value};
use time::format_description::well_known::Rfc3339;
use tokio::sync::mpsc;

/// The MIME types of a result that E2B's `Result` has a field for.
const RESULT_FIELDS: [(&str, &str); 10] = [
    ("text/plain", "text"),
    ("text/html", "html"),
    ("text/markdown", "markdown"),
    ("image/svg+xml", "svg"),
    ("image/png", "png"),
    ("image/jpeg", "jpeg"),
    ("application/pdf", "pdf"),
    ("text/latex", "latex"),
    ("application/json", "json"),
    ("application/javascript", "javascript"),
];

fn now() -> String {
    time::OffsetDateTime::now_utc()
        .format(&Rfc3339)
        .unwrap_or_default()
}

/// A kernel's text as E2B's `stdout`/`stderr` line.
fn stream_line(stream: OutputStream, text: String) -> Value {
    let kind = match stream {
        OutputStream::Stderr => "stderr",
        OutputStream::Stdout => "stdout",
    };
    json!({"type": kind, "text": text, "timestamp": now()})
}

/// One nbformat output as E2B's line: `execute_result` is the main result, `display_data` a
/// further one (a figure), `error` an error; streams were sent as they came, so none here.
pub fn output_line(output: &Value) -> Option<Value> {
    match output["output_type"].as_str()? {
        kind @ ("execute_result" | "display_data") => {
            let mut line = Map::new();
            line.insert("type".into(), "result".into());
            line.insert("is_main_result".into(), (kind == "execute_result").into());
            let mut extra = Map::new();
            for (mime, value) in output["data"].as_object()? {
                // Jupyter may send a text as a list of lines.
                let value = match value {
                    Value::Array(parts) if mime != "application/json" => {
                        Value::from(parts.iter().filter_map(Value::as_str).collect::<String>())
                    }
                    other => other.clone(),
                };
                match RESULT_FIELDS.iter().find(|(m, _)| m == mime) {
                    Some((_, field)) => {
                        line.insert((*field).into(), value);
                    }
                    None => {
                        extra.insert(mime.clone(), value);
                    }
                }
            }
            if !extra.is_empty() {
                line.insert("extra".into(), extra.into());
            }
            Some(line.into())
        }
        "error" => {
            let traceback = output["traceback"]
                .as_array()
                .map(|lines| {
                    lines
                        .iter()
                        .filter_map(Value::as_str)
                        .collect::<Vec<_>>()
                        .join("\n")
                })
                .unwrap_or_default();
            Some(json!({
                "type": "error",
                "name": output["ename"].as_str().unwrap_or(""),
                "value": output["evalue"].as_str().unwrap_or(""),
                "traceback": traceback,
            }))
        }
        _ => None,
    }
}

/// The context an execution names: `None` for the session's kernel.
fn context_of(req: &Execute) -> Result<Option<String>> {
    if req.context_id.is_some() && req.language.is_some() {
        return Err(ServiceError::BadRequest(
            "give a context or a language, not both".into(),
        ));
    }
    if let Some(language) = &req.language {
        check_language(language)?;
    }
    Ok(match req.context_id.as_deref() {
        None | Some(DEFAULT_CONTEXT) => None,
        Some(id) => Some(id.to_owned()),
    })
}

fn check_language(language: &str) -> Result<()> {
    if language.eq_ignore_ascii_case(PYTHON) {
        return Ok(());
    }
    Err(ServiceError::BadRequest(format!(
        "this server's code interpreter runs Python only (got language {language:?})"
    )))
}

impl E2b {
    /// Runs `req.code` and answers its lines as they come (see the module's invariants).
    /// What is refused before the cell starts (bad input, a stopped sandbox) is an error
    /// here; what goes wrong after is an `error` line.
    pub async fn execute(
        &self,
        project: ProjectId,
        id: SessionId,
        req: Execute,
    ) -> Result<BoxStream<'static, Value>> {
        if req.code.len() > MAX_CODE_BYTES {
            return Err(ServiceError::TooLarge(format!(
                "code is at most {MAX_CODE_BYTES} bytes"
            )));
        }
        let context = context_of(&req)?;
        let secrets = self.sessions.credentials().secret_values(project, id).await;
        let options = CellOptions {
            context,
            env: req.env_vars.unwrap_or_default(),
            save_images: false,
        };
        let sessions = self.sessions.clone();
        let (tx, rx) = mpsc::unbounded_channel::<Value>();
        let cell = async move {
            let mut masks = [StreamMask::new(&secrets), StreamMask::new(&secrets)];
            let live = tx.clone();
            let ran = sessions
                .run_cell_with(
                    project,
                    id,
                    None,
                    &req.code,
                    MAX_CELL_TIMEOUT,
                    &options,
                    |stream, text| {
                        let mask = &mut masks[(stream == OutputStream::Stderr) as usize];
                        let text = mask.push(text);
                        if !text.is_empty() {
                            let _ = live.send(stream_line(stream, text));
                        }
                    },
                )
                .await;
            for (i, mask) in masks.iter_mut().enumerate() {
                let rest = mask.finish();
                if !rest.is_empty() {
                    let stream = [OutputStream::Stdout, OutputStream::Stderr][i];
                    let _ = tx.send(stream_line(stream, rest));
                }
            }
            match ran {
                Ok(run) => {
                    for line in run.cell.outputs.iter().filter_map(output_line) {
                        let _ = tx.send(line);
                    }
                    let failed = matches!(
                        run.cell.status,
                        CellStatus::Timeout | CellStatus::Died | CellStatus::Interrupted
                    );
                    if failed {
                        let name = match run.cell.status {
                            CellStatus::Timeout => "TimeoutError",
                            CellStatus::Died => "KernelDied",
                            _ => "Interrupted",
                        };
                        // The controller's words may quote the cell's own text: masked too.
                        let value = run
                            .detail
                            .clone()
                            .map(|d| mask_secrets(d, &secrets))
                            .unwrap_or_else(|| name.into());
                        let _ = tx.send(
                            json!({"type": "error", "name": name, "value": value, "traceback": ""}),
                        );
                    }
                    if let Some(count) = run.cell.execution_count {
                        let _ = tx.send(
                            json!({"type": "number_of_executions", "execution_count": count}),
                        );
                    }
                }
                Err(e) => {
                    // The one map's words: a cause of ours (the database, the backend) is
                    // logged under a reference and only the reference goes out.
                    let _ = tx.send(json!({
                        "type": "error",
                        "name": "SandboxError",
                        "value": e.for_user().detail.to_string(),
                        "traceback": "",
                    }));
                }
            }
            let _ = tx.send(json!({"type": "end_of_execution"}));
        };
        // One channel carries every line in order; the cell is polled by the stream itself,
        // so dropping the stream drops (and interrupts) the cell.
        let lines = receiver_stream(rx);
        let cell = futures::stream::once(cell).filter_map(|()| async { None });
        Ok(futures::stream::select(lines, cell).boxed())
    }

    /// Makes a context (Python only) whose kernel starts in `cwd` (E2B's view; default its
    /// home, our workspace).
    pub async fn create_context(
        &self,
        project: ProjectId,
        id: SessionId,
        req: NewContext,
    ) -> Result<CodeContext> {
        if let Some(language) = &req.language {
            check_language(language)?;
        }
        let cwd = req.cwd.unwrap_or_else(|| E2B_HOME.into());
        let made = self
            .sessions
            .create_kernel_context(project, id, &sandbox_path(&cwd))
            .await?;
        Ok(CodeContext {
            id: made.id,
            language: PYTHON.into(),
            cwd: e2b_path(&made.cwd),
        })
    }

    /// The sandbox's contexts, the default one first.
    pub async fn contexts(&self, project: ProjectId, id: SessionId) -> Result<Vec<CodeContext>> {
        let made = self.sessions.kernel_contexts(project, id).await?;
        let default = CodeContext {
            id: DEFAULT_CONTEXT.into(),
            language: PYTHON.into(),
            cwd: E2B_HOME.into(),
        };
        Ok(std::iter::once(default)
            .chain(made.into_iter().map(|c| CodeContext {
                id: c.id,
                language: PYTHON.into(),
                cwd: e2b_path(&c.cwd),
            }))
            .collect())
    }

    /// A fresh kernel for the context, its state gone.
    pub async fn restart_context(
        &self,
        project: ProjectId,
        id: SessionId,
        context: &str,
    ) -> Result<()> {
        let context = (context != DEFAULT_CONTEXT).then_some(context);
        self.sessions.restart_kernel(project, id, context).await
    }

    /// Ends the context's kernel; the default context is the session's and stays.
    pub async fn delete_context(
        &self,
        project: ProjectId,
        id: SessionId,
        context: &str,
    ) -> Result<()> {
        if context == DEFAULT_CONTEXT {
            return Err(ServiceError::BadRequest(
                "the default context is the sandbox's own kernel and cannot be deleted; restart it instead".into(),
            ));
        }
        self.sessions
            .delete_kernel_context(project, id, context)
            .await
    }
}

fn receiver_stream(mut rx: mpsc::UnboundedReceiver<Value>) -> BoxStream<'static, Value> {
    futures::stream::poll_fn(move |cx| rx.poll_recv(cx)).boxed()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outputs_become_e2b_lines() {
        let result = json!({"output_type": "execute_result", "execution_count": 2,
            "data": {"text/plain": "2", "image/png": "iVBOR", "application/vnd.custom": {"a": 1}},
            "metadata": {}});
        assert_eq!(
            output_line(&result).unwrap(),
            json!({"type": "result", "is_main_result": true, "text": "2", "png": "iVBOR",
                   "extra": {"application/vnd.custom": {"a": 1}}})
        );
        let figure = json!({"output_type": "display_data",
            "data": {"text/plain": ["<Figure ", "640x480>"]}, "metadata": {}});
        assert_eq!(
            output_line(&figure).unwrap(),
            json!({"type": "result", "is_main_result": false, "text": "<Figure 640x480>"})
        );
        let error = json!({"output_type": "error", "ename": "NameError",
            "evalue": "name 'x' is not defined", "traceback": ["a", "b"]});
        assert_eq!(
            output_line(&error).unwrap(),
            json!({"type": "error", "name": "NameError", "value": "name 'x' is not defined",
                   "traceback": "a\nb"})
        );
        let stream = json!({"output_type": "stream", "name": "stdout", "text": "hi"});
        assert_eq!(output_line(&stream), None);
    }

    #[test]
    fn a_context_or_a_language_and_python_only() {
        let req = |context: Option<&str>, language: Option<&str>| Execute {
            code: "1".into(),
            context_id: context.map(Into::into),
            language: language.map(Into::into),
            env_vars: None,
        };
        assert_eq!(context_of(&req(None, None)).unwrap(), None);
        assert_eq!(context_of(&req(Some("default"), None)).unwrap(), None);
        assert_eq!(context_of(&req(None, Some("python"))).unwrap(), None);
        assert_eq!(
            context_of(&req(Some("abc"), None)).unwrap().as_deref(),
            Some("abc")
        );
        assert!(context_of(&req(Some("abc"), Some("python"))).is_err());
        let js = context_of(&req(None, Some("js"))).unwrap_err().to_string();
        assert!(js.contains("Python only"), "{js}");
    }
}
