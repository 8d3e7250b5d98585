//! One frame of the loop: an agent speaking over its own messages, step after step, until it
//! answers without tool calls, reaches its step limit or parks on deferrable calls. The run's
//! frame is the conversation's holder (the session's agent, or whoever a handoff gave it to);
//! a subagent called as a tool speaks in a frame of its own, nested in the call
//! (`subagents.rs`), over a fresh conversation holding only its task.
//!
//! Invariants:
//! * the assistant message and its answers join the frame's messages together, so the model
//!   never sees a call without its result;
//! * every event of a nested frame carries `payload.subagent = {agent, call_id}` (the call of
//!   the frame above that started it), deltas included;
//! * a nested frame never ends the run: its end becomes its caller's tool result, and only a
//!   cancel, a stop or a run finished elsewhere goes through it.

use crate::compaction::Compaction;
use crate::finish::Outcome;
use crate::speaker::{Seat, Speaker};
use crate::stop::Stop;
use crate::tally::Turn;
use crate::Runs;
use sandbox_agents_domain::agent::AgentRecord;
use sandbox_agents_domain::skills::SessionSkills;
use sandbox_agents_domain::tools::{ClientTool, SubagentMode};
use sandbox_agents_domain::{ProjectId, RunId, SessionId};
use sandbox_agents_model::{ChatRequest, Message, Usage};
use sandbox_agents_store::sessions::{Holder, SessionRecord};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

/// Which subagent call a nested frame answers, as its events say it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct SubTag {
    pub agent: String,
    pub call_id: String,
}

impl SubTag {
    /// The `subagent` of an event's payload.
    pub fn value(&self) -> Value {
        serde_json::json!({"agent": self.agent, "call_id": self.call_id})
    }

    /// Adds `subagent` to an event's payload.
    pub fn mark(tag: Option<&SubTag>, mut payload: Value) -> Value {
        if let (Some(t), Value::Object(m)) = (tag, &mut payload) {
            m.insert("subagent".into(), t.value());
        }
        payload
    }

    pub fn mark_map(tag: Option<&SubTag>, mut payload: Map<String, Value>) -> Map<String, Value> {
        if let Some(t) = tag {
            payload.insert("subagent".into(), t.value());
        }
        payload
    }
}

/// What every frame of a run shares: the session, its agent, the run's client tools and the
/// boot's skills.
pub(crate) struct Cast {
    pub project: ProjectId,
    pub id: SessionId,
    pub run: RunId,
    pub session: SessionRecord,
    pub root: AgentRecord,
    pub run_tools: Vec<ClientTool>,
    pub skills: Option<SessionSkills>,
    /// The memory section of the session's agent's system prompt, when its boot staged memory.
    pub memory: Option<String>,
    /// When this process took the run (for its active seconds).
    pub started: std::time::Instant,
}

impl Cast {
    /// A seat `depth` deep; `holds`: see [`Seat::holds`].
    pub fn seat<'a>(&'a self, depth: usize, holds: Option<&'a str>) -> Seat<'a> {
        Seat {
            session: &self.session,
            run: self.run,
            root: &self.root,
            run_tools: &self.run_tools,
            skills: self.skills.as_ref(),
            memory: self.memory.as_deref(),
            depth,
            holds,
        }
    }
}

/// A frame: who speaks, over what, and how far it got.
pub(crate) struct Frame {
    pub speaker: Speaker,
    /// What the model sees after the system prompt.
    pub messages: Vec<Message>,
    pub steps: i64,
    pub max: i64,
    /// `None` for the run's frame; the call a nested frame answers.
    pub tag: Option<SubTag>,
    /// The run's frame: who holds the conversation (handoffs change it).
    pub holder: Holder,
    /// What the model's view of `messages` stands for, once compacted (`compaction.rs`).
    pub compaction: Compaction,
}

/// A nested frame parked on deferrable calls (inside it, or further down), saved with the
/// run's progress and continued once they are answered.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct ParkedFrame {
    /// The speaking agent's slug.
    pub agent: String,
    /// The tool name the frame above called it by (for its `agent.tool_result`).
    pub tool: String,
    pub tag: SubTag,
    pub depth: usize,
    pub steps: i64,
    pub max: i64,
    pub messages: Vec<Message>,
    /// Its own calls waiting for an answer (call row ids); the answers follow `messages`.
    pub awaiting: Vec<i64>,
    /// Its subagent calls that parked; their answers follow too.
    pub nested: Vec<ParkedFrame>,
}

impl ParkedFrame {
    /// Every call row the frame and those below it wait on.
    pub fn rows(frames: &[ParkedFrame]) -> Vec<i64> {
        let mut out = Vec::new();
        for f in frames {
            out.extend(&f.awaiting);
            out.extend(Self::rows(&f.nested));
        }
        out
    }
}

