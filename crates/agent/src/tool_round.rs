//! Running a step's tool calls: the sandbox ones and the subagent ones in order, each
//! between its `agent.tool_use` and its `agent.tool_result`, handoffs answered, then the wait
//! for the ordinary client answers; deferrable client calls (and subagent calls that parked
//! on some) are handed back for parking.

use crate::client_tools;
use crate::finish::Outcome;
use crate::frame::{Cast, Frame, Kind, ParkedFrame, SubTag};
use crate::stop::Stop;
use crate::subagents::Settled;
use crate::tally::Turn;
use crate::tool_output::Live;
use crate::Runs;
use sandbox_agents_domain::event::{EventType, NewEvent};
use sandbox_agents_model::{Completion, Message, ToolCall};
use serde_json::json;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

/// What a step's calls came to.
pub(crate) struct Round {
    /// One answer per call, except those that wait (deferrable or parked subagent calls).
    pub answers: Vec<Message>,
    /// Deferrable client calls (row ids) that wait on a person.
    pub deferrable: Vec<i64>,
    /// Subagent calls that parked on deferrable calls of their own.
    pub nested: Vec<ParkedFrame>,
    pub stop: Option<Stop>,
}

impl Runs {
    /// Runs the step's calls: sandbox and subagent calls in order (each between its
    /// `agent.tool_use`, already written, and its `agent.tool_result`), handoffs answered
    /// (`handoff_to`: who the honoured one gave the conversation to), then waits for the
    /// ordinary client answers. On a stop, calls without an answer get a note, so the
    /// conversation stays well formed.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn run_tools(
        &self,
        cast: &Cast,
        frame: &Frame,
        turn: &mut Turn,
        completion: &Completion,
        kinds: &[Kind<'_>],
        rows: &[Option<i64>],
        handoff_to: Option<&str>,
        token: &CancellationToken,
    ) -> Round {
        let (id, run) = (cast.id, cast.run);
        let calls = &completion.tool_calls;
        let mut answers: Vec<Option<Message>> = vec![None; calls.len()];
        let mut nested = Vec::new();
        let mut stop = None;
        let waits_for_person = kinds.iter().any(|k| matches!(k, Kind::Ask(_)));
        for (i, c) in calls.iter().enumerate() {
            let result = match &kinds[i] {
                Kind::Sandbox | Kind::Mcp(_) => {
                    match self.sandbox_call(cast, frame, c, token).await {
                        Some(r) => r,
                        None => {
                            stop = Some(Stop::Outcome(Outcome::Cancelled));
                            break;
                        }
                    }
                }
                Kind::Subagent(d) => match self.call_subagent(cast, frame, turn, d, c, token).await
                {
                    Ok(Settled::Answer(text)) => text,
                    Ok(Settled::Parked(p)) => {
                        nested.push(p);
                        continue;
                    }
                    Err(s) => {
                        stop = Some(s);
                        break;
                    }
                },
                Kind::Handoff(d, honoured) => {
                    let text = if waits_for_person {
                        "Ignored: this step has calls waiting for a person's decision; hand the conversation over once they are decided.".to_owned()
                    } else {
                        handoff_answer(&d.agent, *honoured, handoff_to)
                    };
                    answers[i] = Some(Message::tool(c.id.clone(), text));
                    continue;
                }
                // The caller answers, or a person decides first.
                Kind::Client(_) | Kind::Ask(_) => continue,
            };
            match self.tool_result(cast, frame, c, result).await {
                Ok(m) => answers[i] = Some(m),
                Err(s) => {
                    stop = Some(s);
                    break;
                }
            }
        }
        let ordinary: Vec<i64> = kinds
            .iter()
            .zip(rows)
            .filter_map(|(k, r)| match k {
                Kind::Client(t) if !t.deferrable => *r,
                _ => None,
            })
            .collect();
        if stop.is_none() && !ordinary.is_empty() {
            match self.wait_for_answers(id, run, &ordinary, token).await {
                Ok(done) => {
                    for call in done {
                        if let Some(i) = rows.iter().position(|r| *r == Some(call.id)) {
                            answers[i] = Some(client_tools::answer(&call));
                        }
                    }
                }
                Err(s) => stop = Some(s),
            }
        }
        if stop.is_none() && token.is_cancelled() {
            stop = Some(Stop::Outcome(Outcome::Cancelled));
        }
        let parked_call = |call: &str| nested.iter().any(|p: &ParkedFrame| p.tag.call_id == call);
        let mut deferrable = Vec::new();
        let mut out = Vec::new();
        for (i, c) in calls.iter().enumerate() {
            match (&answers[i], &kinds[i], rows[i]) {
                (Some(m), _, _) => out.push(m.clone()),
                (None, Kind::Client(t), Some(row)) if t.deferrable && stop.is_none() => {
                    deferrable.push(row)
                }
                (None, Kind::Ask(_), Some(row)) if stop.is_none() => deferrable.push(row),
                (None, Kind::Subagent(_), _) if stop.is_none() && parked_call(&c.id) => {}
                (None, _, _) => out.push(Message::tool(
                    c.id.clone(),
                    "The turn was interrupted before this tool answered.",
                )),
            }
        }
        if stop.is_some() {
            nested.clear();
        }
        Round {
            answers: out,
            deferrable,
            nested,
            stop,
        }
    }
}

