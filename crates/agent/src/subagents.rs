//! Subagents called as tools (`mode: tool`): the call runs the subagent in a frame of its
//! own (`frame.rs`), in the same sandbox, on a fresh conversation holding only the call's
//! `input`, up to its caller's `subagent_max_steps` (default
//! [`sandbox_agents_domain::agent::DEFAULT_SUBAGENT_MAX_STEPS`]) steps, and its final answer is the call's result.
//! Handoffs (`mode: handoff`) change who speaks in the run's frame instead (`frame.rs`).
//!
//! Rules:
//! * a subagent's failure (its model failing, its step limit, bad arguments, an agent that is
//!   gone) is its caller's tool result, starting `error:`, never the run's failure; a
//!   cancel, a stop or a run finished elsewhere ends every frame at once;
//! * a subagent that parks on deferrable client calls parks the whole run: its frame is saved
//!   with the run's progress ([`ParkedFrame`]) and continued, innermost first, once the calls
//!   are answered; its answer then goes to the frame above as if it had never stopped.

use crate::compaction::Compaction;
use crate::finish::Outcome;
use crate::frame::{Cast, Frame, FrameEnd, ParkedFrame, SubTag};
use crate::speaker::{Delegate, Speaker};
use crate::stop::Stop;
use crate::tally::Turn;
use crate::Runs;
use sandbox_agents_domain::event::{EventType, NewEvent};
use sandbox_agents_model::{Message, ToolCall};
use sandbox_agents_store::sessions::Holder;
use serde::Deserialize;
use serde_json::{json, Value};
use std::future::Future;
use std::pin::Pin;
use tokio_util::sync::CancellationToken;

/// What a subagent call came to.
pub(crate) enum Settled {
    /// Its result for the caller (an answer, or what went wrong).
    Answer(String),
    /// It waits on deferrable calls.
    Parked(ParkedFrame),
}

#[derive(Deserialize)]
struct SubagentArgs {
    input: String,
}

type Boxed<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

impl Runs {
    /// Calls the subagent `d` for the call `c` of `parent`.
    pub(crate) fn call_subagent<'a>(
        &'a self,
        cast: &'a Cast,
        parent: &'a Frame,
        turn: &'a mut Turn,
        d: &'a Delegate,
        c: &'a ToolCall,
        token: &'a CancellationToken,
    ) -> Boxed<'a, Result<Settled, Stop>> {
        Box::pin(async move {
            let input = match serde_json::from_str::<SubagentArgs>(&c.arguments) {
                Ok(a) => a.input,
                Err(e) => {
                    return Ok(Settled::Answer(format!(
                        "error: {} takes {{\"input\": string}}, the task for the agent '{}': {e}",
                        d.name, d.agent
                    )))
                }
            };
            // The caller's setting bounds its subagents: the agent that delegates decides how
            // much a delegated task may cost it (a nested frame's own subagents follow that
            // frame's agent's setting).
            let max = parent.speaker.subagent_max_steps;
            let seat = cast.seat(parent.speaker.depth + 1, None);
            let Some(speaker) = self.speaker_by_slug(cast.project, &d.agent, &seat).await? else {
                return Ok(Settled::Answer(format!(
                    "error: there is no agent '{}' any more",
                    d.agent
                )));
            };
            tracing::info!(run.id = %cast.run, subagent = %d.agent, call_id = %c.id, "subagent called");
            let tag = SubTag {
                agent: d.agent.clone(),
                call_id: c.id.clone(),
            };
            let messages = vec![Message::user(input)];
            let compaction = nested_compaction(&speaker, &messages, &tag);
            let mut frame = Frame {
                speaker,
                messages,
                steps: 0,
                max,
                tag: Some(tag),
                holder: Holder::default(),
                compaction,
            };
            let end = self.frame_loop(cast, &mut frame, turn, token).await;
            settle(end, frame, &d.name)
        })
    }

    /// Continues a parked subagent frame whose calls are answered: their answers, then the
    /// frames below it, then its own steps.
    fn resume_frame<'a>(
        &'a self,
        cast: &'a Cast,
        p: ParkedFrame,
        turn: &'a mut Turn,
        token: &'a CancellationToken,
    ) -> Boxed<'a, Result<Settled, Stop>> {
        Box::pin(async move {
            let seat = cast.seat(p.depth, None);
            let Some(speaker) = self.speaker_by_slug(cast.project, &p.agent, &seat).await? else {
                return Ok(Settled::Answer(format!(
                    "error: there is no agent '{}' any more",
                    p.agent
                )));
            };
            let compaction = nested_compaction(&speaker, &p.messages, &p.tag);
            let mut frame = Frame {
                speaker,
                messages: p.messages,
                steps: p.steps,
                max: p.max,
                tag: Some(p.tag),
                holder: Holder::default(),
                compaction,
            };
            let again = self
                .settle(cast, &mut frame, turn, &p.awaiting, token)
                .await?;
            let mut still = self
                .resume_nested(cast, &mut frame, turn, p.nested, token)
                .await?;
            still.extend(again);
            if !still.is_empty() {
                return Ok(Settled::Parked(parked(&frame, &p.tool, Vec::new(), still)));
            }
            let end = self.frame_loop(cast, &mut frame, turn, token).await;
            settle(end, frame, &p.tool)
        })
    }

    /// Continues `nested` (subagent calls of `frame` that parked): each answer joins the
    /// frame's messages (and, for the run's frame, the turn's) with its `agent.tool_result`.
    /// Returns those that park again.
    pub(crate) async fn resume_nested(
        &self,
        cast: &Cast,
        frame: &mut Frame,
        turn: &mut Turn,
        nested: Vec<ParkedFrame>,
        token: &CancellationToken,
    ) -> Result<Vec<ParkedFrame>, Stop> {
        let mut still = Vec::new();
        for n in nested {
            let (tool, call_id) = (n.tool.clone(), n.tag.call_id.clone());
            match self.resume_frame(cast, n, turn, token).await? {
                Settled::Answer(text) => {
                    let ev = NewEvent::new(
                        EventType::AgentToolResult,
                        Some(cast.run),
                        SubTag::mark(
                            frame.tag.as_ref(),
                            json!({"tool": tool, "call_id": call_id, "output": text}),
                        ),
                    );
                    self.append_step(cast.id, cast.run, &[ev]).await?;
                    let m = Message::tool(call_id, text);
                    frame.messages.push(m.clone());
                    if frame.tag.is_none() {
                        turn.added.push(m);
                    }
                }
                Settled::Parked(p) => still.push(p),
            }
        }
        Ok(still)
    }
}