/// How a frame stopped stepping.
pub(crate) enum FrameEnd {
    Answer(String),
    MaxTurns(i64),
    /// The last step's deferrable calls wait on a person (its other answers are in the
    /// frame's messages).
    Parked {
        awaiting: Vec<i64>,
        nested: Vec<ParkedFrame>,
    },
}

/// How a step's call is handled.
pub(crate) enum Kind<'a> {
    /// A sandbox tool (or an unknown name, which its runner answers with an error).
    Sandbox,
    /// A tool of one of the agent's MCP servers, called by the control plane.
    Mcp(&'a crate::mcp::McpOffer),
    Client(&'a ClientTool),
    /// A subagent called as a tool.
    Subagent(&'a crate::speaker::Delegate),
    /// A handoff: `true` for the one the step honours.
    Handoff(&'a crate::speaker::Delegate, bool),
    /// A call the agent's permissions say to ask a person about first: it parks the run
    /// (`approvals.rs`), then is handled as the call inside (never a handoff).
    Ask(Box<Kind<'a>>),
}

impl Kind<'_> {
    /// What the permission of a call of this kind is keyed by: a subagent's slug, else the
    /// tool's name. None for a handoff (never asked about).
    fn permission_key<'c>(&'c self, tool: &'c str) -> Option<&'c str> {
        match self {
            Kind::Sandbox | Kind::Mcp(_) => Some(tool),
            Kind::Client(t) => Some(t.name.as_str()),
            Kind::Subagent(d) => Some(d.agent.as_str()),
            Kind::Handoff(..) | Kind::Ask(_) => None,
        }
    }
}

impl Runs {
    /// Steps `frame` until it ends. The run's frame (no tag) also keeps what it adds in
    /// `turn.added` (the turn's part of the stored conversation), counts its steps in
    /// `turn.steps`, and parks itself (`park_frame`); a nested frame returns `Parked`.
    pub(crate) async fn frame_loop(
        &self,
        cast: &Cast,
        frame: &mut Frame,
        turn: &mut Turn,
        token: &CancellationToken,
    ) -> Result<FrameEnd, Stop> {
        let (id, run) = (cast.id, cast.run);
        while frame.steps < frame.max {
            crate::stop::cancelled_here(token)?;
            turn.check_budget()?;
            let sp = &frame.speaker;
            // Compaction works on the model's view (the system prompt included), which
            // becomes the frame's messages again.
            let mut view = sp.view(&frame.messages);
            let mut summarising = Usage::default();
            self.compact_if_needed(
                id,
                run,
                &sp.model,
                &sp.client,
                &sp.specs,
                &mut view,
                &mut frame.compaction,
                &mut summarising,
                token,
            )
            .await?;
            if summarising.requests > 0 {
                turn.ledger.add(&sp.model, &sp.slug, summarising);
                self.count_call(
                    cast.project,
                    id,
                    Some(run),
                    &summarising,
                    Some(&mut turn.month),
                )
                .await;
                // The summary was a call of its own: the step's is checked again.
                turn.check_budget()?;
            }
            let seen = view.len();
            frame.messages = sp.strip_system(view.clone());
            let mut req = ChatRequest::new(sp.model.clone(), view).tools(sp.specs.clone());
            req.reasoning_effort = sp.reasoning_effort.clone();
            let completion = tokio::select! {
                c = self.model_step(&sp.client, req, id, run, frame.tag.as_ref()) => c?,
                _ = token.cancelled() => return Err(Stop::Outcome(Outcome::Cancelled)),
            };
            frame.compaction.observe(&completion.usage, seen);
            frame.steps += 1;
            if frame.tag.is_none() {
                turn.steps += 1;
            }
            turn.ledger.add(&sp.model, &sp.slug, completion.usage);
            self.count_call(
                cast.project,
                id,
                Some(run),
                &completion.usage,
                Some(&mut turn.month),
            )
            .await;
            let mut handed = false;
            let kinds: Vec<Kind> = completion
                .tool_calls
                .iter()
                .map(|c| {
                    if let Some(t) = sp.client_tool(&c.name) {
                        return Kind::Client(t);
                    }
                    if let Some(o) = sp.mcp_tool(&c.name) {
                        return Kind::Mcp(o);
                    }
                    match sp.delegate(&c.name) {
                        Some(d) if d.mode == SubagentMode::Tool => Kind::Subagent(d),
                        Some(d) => {
                            let first = !handed;
                            handed = true;
                            Kind::Handoff(d, first)
                        }
                        None => Kind::Sandbox,
                    }
                })
                .zip(&completion.tool_calls)
                .map(|(k, c)| match k.permission_key(&c.name) {
                    Some(key) if sp.asks(key, &c.name, &c.arguments) => Kind::Ask(Box::new(k)),
                    _ => k,
                })
                .collect();
            // A step whose calls wait for a person honours no handoff: the calls are settled
            // by the agent that made them, which must still hold the conversation then.
            let mut kinds = kinds;
            if kinds.iter().any(|k| matches!(k, Kind::Ask(_))) {
                for k in &mut kinds {
                    if let Kind::Handoff(_, honoured) = k {
                        *honoured = false;
                    }
                }
            }
            // The honoured handoff: who holds the conversation after it, and the holder's
            // seat (loaded before anything is written, so a vanished agent is refused).
            let mut next = None;
            if let Some(d) = kinds.iter().find_map(|k| match k {
                Kind::Handoff(d, true) => Some(*d),
                _ => None,
            }) {
                let holder = handed_over(
                    &frame.holder,
                    &cast.root.slug.to_string(),
                    &sp.slug,
                    &d.agent,
                );
                let back = holder.stack.last().cloned().unwrap_or_default();
                let seat = cast.seat(holder.stack.len(), Some(back.as_str()));
                match self.speaker_by_slug(cast.project, &d.agent, &seat).await? {
                    Some(s) => next = Some((holder, s)),
                    None => {
                        tracing::warn!(agent = %d.agent, "a handoff names an agent that is gone")
                    }
                }
            }
            let handoff = next
                .as_ref()
                .map(|(h, s)| (sp.slug.as_str(), s.slug.as_str(), h));
            let call_rows = self
                .write_step(id, run, &completion, &kinds, frame.tag.as_ref(), handoff)
                .await?;
            let assistant = Message::from_completion(&completion);
            if completion.tool_calls.is_empty() {
                frame.messages.push(assistant.clone());
                if frame.tag.is_none() {
                    turn.added.push(assistant);
                }
                return Ok(FrameEnd::Answer(completion.text));
            }
            let handoff_to = next.as_ref().map(|(_, s)| s.slug.clone());
            let round = self
                .run_tools(
                    cast,
                    frame,
                    turn,
                    &completion,
                    &kinds,
                    &call_rows,
                    handoff_to.as_deref(),
                    token,
                )
                .await;
            frame.messages.push(assistant.clone());
            frame.messages.extend(round.answers.iter().cloned());
            if frame.tag.is_none() {
                turn.added.push(assistant);
                turn.added.extend(round.answers);
            }
            if let Some(stop) = round.stop {
                return Err(stop);
            }
            if let Some((holder, speaker)) = next {
                frame.holder = holder;
                frame
                    .compaction
                    .reseat(speaker.capabilities.as_deref(), speaker.has_system());
                frame.speaker = speaker;
            }
            if !round.deferrable.is_empty() || !round.nested.is_empty() {
                match frame.tag {
                    // The run's frame parks (or finds everything answered already).
                    None => {
                        self.park_frame(cast, frame, turn, round.deferrable, round.nested, token)
                            .await?
                    }
                    Some(_) => {
                        return Ok(FrameEnd::Parked {
                            awaiting: round.deferrable,
                            nested: round.nested,
                        })
                    }
                }
            }
        }
        Ok(FrameEnd::MaxTurns(frame.max))
    }
}

/// Who holds the conversation after `from` hands it to `to`: back down the stack when `to`
/// handed it to `from`, else one more on it. The session's agent holding it is `agent: None`.
pub(crate) fn handed_over(current: &Holder, root: &str, from: &str, to: &str) -> Holder {
    let mut stack = current.stack.clone();
    if stack.last().map(String::as_str) == Some(to) {
        stack.pop();
    } else {
        stack.push(from.to_owned());
    }
    Holder {
        agent: (to != root).then(|| to.to_owned()),
        stack,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handing_back_pops_and_handing_on_pushes() {
        let start = Holder::default();
        let b = handed_over(&start, "a", "a", "b");
        assert_eq!(
            b,
            Holder {
                agent: Some("b".into()),
                stack: vec!["a".into()]
            }
        );
        let c = handed_over(&b, "a", "b", "c");
        assert_eq!(c.stack, ["a", "b"]);
        let back = handed_over(&c, "a", "c", "b");
        assert_eq!(back, b);
        assert_eq!(handed_over(&back, "a", "b", "a"), start);
    }

    #[test]
    fn only_nested_frames_are_marked() {
        let tag = SubTag {
            agent: "s".into(),
            call_id: "c1".into(),
        };
        let v = SubTag::mark(Some(&tag), serde_json::json!({"text": "x"}));
        assert_eq!(v["subagent"]["call_id"], "c1");
        assert!(SubTag::mark(None, serde_json::json!({}))
            .get("subagent")
            .is_none());
    }
}
