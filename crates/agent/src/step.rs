//! One model step: the streamed model call (deltas go out live as `agent.text_delta`, never
//! stored), and its events written, with the pending rows of its client calls (and of the
//! calls that wait for a person) in the same transaction. Each step's events are appended
//! only while the run is still `running` (checked by the append itself, under the session's
//! lock), so nothing of this run follows its terminal event when somebody else (an interrupt
//! that gave up waiting) finished it. A step is one transaction: beside its begin and commit,
//! the session's lock and the guarded insert (events, outbox rows, notification), and the
//! calls' rows when it has any.

use crate::client_tools;
use crate::finish::Outcome;
use crate::frame::{Kind, SubTag};
use crate::stop::Stop;
use crate::Runs;
use futures::StreamExt;
use sandbox_agents_domain::event::{EventType, NewEvent, SessionEvent};
use sandbox_agents_domain::session::RunStatus;
use sandbox_agents_domain::state::ApprovalFor;
use sandbox_agents_domain::tools::ClientTool;
use sandbox_agents_domain::{RunId, SessionId};
use sandbox_agents_model::{ChatRequest, Completion, StreamEvent, ToolCall};
use sandbox_agents_store::events::{Guarded, RunGuard};
use sandbox_agents_store::sessions::{self, Holder};
use sandbox_agents_store::tool_calls::{self, NewToolCall};
use sandbox_agents_store::{events, runs};
use serde_json::{json, Map, Value};
use tokio::sync::mpsc;
use tracing::Instrument;

/// What a call with a row waits for.
enum Waits<'a> {
    /// The caller's answer.
    Client(&'a ClientTool),
    /// A person's decision on a call of this kind.
    Person(ApprovalFor),
}

