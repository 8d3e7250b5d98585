//! A turn's context: what the model is given before its first step. The session's (or the
//! agent's) instructions, the stored conversation, the prompt, the tools the agent's
//! capabilities and the turn's client tools offer, and, for a parked run that continues,
//! its turn so far with the answers it waited for, and what the session's skills add (their
//! section of the system prompt, `load_skill`); and what the turn accumulates from there
//! ([`Turn`]). The session's last compaction replaces the history it covers
//! (`compaction.rs`); memory changes what goes in here.

use crate::client_tools;
use crate::compaction::Compaction;
use crate::finish::Outcome;
use crate::park::Progress;
use crate::stop::Stop;
use crate::tools;
use crate::Runs;
use sandbox_agents_domain::agent::AgentRef;
use sandbox_agents_domain::skills::SessionSkills;
use sandbox_agents_domain::tools::ClientTool;
use sandbox_agents_domain::{ProjectId, RunId, SessionId};
use sandbox_agents_model::{Message, ModelClient, ToolSpec, Usage};
use sandbox_agents_store::{agents, runs, sessions, tool_calls};

/// What a turn accumulates: the messages it added to the conversation, its steps and usage.
#[derive(Default)]
pub(crate) struct Turn {
    pub added: Vec<Message>,
    pub steps: i32,
    pub usage: Usage,
    pub model: String,
    pub agent: String,
    /// Active seconds before this process took the run (it was parked).
    pub earlier_active: f64,
}

/// What a turn's steps are made from.
pub(crate) struct Context {
    pub client: ModelClient,
    /// The turn's client tools (the agent's merged with the message's).
    pub client_tools: Vec<ClientTool>,
    /// Every tool offered: the sandbox tools, then the client tools.
    pub specs: Vec<ToolSpec>,
    /// The conversation so far, this turn's prompt and (when resumed) steps included.
    pub messages: Vec<Message>,
    pub reasoning_effort: Option<String>,
    /// The turn's step limit.
    pub max: i64,
    /// A parked run that continues here (its steps so far are in `turn`).
    pub resumed: bool,
    /// Which part of `messages` stands for the conversation, once compacted.
    pub compaction: Compaction,
}

impl Runs {
    /// Reads the session, its agent and the run, and builds the turn's context; fills in
    /// what `turn` records about the model, the agent and (when resumed) its progress.
    pub(crate) async fn context(
        &self,
        project: ProjectId,
        id: SessionId,
        run: RunId,
        turn: &mut Turn,
    ) -> Result<Context, Stop> {
        let db = &self.inner.db;
        let session = sessions::get(db, project, id).await?;
        let agent = agents::get(db, project, &AgentRef::Id(session.agent_id)).await?;
        let record = runs::get(db, run).await?.ok_or(Stop::Gone)?;
        turn.agent = agent.slug.to_string();
        turn.model = session
            .model
            .clone()
            .or_else(|| agent.spec.model.clone())
            .unwrap_or_else(|| self.inner.sessions.settings().default_model.clone());
        let client = self
            .inner
            .models
            .for_transport(agent.spec.transport)
            .map_err(|e| Stop::Outcome(Outcome::Failed(e)))?
            .clone();
        let client_tools = record.client_tools.0.clone();
        let skills = sessions::skills(db, id).await?;
        let mut specs = tools::specs(agent.spec.capabilities.as_deref(), skills.as_ref());
        specs.extend(client_tools.iter().map(client_tools::spec));
        let mut messages = Vec::new();
        let instructions = system_prompt(
            session
                .instructions
                .clone()
                .unwrap_or_else(|| agent.spec.instructions.clone()),
            skills.as_ref(),
        );
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
        let mut resumed = false;
        // A parked run continues where it stopped: its turn so far, then the answers.
        if let Some(p) = Progress::of(&record).map_err(|e| {
            Stop::Outcome(Outcome::Failed(sandbox_agents_errors::internal_reference(
                &*e,
            )))
        })? {
            turn.steps = record.turns;
            turn.usage = p.usage;
            turn.earlier_active = p.active_seconds;
            turn.added = p.messages;
            for c in tool_calls::by_ids(db, &p.awaiting).await? {
                turn.added.push(client_tools::answer(&c));
            }
            messages.extend(turn.added.iter().cloned());
            resumed = true;
        }
        let compaction = self
            .resume_compaction(id, agent.spec.capabilities.as_deref(), &mut messages)
            .await?;
        let reasoning_effort = agent
            .spec
            .reasoning_effort
            .and_then(|r| serde_json::to_value(r).ok())
            .and_then(|v| v.as_str().map(str::to_owned));
        Ok(Context {
            client,
            client_tools,
            specs,
            messages,
            reasoning_effort,
            max,
            resumed,
            compaction,
        })
    }
}

/// The instructions, then what the boot's skills add: a workspace tree's docs and the skills
/// section (see `SessionSkills::prompt_section`).
fn system_prompt(instructions: String, skills: Option<&SessionSkills>) -> String {
    let mut parts = vec![instructions];
    if let Some(s) = skills {
        parts.extend(s.workspace_docs.clone());
        parts.extend(s.prompt_section());
    }
    parts.retain(|p| !p.trim().is_empty());
    parts.join("\n\n")
}
