//! The agent that speaks in a frame of the loop: the session's agent, the agent a handoff
//! gave the conversation to, or a subagent called as a tool. Each speaks with its own
//! instructions, model (and transport), sandbox tools (its capabilities), client tools and
//! subagents; all of them work in the session's one sandbox.
//!
//! Rules:
//! * the session's own agent keeps the session's overrides (`model`, `instructions`) and is
//!   the one told about the boot's skills (they come from its `skills_source`) and given the
//!   memory summary the boot staged (its memory; a subagent has none of its own here);
//! * another agent's client tools are its own plus the turn's (those the message declared),
//!   so a caller's tools answer wherever the conversation is;
//! * subagents are offered while the frame is less than [`MAX_DEPTH`] deep (handoffs and
//!   tool calls both count), handoffs only to the frame that holds the conversation, and
//!   the holder after a handoff is offered the way back (`transfer_to_<who handed over>`).
//!   A name already taken (a client tool, a sandbox tool, an earlier subagent) wins.
//! * the agent's permissions hold wherever it speaks: a tool, group or subagent it denies is
//!   never offered; one it asks about waits for a person (`frame.rs`, `approvals.rs`). The
//!   way back after a handoff is never withheld.

use crate::client_tools;
use crate::finish::Outcome;
use crate::stop::Stop;
use crate::tools;
use crate::Runs;
use sandbox_agents_domain::agent::{AgentRecord, AgentRef, Capability, DEFAULT_SUBAGENT_MAX_STEPS};
use sandbox_agents_domain::permissions::{self, PermissionMode, Permissions};
use sandbox_agents_domain::skills::SessionSkills;
use sandbox_agents_domain::tools::{ClientTool, SubagentMode};
use sandbox_agents_domain::ProjectId;
use sandbox_agents_model::{Message, ModelClient, ToolSpec};
use sandbox_agents_store::agents;
use sandbox_agents_store::sessions::SessionRecord;
use serde_json::json;

/// How deep subagents go below the session's agent: a frame this deep is offered none.
pub(crate) const MAX_DEPTH: usize = 3;

/// The longest function name providers accept.
const MAX_TOOL_NAME: usize = 64;

/// A tool that reaches another agent.
#[derive(Clone, Debug)]
pub(crate) struct Delegate {
    /// The function name the model calls.
    pub name: String,
    /// The agent's slug.
    pub agent: String,
    pub mode: SubagentMode,
}

/// An agent as one frame of the loop speaks with it.
pub(crate) struct Speaker {
    pub slug: String,
    pub model: String,
    pub client: ModelClient,
    pub reasoning_effort: Option<String>,
    /// The system prompt (empty: none is sent).
    pub system: String,
    pub client_tools: Vec<ClientTool>,
    pub delegates: Vec<Delegate>,
    /// The MCP tools it is offered (`mcp.rs`).
    pub mcp: Vec<crate::mcp::McpOffer>,
    /// Everything offered: sandbox tools, client tools, MCP tools, then delegates.
    pub specs: Vec<ToolSpec>,
    /// How deep below the session's agent this frame is.
    pub depth: usize,
    /// The agent's capabilities (null: the default set), for compaction.
    pub capabilities: Option<Vec<Capability>>,
    /// Steps each subagent this agent calls as a tool may take (its `subagent_max_steps`).
    pub subagent_max_steps: i64,
    /// The agent's permissions (what it denies is not in `specs`).
    pub permissions: Permissions,
}

/// Where a speaker speaks.
pub(crate) struct Seat<'a> {
    pub session: &'a SessionRecord,
    /// The run it speaks in (for the events of its MCP servers).
    pub run: sandbox_agents_domain::RunId,
    /// The session's own agent (whose overrides and skills it is).
    pub root: &'a AgentRecord,
    /// The run's client tools (the session agent's merged with the message's).
    pub run_tools: &'a [ClientTool],
    pub skills: Option<&'a SessionSkills>,
    /// The memory section the session's agent is given.
    pub memory: Option<&'a str>,
    pub depth: usize,
    /// `Some(who handed over)` for the holder of the conversation after a handoff, `Some("")`
    /// for the session's own agent holding it, `None` for a subagent called as a tool (which
    /// holds no conversation, so it is offered no handoff).
    pub holds: Option<&'a str>,
}

impl Speaker {
    /// The model's view: the system prompt, then `messages`.
    pub fn view(&self, messages: &[Message]) -> Vec<Message> {
        let mut out = Vec::with_capacity(messages.len() + 1);
        if self.has_system() {
            out.push(Message::system(self.system.clone()));
        }
        out.extend(messages.iter().cloned());
        out
    }

