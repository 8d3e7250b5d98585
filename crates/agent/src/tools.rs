//! The sandbox tools a run offers the model, chosen by the agent's capabilities (null = shell
//! and filesystem). Every tool runs through the sandbox backend, inside the workspace; a
//! failure becomes the tool's output (the model reads it), never the run's failure.

use crate::tool_output::Live;
use crate::Runs;
use bytes::Bytes;
use futures::StreamExt;
use sandbox_agents_domain::agent::Capability;
use sandbox_agents_domain::notebook::PYTHON_TOOL;
use sandbox_agents_domain::skills::{SessionSkills, LOAD_SKILL_TOOL};
use sandbox_agents_domain::{ProjectId, SessionId};
use sandbox_agents_model::ToolSpec;
use serde::Deserialize;
use serde_json::json;

/// Most bytes of a tool's output the model sees; the rest is cut with a note.
pub const MAX_TOOL_OUTPUT: usize = 32 * 1024;

/// The tool specs for an agent's capabilities, and `load_skill` when the session's skills
/// are announced and load on demand.
pub fn specs(capabilities: Option<&[Capability]>, skills: Option<&SessionSkills>) -> Vec<ToolSpec> {
    let has = |c: Capability| capabilities.is_none_or(|cs| cs.contains(&c));
    let mut out = Vec::new();
    if has(Capability::Shell) {
        out.push(ToolSpec {
            name: "shell".into(),
            description: "Run a shell command (sh -c) in the workspace (/workspace). Returns the exit code, stdout and stderr.".into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "command": {"type": "string", "description": "The command line."},
                    "timeout": {"type": "number", "description": "Seconds before it is killed (default 60, at most 600)."}
                },
                "required": ["command"]
            }),
        });
    }
    if has(Capability::Filesystem) {
        let path =
            json!({"type": "string", "description": "A path relative to the workspace root."});
        out.push(ToolSpec {
            name: "read_file".into(),
            description: "Read a text file in the workspace.".into(),
            parameters: json!({"type": "object", "properties": {"path": path}, "required": ["path"]}),
        });
        out.push(ToolSpec {
            name: "write_file".into(),
            description:
                "Create or overwrite a file in the workspace (parent directories are created)."
                    .into(),
            parameters: json!({
                "type": "object",
                "properties": {"path": path, "content": {"type": "string"}},
                "required": ["path", "content"]
            }),
        });
        out.push(ToolSpec {
            name: "edit_file".into(),
            description: "Replace one exact occurrence of old_text with new_text in a workspace file. old_text must occur exactly once; include enough surrounding lines to make it unique.".into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "path": path,
                    "old_text": {"type": "string", "description": "The exact text to replace (it must occur exactly once)."},
                    "new_text": {"type": "string", "description": "What replaces it."}
                },
                "required": ["path", "old_text", "new_text"]
            }),
        });
        out.push(ToolSpec {
            name: "list_files".into(),
            description: "List a directory of the workspace (default: its root).".into(),
            parameters: json!({"type": "object", "properties": {"path": path}}),
        });
    }
    if capabilities.is_some_and(|cs| cs.contains(&Capability::Python)) {
        out.push(ToolSpec {
            name: PYTHON_TOOL.into(),
            description: "Run Python code in a persistent IPython kernel (cwd /workspace). Variables, imports and installed packages stay between calls and turns while the sandbox runs. Returns what the cell printed, its result and any error with its traceback; matplotlib figures are shown by saving them as images under outputs/. Prefer this over the shell for data analysis.".into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "code": {"type": "string", "description": "The cell's code."},
                    "timeout": {"type": "number", "description": "Seconds before the cell is interrupted (default 600, at most 3600); the kernel and its state are kept."}
                },
                "required": ["code"]
            }),
        });
    }
    if skills.is_some_and(SessionSkills::offers_load_skill) {
        out.push(ToolSpec {
            name: LOAD_SKILL_TOOL.into(),
            description: "Put a skill's folder in the workspace so you can use it: call it before opening the skill's SKILL.md. Returns its path; loading it again is harmless.".into(),
            parameters: json!({
                "type": "object",
                "properties": {"skill_name": {"type": "string", "description": "The skill's name, as the skills list gives it."}},
                "required": ["skill_name"]
            }),
        });
    }
    out
}

