//! The worker that drives one run: wake the sandbox if it is asleep, then call the model,
//! run the tools it asks for, and write every step to the log until the model answers
//! without tool calls, the turn limit is reached, the model fails, or the run is cancelled.
//!
//! Each step's events are appended only while the run is still `running` (checked in the
//! appending transaction), so nothing of this run follows its terminal event when somebody
//! else (an interrupt that gave up waiting) finished it.

use super::client_tools;
use super::park::{Parked, Progress};
use super::usage::turn_usage;
use super::{tools, Outcome};
use crate::sessions::Runtime;
use futures::StreamExt;
use sandbox_agents_domain::agent::AgentRef;
use sandbox_agents_domain::event::{EventType, NewEvent};
use sandbox_agents_domain::tools::ClientTool;
use sandbox_agents_domain::{ProjectId, RunId, SessionId};
use sandbox_agents_model::{
    ChatRequest, Completion, Message, StreamEvent, ToolCall, ToolSpec, Usage,
};
use sandbox_agents_store::tool_calls::{self, NewToolCall};
use sandbox_agents_store::{agents, events, runs, sessions};
use serde_json::{json, Map, Value};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// What a turn accumulates: the messages it added to the conversation, its steps and usage.
#[derive(Default)]
struct Turn {
    added: Vec<Message>,
    steps: i32,
    usage: Usage,
    model: String,
    agent: String,
    /// Active seconds before this process took the run (it was parked).
    earlier_active: f64,
}

/// Why the loop stopped early, from inside a step.
pub(crate) enum Stop {
    Outcome(Outcome),
    /// The run was finished by someone else: write nothing more.
    Gone,
    /// The run parked on deferrable calls: write nothing more; an answer continues it.
    Parked,
}

/// A failure inside the loop fails the run; what the run's `error` and its terminal event
/// say is [`crate::RuntimeError::user_message`]: never a database or backend message.
impl From<crate::RuntimeError> for Stop {
    fn from(e: crate::RuntimeError) -> Self {
        Stop::Outcome(Outcome::Failed(e.user_message()))
    }
}

impl From<sqlx::Error> for Stop {
    fn from(e: sqlx::Error) -> Self {
        crate::RuntimeError::from(e).into()
    }
}

impl From<sandbox_agents_store::Error> for Stop {
    fn from(e: sandbox_agents_store::Error) -> Self {
        crate::RuntimeError::from(e).into()
    }
}

/// How a step's call is handled.
enum Kind<'a> {
    /// A sandbox tool (or an unknown name, which its runner answers with an error).
    Sandbox,
    Client(&'a ClientTool),
}

impl Runtime {
    /// Drives the run to its terminal event, or until it parks. Never fails: whatever goes
    /// wrong ends the run with `session.status_error`.
    pub(crate) async fn drive(
        &self,
        project: ProjectId,
        id: SessionId,
        run: RunId,
        wake: bool,
        token: CancellationToken,
    ) {
        let started = Instant::now();
        let mut turn = Turn::default();
        let shutdown = self.inner.shutdown.clone();
        let outcome = tokio::select! {
            r = self.run_loop(project, id, run, wake, &token, &mut turn, started) => r,
            _ = shutdown.cancelled() => Err(Stop::Outcome(Outcome::Failed("the server shut down during this turn".into()))),
        };
        let outcome = match outcome {
            Ok(o) | Err(Stop::Outcome(o)) => o,
            Err(Stop::Gone) | Err(Stop::Parked) => return,
        };
        let outcome = if token.is_cancelled() && !matches!(outcome, Outcome::Completed(_)) {
            Outcome::Cancelled
        } else {
            outcome
        };
        let usage = turn_usage(
            &turn.usage,
            turn.earlier_active + started.elapsed().as_secs_f64(),
            &turn.model,
            &turn.agent,
        );
        let conversation = match self.saved_conversation(id, run, &turn.added).await {
            Ok(c) => Some(c),
            Err(e) => {
                tracing::warn!(run.id = %run, error = %e, "could not read the conversation; it is kept as it was");
                None
            }
        };
        if let Err(e) = self
            .finish_run(
                id,
                run,
                &outcome,
                turn.steps,
                &usage,
                conversation.as_deref(),
            )
            .await
        {
            tracing::error!(run.id = %run, error = %e, "could not record the end of a run; the recovery sweep fails it");
        }
    }