    /// Whether [`Speaker::view`] starts with a system prompt.
    pub fn has_system(&self) -> bool {
        !self.system.trim().is_empty()
    }

    /// `messages` from a view, without its system prompt.
    pub fn strip_system(&self, mut view: Vec<Message>) -> Vec<Message> {
        if self.has_system() && !view.is_empty() {
            view.remove(0);
        }
        view
    }

    pub fn client_tool(&self, name: &str) -> Option<&ClientTool> {
        self.client_tools.iter().find(|t| t.name == name)
    }

    pub fn mcp_tool(&self, name: &str) -> Option<&crate::mcp::McpOffer> {
        self.mcp.iter().find(|o| o.name == name)
    }

    pub fn delegate(&self, name: &str) -> Option<&Delegate> {
        self.delegates.iter().find(|d| d.name == name)
    }

    /// Whether a call of `name` (a sandbox or client tool's name, or a subagent's slug) with
    /// these arguments waits for a person.
    pub fn asks(&self, name: &str, tool: &str, arguments: &str) -> bool {
        permissions::decide(
            permissions::permission_for(&self.permissions, name),
            tool,
            arguments,
        ) == PermissionMode::Ask
    }

    fn denies(perms: &Permissions, name: &str) -> bool {
        permissions::permission_for(perms, name).is_some_and(|p| p.mode == PermissionMode::Deny)
    }
}