#[derive(Deserialize)]
struct LoadSkillArgs {
    skill_name: String,
}

#[derive(Deserialize)]
struct PythonArgs {
    code: String,
    #[serde(default)]
    timeout: Option<f64>,
}

#[derive(Deserialize)]
struct ShellArgs {
    command: String,
    #[serde(default)]
    timeout: Option<f64>,
}

#[derive(Deserialize)]
struct PathArgs {
    #[serde(default)]
    path: Option<String>,
}

#[derive(Deserialize)]
struct EditArgs {
    path: String,
    old_text: String,
    new_text: String,
}

/// The most bytes `edit_file` reads and writes back.
const MAX_EDIT_BYTES: usize = 4 * 1024 * 1024;

/// Replaces the one occurrence of `old` in `text`; an error text when there is none or more.
pub(crate) fn replace_once(text: &str, old: &str, new: &str, path: &str) -> Result<String, String> {
    if old.is_empty() {
        return Err("error: old_text is empty; give the exact text to replace".into());
    }
    match text.matches(old).count() {
        0 => Err(format!(
            "error: old_text was not found in {path}; read the file and copy the text exactly"
        )),
        1 => Ok(text.replacen(old, new, 1)),
        n => Err(format!(
            "error: old_text occurs {n} times in {path}; include more surrounding text so it occurs once"
        )),
    }
}

#[derive(Deserialize)]
struct WriteArgs {
    path: String,
    content: String,
}

/// Cuts `s` to [`MAX_TOOL_OUTPUT`] bytes (on a char boundary), saying so.
fn capped(mut s: String) -> String {
    if s.len() > MAX_TOOL_OUTPUT {
        let mut end = MAX_TOOL_OUTPUT;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        let total = s.len();
        s.truncate(end);
        s.push_str(&format!(
            "\n[output truncated: {total} bytes, only the first {end} are shown]"
        ));
    }
    s
}

fn parse<'a, T: Deserialize<'a>>(tool: &str, arguments: &'a str) -> Result<T, String> {
    serde_json::from_str(arguments)
        .map_err(|e| format!("error: the arguments of {tool} are not valid: {e}"))
}

impl Runs {
    /// Runs one tool call and returns what the model reads back (and the event log records).
    /// `tool` must be one of [`specs`] for the agent; anything else is answered with an error
    /// text. Secret values the sandbox was given are masked (`***`): agents use secrets
    /// through their environment and need not see them, and this way a command that prints
    /// one sends it neither to the model provider nor to the log and its webhooks.
    pub(crate) async fn run_tool(
        &self,
        project: ProjectId,
        id: SessionId,
        allowed: &[ToolSpec],
        tool: &str,
        arguments: &str,
        live: &Live<'_>,
    ) -> String {
        if !allowed.iter().any(|t| t.name == tool) {
            return format!("error: there is no tool named '{tool}'");
        }
        // The values in force when the tool starts and when it ends: a stop or a restart
        // after a rotation in between must not unmask what the command saw.
        let mut secrets = self
            .inner
            .sessions
            .credentials()
            .secret_values(project, id)
            .await;
        let out = match tool {
            "shell" => {
                self.shell_tool(project, id, arguments, live, &secrets)
                    .await
            }
            PYTHON_TOOL => {
                self.python_tool(project, id, arguments, live, &secrets)
                    .await
            }
            "read_file" => self.read_tool(project, id, arguments).await,
            "write_file" => self.write_tool(project, id, arguments).await,
            "edit_file" => self.edit_tool(project, id, arguments).await,
            "list_files" => self.list_tool(project, id, arguments).await,
            LOAD_SKILL_TOOL => match parse::<LoadSkillArgs>(tool, arguments) {
                Ok(a) => self
                    .inner
                    .sessions
                    .load_skill(project, id, &a.skill_name)
                    .await
                    .map(|v| v.to_string()),
                Err(e) => Err(e),
            },
            other => Err(format!("error: there is no tool named '{other}'")),
        };
        secrets.extend(
            self.inner
                .sessions
                .credentials()
                .secret_values(project, id)
                .await,
        );
        capped(sandbox_agents_credentials::secrets::mask(
            out.unwrap_or_else(|e| e),
            &secrets,
        ))
    }