    /// The stored history plus this turn's prompt and messages.
    async fn saved_conversation(
        &self,
        id: SessionId,
        run: RunId,
        added: &[Message],
    ) -> crate::Result<Vec<Value>> {
        let db = &self.inner.db;
        let mut c = runs::conversation(db, id).await?;
        let prompt = runs::get(db, run)
            .await?
            .map(|r| r.prompt)
            .unwrap_or_default();
        c.push(serde_json::to_value(Message::user(prompt)).expect("a message serialises"));
        c.extend(
            added
                .iter()
                .map(|m| serde_json::to_value(m).expect("a message serialises")),
        );
        Ok(c)
    }

    #[allow(clippy::too_many_arguments)]
    async fn run_loop(
        &self,
        project: ProjectId,
        id: SessionId,
        run: RunId,
        wake: bool,
        token: &CancellationToken,
        turn: &mut Turn,
        started: Instant,
    ) -> Result<Outcome, Stop> {
        let db = &self.inner.db;
        if wake {
            self.wake(project, id).await?;
        }
        let session = sessions::get(db, project, id).await?;
        let agent = agents::get(db, project, &AgentRef::Id(session.agent_id.into())).await?;
        let record = runs::get(db, run).await?.ok_or(Stop::Gone)?;
        turn.agent = agent.slug.to_string();
        turn.model = session
            .model
            .clone()
            .or_else(|| agent.spec.model.clone())
            .unwrap_or_else(|| self.inner.settings.default_model.clone());
        let client = self
            .inner
            .models
            .for_transport(agent.spec.transport)
            .map_err(|e| Stop::Outcome(Outcome::Failed(e)))?
            .clone();
        let client_tools = record.client_tools.0.clone();
        let mut specs = tools::specs(agent.spec.capabilities.as_deref());
        specs.extend(client_tools.iter().map(client_tools::spec));
        let mut messages = Vec::new();
        let instructions = session
            .instructions
            .clone()
            .unwrap_or_else(|| agent.spec.instructions.clone());
        if !instructions.trim().is_empty() {
            messages.push(Message::system(instructions));
        }
        for m in runs::conversation(db, id).await? {
            match serde_json::from_value::<Message>(m) {
                Ok(m) => messages.push(m),
                Err(e) => {
                    tracing::warn!(error = %e, "skipping a stored message that does not parse")
                }
            }
        }
        messages.push(Message::user(record.prompt.clone()));
        let max = i64::from(record.max_turns);
        // A parked run continues where it stopped: its turn so far, then the answers.
        if let Some(p) = Progress::of(&record)
            .map_err(|e| Stop::Outcome(Outcome::Failed(crate::error::internal_reference(&*e))))?
        {
            turn.steps = record.turns;
            turn.usage = p.usage;
            turn.earlier_active = p.active_seconds;
            turn.added = p.messages;
            for c in tool_calls::by_ids(db, &p.awaiting).await? {
                turn.added.push(client_tools::answer(&c));
            }
            messages.extend(turn.added.iter().cloned());
            if i64::from(turn.steps) >= max {
                return Ok(Outcome::MaxTurns(max));
            }
        }
        let reasoning_effort = agent
            .spec
            .reasoning_effort
            .and_then(|r| serde_json::to_value(r).ok())
            .and_then(|v| v.as_str().map(str::to_owned));
        for step in (i64::from(turn.steps) + 1)..=max {
            self.check_cancelled(run, token).await?;
            let mut req =
                ChatRequest::new(turn.model.clone(), messages.clone()).tools(specs.clone());
            req.reasoning_effort = reasoning_effort.clone();
            let completion = tokio::select! {
                c = self.model_step(&client, req, id, run) => c?,
                _ = token.cancelled() => return Err(Stop::Outcome(Outcome::Cancelled)),
            };
            turn.steps += 1;
            turn.usage += completion.usage;
            let kinds: Vec<Kind> = completion
                .tool_calls
                .iter()
                .map(|c| match client_tools.iter().find(|t| t.name == c.name) {
                    Some(t) => Kind::Client(t),
                    None => Kind::Sandbox,
                })
                .collect();
            let call_rows = self.write_step(id, run, &completion, &kinds).await?;
            let assistant = Message::from_completion(&completion);
            if completion.tool_calls.is_empty() {
                turn.added.push(assistant);
                return Ok(Outcome::Completed(completion.text));
            }
            let (answers, deferrable, stopped) = self
                .run_tools(
                    project,
                    id,
                    run,
                    &specs,
                    &completion,
                    &kinds,
                    &call_rows,
                    token,
                )
                .await;
            // The assistant message and the answers go in together, so the stored
            // conversation never holds a call without its result.
            messages.push(assistant.clone());
            messages.extend(answers.iter().cloned());
            turn.added.push(assistant);
            turn.added.extend(answers);
            if let Some(stop) = stopped {
                return Err(stop);
            }
            if !deferrable.is_empty() {
                let progress = Progress {
                    messages: turn.added.clone(),
                    awaiting: deferrable.clone(),
                    usage: turn.usage,
                    active_seconds: turn.earlier_active + started.elapsed().as_secs_f64(),
                    model: turn.model.clone(),
                    agent: turn.agent.clone(),
                };
                match self
                    .park(id, run, &deferrable, progress, turn.steps)
                    .await?
                {
                    Parked::Yes => return Err(Stop::Parked),
                    Parked::Answered(calls) => {
                        let more: Vec<Message> = calls.iter().map(client_tools::answer).collect();
                        messages.extend(more.iter().cloned());
                        turn.added.extend(more);
                    }
                }
            }
            if step == max {
                return Ok(Outcome::MaxTurns(max));
            }
        }
        Ok(Outcome::MaxTurns(max))
    }