impl Runs {
    /// Loads the agent `slug` names and seats it: `Ok(None)` when the project has no such
    /// agent any more (its tool is then left out, or the conversation returns to the
    /// session's agent).
    pub(crate) async fn speaker_by_slug(
        &self,
        project: ProjectId,
        slug: &str,
        seat: &Seat<'_>,
    ) -> Result<Option<Speaker>, Stop> {
        if slug == seat.root.slug.as_str() {
            return self
                .speaker(project, seat.root.clone(), seat)
                .await
                .map(Some);
        }
        let slug = AgentRef::Slug(slug.to_owned());
        match agents::resolve(&self.inner.db, project, &slug, seat.session.pins()).await {
            Ok(a) => self.speaker(project, a, seat).await.map(Some),
            Err(sandbox_agents_store::Error::NotFound) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// Seats `agent`: its model and client, its system prompt and every tool it is offered.
    pub(crate) async fn speaker(
        &self,
        project: ProjectId,
        agent: AgentRecord,
        seat: &Seat<'_>,
    ) -> Result<Speaker, Stop> {
        let is_root = agent.id == seat.root.id;
        let default_model = || self.inner.sessions.settings().default_model.clone();
        let model = if is_root {
            seat.session
                .model
                .clone()
                .or_else(|| agent.spec.model.clone())
        } else {
            agent.spec.model.clone()
        }
        .unwrap_or_else(default_model);
        let client = self
            .inner
            .models
            .for_transport(agent.spec.transport)
            .map_err(|e| Stop::Outcome(Outcome::Failed(e)))?
            .clone();
        let instructions = if is_root {
            seat.session
                .instructions
                .clone()
                .unwrap_or_else(|| agent.spec.instructions.clone())
        } else {
            agent.spec.instructions.clone()
        };
        let skills = seat.skills.filter(|_| is_root);
        let memory = seat.memory.filter(|_| is_root);
        let system = system_prompt(instructions, skills, memory);
        let client_tools = if is_root {
            seat.run_tools.to_vec()
        } else {
            let turn_only: Vec<ClientTool> = seat
                .run_tools
                .iter()
                .filter(|t| !seat.root.spec.client_tools.contains(t))
                .cloned()
                .collect();
            client_tools::merge(&agent.spec.client_tools, &turn_only)
        };
        let perms = &agent.spec.permissions;
        let mut specs = tools::specs(agent.spec.capabilities.as_deref(), skills);
        specs.retain(|s| !Speaker::denies(perms, &s.name));
        // A sandbox tool's name means that tool (saves refuse a clash; a subagent's own
        // client tool may still meet the `python` of a capability): the client tool yields.
        let mut client_tools = client_tools;
        client_tools.retain(|t| {
            let free = !specs.iter().any(|s| s.name == t.name);
            if !free {
                tracing::warn!(tool = %t.name, "a client tool's name is a sandbox tool's; it is not offered");
            }
            free && !Speaker::denies(perms, &t.name)
        });
        specs.extend(client_tools.iter().map(client_tools::spec));
        // The session narrows its own agent's servers (its subagents keep theirs).
        let servers: Vec<_> = agent
            .spec
            .mcp_servers
            .iter()
            .filter(|s| {
                !is_root
                    || seat
                        .session
                        .mcp_servers
                        .as_ref()
                        .is_none_or(|names| names.contains(&s.name))
            })
            .cloned()
            .collect();
        let (mcp, mcp_specs) = self
            .mcp_offers(
                project,
                seat.session.id,
                seat.run,
                &servers,
                &specs,
                |name| Speaker::denies(perms, name),
            )
            .await?;
        specs.extend(mcp_specs);
        let mut delegates = Vec::new();
        let mut offer = |name: String,
                         agent: &str,
                         mode,
                         description: String,
                         specs: &mut Vec<ToolSpec>| {
            let name: String = name.chars().take(MAX_TOOL_NAME).collect();
            if specs.iter().any(|s| s.name == name) {
                tracing::warn!(tool = %name, "a subagent's tool name is taken by another tool; it is not offered");
                return;
            }
            let parameters = match mode {
                SubagentMode::Tool => json!({
                    "type": "object",
                    "properties": {"input": {"type": "string", "description": "The task, with everything needed to do it: the agent sees nothing else of this conversation."}},
                    "required": ["input"]
                }),
                SubagentMode::Handoff => json!({"type": "object", "properties": {}}),
            };
            specs.push(ToolSpec {
                name: name.clone(),
                description,
                parameters,
            });
            delegates.push(Delegate {
                name,
                agent: agent.to_owned(),
                mode,
            });
        };
        if let Some(back) = seat.holds.filter(|b| !b.is_empty()) {
            offer(
                format!("transfer_to_{back}"),
                back,
                SubagentMode::Handoff,
                format!("Hand the conversation back to the agent '{back}', which handed it to you, once your part is done or the request is not yours to answer."),
                &mut specs,
            );
        }
        if seat.depth < MAX_DEPTH {
            for s in &agent.spec.subagents {
                if (s.mode == SubagentMode::Handoff && seat.holds.is_none())
                    || Speaker::denies(perms, &s.agent)
                {
                    continue;
                }
                let description = if s.description.is_empty() {
                    let slug = AgentRef::Slug(s.agent.clone());
                    match agents::resolve(&self.inner.db, project, &slug, seat.session.pins()).await
                    {
                        Ok(a) => a.spec.description,
                        Err(sandbox_agents_store::Error::NotFound) => continue,
                        Err(e) => return Err(e.into()),
                    }
                } else {
                    s.description.clone()
                };
                let (name, description) = match s.mode {
                    SubagentMode::Tool => (
                        s.tool_name.clone().unwrap_or_else(|| s.agent.clone()),
                        if description.is_empty() {
                            format!("Ask the agent '{}' to do a task; it answers with its result.", s.agent)
                        } else {
                            description
                        },
                    ),
                    SubagentMode::Handoff => (
                        s.tool_name
                            .clone()
                            .unwrap_or_else(|| format!("transfer_to_{}", s.agent)),
                        format!(
                            "Hand the conversation to the agent '{}', which continues it from here and answers the next messages.{}",
                            s.agent,
                            if description.is_empty() { String::new() } else { format!(" It is for: {description}") }
                        ),
                    ),
                };
                offer(name, &s.agent, s.mode, description, &mut specs);
            }
        }
        let reasoning_effort = agent
            .spec
            .reasoning_effort
            .and_then(|r| serde_json::to_value(r).ok())
            .and_then(|v| v.as_str().map(str::to_owned));
        Ok(Speaker {
            slug: agent.slug.to_string(),
            model,
            client,
            reasoning_effort,
            system,
            client_tools,
            mcp,
            delegates,
            specs,
            depth: seat.depth,
            capabilities: agent.spec.capabilities.clone(),
            subagent_max_steps: agent
                .spec
                .subagent_max_steps
                .unwrap_or(DEFAULT_SUBAGENT_MAX_STEPS),
            permissions: agent.spec.permissions.clone(),
        })
    }
}

/// The instructions, then what the boot's skills add (a workspace tree's docs and the skills
/// section, see `SessionSkills::prompt_section`), then the memory section.
fn system_prompt(
    instructions: String,
    skills: Option<&SessionSkills>,
    memory: Option<&str>,
) -> String {
    let mut parts = vec![instructions];
    if let Some(s) = skills {
        parts.extend(s.workspace_docs.clone());
        parts.extend(s.prompt_section());
    }
    parts.extend(memory.map(str::to_owned));
    parts.retain(|p| !p.trim().is_empty());
    parts.join("\n\n")
}