    /// The command's output also goes out live as it is written (`tool_output.rs`).
    async fn shell_tool(
        &self,
        p: ProjectId,
        id: SessionId,
        args: &str,
        live: &Live<'_>,
        secrets: &[String],
    ) -> Result<String, String> {
        let a: ShellArgs = parse("shell", args)?;
        let prepared = self
            .inner
            .sessions
            .prepare_exec(p, id, a.command, a.timeout)
            .await
            .map_err(|e| format!("error: {e}"))?;
        let (run, rx) = prepared.run_to_channel();
        let publish = crate::tool_output::publish(&self.inner.db, id, live, "shell", secrets, rx);
        let (r, ()) = tokio::join!(run, publish);
        let r = r.map_err(|e| format!("error: {e}"))?.result;
        let mut out = format!("exit code: {}\n", r.exit_code);
        if !r.stdout.is_empty() {
            out.push_str(&format!("stdout:\n{}\n", r.stdout));
        }
        if !r.stderr.is_empty() {
            out.push_str(&format!("stderr:\n{}\n", r.stderr));
        }
        Ok(out)
    }

    /// A cell in the session's kernel; what it prints goes out live, as a shell command's
    /// does. The text is cut at `notebook::MAX_CELL_TEXT` characters here (the tool's own
    /// limit), before the general cap.
    async fn python_tool(
        &self,
        p: ProjectId,
        id: SessionId,
        args: &str,
        live: &Live<'_>,
        secrets: &[String],
    ) -> Result<String, String> {
        let a: PythonArgs = parse(PYTHON_TOOL, args)?;
        let timeout = match a.timeout {
            None => sandbox_agents_sessions::DEFAULT_CELL_TIMEOUT,
            Some(t) if t > 0.0 && t <= sandbox_agents_sessions::MAX_CELL_TIMEOUT.as_secs_f64() => {
                std::time::Duration::from_secs_f64(t)
            }
            Some(t) => {
                return Err(format!(
                    "error: timeout is more than 0 and at most {} seconds (got {t})",
                    sandbox_agents_sessions::MAX_CELL_TIMEOUT.as_secs()
                ))
            }
        };
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let cell = self.inner.sessions.run_cell(
            p,
            id,
            Some(live.run),
            &a.code,
            timeout,
            move |stream, text| {
                let _ = tx.send((stream, text.to_owned()));
            },
        );
        let publish =
            crate::tool_output::publish(&self.inner.db, id, live, PYTHON_TOOL, secrets, rx);
        let (ran, ()) = tokio::join!(cell, publish);
        let ran = ran.map_err(|e| format!("error: {e}"))?;
        Ok(sandbox_agents_domain::notebook::cell_text(
            &ran.cell,
            &ran.files,
            ran.restarted,
            ran.detail.as_deref(),
        ))
    }

    async fn read_tool(&self, p: ProjectId, id: SessionId, args: &str) -> Result<String, String> {
        let a: PathArgs = parse("read_file", args)?;
        let path = a.path.unwrap_or_default();
        let mut f = self
            .inner
            .sessions
            .read_file(p, id, &path)
            .await
            .map_err(|e| format!("error: {e}"))?;
        let mut buf = Vec::new();
        while let Some(chunk) = f.body.next().await {
            let chunk = chunk.map_err(|e| format!("error: reading {path}: {e}"))?;
            buf.extend_from_slice(&chunk);
            if buf.len() > MAX_TOOL_OUTPUT {
                break;
            }
        }
        Ok(String::from_utf8_lossy(&buf).into_owned())
    }