    /// Writes a model step: its thinking and message, an `agent.tool_use` for each sandbox
    /// call and an `agent.client_tool_call` for each client call, whose pending rows go in
    /// the same transaction. Returns the client calls' row ids, by call index.
    async fn write_step(
        &self,
        id: SessionId,
        run: RunId,
        completion: &Completion,
        kinds: &[Kind<'_>],
    ) -> Result<Vec<Option<i64>>, Stop> {
        let mut batch = Vec::new();
        if let Some(r) = completion.reasoning.as_ref().filter(|r| !r.is_empty()) {
            batch.push(NewEvent::new(
                EventType::AgentThinking,
                Some(run),
                json!({"text": r}),
            ));
        }
        if !completion.text.is_empty() {
            batch.push(NewEvent::new(
                EventType::AgentMessage,
                Some(run),
                json!({"text": completion.text}),
            ));
        }
        // (index in the batch, the call, its tool) for the client calls.
        let mut client: Vec<(usize, &ToolCall, &ClientTool)> = Vec::new();
        for (c, kind) in completion.tool_calls.iter().zip(kinds) {
            match kind {
                Kind::Sandbox => batch.push(NewEvent::new(
                    EventType::AgentToolUse,
                    Some(run),
                    json!({"tool": c.name, "call_id": c.id, "arguments": c.arguments}),
                )),
                Kind::Client(t) => {
                    client.push((batch.len(), c, t));
                    batch.push(NewEvent::new(
                        EventType::AgentClientToolCall,
                        Some(run),
                        json!({"tool": c.name, "call_id": c.id, "arguments": c.arguments, "deferrable": t.deferrable}),
                    ));
                }
            }
        }
        let mut rows = vec![None; kinds.len()];
        if batch.is_empty() {
            return Ok(rows);
        }
        let mut tx = self.inner.db.begin().await?;
        match runs::get(&mut *tx, run).await? {
            Some(r) if r.status == "running" => {}
            _ => return Err(Stop::Gone),
        }
        let written = events::append(&mut tx, id, &batch).await?;
        let now = time::OffsetDateTime::now_utc();
        let new: Vec<NewToolCall> = client
            .iter()
            .map(|(i, c, t)| NewToolCall {
                call_id: &c.id,
                tool: &c.name,
                arguments: &c.arguments,
                deferrable: t.deferrable,
                seq: written[*i].seq,
                deadline: (!t.deferrable).then(|| client_tools::deadline(t, now)),
            })
            .collect();
        let ids = tool_calls::insert(&mut tx, run, id, &new).await?;
        tx.commit().await?;
        let mut ids = ids.into_iter();
        for (slot, kind) in rows.iter_mut().zip(kinds) {
            if matches!(kind, Kind::Client(_)) {
                *slot = ids.next();
            }
        }
        Ok(rows)
    }

    /// Runs the step's calls: the sandbox ones in order (each between its `agent.tool_use`,
    /// already written, and its `agent.tool_result`), then waits for the ordinary client
    /// answers. Returns one answer per call except the deferrable client calls, whose row ids
    /// come back for parking (§9.14: ordinary answers first, then park). On a stop, calls
    /// without an answer get a note, so the conversation stays well formed.
    #[allow(clippy::too_many_arguments)]
    async fn run_tools(
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

    /// One streamed model call: deltas go out live as `agent.text_delta`.
    async fn model_step(
        &self,
        client: &sandbox_agents_model::ModelClient,
        req: ChatRequest,
        id: SessionId,
        run: RunId,
    ) -> Result<Completion, Stop> {
        let stream = client.stream(req);
        futures::pin_mut!(stream);
        while let Some(ev) = stream.next().await {
            match ev {
                Ok(StreamEvent::TextDelta(text)) => {
                    let mut p = Map::new();
                    p.insert("text".into(), Value::from(text));
                    if let Err(e) = events::publish_ephemeral(
                        &self.inner.db,
                        id,
                        Some(run),
                        EventType::AgentTextDelta,
                        p,
                    )
                    .await
                    {
                        tracing::debug!(error = %e, "a text delta could not be published");
                    }
                }
                Ok(StreamEvent::ReasoningDelta(_)) => {}
                Ok(StreamEvent::Done(c)) => return Ok(c),
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
    async fn append_step(&self, id: SessionId, run: RunId, batch: &[NewEvent]) -> Result<(), Stop> {
        if batch.is_empty() {
            return Ok(());
        }
        let mut tx = self.inner.db.begin().await?;
        match runs::get(&mut *tx, run).await? {
            Some(r) if r.status == "running" => {}
            _ => return Err(Stop::Gone),
        }
        events::append(&mut tx, id, batch).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Between steps: a local cancel, or one another process recorded.
    pub(crate) async fn check_cancelled(
        &self,
        run: RunId,
        token: &CancellationToken,
    ) -> Result<(), Stop> {
        if token.is_cancelled() {
            return Err(Stop::Outcome(Outcome::Cancelled));
        }
        match runs::get(&self.inner.db, run).await? {
            Some(r) if r.status != "running" => Err(Stop::Gone),
            Some(r) if r.cancel_requested => Err(Stop::Outcome(Outcome::Cancelled)),
            None => Err(Stop::Gone),
            Some(_) => Ok(()),
        }
    }

    /// Wakes an asleep session for this run: boot (written as `session.status_running`), then
    /// wait until it is running. A failed boot fails the run.
    async fn wake(&self, project: ProjectId, id: SessionId) -> Result<(), Stop> {
        let db = &self.inner.db;
        sessions::mark_provisioning(db, project, id).await?;
        self.boot(id).await?;
        let deadline = Instant::now() + Duration::from_secs(300);
        loop {
            let s = sessions::get(db, project, id).await?;
            match s.status.as_str() {
                "running" => return Ok(()),
                "provisioning" if Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(100)).await
                }
                _ => {
                    return Err(Stop::Outcome(Outcome::Failed(s.error.unwrap_or_else(
                        || format!("the sandbox did not start (it is {})", s.status),
                    ))))
                }
            }
        }
    }
}
