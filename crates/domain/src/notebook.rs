//! The `python` capability's journal: every cell a session's kernel ran, with its outputs,
//! and the nbformat 4.5 notebook `GET /api/sessions/{id}/notebook` builds from it.
//!
//! Outputs are stored in nbformat's own shapes (`stream`, `execute_result`, `display_data`,
//! `error`), so the notebook is the journal as it is, and a reader of one knows the other.

use crate::text::strip_ansi;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use time::OffsetDateTime;
use utoipa::ToSchema;

/// The name of the tool the `python` capability gives the model.
pub const PYTHON_TOOL: &str = "python";
/// The most characters of a cell's text the model reads back; the cut is said.
pub const MAX_CELL_TEXT: usize = 16_000;

pub use crate::state::CellStatus;

/// One journaled cell.
#[derive(Clone, Debug, PartialEq)]
pub struct NotebookCell {
    /// The nbformat cell id (lowercase letters and digits).
    pub id: String,
    pub code: String,
    /// nbformat 4 outputs, in the order the kernel sent them.
    pub outputs: Vec<Value>,
    pub execution_count: Option<i64>,
    pub status: CellStatus,
    /// The kernel the cell ran in (changes when a kernel starts); None while running.
    pub epoch: Option<String>,
    pub started_at: OffsetDateTime,
    pub finished_at: Option<OffsetDateTime>,
}

/// An nbformat 4.5 notebook (`application/x-ipynb+json`), as `nbformat.validate` accepts it.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct Notebook {
    /// Always 4.
    pub nbformat: u32,
    /// Always 5 (cells have ids).
    pub nbformat_minor: u32,
    /// `kernelspec` and `language_info` of the session's kernel.
    #[schema(value_type = Object)]
    pub metadata: Map<String, Value>,
    /// One code cell per journaled cell, oldest first; each cell's `metadata.sandbox_agents`
    /// says how it ended (`status`) and which kernel ran it (`epoch`).
    #[schema(value_type = Vec<Object>)]
    pub cells: Vec<Value>,
}

