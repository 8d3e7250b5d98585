//! Compaction: when the conversation the model would see reaches [`THRESHOLD_PERCENT`] of the
//! model's input window, one model call writes a checkpoint summary and the model's view
//! becomes the system prompt, the most recent user messages (`view::recent_users`) and the
//! summary, in place of the history it covers. Only the view changes: the session's stored
//! conversation (`finish.rs`, `park.rs`) and its event log stay whole.
//!
//! * Entry point: [`Runs::compact_if_needed`], called by a turn loop before each model call;
//!   [`Runs::resume_compaction`] gives a turn's context its starting point.
//! * Which model summarises: the turn's own model and client, with the turn's tools offered
//!   (the history holds calls of them; some providers refuse such a history without its
//!   tools) and a prompt that asks for text only.
//! * The size is the provider's: the prompt tokens it reported for the last call, plus an
//!   estimate (`view::estimate`) of what was added since; the estimate alone when there is
//!   no report (a turn's first call, or right after a compaction).
//! * The window: the catalogue's `max_input_tokens`, else the server's
//!   `--default-max-input-tokens` (`window.rs`).
//! * Where the next turn starts: the `agent.compaction` event carries the summary and
//!   `messages_covered`, how many messages of the conversation (as the context reads it: the
//!   stored conversation, then a turn's prompt and steps) it stands for. The conversation
//!   only ever grows at its end, so that count stays true; a turn's context is
//!   `system + recent users of conversation[..covered] + summary + conversation[covered..]`,
//!   for a parked run that continues as much as for a new turn.
//! * A view that cannot get below the window fails the run, naming the sizes, rather than
//!   sending the provider a request it refuses; an agent without the `compaction`
//!   capability fails the same way once over the window, and never compacts.

mod view;
mod window;

pub(crate) use window::Windows;

use crate::finish::Outcome;
use crate::stop::Stop;
use crate::Runs;
use sandbox_agents_domain::agent::Capability;
use sandbox_agents_domain::event::{EventType, NewEvent};
use sandbox_agents_domain::{RunId, SessionId};
use sandbox_agents_model::{ChatRequest, Message, ModelClient, ToolSpec, Usage};
use sandbox_agents_store::events;
use serde_json::{json, Map, Value};
use tokio_util::sync::CancellationToken;

/// Compaction starts when the view reaches this share of the input window: the rest is room
/// for the summarising call's prompt and answer, and for the next step's.
pub(crate) const THRESHOLD_PERCENT: u64 = 90;

/// What the summarising call is asked, as the last (user) message of the view.
pub(crate) const CHECKPOINT_PROMPT: &str = "CONTEXT CHECKPOINT. The conversation above is \
about to be replaced by your summary: whoever continues the work sees only the system prompt, \
the most recent user messages and what you write now. Write a concise, structured handoff \
with:\n\
1. The goal: what the user asked for, in their terms.\n\
2. Progress so far and the decisions made, with their reasons.\n\
3. Constraints and preferences the user stated.\n\
4. The remaining steps, in order.\n\
5. Critical data needed to continue: file paths, commands, ids, names, values, errors seen.\n\
Do not call tools; answer with the summary only.";

/// Whether an agent with these capabilities compacts: null means the default set, which
/// includes compaction.
pub(crate) fn enabled(capabilities: Option<&[Capability]>) -> bool {
    capabilities.is_none_or(|cs| cs.contains(&Capability::Compaction))
}

/// The view's bookkeeping: which of its messages stand for the conversation, and the last
/// size the provider reported. The view is `messages[..head]` (the system prompt and, once
/// compacted, the recent user messages and the summary) then the conversation from
/// `covered` on.
#[derive(Debug)]
pub(crate) struct Compaction {
    /// Whether this agent compacts (else it only fails clearly once over the window).
    enabled: bool,
    /// 1 when the view starts with a system prompt, else 0.
    system: usize,
    head: usize,
    covered: usize,
    /// The user messages among the covered ones, oldest first.
    covered_users: Vec<String>,
    /// The prompt tokens the provider reported for a call, and how many messages the view
    /// had then.
    reported: Option<(u64, usize)>,
    /// Whether the view is the session's stored conversation, whose compaction point the
    /// next turn starts from (a subagent's fresh conversation is not).
    stored: bool,
    /// Added to the `agent.compaction` payload (e.g. which subagent's view it was).
    pub extra: Map<String, Value>,
}