impl Runs {
    /// Runs one sandbox tool call of `frame` (its output goes out live), or one of its MCP
    /// tools; `None` when the run was cancelled first.
    pub(crate) async fn sandbox_call(
        &self,
        cast: &Cast,
        frame: &Frame,
        c: &ToolCall,
        token: &CancellationToken,
    ) -> Option<String> {
        let live = Live {
            run: cast.run,
            call_id: &c.id,
            subagent: frame.tag.as_ref().map(SubTag::value),
        };
        // Sandbox tools are ours (bash, files, python, load_skill...): a bounded set of
        // labels, unlike the names of caller-answered tools and MCP servers' (all `mcp`).
        let started = std::time::Instant::now();
        let label = if frame.speaker.mcp_tool(&c.name).is_some() {
            "mcp".to_owned()
        } else {
            c.name.clone()
        };
        let timed = |outcome: &'static str| {
            metrics::histogram!("sandbox_agents_tool_call_duration_seconds", "tool" => label.clone(), "outcome" => outcome)
                .record(started.elapsed());
        };
        let span = tracing::info_span!(
            "execute_tool",
            otel.name = %format!("execute_tool {}", c.name),
            gen_ai.operation.name = "execute_tool",
            gen_ai.tool.name = %c.name,
            gen_ai.tool.call.id = %c.id,
            gen_ai.tool.type = "function",
        );
        if let Some(offer) = frame.speaker.mcp_tool(&c.name) {
            let (answer, unreachable) = tokio::select! {
                r = self.mcp_call(cast.project, cast.id, offer, c).instrument(span) => {
                    timed("answered");
                    r
                }
                _ = token.cancelled() => {
                    timed("cancelled");
                    return None;
                }
            };
            if let Some(error) = unreachable {
                let ev = NewEvent::new(
                    EventType::AgentMcpServerError,
                    Some(cast.run),
                    SubTag::mark(
                        frame.tag.as_ref(),
                        json!({"mcp_server": offer.server.name, "error": error, "required": offer.server.required, "call_id": c.id}),
                    ),
                );
                // A run that is no longer running: the result has nowhere to go either.
                self.append_step(cast.id, cast.run, &[ev]).await.ok()?;
            }
            return Some(answer);
        }
        let specs = &frame.speaker.specs;
        tokio::select! {
            r = self.run_tool(cast.project, cast.id, specs, &c.name, &c.arguments, &live).instrument(span) => {
                timed("answered");
                Some(r)
            }
            _ = token.cancelled() => {
                timed("cancelled");
                None
            }
        }
    }

    /// Writes a sandbox or subagent call's `agent.tool_result` (marked with the frame's tag)
    /// and returns the answer the model gets.
    pub(crate) async fn tool_result(
        &self,
        cast: &Cast,
        frame: &Frame,
        c: &ToolCall,
        result: String,
    ) -> Result<Message, Stop> {
        let mut payload = json!({"tool": c.name, "call_id": c.id, "output": result});
        if let Some(o) = frame.speaker.mcp_tool(&c.name) {
            payload["mcp_server"] = json!(o.server.name);
        }
        let ev = NewEvent::new(
            EventType::AgentToolResult,
            Some(cast.run),
            SubTag::mark(frame.tag.as_ref(), payload),
        );
        self.append_step(cast.id, cast.run, &[ev]).await?;
        Ok(Message::tool(c.id.clone(), result))
    }
}

/// What the model is told about a handoff call.
fn handoff_answer(agent: &str, honoured: bool, to: Option<&str>) -> String {
    match (honoured, to) {
        (true, Some(to)) => format!("The conversation is handed to the agent '{to}', which continues from here."),
        (true, None) => format!("error: there is no agent '{agent}' any more; the conversation stays with you."),
        (false, Some(to)) => format!("Ignored: only one handoff per step is honoured, and this step handed the conversation to '{to}'."),
        (false, None) => "Ignored: only one handoff per step is honoured.".to_owned(),
    }
}
