//! Text as programs print it, made fit for people and models.

/// `text` without terminal colour codes (CSI sequences: ESC `[` … a letter), which IPython's
/// tracebacks and Docker's classic builder put in their output.
pub fn strip_ansi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            if chars.next() == Some('[') {
                for c in chars.by_ref() {
                    if c.is_ascii_alphabetic() {
                        break;
                    }
                }
            }
            continue;
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn colour_codes_are_removed_and_the_text_kept() {
        assert_eq!(
            super::strip_ansi("\u{1b}[31mError\u{1b}[39m: \u{1b}[1;32mok\u{1b}[0m"),
            "Error: ok"
        );
    }
}
