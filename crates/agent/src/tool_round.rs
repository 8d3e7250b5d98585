//! Running a step's tool calls: the sandbox ones in order, each between its
//! `agent.tool_use` and its `agent.tool_result`, then the wait for the ordinary client
//! answers; deferrable client calls are handed back for parking.

use crate::client_tools;
use crate::finish::Outcome;
use crate::stop::Stop;
use crate::turn::Kind;
use crate::Runs;
use sandbox_agents_domain::event::{EventType, NewEvent};
use sandbox_agents_domain::{ProjectId, RunId, SessionId};
use sandbox_agents_model::{Completion, Message, ToolSpec};
use serde_json::json;
use tokio_util::sync::CancellationToken;

impl Runs {
    /// Runs the step's calls: the sandbox ones in order (each between its `agent.tool_use`,
    /// already written, and its `agent.tool_result`), then waits for the ordinary client
    /// answers. Returns one answer per call except the deferrable client calls, whose row ids
    /// come back for parking (ordinary answers are awaited first, then the run parks). On a stop, calls
    /// without an answer get a note, so the conversation stays well formed.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn run_tools(
        &self,
        project: ProjectId,
        id: SessionId,
        run: RunId,
        specs: &[ToolSpec],
        completion: &Completion,
        kinds: &[Kind<'_>],
        rows: &[Option<i64>],
        token: &CancellationToken,
    ) -> (Vec<Message>, Vec<i64>, Option<Stop>) {
        let calls = &completion.tool_calls;
        let mut answers: Vec<Option<Message>> = vec![None; calls.len()];
        let mut stop = None;
        for (i, c) in calls.iter().enumerate() {
            if !matches!(kinds[i], Kind::Sandbox) {
                continue;
            }
            let result = tokio::select! {
                r = self.run_tool(project, id, specs, &c.name, &c.arguments) => r,
                _ = token.cancelled() => {
                    stop = Some(Stop::Outcome(Outcome::Cancelled));
                    break;
                }
            };
            let ev = NewEvent::new(
                EventType::AgentToolResult,
                Some(run),
                json!({"tool": c.name, "call_id": c.id, "output": result}),
            );
            answers[i] = Some(Message::tool(c.id.clone(), result));
            if let Err(s) = self.append_step(id, run, &[ev]).await {
                stop = Some(s);
                break;
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
        let mut deferrable = Vec::new();
        let mut out = Vec::new();
        for (i, c) in calls.iter().enumerate() {
            match (&answers[i], &kinds[i], rows[i]) {
                (Some(m), _, _) => out.push(m.clone()),
                (None, Kind::Client(t), Some(row)) if t.deferrable && stop.is_none() => {
                    deferrable.push(row)
                }
                (None, _, _) => out.push(Message::tool(
                    c.id.clone(),
                    "The turn was interrupted before this tool answered.",
                )),
            }
        }
        (out, deferrable, stop)
    }
}
