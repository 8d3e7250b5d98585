//! What the model is told of a tool's result: its content blocks as text (an image or a
//! binary resource by its type and size, never its bytes), the structured result when there
//! is no text, bounded to `max` bytes.

use rmcp::model::CallToolResult;
use serde_json::Value;

/// The model's text of `result`, and whether the server said it is an error.
pub fn to_text(result: &CallToolResult, max: usize) -> (String, bool) {
    let mut parts: Vec<String> = Vec::new();
    for block in &result.content {
        let Ok(v) = serde_json::to_value(block) else {
            continue;
        };
        let kind = v.get("type").and_then(Value::as_str).unwrap_or_default();
        let text = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or_default();
        parts.push(match kind {
            "text" => text("text").to_owned(),
            "image" | "audio" => format!(
                "[{kind}: {}, {} bytes]",
                text("mimeType"),
                text("data").len() / 4 * 3
            ),
            "resource" => match v.get("resource") {
                Some(r) if r.get("text").is_some() => {
                    r["text"].as_str().unwrap_or_default().to_owned()
                }
                Some(r) => format!(
                    "[resource {}: {}, binary]",
                    r.get("uri").and_then(Value::as_str).unwrap_or_default(),
                    r.get("mimeType")
                        .and_then(Value::as_str)
                        .unwrap_or("application/octet-stream")
                ),
                None => String::new(),
            },
            "resource_link" => format!("[resource link: {}]", text("uri")),
            other => format!("[{other} content]"),
        });
    }
    if parts.iter().all(|p| p.trim().is_empty()) {
        if let Some(s) = &result.structured_content {
            parts = vec![s.to_string()];
        }
    }
    let is_error = result.is_error.unwrap_or(false);
    (bounded(parts.join("\n"), max), is_error)
}

/// `text` cut to at most `max` bytes on a character boundary, saying how much was left out.
pub fn bounded(text: String, max: usize) -> String {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!(
        "{}\n[the tool's result was {} bytes; the first {end} are shown]",
        &text[..end],
        text.len()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_become_text_and_the_whole_is_bounded() {
        let result: CallToolResult = serde_json::from_value(serde_json::json!({
            "content": [
                {"type": "text", "text": "hello"},
                {"type": "image", "data": "AAAA", "mimeType": "image/png"},
                {"type": "resource", "resource": {"uri": "file:///a", "text": "inside"}},
            ],
            "isError": true,
        }))
        .unwrap();
        let (text, error) = to_text(&result, 1000);
        assert!(error);
        assert_eq!(text, "hello\n[image: image/png, 3 bytes]\ninside");
        let (cut, _) = to_text(&result, 3);
        assert!(cut.starts_with("hel\n[the tool's result was"), "{cut}");
    }

    #[test]
    fn structured_content_stands_in_for_missing_text() {
        let result: CallToolResult = serde_json::from_value(serde_json::json!({
            "content": [], "structuredContent": {"sum": 3},
        }))
        .unwrap();
        assert_eq!(to_text(&result, 100), (r#"{"sum":3}"#.to_owned(), false));
    }
}