impl Compaction {
    /// The bookkeeping of a view that is not the session's stored conversation (a fresh
    /// conversation of a subagent): its compactions are not where a later turn starts.
    pub(crate) fn nested(capabilities: Option<&[Capability]>, messages: &[Message]) -> Self {
        let system = usize::from(matches!(messages.first(), Some(Message::System { .. })));
        Compaction {
            enabled: enabled(capabilities),
            system,
            head: system,
            covered: 0,
            covered_users: Vec::new(),
            reported: None,
            stored: false,
            extra: Map::new(),
        }
    }

    /// A handoff: another agent speaks over the same messages, with its own system prompt
    /// (`system`: whether its view has one) and capabilities. The indices move with the
    /// system prompt, and the last reported size no longer describes the view.
    pub(crate) fn reseat(&mut self, capabilities: Option<&[Capability]>, system: bool) {
        let system = usize::from(system);
        self.head = self.head + system - self.system;
        self.system = system;
        self.enabled = enabled(capabilities);
        self.reported = None;
    }

    /// Records the prompt size the provider reported for a call whose view had `len`
    /// messages (a provider that reports none leaves the estimate in charge).
    pub(crate) fn observe(&mut self, usage: &Usage, len: usize) {
        if usage.input_tokens > 0 {
            self.reported = Some((usage.input_tokens, len));
        }
    }

    /// About how many tokens the model would be given for `messages` and `specs`.
    fn estimate(&self, messages: &[Message], specs: &[ToolSpec]) -> u64 {
        match self.reported {
            Some((tokens, len)) if len <= messages.len() => {
                tokens
                    + messages[len..]
                        .iter()
                        .map(view::message_tokens)
                        .sum::<u64>()
            }
            _ => view::estimate(messages, specs),
        }
    }
}

/// The sizes a failure names.
fn too_big(model: &str, window: u64, what: String) -> Stop {
    Stop::Outcome(Outcome::Failed(format!(
        "the conversation no longer fits the input window of model '{model}' ({window} tokens): \
         {what}; start a new session, shorten the prompt or the agent's instructions, or use a \
         model with a larger input window"
    )))
}

impl Runs {
    /// The view a turn starts from: `messages` as the context read them (the system prompt,
    /// if any, then the conversation with the turn's prompt and, for a parked run, its steps)
    /// with the session's last compaction applied when the agent compacts.
    pub(crate) async fn resume_compaction(
        &self,
        session: SessionId,
        capabilities: Option<&[Capability]>,
        messages: &mut Vec<Message>,
    ) -> Result<Compaction, Stop> {
        let mut c = Compaction::nested(capabilities, messages);
        c.stored = true;
        if !c.enabled {
            return Ok(c);
        }
        let Some(point) = events::last_compaction(&self.inner.db, session).await? else {
            return Ok(c);
        };
        let summary = point.get("summary").and_then(Value::as_str);
        let covered = point.get("messages_covered").and_then(Value::as_u64);
        let (Some(summary), Some(covered)) = (summary, covered) else {
            tracing::warn!(session.id = %session, "an agent.compaction event without its summary; the turn starts from the whole conversation");
            return Ok(c);
        };
        let conversation = messages.split_off(c.system);
        // More than there is: the turn that compacted was not saved (an interrupt that gave
        // up waiting finished it); its summary still says what happened in the sandbox.
        let covered = usize::try_from(covered)
            .unwrap_or(usize::MAX)
            .min(conversation.len());
        c.covered_users = view::user_texts(&conversation[..covered])
            .map(str::to_owned)
            .collect();
        messages.extend(
            view::recent_users(&c.covered_users)
                .into_iter()
                .map(Message::user),
        );
        messages.push(view::summary_message(summary));
        c.head = messages.len();
        c.covered = covered;
        messages.extend(conversation.into_iter().skip(covered));
        // A compaction point falls between units (it is taken before a model call), so the
        // rest starts with a whole unit; should it not, a provider would refuse the orphan.
        // Dropping one makes a later `messages_covered` of this turn smaller, which only
        // shows the next turn a little more.
        *messages = view::without_orphans(std::mem::take(messages));
        Ok(c)
    }

