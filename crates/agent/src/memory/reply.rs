//! The strict format a consolidation's answer must have, and its parsing: the whole merged
//! `MEMORY.md` between `<memory>` and `</memory>`, then the new summary between `<summary>`
//! and `</summary>`, nothing to guess. An answer that does not parse, or whose parts are over
//! the store's limits, fails the attempt (it is retried a bounded number of times).

use sandbox_agents_domain::memory::check_sizes;

/// What a consolidation writes.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Merged {
    pub memory: String,
    pub summary: String,
}

/// The instructions for the answer, quoted in the consolidation prompt.
pub(crate) const FORMAT: &str = "Answer with exactly two parts and nothing else:\n\
<memory>\n(the whole merged MEMORY.md, in Markdown)\n</memory>\n\
<summary>\n(a summary of it for the system prompt: at most 2,000 words)\n</summary>";

/// One part: the text between `open` and the last `close` after it, without the newline
/// that follows the tag and the one before its end.
fn part<'a>(text: &'a str, open: &str, close: &str) -> Result<&'a str, String> {
    let start = text
        .find(open)
        .ok_or_else(|| format!("the answer has no {open}"))?
        + open.len();
    let end = text[start..]
        .rfind(close)
        .ok_or_else(|| format!("the answer has no {close} after {open}"))?
        + start;
    let inner = &text[start..end];
    let inner = inner.strip_prefix('\n').unwrap_or(inner);
    Ok(inner.strip_suffix('\n').unwrap_or(inner))
}

/// Parses a consolidation's answer; the error says what is wrong with it.
pub(crate) fn parse(text: &str) -> Result<Merged, String> {
    let summary_at = text
        .rfind("<summary>")
        .ok_or("the answer has no <summary>")?;
    let memory = part(&text[..summary_at], "<memory>", "</memory>")?;
    let summary = part(&text[summary_at..], "<summary>", "</summary>")?;
    check_sizes(memory, summary)?;
    Ok(Merged {
        memory: memory.to_owned(),
        summary: summary.trim().to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_parts_are_read_as_they_are() {
        let m = parse("Here:\n<memory>\n# Notes\n- uses <memory> tags\n</memory>\n<summary>\nshort\n</summary>\n")
            .unwrap();
        assert_eq!(m.memory, "# Notes\n- uses <memory> tags");
        assert_eq!(m.summary, "short");
        let empty = parse("<memory></memory><summary></summary>").unwrap();
        assert_eq!(empty.memory, "");
    }

    #[test]
    fn an_answer_out_of_format_or_over_the_limits_is_refused() {
        assert!(parse("just some notes").unwrap_err().contains("<summary>"));
        assert!(parse("<summary>s</summary>")
            .unwrap_err()
            .contains("<memory>"));
        assert!(parse("<memory>m<summary>s</summary>")
            .unwrap_err()
            .contains("</memory>"));
        assert!(parse("<memory>m</memory><summary>s")
            .unwrap_err()
            .contains("</summary>"));
        let big = format!(
            "<memory>{}</memory><summary>s</summary>",
            "x".repeat(300 * 1024)
        );
        assert!(parse(&big).unwrap_err().contains("256 KiB"));
    }
}