    async fn write_tool(&self, p: ProjectId, id: SessionId, args: &str) -> Result<String, String> {
        let a: WriteArgs = parse("write_file", args)?;
        let r = self.put_text(p, id, &a.path, a.content).await?;
        Ok(format!("wrote {} bytes to {}", r.size, r.path))
    }

    async fn edit_tool(&self, p: ProjectId, id: SessionId, args: &str) -> Result<String, String> {
        let a: EditArgs = parse("edit_file", args)?;
        let mut f = self
            .inner
            .sessions
            .read_file(p, id, &a.path)
            .await
            .map_err(|e| format!("error: {e}"))?;
        let mut buf = Vec::new();
        while let Some(chunk) = f.body.next().await {
            let chunk = chunk.map_err(|e| format!("error: reading {}: {e}", a.path))?;
            buf.extend_from_slice(&chunk);
            if buf.len() > MAX_EDIT_BYTES {
                return Err(format!(
                    "error: {} is larger than {MAX_EDIT_BYTES} bytes; edit it with the shell tool",
                    a.path
                ));
            }
        }
        let text =
            String::from_utf8(buf).map_err(|_| format!("error: {} is not UTF-8 text", a.path))?;
        let edited = replace_once(&text, &a.old_text, &a.new_text, &a.path)?;
        let r = self.put_text(p, id, &a.path, edited).await?;
        Ok(format!("edited {} ({} bytes)", r.path, r.size))
    }

    /// Writes `text` to `path` in the workspace, as the file tools do (the tool error on failure).
    async fn put_text(
        &self,
        p: ProjectId,
        id: SessionId,
        path: &str,
        text: String,
    ) -> Result<sandbox_agents_domain::session::UploadResult, String> {
        let data = futures::stream::iter([Ok::<_, std::io::Error>(Bytes::from(text))]);
        self.inner
            .sessions
            .put_file(p, id, Some(path), None, data, false)
            .await
            .map_err(|e| format!("error: {e}"))
    }

    async fn list_tool(&self, p: ProjectId, id: SessionId, args: &str) -> Result<String, String> {
        let a: PathArgs = parse("list_files", args)?;
        let entries = self
            .inner
            .sessions
            .list_files(p, id, a.path.as_deref().unwrap_or(""))
            .await
            .map_err(|e| format!("error: {e}"))?;
        if entries.is_empty() {
            return Ok("(empty)".into());
        }
        Ok(entries
            .iter()
            .map(|e| format!("{} {} {}", e.kind, e.size, e.path))
            .collect::<Vec<_>>()
            .join("\n"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_edit_replaces_exactly_one_occurrence() {
        assert_eq!(replace_once("a b c", "b", "B", "f").unwrap(), "a B c");
        assert!(replace_once("a b c", "x", "B", "f")
            .unwrap_err()
            .contains("not found"));
        assert!(replace_once("b b", "b", "B", "f")
            .unwrap_err()
            .contains("occurs 2 times"));
        assert!(replace_once("b", "", "B", "f")
            .unwrap_err()
            .contains("empty"));
    }

    #[test]
    fn the_builtin_names_are_the_tools_offered() {
        let lazy = SessionSkills {
            skills: vec![sandbox_agents_domain::skills::SkillEntry {
                name: "s".into(),
                description: "d".into(),
                source: "s".into(),
                path: ".agents/s".into(),
            }],
            lazy: true,
            announced: true,
            ..Default::default()
        };
        let names: Vec<String> = specs(None, Some(&lazy))
            .into_iter()
            .map(|t| t.name)
            .collect();
        let mut builtin: Vec<&str> = sandbox_agents_domain::tools::BUILTIN_TOOLS.to_vec();
        let mut offered: Vec<&str> = names.iter().map(String::as_str).collect();
        builtin.sort();
        offered.sort();
        assert_eq!(builtin, offered);
    }
}