/// The compaction bookkeeping of a subagent's own conversation: never a session's starting
/// point, and its `agent.compaction` events marked like the frame's others.
fn nested_compaction(speaker: &Speaker, messages: &[Message], tag: &SubTag) -> Compaction {
    let mut c = Compaction::nested(speaker.capabilities.as_deref(), &speaker.view(messages));
    if let Value::Object(m) = SubTag::mark(Some(tag), json!({})) {
        c.extra = m;
    }
    c
}

/// A nested frame's end, as its caller sees it.
fn settle(end: Result<FrameEnd, Stop>, frame: Frame, tool: &str) -> Result<Settled, Stop> {
    let who = frame.speaker.slug.clone();
    Ok(match end {
        Ok(FrameEnd::Answer(t)) if t.trim().is_empty() => Settled::Answer(format!(
            "(the agent '{who}' finished without a text answer)"
        )),
        Ok(FrameEnd::Answer(t)) => Settled::Answer(t),
        Ok(FrameEnd::MaxTurns(n)) => Settled::Answer(format!(
            "error: the agent '{who}' reached its limit of {n} steps before it answered"
        )),
        Ok(FrameEnd::Parked { awaiting, nested }) => {
            Settled::Parked(parked(&frame, tool, awaiting, nested))
        }
        Err(Stop::Outcome(Outcome::Failed(e))) => {
            tracing::info!(subagent = %who, error = %e, "a subagent failed; its caller is told");
            Settled::Answer(format!("error: the agent '{who}' failed: {e}"))
        }
        Err(other) => return Err(other),
    })
}

fn parked(frame: &Frame, tool: &str, awaiting: Vec<i64>, nested: Vec<ParkedFrame>) -> ParkedFrame {
    ParkedFrame {
        agent: frame.speaker.slug.clone(),
        tool: tool.to_owned(),
        tag: frame
            .tag
            .clone()
            .expect("only nested frames park as frames"),
        depth: frame.speaker.depth,
        steps: frame.steps,
        max: frame.max,
        messages: frame.messages.clone(),
        awaiting,
        nested,
    }
}