    /// Before a model call: when the view (`messages` with `specs`) reaches
    /// [`THRESHOLD_PERCENT`] of `model`'s input window and the agent compacts, one call with
    /// [`CHECKPOINT_PROMPT`] summarises it, `agent.compaction` is written, and `messages`
    /// becomes the compacted view. Its usage is added to `usage`. Fails the run when the
    /// view cannot get below the window, or is over it and the agent does not compact.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn compact_if_needed(
        &self,
        session: SessionId,
        run: RunId,
        model: &str,
        client: &ModelClient,
        specs: &[ToolSpec],
        messages: &mut Vec<Message>,
        state: &mut Compaction,
        usage: &mut Usage,
        token: &CancellationToken,
    ) -> Result<(), Stop> {
        let default = self.inner.sessions.settings().default_max_input_tokens;
        let window = self
            .inner
            .windows
            .max_input_tokens(client, model, default)
            .await;
        let before = state.estimate(messages, specs);
        if before * 100 < window * THRESHOLD_PERCENT {
            return Ok(());
        }
        // Not compacting when it cannot help: the agent does not compact, or nothing was
        // added since the last compaction.
        if !state.enabled || messages.len() == state.head {
            if before >= window {
                return Err(too_big(
                    model,
                    window,
                    if state.enabled {
                        format!("it is about {before} tokens, even just compacted")
                    } else {
                        format!(
                            "it is about {before} tokens, and this agent does not compact it \
                             (its capabilities leave out 'compaction'; add it to let the \
                             conversation be summarised)"
                        )
                    },
                ));
            }
            return Ok(());
        }
        let tail = &messages[state.head..];
        let mut users = state.covered_users.clone();
        users.extend(view::user_texts(tail).map(str::to_owned));
        let mut head: Vec<Message> = messages[..state.system].to_vec();
        head.extend(view::recent_users(&users).into_iter().map(Message::user));
        let kept = view::estimate(&head, specs);
        if kept >= window {
            return Err(too_big(
                model,
                window,
                format!(
                    "compacted, the system prompt, the tools and the most recent user messages \
                     alone are about {kept} tokens (the newest user message about {})",
                    users.last().map_or(0, |u| view::text_tokens(u))
                ),
            ));
        }
        let input = summarising_input(messages, state.system, specs, window).ok_or_else(|| {
            let last = view::unit_starts(&messages[state.system..])
                .last()
                .map_or(0, |&i| view::estimate(&messages[state.system + i..], &[]));
            too_big(
                model,
                window,
                format!(
                    "it is about {before} tokens, and its last message (with the tool \
                         results that answer it) alone is about {last}, too big to summarise"
                ),
            )
        })?;
        let req = ChatRequest::new(model.to_owned(), input).tools(specs.to_vec());
        let completion = tokio::select! {
            c = client.complete(req) => c.map_err(|e| Stop::Outcome(Outcome::Failed(format!(
                "compacting the conversation failed: the model request failed: {e}"
            ))))?,
            _ = token.cancelled() => return Err(Stop::Outcome(Outcome::Cancelled)),
        };
        *usage += completion.usage;
        let summary = completion.text.trim();
        if summary.is_empty() {
            return Err(Stop::Outcome(Outcome::Failed(
                "compacting the conversation failed: the model answered the checkpoint prompt \
                 without a summary"
                    .into(),
            )));
        }
        head.push(view::summary_message(summary));
        let after = view::estimate(&head, specs);
        if after >= window {
            return Err(too_big(
                model,
                window,
                format!(
                    "compacted, it is still about {after} tokens (the summary about {})",
                    view::text_tokens(summary)
                ),
            ));
        }
        let covered = state.covered + tail.len();
        let mut payload = json!({
            "tokens_before": before,
            "tokens_after": after,
            "window": window,
            "summary_chars": summary.chars().count(),
        });
        if state.stored {
            payload["summary"] = Value::from(summary);
            payload["messages_covered"] = Value::from(covered);
        }
        let mut event = NewEvent::new(EventType::AgentCompaction, Some(run), payload);
        event.payload.extend(state.extra.clone());
        self.append_step(session, run, &[event]).await?;
        tracing::info!(run.id = %run, before, after, window, "conversation compacted");
        *messages = head;
        state.head = messages.len();
        state.covered = covered;
        state.covered_users = users;
        state.reported = None;
        Ok(())
    }
}