impl Runs {
    /// Writes a model step: its thinking and message, an `agent.tool_use` for each sandbox
    /// or subagent call, an `agent.client_tool_call` for each client call, an `agent.tool_use`
    /// marked `awaiting_approval` for each call that asks a person first (with the pending
    /// rows of the last two in the same transaction), and the honoured handoff (`handoff`:
    /// from, to, the holder after it) as `agent.handoff` with the session's new holder. A
    /// nested frame's events carry its `tag`. Returns the rows' ids, by call index.
    pub(crate) async fn write_step(
        &self,
        id: SessionId,
        run: RunId,
        completion: &Completion,
        kinds: &[Kind<'_>],
        tag: Option<&SubTag>,
        handoff: Option<(&str, &str, &Holder)>,
    ) -> Result<Vec<Option<i64>>, Stop> {
        let ev = |kind, payload| NewEvent::new(kind, Some(run), SubTag::mark(tag, payload));
        let mut batch = Vec::new();
        if let Some(r) = completion.reasoning.as_ref().filter(|r| !r.is_empty()) {
            batch.push(ev(EventType::AgentThinking, json!({"text": r})));
        }
        if !completion.text.is_empty() {
            batch.push(ev(
                EventType::AgentMessage,
                json!({"text": completion.text}),
            ));
        }
        // The calls that get a row, by call index: (index in the batch, the call, how it
        // waits). Client calls wait for the caller; asked ones for a person.
        let mut waiting: Vec<(usize, usize, &ToolCall, Waits)> = Vec::new();
        for (n, (c, kind)) in completion.tool_calls.iter().zip(kinds).enumerate() {
            match kind {
                Kind::Sandbox => batch.push(ev(
                    EventType::AgentToolUse,
                    json!({"tool": c.name, "call_id": c.id, "arguments": c.arguments}),
                )),
                Kind::Subagent(d) => batch.push(ev(
                    EventType::AgentToolUse,
                    json!({"tool": c.name, "call_id": c.id, "arguments": c.arguments, "agent": d.agent}),
                )),
                Kind::Mcp(o) => batch.push(ev(
                    EventType::AgentToolUse,
                    json!({"tool": c.name, "call_id": c.id, "arguments": c.arguments, "mcp_server": o.server.name}),
                )),
                Kind::Handoff(..) => {}
                Kind::Client(t) => {
                    waiting.push((n, batch.len(), c, Waits::Client(t)));
                    batch.push(ev(
                        EventType::AgentClientToolCall,
                        json!({"tool": c.name, "call_id": c.id, "arguments": c.arguments, "deferrable": t.deferrable}),
                    ));
                }
                Kind::Ask(inner) => {
                    let mut payload = json!({"tool": c.name, "call_id": c.id, "arguments": c.arguments, "awaiting_approval": true});
                    let kind = match inner.as_ref() {
                        Kind::Subagent(d) => {
                            payload["agent"] = json!(d.agent);
                            ApprovalFor::Subagent
                        }
                        Kind::Client(_) => {
                            payload["client_tool"] = json!(true);
                            ApprovalFor::Client
                        }
                        // Settled like a sandbox call: `sandbox_call` routes MCP names.
                        Kind::Mcp(o) => {
                            payload["mcp_server"] = json!(o.server.name);
                            ApprovalFor::Sandbox
                        }
                        _ => ApprovalFor::Sandbox,
                    };
                    waiting.push((n, batch.len(), c, Waits::Person(kind)));
                    batch.push(ev(EventType::AgentToolUse, payload));
                }
            }
        }
        if let Some((from, to, _)) = handoff {
            batch.push(ev(EventType::AgentHandoff, json!({"from": from, "to": to})));
        }
        let mut rows = vec![None; kinds.len()];
        if batch.is_empty() {
            return Ok(rows);
        }
        let mut tx = self.inner.db.begin().await?;
        if let Some((_, _, holder)) = handoff {
            sessions::set_holder(&mut tx, id, holder).await?;
        }
        // A cancel another process asked for refuses the step (this process's own shows in
        // the token before the model call).
        let written = self.append_running(&mut tx, id, run, &batch, true).await?;
        let now = time::OffsetDateTime::now_utc();
        // The row keeps the frame's mark, for the result event written when the client answers.
        let mark = tag.map(SubTag::value);
        let new: Vec<NewToolCall> = waiting
            .iter()
            .map(|(_, i, c, waits)| NewToolCall {
                call_id: &c.id,
                tool: &c.name,
                arguments: &c.arguments,
                // A call that waits for a person parks, as a deferrable one does.
                deferrable: match waits {
                    Waits::Client(t) => t.deferrable,
                    Waits::Person(_) => true,
                },
                seq: written[*i].seq,
                deadline: match waits {
                    Waits::Client(t) if !t.deferrable => Some(client_tools::deadline(t, now)),
                    _ => None,
                },
                subagent: mark.as_ref(),
                approval: match waits {
                    Waits::Client(_) => None,
                    Waits::Person(k) => Some(*k),
                },
            })
            .collect();
        let ids = tool_calls::insert(&mut tx, run, id, &new).await?;
        tx.commit().await?;
        for ((n, ..), row) in waiting.iter().zip(ids) {
            rows[*n] = Some(row);
        }
        Ok(rows)
    }

    /// One streamed model call: deltas go out live as `agent.text_delta`.
    pub(crate) async fn model_step(
        &self,
        client: &sandbox_agents_model::ModelClient,
        req: ChatRequest,
        id: SessionId,
        run: RunId,
        tag: Option<&SubTag>,
    ) -> Result<Completion, Stop> {
        // The model call's span, with the GenAI semantic conventions' attributes.
        let span = tracing::info_span!(
            "chat",
            otel.name = %format!("chat {}", req.model),
            otel.kind = "client",
            gen_ai.operation.name = "chat",
            gen_ai.provider.name = "openai",
            gen_ai.request.model = %req.model,
            gen_ai.usage.input_tokens = tracing::field::Empty,
            gen_ai.usage.output_tokens = tracing::field::Empty,
            gen_ai.response.finish_reasons = tracing::field::Empty,
            error.type = tracing::field::Empty,
        );
        let answered = self
            .stream_model(client, req, id, run, tag)
            .instrument(span.clone())
            .await;
        match &answered {
            Ok(c) => {
                span.record("gen_ai.usage.input_tokens", c.usage.input_tokens);
                span.record("gen_ai.usage.output_tokens", c.usage.output_tokens);
                span.record("gen_ai.response.finish_reasons", c.finish_reason.as_str());
            }
            Err(_) => {
                span.record("error.type", "model_error");
            }
        }
        answered
    }

    async fn stream_model(
        &self,
        client: &sandbox_agents_model::ModelClient,
        req: ChatRequest,
        id: SessionId,
        run: RunId,
        tag: Option<&SubTag>,
    ) -> Result<Completion, Stop> {
        let stream = client.stream(req);
        futures::pin_mut!(stream);
        let deltas = Deltas::start(self.inner.db.clone(), id, run, tag.cloned());
        while let Some(ev) = stream.next().await {
            match ev {
                Ok(StreamEvent::TextDelta(text)) => deltas.send(text),
                Ok(StreamEvent::ReasoningDelta(_)) => {}
                Ok(StreamEvent::Done(c)) => {
                    // Every delta is out before the step's events are written.
                    deltas.flush().await;
                    return Ok(c);
                }
                Err(e) => {
                    return Err(Stop::Outcome(Outcome::Failed(format!(
                        "the model request failed: {e}"
                    ))))
                }
            }
        }
        Err(Stop::Outcome(Outcome::Failed(
            "the model stream ended without an answer".into(),
        )))
    }

    /// Appends a step's events if the run is still running; `Gone` otherwise.
    pub(crate) async fn append_step(
        &self,
        id: SessionId,
        run: RunId,
        batch: &[NewEvent],
    ) -> Result<(), Stop> {
        if batch.is_empty() {
            return Ok(());
        }
        let mut tx = self.inner.db.begin().await?;
        self.append_running(&mut tx, id, run, batch, false).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Appends `batch` in `tx` while the run is running (checked by the append itself, after
    /// the session's lock: see [`events::append_guarded`]). Refused: `Gone` when the run is
    /// finished, `Cancelled` when `refuse_cancelled` and a cancel was asked for.
    async fn append_running(
        &self,
        tx: &mut sqlx::PgConnection,
        id: SessionId,
        run: RunId,
        batch: &[NewEvent],
        refuse_cancelled: bool,
    ) -> Result<Vec<SessionEvent>, Stop> {
        let guard = RunGuard {
            run,
            unless_cancel_requested: refuse_cancelled,
        };
        match events::append_guarded(tx, id, batch, Some(guard)).await? {
            Guarded::Appended(written) => Ok(written),
            // Why it was refused (rare: read only then).
            Guarded::Refused => match runs::get(&mut *tx, run).await? {
                Some(r) if r.status == RunStatus::Running && r.cancel_requested => {
                    Err(Stop::Outcome(Outcome::Cancelled))
                }
                _ => Err(Stop::Gone),
            },
        }
    }
}

/// A step's text deltas on their way out, in order, without holding up the model's stream:
/// a task publishes them (a notification each, one round trip), and when deltas arrive
/// faster than that it sends those waiting as one (their texts joined, which readers
/// concatenate anyway). The queue is unbounded, but it holds no more than the model's answer.
struct Deltas {
    queue: mpsc::UnboundedSender<String>,
    task: tokio::task::JoinHandle<()>,
}

impl Deltas {
    fn start(db: sandbox_agents_store::Db, id: SessionId, run: RunId, tag: Option<SubTag>) -> Self {
        let (queue, mut rx) = mpsc::unbounded_channel::<String>();
        let task = tokio::spawn(async move {
            while let Some(mut text) = rx.recv().await {
                while let Ok(more) = rx.try_recv() {
                    text.push_str(&more);
                }
                let mut p = Map::new();
                p.insert("text".into(), Value::from(text));
                let payload = SubTag::mark_map(tag.as_ref(), p);
                if let Err(e) = events::publish_ephemeral(
                    &db,
                    id,
                    Some(run),
                    EventType::AgentTextDelta,
                    payload,
                )
                .await
                {
                    tracing::debug!(error = %e, "a text delta could not be published");
                }
            }
        });
        Deltas { queue, task }
    }

    fn send(&self, text: String) {
        // The task ends only once the queue is closed, which `flush` does.
        let _ = self.queue.send(text);
    }

    /// Closes the queue and waits until everything sent is published.
    async fn flush(self) {
        drop(self.queue);
        if let Err(e) = self.task.await {
            tracing::debug!(error = %e, "the delta publisher failed");
        }
    }
}