impl Notebook {
    pub fn of(cells: &[NotebookCell]) -> Notebook {
        let mut metadata = Map::new();
        metadata.insert(
            "kernelspec".into(),
            json!({"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}),
        );
        metadata.insert(
            "language_info".into(),
            json!({"name": "python", "file_extension": ".py", "mimetype": "text/x-python"}),
        );
        Notebook {
            nbformat: 4,
            nbformat_minor: 5,
            metadata,
            cells: cells.iter().map(code_cell).collect(),
        }
    }
}

fn code_cell(c: &NotebookCell) -> Value {
    let mut meta = Map::new();
    meta.insert("status".into(), Value::from(c.status.as_str()));
    if let Some(e) = &c.epoch {
        meta.insert("epoch".into(), Value::from(e.as_str()));
    }
    json!({
        "cell_type": "code",
        "id": c.id,
        "metadata": {"sandbox_agents": meta},
        "source": c.code,
        "execution_count": c.execution_count,
        "outputs": c.outputs.iter().map(valid_output).collect::<Vec<_>>(),
    })
}

/// An output as nbformat requires it: `execute_result` with its `execution_count`,
/// `metadata` objects present, `traceback` a list of strings.
fn valid_output(o: &Value) -> Value {
    let mut o = o.clone();
    if let Some(m) = o.as_object_mut() {
        match m.get("output_type").and_then(Value::as_str) {
            Some("execute_result") => {
                m.entry("execution_count").or_insert(Value::Null);
                m.entry("metadata").or_insert_with(|| json!({}));
                m.entry("data").or_insert_with(|| json!({}));
            }
            Some("display_data") => {
                m.entry("metadata").or_insert_with(|| json!({}));
                m.entry("data").or_insert_with(|| json!({}));
            }
            Some("error") => {
                m.entry("ename").or_insert_with(|| json!(""));
                m.entry("evalue").or_insert_with(|| json!(""));
                m.entry("traceback").or_insert_with(|| json!([]));
            }
            _ => {}
        }
    }
    o
}

/// What the model reads of a cell: its outputs in order (stream text, results' plain text,
/// errors with their traceback), the images saved, and how it ended, cut at
/// [`MAX_CELL_TEXT`] characters with the cut said.
pub fn cell_text(
    cell: &NotebookCell,
    files: &[String],
    restarted: bool,
    detail: Option<&str>,
) -> String {
    let mut out = String::new();
    if restarted {
        out.push_str("note: the Python kernel restarted (the sandbox was stopped or released, or the kernel died) since the previous cell, so variables, imports and files in memory from earlier cells are gone; run what this cell needs again.\n");
    }
    for o in &cell.outputs {
        match o["output_type"].as_str() {
            Some("stream") => out.push_str(o["text"].as_str().unwrap_or("")),
            Some("execute_result") | Some("display_data") => {
                let data = &o["data"];
                if let Some(t) = data["text/plain"].as_str() {
                    if !(data.get("image/png").is_some() && t.starts_with("<Figure")) {
                        out.push_str(t);
                        out.push('\n');
                    }
                }
            }
            Some("error") => {
                let tb: Vec<String> = o["traceback"]
                    .as_array()
                    .map(|lines| {
                        lines
                            .iter()
                            .filter_map(Value::as_str)
                            .map(strip_ansi)
                            .collect()
                    })
                    .unwrap_or_default();
                if tb.is_empty() {
                    out.push_str(&format!(
                        "{}: {}\n",
                        o["ename"].as_str().unwrap_or(""),
                        o["evalue"].as_str().unwrap_or("")
                    ));
                } else {
                    out.push_str(&tb.join("\n"));
                    out.push('\n');
                }
            }
            _ => {}
        }
    }
    for f in files {
        out.push_str(&format!("[image saved: {f}]\n"));
    }
    match cell.status {
        CellStatus::Ok if out.is_empty() => out.push_str("(no output)\n"),
        CellStatus::Timeout | CellStatus::Died | CellStatus::Interrupted => {
            out.push_str(&format!(
                "[{}]\n",
                detail.unwrap_or(match cell.status {
                    CellStatus::Timeout => "the cell hit its time limit and was interrupted",
                    CellStatus::Died =>
                        "the Python kernel died; a new one starts with the next cell",
                    _ => "the cell was interrupted",
                })
            ));
        }
        _ => {
            if let Some(d) = detail {
                out.push_str(&format!("[{d}]\n"));
            }
        }
    }
    let chars = out.chars().count();
    if chars > MAX_CELL_TEXT {
        let mut cut: String = out.chars().take(MAX_CELL_TEXT).collect();
        cut.push_str(&format!(
            "\n[output truncated: {chars} characters, only the first {MAX_CELL_TEXT} are shown; write large results to a file instead]"
        ));
        return cut;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cell(outputs: Vec<Value>, status: CellStatus) -> NotebookCell {
        NotebookCell {
            id: "abc".into(),
            code: "x".into(),
            outputs,
            execution_count: Some(1),
            status,
            epoch: Some("e".into()),
            started_at: OffsetDateTime::UNIX_EPOCH,
            finished_at: None,
        }
    }

    #[test]
    fn the_text_keeps_outputs_in_order_and_strips_colours() {
        let c = cell(
            vec![
                json!({"output_type": "stream", "name": "stdout", "text": "a\n"}),
                json!({"output_type": "execute_result", "data": {"text/plain": "42"}, "execution_count": 1}),
                json!({"output_type": "error", "ename": "E", "evalue": "v", "traceback": ["\u{1b}[31mE\u{1b}[39m: v"]}),
            ],
            CellStatus::Error,
        );
        assert_eq!(cell_text(&c, &[], false, None), "a\n42\nE: v\n");
    }

    #[test]
    fn a_long_text_is_cut_and_says_so() {
        let c = cell(
            vec![json!({"output_type": "stream", "name": "stdout", "text": "x".repeat(20_000)})],
            CellStatus::Ok,
        );
        let t = cell_text(&c, &[], false, None);
        assert!(t.starts_with(&"x".repeat(MAX_CELL_TEXT)));
        assert!(t.contains("20000 characters, only the first 16000"));
    }

    #[test]
    fn a_restart_and_saved_images_are_said() {
        let c = cell(vec![], CellStatus::Ok);
        let t = cell_text(&c, &["outputs/abc-1.png".into()], true, None);
        assert!(t.starts_with("note: the Python kernel restarted"));
        assert!(t.contains("[image saved: outputs/abc-1.png]"));
    }

    #[test]
    fn the_notebook_has_ids_and_complete_outputs() {
        let nb = Notebook::of(&[cell(
            vec![json!({"output_type": "execute_result", "data": {"text/plain": "1"}})],
            CellStatus::Ok,
        )]);
        let v = serde_json::to_value(&nb).unwrap();
        assert_eq!(
            (v["nbformat"].as_u64(), v["nbformat_minor"].as_u64()),
            (Some(4), Some(5))
        );
        let out = &v["cells"][0]["outputs"][0];
        assert_eq!(v["cells"][0]["id"], "abc");
        assert!(out["metadata"].is_object() && out.get("execution_count").is_some());
    }
}
