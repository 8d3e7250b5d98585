//! The model's view measured and rebuilt, without IO: the token estimate, the recent user
//! messages a compacted view keeps, the summary's message, and the units a view is trimmed
//! by (an assistant message with the results of its calls, so that a `tool` message never
//! goes to the model without the call it answers).

use sandbox_agents_model::{Message, ToolSpec};
use std::collections::HashSet;

/// Bytes per token of the estimate. Providers' tokenizers give about four characters of
/// English a token and fewer for code and JSON; counting bytes rather than characters errs
/// on the large side for everything that is not ASCII. The estimate only has to cover what
/// was added since the provider last reported a prompt's size (see `Compaction::estimate`),
/// so a tokenizer (one per model family, and none for most providers behind a proxy) would
/// buy little.
const BYTES_PER_TOKEN: usize = 4;

/// How many tokens of the most recent user messages a compacted view keeps word for word.
pub(crate) const RECENT_USER_TOKENS: u64 = 20_000;

/// What the summary's message starts with, so the model reads it as a checkpoint of earlier
/// work and not as a new request.
pub(crate) const SUMMARY_PREFIX: &str =
    "Earlier turns of this conversation were compacted to save room. \
This is the summary written at that checkpoint; the user messages above are the most recent \
ones, word for word. Continue the work from here.";

/// About how many tokens `text` is.
pub(crate) fn text_tokens(text: &str) -> u64 {
    u64::try_from(text.len().div_ceil(BYTES_PER_TOKEN)).unwrap_or(u64::MAX)
}

/// About how many tokens a message is, as it goes on the wire (its role, content, tool calls
/// and ids, in JSON).
pub(crate) fn message_tokens(m: &Message) -> u64 {
    serde_json::to_string(m).map_or(0, |s| text_tokens(&s))
}

/// About how many tokens the tool specs are.
pub(crate) fn specs_tokens(specs: &[ToolSpec]) -> u64 {
    specs
        .iter()
        .map(|s| serde_json::to_string(s).map_or(0, |s| text_tokens(&s)))
        .sum()
}

/// About how many tokens the model is given for `messages` with `specs` offered.
pub(crate) fn estimate(messages: &[Message], specs: &[ToolSpec]) -> u64 {
    messages.iter().map(message_tokens).sum::<u64>() + specs_tokens(specs)
}

/// The texts of the user messages in `messages`, oldest first.
pub(crate) fn user_texts(messages: &[Message]) -> impl Iterator<Item = &str> {
    messages.iter().filter_map(|m| match m {
        Message::User { content } => Some(content.as_str()),
        _ => None,
    })
}

/// The most recent of `users` (oldest first) that a compacted view keeps: the newest always,
/// whole (cutting the request the work is about would change the task; when it alone is too
/// big the run fails saying so), then older ones, whole, while they fit in
/// [`RECENT_USER_TOKENS`]. The first that does not fit ends the selection, so what is kept
/// is always the tail of what the user said. Oldest first.
pub(crate) fn recent_users(users: &[String]) -> Vec<String> {
    let Some((newest, older)) = users.split_last() else {
        return Vec::new();
    };
    let mut spent = text_tokens(newest);
    let mut kept = vec![newest.clone()];
    for u in older.iter().rev() {
        spent += text_tokens(u);
        if spent > RECENT_USER_TOKENS {
            break;
        }
        kept.push(u.clone());
    }
    kept.reverse();
    kept
}

/// The message that carries the summary into the view. A user message: every provider
/// accepts one anywhere, and the model must read it as context given to it, not as
/// something it said.
pub(crate) fn summary_message(summary: &str) -> Message {
    Message::user(format!("{SUMMARY_PREFIX}\n\n{summary}"))
}

/// Where each unit of `messages` starts: every message but a `tool` one starts a unit, and a
/// `tool` message belongs to the unit before it (its assistant call's).
pub(crate) fn unit_starts(messages: &[Message]) -> Vec<usize> {
    messages
        .iter()
        .enumerate()
        .filter(|(_, m)| !matches!(m, Message::Tool { .. }))
        .map(|(i, _)| i)
        .collect()
}

/// `messages` without the `tool` messages that answer no earlier assistant call (a view
/// must never hold one; a provider refuses it).
pub(crate) fn without_orphans(messages: Vec<Message>) -> Vec<Message> {
    let mut calls: HashSet<String> = HashSet::new();
    messages
        .into_iter()
        .filter(|m| match m {
            Message::Assistant { tool_calls, .. } => {
                calls.extend(tool_calls.iter().map(|c| c.id.clone()));
                true
            }
            Message::Tool { tool_call_id, .. } => calls.contains(tool_call_id),
            _ => true,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use sandbox_agents_model::ToolCall;

    fn call(id: &str) -> Message {
        Message::Assistant {
            content: None,
            tool_calls: vec![ToolCall {
                id: id.into(),
                name: "shell".into(),
                arguments: "{}".into(),
            }],
        }
    }

    #[test]
    fn the_newest_user_message_is_kept_whole_and_older_ones_while_they_fit() {
        let big = "x".repeat(4 * 15_000);
        let users = vec![
            "first".to_owned(),
            big.clone(),
            "third".to_owned(),
            big.clone(),
            "last".to_owned(),
        ];
        // "last", the newer 15k and "third" fit; the older 15k does not, which ends the
        // selection: "first" is not reached although it would fit.
        assert_eq!(
            recent_users(&users),
            vec!["third".to_owned(), big.clone(), "last".to_owned()]
        );
        let huge = "y".repeat(4 * 30_000);
        assert_eq!(recent_users(&["a".into(), huge.clone()]), vec![huge]);
        assert!(recent_users(&[]).is_empty());
    }

    #[test]
    fn a_tool_result_stays_in_the_unit_of_its_call_and_orphans_are_dropped() {
        let ms = vec![
            Message::user("go"),
            call("c1"),
            Message::tool("c1", "ok"),
            Message::user("again"),
        ];
        assert_eq!(unit_starts(&ms), vec![0, 1, 3]);
        let kept = without_orphans(vec![
            Message::tool("c0", "answer to a call that is gone"),
            call("c1"),
            Message::tool("c1", "ok"),
        ]);
        assert_eq!(kept, vec![call("c1"), Message::tool("c1", "ok")]);
    }

    #[test]
    fn the_estimate_counts_messages_and_tools_in_bytes() {
        let m = Message::user("a".repeat(400));
        let spec = ToolSpec {
            name: "t".into(),
            description: String::new(),
            parameters: serde_json::json!({}),
        };
        let one = message_tokens(&m);
        assert!((100..110).contains(&one), "{one}");
        let specs = [spec];
        assert_eq!(estimate(&[m], &specs), one + specs_tokens(&specs));
        assert_eq!(text_tokens("é"), 1);
    }
}
