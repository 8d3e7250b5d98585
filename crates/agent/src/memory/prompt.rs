//! The memory section of a session's system prompt: what the boot staged of the store's
//! summary (capped: every turn carries it), and how to use `memories/MEMORY.md`.

use sandbox_agents_domain::memory::{MAX_SUMMARY_CHARS, MEMORY_FILE};

/// The section for a session whose boot staged `summary`.
pub(crate) fn section(summary: &str) -> String {
    let summary: String = summary.trim().chars().take(MAX_SUMMARY_CHARS).collect();
    let summary = if summary.is_empty() {
        "(empty: nothing is remembered yet)".to_owned()
    } else {
        summary
    };
    format!(
        "## Memory\n\
         You have a memory that outlives this session. `{MEMORY_FILE}` in your workspace holds \
         what earlier sessions of this agent learnt; its summary is below.\n\
         - Consult `{MEMORY_FILE}` when the task touches what it covers, before you start over.\n\
         - Facts drift (files, versions, commands, people change): verify a remembered fact \
         against the workspace or the world before you rely on it.\n\
         - When evidence contradicts the memory, or you learn something later sessions need, \
         update `{MEMORY_FILE}` (keep it short and factual); it is merged into the agent's \
         memory when this session ends.\n\n\
         Memory summary:\n{summary}"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_section_names_the_file_and_carries_the_capped_summary() {
        let s = section("the build uses port 8123");
        assert!(s.contains("memories/MEMORY.md"));
        assert!(s.ends_with("Memory summary:\nthe build uses port 8123"));
        assert!(section("  ").contains("nothing is remembered yet"));
        let long = section(&"x".repeat(MAX_SUMMARY_CHARS + 50));
        assert_eq!(long.matches('x').count(), MAX_SUMMARY_CHARS);
    }
}