/// What the summarising call is given: the view and [`CHECKPOINT_PROMPT`], without as many
/// of its oldest units (`view::unit_starts`) as it takes to fit in `window`; the system
/// prompt always. None when even the last unit does not fit.
fn summarising_input(
    messages: &[Message],
    system: usize,
    specs: &[ToolSpec],
    window: u64,
) -> Option<Vec<Message>> {
    let prompt = Message::user(CHECKPOINT_PROMPT);
    let fixed = view::estimate(&messages[..system], specs) + view::message_tokens(&prompt);
    let body = &messages[system..];
    let mut size: u64 = body.iter().map(view::message_tokens).sum();
    let starts = view::unit_starts(body);
    let mut from = 0;
    for (n, &start) in starts.iter().enumerate() {
        if fixed + size < window {
            from = start;
            break;
        }
        let end = starts.get(n + 1).copied().unwrap_or(body.len());
        size -= body[start..end]
            .iter()
            .map(view::message_tokens)
            .sum::<u64>();
        if n + 1 == starts.len() {
            return None;
        }
    }
    if from > 0 {
        tracing::warn!(
            dropped = from,
            "the view is too big to summarise whole; its oldest messages are left out of the summary"
        );
    }
    let mut input = messages[..system].to_vec();
    input.extend(body[from..].iter().cloned());
    input.push(prompt);
    Some(input)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summarising_input_drops_the_oldest_units_until_it_fits() {
        let big = "x".repeat(4_000);
        let ms = vec![
            Message::system("sys"),
            Message::user(big.clone()),
            Message::user("recent"),
        ];
        let whole = summarising_input(&ms, 1, &[], 100_000).unwrap();
        assert_eq!(whole.len(), 4);
        assert_eq!(whole[3], Message::user(CHECKPOINT_PROMPT));
        let trimmed = summarising_input(&ms, 1, &[], 800).unwrap();
        assert_eq!(
            trimmed,
            vec![
                Message::system("sys"),
                Message::user("recent"),
                Message::user(CHECKPOINT_PROMPT)
            ]
        );
        assert_eq!(summarising_input(&ms, 1, &[], 100), None);
    }

    #[test]
    fn a_reported_size_counts_only_what_came_after_it() {
        let ms = vec![
            Message::user("a".repeat(400)),
            Message::user("b".repeat(400)),
        ];
        let mut c = Compaction::nested(None, &ms);
        let estimated = c.estimate(&ms, &[]);
        c.observe(
            &Usage {
                input_tokens: 7,
                ..Usage::default()
            },
            1,
        );
        assert_eq!(c.estimate(&ms, &[]), 7 + view::message_tokens(&ms[1]));
        assert!(c.estimate(&ms, &[]) < estimated);
        assert!(enabled(None) && !enabled(Some(&[Capability::Shell])));
    }
}
