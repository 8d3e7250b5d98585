//! The worker that drives one run: wake the sandbox if it is asleep, then call the model,
//! run the tools it asks for, and write every step to the log until the model answers
//! without tool calls, the turn limit is reached, the model fails, or the run is cancelled.
//!
//! Each step's events are appended only while the run is still `running` (checked in the
//! appending transaction), so nothing of this run follows its terminal event when somebody
//! else (an interrupt that gave up waiting) finished it.

use super::usage::turn_usage;
use super::{tools, Outcome};
use crate::sessions::Runtime;
use futures::StreamExt;
use sandbox_agents_domain::agent::AgentRef;
use sandbox_agents_domain::event::{EventType, NewEvent};
use sandbox_agents_domain::{ProjectId, RunId, SessionId};
use sandbox_agents_model::{ChatRequest, Completion, Message, StreamEvent, ToolSpec, Usage};
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
}

/// Why the loop stopped early, from inside a step.
enum Stop {
    Outcome(Outcome),
    /// The run was finished by someone else: write nothing more.
    Gone,
}

impl From<crate::RuntimeError> for Stop {
    fn from(e: crate::RuntimeError) -> Self {
        Stop::Outcome(Outcome::Failed(format!("internal error: {e}")))
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

impl Runtime {
    /// Drives the run to its terminal event. Never fails: whatever goes wrong ends the run
    /// with `session.status_error`.
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
            r = self.run_loop(project, id, run, wake, &token, &mut turn) => r,
            _ = shutdown.cancelled() => Err(Stop::Outcome(Outcome::Failed("the server shut down during this turn".into()))),
        };
        let outcome = match outcome {
            Ok(o) | Err(Stop::Outcome(o)) => o,
            Err(Stop::Gone) => return,
        };
        let outcome = if token.is_cancelled() && !matches!(outcome, Outcome::Completed(_)) {
            Outcome::Cancelled
        } else {
            outcome
        };
        let usage = turn_usage(
            &turn.usage,
            started.elapsed().as_secs_f64(),
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
            tracing::error!(run.id = %run, error = %e, "could not record the end of a run; the next start fails it");
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

    async fn run_loop(
        &self,
        project: ProjectId,
        id: SessionId,
        run: RunId,
        wake: bool,
        token: &CancellationToken,
        turn: &mut Turn,
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
        let specs = tools::specs(agent.spec.capabilities.as_deref());
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
        let reasoning_effort = agent
            .spec
            .reasoning_effort
            .and_then(|r| serde_json::to_value(r).ok())
            .and_then(|v| v.as_str().map(str::to_owned));
        for step in 1..=max {
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
            for c in &completion.tool_calls {
                batch.push(NewEvent::new(
                    EventType::AgentToolUse,
                    Some(run),
                    json!({"tool": c.name, "call_id": c.id, "arguments": c.arguments}),
                ));
            }
            self.append_step(id, run, &batch).await?;
            let assistant = Message::from_completion(&completion);
            if completion.tool_calls.is_empty() {
                turn.added.push(assistant);
                return Ok(Outcome::Completed(completion.text));
            }
            let results = self
                .run_tools(project, id, run, &specs, &completion, token)
                .await;
            // The assistant message and one answer per call go in together, so the stored
            // conversation never holds a call without its result.
            let (answers, stopped) = match results {
                Ok(r) => (r, None),
                Err((r, stop)) => (r, Some(stop)),
            };
            messages.push(assistant.clone());
            messages.extend(answers.iter().cloned());
            turn.added.push(assistant);
            turn.added.extend(answers);
            if let Some(stop) = stopped {
                return Err(stop);
            }
            if step == max {
                return Ok(Outcome::MaxTurns(max));
            }
        }
        Ok(Outcome::MaxTurns(max))
    }

    /// Runs the step's tool calls in order, each between its `agent.tool_use` (already
    /// written) and its `agent.tool_result`. On cancellation the calls not answered get a
    /// note, so the conversation stays well formed.
    async fn run_tools(
        &self,
        project: ProjectId,
        id: SessionId,
        run: RunId,
        specs: &[ToolSpec],
        completion: &Completion,
        token: &CancellationToken,
    ) -> Result<Vec<Message>, (Vec<Message>, Stop)> {
        let mut out = Vec::new();
        let mut calls = completion.tool_calls.iter();
        for c in calls.by_ref() {
            let result = tokio::select! {
                r = self.run_tool(project, id, specs, &c.name, &c.arguments) => r,
                _ = token.cancelled() => {
                    out.push(Message::tool(c.id.clone(), "The turn was interrupted before this tool finished."));
                    break;
                }
            };
            let ev = NewEvent::new(
                EventType::AgentToolResult,
                Some(run),
                json!({"tool": c.name, "call_id": c.id, "output": result}),
            );
            out.push(Message::tool(c.id.clone(), result));
            if let Err(stop) = self.append_step(id, run, &[ev]).await {
                return Err((out, stop));
            }
        }
        if token.is_cancelled() {
            for c in calls {
                out.push(Message::tool(
                    c.id.clone(),
                    "The turn was interrupted before this tool ran.",
                ));
            }
            return Err((out, Stop::Outcome(Outcome::Cancelled)));
        }
        Ok(out)
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
    async fn check_cancelled(&self, run: RunId, token: &CancellationToken) -> Result<(), Stop> {
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
