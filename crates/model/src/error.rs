//! What can go wrong talking to a model, said for a person.

/// A failed model call. Every message says what happened and, where it helps, what to do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ModelError {
    /// The provider answered with an error status. `message` is the provider's own message
    /// (from its JSON error body) when it gave one, else the start of the body.
    #[error("the model provider answered {status}: {message}")]
    Http { status: u16, message: String },
    /// The provider could not be reached, or the connection broke.
    #[error("{0}")]
    Connect(String),
    /// The provider went quiet for longer than the timeout allows.
    #[error("{0}")]
    Timeout(String),
    /// The provider answered something that is not the OpenAI chat-completions format, or
    /// reported an error in the middle of a streamed answer.
    #[error("{0}")]
    Protocol(String),
    /// The client is not set up (no provider configured, an invalid base URL).
    #[error("{0}")]
    Config(String),
}

impl ModelError {
    /// The HTTP status, for `Http` errors.
    pub fn status(&self) -> Option<u16> {
        match self {
            ModelError::Http { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// Whether another attempt may succeed: 429, 500, 502, 503, 504, a connection error or a
    /// timeout. (Whether it is *safe* to retry is the caller's question: see the client.)
    pub fn is_transient(&self) -> bool {
        match self {
            ModelError::Http { status, .. } => matches!(status, 429 | 500 | 502 | 503 | 504),
            ModelError::Connect(_) | ModelError::Timeout(_) => true,
            ModelError::Protocol(_) | ModelError::Config(_) => false,
        }
    }
}

/// The provider's message from an error body: OpenAI's `{"error": {"message"}}`, a bare
/// `{"error": "..."}`, FastAPI's `{"detail": ...}` or `{"message": ...}`; otherwise the body
/// itself, cut to 500 characters (an HTML error page from a load balancer, say).
pub fn provider_message(body: &str) -> String {
    let from_json = serde_json::from_str::<serde_json::Value>(body)
        .ok()
        .and_then(|v| {
            let text = |v: &serde_json::Value| match v {
                serde_json::Value::String(s) => Some(s.clone()),
                serde_json::Value::Null => None,
                other => Some(other.to_string()),
            };
            v.pointer("/error/message")
                .and_then(text)
                .or_else(|| v.get("error").filter(|e| e.is_string()).and_then(text))
                .or_else(|| v.get("detail").and_then(text))
                .or_else(|| v.get("message").and_then(text))
        });
    let message = from_json.unwrap_or_else(|| body.trim().to_owned());
    if message.is_empty() {
        return "(no error message)".to_owned();
    }
    let mut cut: String = message.chars().take(500).collect();
    if cut.len() < message.len() {
        cut.push('…');
    }
    cut
}

/// A reqwest error by its causes ("tcp connect error: Connection refused (os error 111)"),
/// without reqwest's own "error sending request for url (...)", which names the URL again.
pub(crate) fn describe(e: &reqwest::Error) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut source = std::error::Error::source(e);
    while let Some(cause) = source {
        let text = cause.to_string();
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        source = cause.source();
    }
    if parts.is_empty() {
        e.to_string()
    } else {
        parts.join(": ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_providers_message_is_found_in_the_usual_shapes() {
        assert_eq!(
            provider_message(r#"{"error":{"message":"bad model","type":"x"}}"#),
            "bad model"
        );
        assert_eq!(provider_message(r#"{"error":"quota"}"#), "quota");
        assert_eq!(provider_message(r#"{"detail":"nope"}"#), "nope");
        assert_eq!(provider_message("<html>502</html>\n"), "<html>502</html>");
        assert_eq!(provider_message(""), "(no error message)");
        assert_eq!(provider_message(&"x".repeat(600)).chars().count(), 501);
    }
}
