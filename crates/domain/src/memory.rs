//! Agent memory that outlives sessions: each agent's store (`MEMORY.md` and a short summary),
//! its limits, where a session's workspace holds it, and the transcript a consolidation reads.
//!
//! The store is versioned: every write (a PUT of the API, a consolidation) names the version
//! it read and is refused when that is not the current one, so no writer overwrites an update
//! it never saw.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use time::OffsetDateTime;
use utoipa::ToSchema;

/// The most bytes of `MEMORY.md` a store holds (UTF-8).
pub const MAX_MEMORY_BYTES: usize = 256 * 1024;
/// The most characters of the summary: about 4k tokens, since every turn's system prompt
/// carries it.
pub const MAX_SUMMARY_CHARS: usize = 16_000;
/// The most characters of a session's transcript a consolidation is given (its tail), so
/// that one call fits the model's window.
pub const MAX_TRANSCRIPT_CHARS: usize = 60_000;

/// The workspace directory a session with the `memory` capability starts with.
pub const MEMORY_DIR: &str = "memories";
/// The store's `MEMORY.md`, relative to the workspace.
pub const MEMORY_FILE: &str = "memories/MEMORY.md";
/// The store's summary, relative to the workspace.
pub const SUMMARY_FILE: &str = "memories/memory_summary.md";

/// An agent's memory as `GET` and `PUT /api/agents/{ref}/memory` return it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct AgentMemory {
    /// The whole `MEMORY.md`: what the agent's sessions learnt, merged by consolidation and
    /// edited by people. At most 256 KiB of UTF-8. `""` until anything is written.
    pub memory: String,
    /// The short summary every session's system prompt carries: at most 16,000 characters.
    pub summary: String,
    /// The optimistic lock: 0 before the first write, one more on every write (a PUT or a
    /// consolidation). Send it back on PUT.
    pub version: i64,
    /// The last write; null before the first.
    #[serde(with = "time::serde::rfc3339::option")]
    pub updated_at: Option<OffsetDateTime>,
}

impl AgentMemory {
    /// The store of an agent that never had memory.
    pub fn empty() -> Self {
        AgentMemory {
            memory: String::new(),
            summary: String::new(),
            version: 0,
            updated_at: None,
        }
    }
}

/// The body of `PUT /api/agents/{ref}/memory`: the whole store, replacing it.
#[derive(Clone, Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MemoryPut {
    /// The new `MEMORY.md`: at most 256 KiB of UTF-8 (413 above).
    pub memory: String,
    /// The new summary: at most 16,000 characters (413 above).
    pub summary: String,
    /// The `version` the caller read (0 for an agent that never had memory). When it is not
    /// the current one the write is refused with 409 and nothing changes: read the memory
    /// again and redo the edit on it.
    pub version: i64,
}

/// Why a store's texts cannot be kept: too large.
pub fn check_sizes(memory: &str, summary: &str) -> Result<(), String> {
    if memory.len() > MAX_MEMORY_BYTES {
        return Err(format!(
            "MEMORY.md is {} bytes; it holds at most {} KiB: shorten it (move detail into the workspace, keep what later sessions need)",
            memory.len(),
            MAX_MEMORY_BYTES / 1024
        ));
    }
    let chars = summary.chars().count();
    if chars > MAX_SUMMARY_CHARS {
        return Err(format!(
            "the summary is {chars} characters; it holds at most {MAX_SUMMARY_CHARS} (every system prompt carries it): shorten it"
        ));
    }
    Ok(())
}

/// `text` cut to its last `max` characters, on a character boundary.
pub fn tail_chars(text: &str, max: usize) -> &str {
    let n = text.chars().count();
    if n <= max {
        return text;
    }
    let skip = n - max;
    let start = text.char_indices().nth(skip).map_or(text.len(), |(i, _)| i);
    &text[start..]
}

/// A stored conversation (the chat messages `store::runs::conversation` holds) as plain text
/// for a consolidation: one block per message, `role: content`, tool calls by name and
/// arguments; the tail of at most `max` characters (the latest is what a session ended on).
/// Empty for an empty conversation.
pub fn transcript(messages: &[Value], max: usize) -> String {
    let mut out = String::new();
    for m in messages {
        let role = m.get("role").and_then(Value::as_str).unwrap_or("message");
        let content = match m.get("content") {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Null) | None => String::new(),
            Some(other) => other.to_string(),
        };
        let mut block = String::new();
        if !content.trim().is_empty() {
            block.push_str(&content);
        }
        for c in m
            .get("tool_calls")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let name = c.get("name").and_then(Value::as_str).unwrap_or("?");
            let args = c.get("arguments").and_then(Value::as_str).unwrap_or("");
            if !block.is_empty() {
                block.push('\n');
            }
            block.push_str(&format!("[calls {name} {args}]"));
        }
        if block.is_empty() {
            continue;
        }
        if !out.is_empty() {
            out.push_str("\n\n");
        }
        out.push_str(role);
        out.push_str(": ");
        out.push_str(&block);
    }
    tail_chars(&out, max).to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn sizes_over_the_limits_are_refused_with_the_limit() {
        assert!(check_sizes("", "").is_ok());
        let big = "x".repeat(MAX_MEMORY_BYTES + 1);
        assert!(check_sizes(&big, "").unwrap_err().contains("256 KiB"));
        let long = "é".repeat(MAX_SUMMARY_CHARS + 1);
        assert!(check_sizes("", &long).unwrap_err().contains("16000"));
        assert!(check_sizes("", &"é".repeat(MAX_SUMMARY_CHARS)).is_ok());
    }

    #[test]
    fn the_tail_keeps_the_last_characters_on_a_boundary() {
        assert_eq!(tail_chars("abc", 5), "abc");
        assert_eq!(tail_chars("aébc", 2), "bc");
        assert_eq!(tail_chars("aébc", 3), "ébc");
    }

    #[test]
    fn a_transcript_names_roles_and_calls_and_keeps_the_tail() {
        let msgs = vec![
            json!({"role": "user", "content": "find FACT-A"}),
            json!({"role": "assistant", "content": null,
                   "tool_calls": [{"id": "c", "name": "shell", "arguments": "{\"command\":\"ls\"}"}]}),
            json!({"role": "tool", "tool_call_id": "c", "content": "a.txt"}),
            json!({"role": "assistant", "content": ""}),
        ];
        let t = transcript(&msgs, 10_000);
        assert_eq!(
            t,
            "user: find FACT-A\n\nassistant: [calls shell {\"command\":\"ls\"}]\n\ntool: a.txt"
        );
        assert_eq!(transcript(&msgs, 5), "a.txt");
        assert_eq!(transcript(&[], 100), "");
    }
}
