//! Agents: reusable definitions of what a session runs (instructions, model, the files a
//! sandbox starts from, tools). Requests parse into an [`AgentSpec`]; the store keeps specs;
//! responses are [`Agent`] with the default model resolved.

use crate::ids::AgentId;
use crate::manifest::ManifestSpec;
use crate::network::NetworkPolicy;
use crate::patch::{non_null, Patch};
use crate::slug::Slug;
use crate::tools::{
    validate_client_tools, validate_secret_bindings, ClientTool, SecretBinding, SkillsSource,
    Subagent, WorkspaceSource,
};
use crate::validation::{FieldError, Violations};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use time::OffsetDateTime;
use utoipa::ToSchema;

/// Longest name, in characters.
pub const MAX_NAME_LEN: usize = 200;
/// Longest description, in characters.
pub const MAX_DESCRIPTION_LEN: usize = 4_000;
/// Longest instructions, in bytes: generous for system prompts, bounded for the database.
pub const MAX_INSTRUCTIONS_LEN: usize = 256 * 1024;

/// How the control plane reaches the model: `proxy` (the default) and `litellm` call the
/// LiteLLM proxy the server is configured with (`GET /api/models` lists its names), `openai`
/// calls OpenAI directly and takes any OpenAI model name.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Transport {
    /// A LiteLLM proxy (the default).
    #[default]
    Proxy,
    /// The same, named after the proxy.
    Litellm,
    /// OpenAI directly.
    Openai,
}

/// How hard the model reasons before it answers, passed to the provider as is; null on the
/// agent leaves it to the provider.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum ReasoningEffort {
    None,
    Low,
    Medium,
    High,
    Xhigh,
    Max,
}

/// What the agent may do inside its sandbox: `shell` (the `shell` tool), `filesystem`
/// (`read_file`, `write_file`, `edit_file`, `list_files`), `skills` (the skills of its
/// `skills_source` announced in the system prompt, with `load_skill` for lazy sources; without
/// it the source is staged at boot but not announced), `memory` (the agent's memory store
/// staged under `memories/`, its summary in the system prompt, what a session learnt merged
/// back when it stops) and `compaction` (when the conversation nears the model's input window
/// it is summarised, and the model sees the summary and the most recent user messages instead
/// of the older history; without it a run over the window fails saying so) and `python` (a
/// `python` tool running cells in an IPython kernel kept for the session, whose variables
/// survive between calls and turns while the sandbox runs; its packages come from the agent's
/// environment, or a built-in `analysis` environment when it has none). Null on the agent
/// means the default set, `shell`, `filesystem` and `compaction`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Capability {
    Shell,
    Filesystem,
    Compaction,
    Memory,
    Skills,
    Python,
}

/// An agent's definition: everything a caller edits. Stored as is; validated on the way in.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AgentSpec {
    pub name: String,
    pub description: String,
    pub instructions: String,
    pub transport: Transport,
    pub model: Option<String>,
    pub reasoning_effort: Option<ReasoningEffort>,
    pub image: Option<String>,
    pub capabilities: Option<Vec<Capability>>,
    pub skills_source: Option<SkillsSource>,
    pub workspace_source: Option<WorkspaceSource>,
    pub manifest: ManifestSpec,
    pub exposed_ports: Vec<u16>,
    pub client_tools: Vec<ClientTool>,
    pub secret_bindings: Vec<SecretBinding>,
    pub subagents: Vec<Subagent>,
    pub idle_ttl_seconds: Option<i64>,
    pub environment_id: Option<String>,
    /// Stored only when set (older definitions have none: the default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subagent_max_steps: Option<i64>,
    /// Older definitions have none: open.
    #[serde(default)]
    pub network: NetworkPolicy,
    /// Stored only when set (older definitions have none: the server's default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime_class: Option<String>,
    /// Stored only when set (older definitions have none: no budget).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<crate::budget::Budget>,
    /// Stored only when set (older definitions have none: every tool allowed).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub permissions: crate::permissions::Permissions,
    /// Stored only when set (older definitions have none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mcp_servers: Vec<crate::mcp::McpServer>,
}

/// Steps a subagent called as a tool takes when its caller sets no `subagent_max_steps`.
pub const DEFAULT_SUBAGENT_MAX_STEPS: i64 = 10;
/// The range of `subagent_max_steps`: one step at least (an answer), and a bound on what one
/// tool call of a caller may cost.
pub const SUBAGENT_MAX_STEPS_RANGE: std::ops::RangeInclusive<i64> = 1..=100;

/// The body of `POST /api/agents`: a new agent definition. Only `slug` and `name` are
/// required; every other field has a default. Optional fields the client sends as explicit
/// null mean "not set"; `manifest`, `exposed_ports`, `client_tools`, `secret_bindings`,
/// `subagents` and `network` may be left out but not sent as null (422). Every field error is
/// reported at once, in one 422.
#[derive(Debug, Deserialize, ToSchema)]
pub struct AgentCreate {
    /// The stable, URL-safe name callers use in paths (`/api/agents/{ref}`) and subagent
    /// references: 1 to 63 lowercase letters, digits and `-`, starting with a letter or digit,
    /// and never shaped like a UUID. Unique in the project (409 when taken); it cannot be
    /// changed later.
    #[schema(pattern = "^[a-z0-9][a-z0-9-]{0,62}$", min_length = 1, max_length = 63)]
    pub slug: String,
    /// A display name: 1 to 200 characters, not blank.
    #[schema(
        min_length = 1,
        max_length = 200,
        pattern = "[^\\t\\n\\u000b\\f\\r \\u0085\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000]"
    )]
    pub name: String,
    /// What the agent is for, for people: at most 4000 characters. Default `""`.
    #[serde(default)]
    #[schema(max_length = 4000, default = "")]
    pub description: String,
    /// The system prompt every turn starts from: at most 256 KiB of UTF-8. Default `""`.
    /// A session can override it (`SessionCreate.instructions`).
    #[serde(default)]
    #[schema(default = "")]
    pub instructions: String,
    /// How the control plane reaches the model. Default `proxy`.
    #[serde(default)]
    #[schema(default = "proxy")]
    pub transport: Transport,
    /// The model name, as the transport knows it (for `proxy` and `litellm`, one of
    /// `GET /api/models`; it is not checked on write). Null: the server's default model,
    /// which responses show resolved. Not blank when set.
    #[serde(default)]
    #[schema(
        min_length = 1,
        pattern = "[^\\t\\n\\u000b\\f\\r \\u0085\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000]"
    )]
    pub model: Option<String>,
    /// How hard the model reasons; null leaves it to the provider.
    #[serde(default)]
    pub reasoning_effort: Option<ReasoningEffort>,
    /// The container image sessions boot from; null: the server's default image. Not blank
    /// when set.
    #[serde(default)]
    #[schema(
        min_length = 1,
        pattern = "[^\\t\\n\\u000b\\f\\r \\u0085\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000]"
    )]
    pub image: Option<String>,
    /// What the agent may do in its sandbox; null: the default set (`shell`, `filesystem`,
    /// `compaction`). Duplicates are dropped.
    #[serde(default)]
    pub capabilities: Option<Vec<Capability>>,
    /// Where the agent's skills come from; null: none. Staged into every boot of its
    /// sessions (a bundle's `latest` resolved at each one); a source that cannot be staged
    /// fails the boot with the reason.
    #[serde(default)]
    pub skills_source: Option<SkillsSource>,
    /// Also stage the skills source's whole tree in the workspace (at `dest`), with its docs
    /// file and `instructions` appended to the instructions; null: no. Needs a
    /// `skills_source` (a session otherwise gets 422).
    #[serde(default)]
    pub workspace_source: Option<WorkspaceSource>,
    /// The files and environment variables every session's workspace starts from. Default:
    /// empty. May be left out, not sent as null.
    #[serde(default, deserialize_with = "non_null")]
    pub manifest: ManifestSpec,
    #[serde(default, deserialize_with = "non_null")]
    #[schema(schema_with = crate::openapi::exposed_ports)]
    pub exposed_ports: Vec<u16>,
    /// Tools the caller implements and answers (`POST .../tool-results`), offered to the
    /// model on every turn besides the sandbox tools. Names are unique, and none may be a
    /// sandbox tool's name. Default `[]`; not null.
    #[serde(default, deserialize_with = "non_null")]
    pub client_tools: Vec<ClientTool>,
    /// Secrets of the project that become environment variables of every command the
    /// sandbox runs; a session's own bindings win per variable. At most 32. Default `[]`;
    /// not null.
    #[serde(default, deserialize_with = "non_null")]
    #[schema(max_items = 32)]
    pub secret_bindings: Vec<SecretBinding>,
    /// Other agents of the project this one can call (`tool`) or hand the conversation to
    /// (`handoff`), in the same sandbox; each must exist, not be this agent, and close no
    /// cycle of subagents (422). Default `[]`; not null.
    #[serde(default, deserialize_with = "non_null")]
    pub subagents: Vec<Subagent>,
    /// Seconds a session may sit unused before its sandbox is released (stopped, workspace
    /// archived, `stopped_reason: idle`; the next message wakes it). Null: the server's
    /// default; `0`: never released.
    #[serde(default)]
    #[schema(minimum = 0)]
    pub idle_ttl_seconds: Option<i64>,
    /// The environment its sessions start in (when the session names none), by id or name;
    /// null: the server's default. It must be an environment of the project (422 otherwise)
    /// and is stored as that environment's id.
    #[serde(default)]
    #[schema(
        min_length = 1,
        pattern = "[^\\t\\n\\u000b\\f\\r \\u0085\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000]"
    )]
    pub environment_id: Option<String>,
    /// Steps (model calls) each subagent this agent calls as a tool may take before its call
    /// ends with an error result: 1 to 100; null: 10. A nested subagent's own calls follow
    /// its own agent's setting.
    #[serde(default)]
    #[schema(minimum = 1, maximum = 100)]
    pub subagent_max_steps: Option<i64>,
    /// What its sessions' sandboxes may connect to. A session copies it when it is created
    /// (an edit applies to sessions created afterwards); the session's environment's and
    /// its own policy can only narrow it. Default `{"egress": "open"}`; not null.
    #[serde(default, deserialize_with = "non_null")]
    pub network: NetworkPolicy,
    /// The runtime its sessions' sandboxes run under (a Kubernetes RuntimeClass: gVisor,
    /// Kata), one of those the server offers (`runtime_classes` in `GET /api/backends`, 422
    /// otherwise); null: its environment's, else the server's default. A sandbox with a
    /// runtime class of its own boots cold (the warm pool holds the default's).
    #[serde(default)]
    #[schema(
        min_length = 1,
        max_length = 253,
        pattern = "^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"
    )]
    pub runtime_class: Option<String>,
    /// The budget its sessions start with when they are created without one of their own
    /// (copied then: an edit applies to sessions created afterwards); null: none.
    #[serde(default)]
    pub budget: Option<crate::budget::Budget>,
    /// Per tool (`shell`, `read_file`..., `python`, a client tool's name), group of tools
    /// (`filesystem`, `skills`) or subagent (its slug): `allow` (the default), `ask` (the call
    /// waits for a person: `POST /api/sessions/{id}/tool-confirmations`) or `deny` (never
    /// offered). Each must name something the agent has (422). Default `{}`: all allowed.
    #[serde(default)]
    pub permissions: crate::permissions::Permissions,
    /// MCP servers whose tools the agent is offered as `mcp__<server>__<tool>`: remote ones
    /// (`url`, called by the control plane with `headers` that may read project secrets) and
    /// local ones (`command`, run in the sandbox over stdio). At most 16; default `[]`.
    #[serde(default)]
    #[schema(max_items = 16)]
    pub mcp_servers: Vec<crate::mcp::McpServer>,
}

impl AgentCreate {
    /// Parses the body into a slug and a checked spec, or every field error at once.
    pub fn into_spec(self) -> Result<(Slug, AgentSpec), Vec<FieldError>> {
        let mut v = Violations::new();
        let slug = match Slug::parse(&self.slug) {
            Ok(s) => Some(s),
            Err(msg) => {
                v.push(
                    "value_error",
                    &["slug"],
                    msg,
                    Value::from(self.slug.as_str()),
                );
                None
            }
        };
        let spec = AgentSpec {
            name: self.name,
            description: self.description,
            instructions: self.instructions,
            transport: self.transport,
            model: self.model,
            reasoning_effort: self.reasoning_effort,
            image: self.image,
            capabilities: self.capabilities,
            skills_source: self.skills_source,
            workspace_source: self.workspace_source,
            manifest: self.manifest,
            exposed_ports: self.exposed_ports,
            client_tools: self.client_tools,
            secret_bindings: self.secret_bindings,
            subagents: self.subagents,
            idle_ttl_seconds: self.idle_ttl_seconds,
            environment_id: self.environment_id,
            subagent_max_steps: self.subagent_max_steps,
            network: self.network,
            runtime_class: self.runtime_class,
            budget: self.budget,
            permissions: self.permissions,
            mcp_servers: self.mcp_servers,
        }
        .normalized();
        spec.validate(&mut v);
        v.into_result()?;
        Ok((slug.expect("a slug error is a violation"), spec))
    }
}

/// The body of `PATCH /api/agents/{ref}`: `version` plus any field of the definition. A field
/// left out is unchanged; a field sent as null is cleared where that means something (back to
/// the server default, or `[]` for lists) and is a 422 where it does not (`slug`, `name`,
/// `description`, `instructions`, `transport`, `manifest`, `exposed_ports`, `network`). A list or a
/// manifest sent replaces the whole stored one. The result is checked as a whole, with the
/// same rules as a create.
#[derive(Debug, Deserialize, ToSchema)]
pub struct AgentPatch {
    /// The `version` the caller read. When it is not the current one the edit is refused
    /// with 409 and nothing changes; re-read the agent and apply the edit again. On success
    /// the version goes up by one.
    pub version: i64,
    /// Slugs cannot change: the current slug is accepted (and ignored), any other value is a
    /// 422. Not null.
    #[serde(default)]
    #[schema(value_type = String, pattern = "^[a-z0-9][a-z0-9-]{0,62}$", min_length = 1, max_length = 63)]
    pub slug: Patch<String>,
    /// A new display name: 1 to 200 characters, not blank. Not null.
    #[serde(default)]
    #[schema(value_type = String, min_length = 1, max_length = 200, pattern = "[^\\t\\n\\u000b\\f\\r \\u0085\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000]")]
    pub name: Patch<String>,
    /// A new description: at most 4000 characters. Not null.
    #[serde(default)]
    #[schema(value_type = String, max_length = 4000)]
    pub description: Patch<String>,
    /// New instructions: at most 256 KiB of UTF-8. Not null.
    #[serde(default)]
    #[schema(value_type = String)]
    pub instructions: Patch<String>,
    /// A new transport. Not null.
    #[serde(default)]
    #[schema(value_type = Transport)]
    pub transport: Patch<Transport>,
    /// A new model name, not blank; null puts the agent back on the server's default model
    /// (responses still show the resolved name).
    #[serde(default)]
    #[schema(value_type = Option<String>, min_length = 1, pattern = "[^\\t\\n\\u000b\\f\\r \\u0085\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000]")]
    pub model: Patch<String>,
    /// A new reasoning effort; null clears it.
    #[serde(default)]
    #[schema(value_type = Option<ReasoningEffort>)]
    pub reasoning_effort: Patch<ReasoningEffort>,
    /// A new image, not blank; null goes back to the server's default image.
    #[serde(default)]
    #[schema(value_type = Option<String>, min_length = 1, pattern = "[^\\t\\n\\u000b\\f\\r \\u0085\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000]")]
    pub image: Patch<String>,
    /// New capabilities; null goes back to the default set.
    #[serde(default)]
    #[schema(value_type = Option<Vec<Capability>>)]
    pub capabilities: Patch<Vec<Capability>>,
    /// A new skills source (its `ssh_key_id`, if any, must name a git key of the project);
    /// null removes it.
    #[serde(default)]
    #[schema(value_type = Option<SkillsSource>)]
    pub skills_source: Patch<SkillsSource>,
    /// A new workspace source; null removes it.
    #[serde(default)]
    #[schema(value_type = Option<WorkspaceSource>)]
    pub workspace_source: Patch<WorkspaceSource>,
    /// A new manifest, replacing the whole stored one. Not null.
    #[serde(default)]
    #[schema(value_type = ManifestSpec)]
    pub manifest: Patch<ManifestSpec>,
    #[serde(default)]
    #[schema(schema_with = crate::openapi::exposed_ports)]
    pub exposed_ports: Patch<Vec<u16>>,
    /// New client tools, replacing the list; null empties it.
    #[serde(default)]
    #[schema(value_type = Option<Vec<ClientTool>>)]
    pub client_tools: Patch<Vec<ClientTool>>,
    /// New secret bindings (at most 32), replacing the list; null empties it.
    #[serde(default)]
    #[schema(value_type = Option<Vec<SecretBinding>>, max_items = 32)]
    pub secret_bindings: Patch<Vec<SecretBinding>>,
    /// New subagents, replacing the list; null empties it.
    #[serde(default)]
    #[schema(value_type = Option<Vec<Subagent>>)]
    pub subagents: Patch<Vec<Subagent>>,
    /// A new idle timeout in seconds (`0`: never released); null goes back to the server's
    /// default.
    #[serde(default)]
    #[schema(value_type = Option<i64>, minimum = 0)]
    pub idle_ttl_seconds: Patch<i64>,
    /// A new default environment (an id or name of one of the project's environments, 422
    /// otherwise; stored as its id); null goes back to the server's default.
    #[serde(default)]
    #[schema(value_type = Option<String>, min_length = 1, pattern = "[^\\t\\n\\u000b\\f\\r \\u0085\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000]")]
    pub environment_id: Patch<String>,
    /// A new step limit for the subagents it calls as tools (1 to 100); null goes back to the
    /// default, 10.
    #[serde(default)]
    #[schema(value_type = Option<i64>, minimum = 1, maximum = 100)]
    pub subagent_max_steps: Patch<i64>,
    /// A new network policy, replacing the whole stored one; sessions created afterwards
    /// copy it, existing ones keep theirs. Not null.
    #[serde(default)]
    #[schema(value_type = NetworkPolicy)]
    pub network: Patch<NetworkPolicy>,
    /// A new runtime class (one the server offers, 422 otherwise); null goes back to its
    /// environment's, else the server's default. Sessions boot under it from their next boot.
    #[serde(default)]
    #[schema(value_type = Option<String>, min_length = 1, max_length = 253, pattern = "^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")]
    pub runtime_class: Patch<String>,
    /// A new default budget for sessions created afterwards; null removes it.
    #[serde(default)]
    #[schema(value_type = Option<crate::budget::Budget>)]
    pub budget: Patch<crate::budget::Budget>,
    /// New permissions, replacing the whole set; null or `{}`: every tool allowed. They apply
    /// from the next turn (or a parked turn's continuation) of sessions that run this
    /// version.
    #[serde(default)]
    #[schema(value_type = Option<std::collections::BTreeMap<String, crate::permissions::Permission>>)]
    pub permissions: Patch<crate::permissions::Permissions>,
    /// New MCP servers, replacing the whole list; null: none.
    #[serde(default)]
    #[schema(value_type = Option<Vec<crate::mcp::McpServer>>, max_items = 16)]
    pub mcp_servers: Patch<Vec<crate::mcp::McpServer>>,
}

/// A field that cannot be cleared: null is a 422, a value replaces, absent keeps.
fn required<T>(field: &'static str, p: Patch<T>, current: &mut T, v: &mut Violations) {
    match p {
        Patch::Absent => {}
        Patch::Null => v.null(&[field]),
        Patch::Value(x) => *current = x,
    }
}

/// A field whose null means "clear" (or "back to the default").
fn clearable<T>(p: Patch<T>, current: &mut Option<T>) {
    if let Some(new) = p.into_option() {
        *current = new;
    }
}

/// A list whose null means "empty".
fn list<T>(p: Patch<Vec<T>>, current: &mut Vec<T>) {
    if let Some(new) = p.into_option() {
        *current = new.unwrap_or_default();
    }
}

impl AgentPatch {
    /// Applies the edit to `spec`, checking the result as a whole.
    pub fn apply(self, slug: &Slug, spec: &mut AgentSpec) -> Result<(), Vec<FieldError>> {
        let mut v = Violations::new();
        match self.slug {
            Patch::Value(s) if s != slug.as_str() => v.push(
                "value_error",
                &["slug"],
                "the slug cannot be changed; create a new agent instead",
                Value::from(s),
            ),
            Patch::Null => v.null(&["slug"]),
            _ => {}
        }
        required("name", self.name, &mut spec.name, &mut v);
        required(
            "description",
            self.description,
            &mut spec.description,
            &mut v,
        );
        required(
            "instructions",
            self.instructions,
            &mut spec.instructions,
            &mut v,
        );
        required("transport", self.transport, &mut spec.transport, &mut v);
        clearable(self.model, &mut spec.model);
        clearable(self.reasoning_effort, &mut spec.reasoning_effort);
        clearable(self.image, &mut spec.image);
        clearable(self.capabilities, &mut spec.capabilities);
        clearable(self.skills_source, &mut spec.skills_source);
        clearable(self.workspace_source, &mut spec.workspace_source);
        required("manifest", self.manifest, &mut spec.manifest, &mut v);
        required(
            "exposed_ports",
            self.exposed_ports,
            &mut spec.exposed_ports,
            &mut v,
        );
        list(self.client_tools, &mut spec.client_tools);
        list(self.secret_bindings, &mut spec.secret_bindings);
        list(self.subagents, &mut spec.subagents);
        clearable(self.idle_ttl_seconds, &mut spec.idle_ttl_seconds);
        clearable(self.environment_id, &mut spec.environment_id);
        clearable(self.subagent_max_steps, &mut spec.subagent_max_steps);
        required("network", self.network, &mut spec.network, &mut v);
        clearable(self.runtime_class, &mut spec.runtime_class);
        clearable(self.budget, &mut spec.budget);
        if let Some(p) = self.permissions.into_option() {
            spec.permissions = p.unwrap_or_default();
        }
        list(self.mcp_servers, &mut spec.mcp_servers);
        *spec = spec.clone().normalized();
        spec.validate(&mut v);
        v.into_result()
    }
}

impl AgentSpec {
    /// Canonical form: ports sorted and unique, capabilities unique in a stable order.
    fn normalized(mut self) -> Self {
        self.exposed_ports.sort_unstable();
        self.exposed_ports.dedup();
        if let Some(caps) = self.capabilities.as_mut() {
            let mut seen = Vec::new();
            caps.retain(|c| {
                let new = !seen.contains(c);
                seen.push(*c);
                new
            });
        }
        // `{}` limits nothing: stored as no budget, as a session stores it.
        self.budget = self.budget.filter(|b| !b.is_empty());
        self
    }

    /// The checks a spec must pass whichever way it was built.
    pub fn validate(&self, v: &mut Violations) {
        let name_len = self.name.chars().count();
        if self.name.trim().is_empty() {
            v.push(
                "string_too_short",
                &["name"],
                "name must not be empty",
                Value::from(self.name.as_str()),
            );
        } else if name_len > MAX_NAME_LEN {
            v.push(
                "string_too_long",
                &["name"],
                format!("name is at most {MAX_NAME_LEN} characters"),
                Value::Null,
            );
        }
        if self.description.chars().count() > MAX_DESCRIPTION_LEN {
            v.push(
                "string_too_long",
                &["description"],
                format!("description is at most {MAX_DESCRIPTION_LEN} characters"),
                Value::Null,
            );
        }
        if self.instructions.len() > MAX_INSTRUCTIONS_LEN {
            v.push(
                "string_too_long",
                &["instructions"],
                format!(
                    "instructions are at most {} KiB",
                    MAX_INSTRUCTIONS_LEN / 1024
                ),
                Value::Null,
            );
        }
        for (field, value) in [
            ("model", &self.model),
            ("image", &self.image),
            ("environment_id", &self.environment_id),
        ] {
            if let Some(s) = value {
                if s.trim().is_empty() {
                    v.push(
                        "string_too_short",
                        &[field],
                        format!("{field} must not be empty; send null to use the default"),
                        Value::from(s.as_str()),
                    );
                }
            }
        }
        crate::runtime_class::validate(self.runtime_class.as_deref(), v, &["runtime_class"]);
        if !self.permissions.is_empty() {
            let sandbox =
                sandbox_tool_names(self.capabilities.as_deref(), self.skills_source.is_some());
            let subagents: Vec<(&str, bool)> = self
                .subagents
                .iter()
                .map(|s| {
                    (
                        s.agent.as_str(),
                        s.mode == crate::tools::SubagentMode::Handoff,
                    )
                })
                .collect();
            let client: Vec<&str> = self.client_tools.iter().map(|t| t.name.as_str()).collect();
            let mcp: Vec<&str> = self.mcp_servers.iter().map(|s| s.name.as_str()).collect();
            crate::permissions::validate(&self.permissions, &sandbox, &subagents, &client, &mcp, v);
        }
        if let Some(b) = &self.budget {
            b.validate(v, &["budget"]);
        }
        if let Some(p) = self.exposed_ports.iter().find(|p| **p == 0) {
            v.push(
                "value_error",
                &["exposed_ports"],
                "ports are between 1 and 65535",
                Value::from(*p),
            );
        }
        if let Some(ttl) = self.idle_ttl_seconds {
            if ttl < 0 {
                v.push(
                    "value_error",
                    &["idle_ttl_seconds"],
                    "idle_ttl_seconds is 0 (never released) or more",
                    Value::from(ttl),
                );
            }
        }
        if let Some(n) = self.subagent_max_steps {
            if !SUBAGENT_MAX_STEPS_RANGE.contains(&n) {
                v.push(
                    "value_error",
                    &["subagent_max_steps"],
                    format!(
                        "subagent_max_steps is {} to {} steps; send null for the default, {DEFAULT_SUBAGENT_MAX_STEPS}",
                        SUBAGENT_MAX_STEPS_RANGE.start(),
                        SUBAGENT_MAX_STEPS_RANGE.end()
                    ),
                    Value::from(n),
                );
            }
        }
        self.manifest.validate(&["manifest"], v);
        validate_client_tools(&self.client_tools, "client_tools", v);
        python_tool_is_free(
            self.capabilities.as_deref(),
            &self.client_tools,
            "client_tools",
            v,
        );
        validate_secret_bindings(&self.secret_bindings, "secret_bindings", v);
        crate::mcp::validate_servers(&self.mcp_servers, "mcp_servers", v);
        if let Some(s) = &self.skills_source {
            s.validate("skills_source", v);
        }
        self.network.validate(v, &["network"]);
        for (i, s) in self.subagents.iter().enumerate() {
            if Slug::parse(&s.agent).is_err() {
                v.push(
                    "value_error",
                    &["subagents", &i.to_string(), "agent"],
                    "agent is the slug of another agent in this project",
                    Value::from(s.agent.as_str()),
                );
            }
        }
    }
}

/// The sandbox tools an agent with these capabilities is offered (null: shell and
/// filesystem), with `load_skill` when it has skills.
pub fn sandbox_tool_names(capabilities: Option<&[Capability]>, skills: bool) -> Vec<&'static str> {
    let has = |c: Capability| capabilities.is_none_or(|cs| cs.contains(&c));
    let mut out = Vec::new();
    if has(Capability::Shell) {
        out.push("shell");
    }
    if has(Capability::Filesystem) {
        out.extend(["read_file", "write_file", "edit_file", "list_files"]);
    }
    if capabilities.is_some_and(|cs| cs.contains(&Capability::Python)) {
        out.push(crate::notebook::PYTHON_TOOL);
    }
    if skills {
        out.push(crate::skills::LOAD_SKILL_TOOL);
    }
    out
}

/// An agent as stored.
#[derive(Clone, Debug, PartialEq)]
pub struct AgentRecord {
    pub id: AgentId,
    pub slug: Slug,
    pub spec: AgentSpec,
    pub version: i64,
    pub archived_at: Option<OffsetDateTime>,
    pub created_at: OffsetDateTime,
    pub updated_at: OffsetDateTime,
}

impl AgentRecord {
    /// The response shape, with `model` resolved to `default_model` when the agent has none.
    pub fn to_wire(&self, default_model: &str) -> Agent {
        let s = &self.spec;
        Agent {
            id: self.id.to_string(),
            slug: self.slug.to_string(),
            name: s.name.clone(),
            description: s.description.clone(),
            instructions: s.instructions.clone(),
            transport: s.transport,
            model: s.model.clone().unwrap_or_else(|| default_model.to_owned()),
            reasoning_effort: s.reasoning_effort,
            image: s.image.clone(),
            capabilities: s.capabilities.clone(),
            skills_source: s.skills_source.clone(),
            workspace_source: s.workspace_source.clone(),
            manifest: s.manifest.clone(),
            exposed_ports: s.exposed_ports.clone(),
            client_tools: s.client_tools.clone(),
            secret_bindings: s.secret_bindings.clone(),
            subagents: s.subagents.clone(),
            idle_ttl_seconds: s.idle_ttl_seconds,
            environment_id: s.environment_id.clone(),
            subagent_max_steps: s.subagent_max_steps.unwrap_or(DEFAULT_SUBAGENT_MAX_STEPS),
            network: s.network.clone(),
            runtime_class: s.runtime_class.clone(),
            budget: s.budget,
            permissions: s.permissions.clone(),
            mcp_servers: s.mcp_servers.clone(),
            version: self.version,
            archived_at: self.archived_at,
            created_at: self.created_at,
            updated_at: self.updated_at,
        }
    }
}

/// An agent definition as every agent endpoint returns it: what sessions of this agent run.
/// Nullable fields are null when the agent leaves them to the server (`model` alone is always
/// resolved).
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct Agent {
    /// The agent's id (a UUID); `{ref}` in paths takes it or the slug.
    pub id: String,
    /// The stable name, unique in the project and immutable.
    pub slug: String,
    /// The display name.
    pub name: String,
    /// What the agent is for, for people; may be `""`.
    pub description: String,
    /// The system prompt; may be `""`.
    pub instructions: String,
    /// How the control plane reaches the model.
    pub transport: Transport,
    /// The resolved model: the agent's own, or the server's default when the agent sets none
    /// (never null).
    pub model: String,
    /// Null: left to the provider.
    pub reasoning_effort: Option<ReasoningEffort>,
    /// The container image sessions boot from; null: the server's default image.
    pub image: Option<String>,
    /// Null: the default set (`shell`, `filesystem`, `compaction`).
    pub capabilities: Option<Vec<Capability>>,
    /// Null: no skills.
    pub skills_source: Option<SkillsSource>,
    /// Null: the workspace is the manifest alone.
    pub workspace_source: Option<WorkspaceSource>,
    /// What every session's workspace starts from.
    pub manifest: ManifestSpec,
    /// Ports sessions publish for previews, sorted.
    pub exposed_ports: Vec<u16>,
    /// Tools the caller implements; `[]` for none.
    pub client_tools: Vec<ClientTool>,
    /// Secrets its sandboxes get as environment variables; `[]` for none.
    pub secret_bindings: Vec<SecretBinding>,
    /// Agents this one can call or hand over to; `[]` for none.
    pub subagents: Vec<Subagent>,
    /// Seconds unused before a session's sandbox is released; null: the server's default;
    /// `0`: never.
    pub idle_ttl_seconds: Option<i64>,
    /// The default environment of its sessions; null: the server's default.
    pub environment_id: Option<String>,
    /// Steps each subagent it calls as a tool may take (10 unless set; resolved, never null).
    #[schema(minimum = 1, maximum = 100)]
    pub subagent_max_steps: i64,
    /// What its sessions' sandboxes may connect to (`{"egress": "open", ...}` unless set).
    /// Sessions copy it when they are created.
    pub network: NetworkPolicy,
    /// The runtime its sessions' sandboxes run under (a Kubernetes RuntimeClass); null: its
    /// environment's, else the server's default.
    pub runtime_class: Option<String>,
    /// The budget its sessions start with unless created with their own; null: none.
    pub budget: Option<crate::budget::Budget>,
    /// Per tool, group of tools or subagent: `allow`, `ask` or `deny`; `{}`: all allowed.
    pub permissions: crate::permissions::Permissions,
    /// MCP servers whose tools it is offered (`mcp__<server>__<tool>`); `[]` for none.
    /// Header values that read secrets show the secret's name, never its value.
    pub mcp_servers: Vec<crate::mcp::McpServer>,
    /// The optimistic lock: 1 on create, one more on every successful PATCH (archive and
    /// unarchive leave it). Send it back on PATCH.
    pub version: i64,
    /// When it was archived; null while it is not. An archived agent starts no sessions.
    #[serde(with = "time::serde::rfc3339::option")]
    pub archived_at: Option<OffsetDateTime>,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
    /// The last edit, archive or unarchive.
    #[serde(with = "time::serde::rfc3339")]
    pub updated_at: OffsetDateTime,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn create(json: &str) -> Result<(Slug, AgentSpec), Vec<FieldError>> {
        serde_json::from_str::<AgentCreate>(json)
            .unwrap()
            .into_spec()
    }

    #[test]
    fn the_clients_explicit_nulls_are_accepted() {
        let (slug, spec) = create(
            r#"{"slug":"a","name":"A","description":"","instructions":"","transport":"proxy","model":null,
                "reasoning_effort":null,"image":null,"capabilities":null,"skills_source":null,"workspace_source":null}"#,
        )
        .unwrap();
        assert_eq!(slug.as_str(), "a");
        assert_eq!(spec.model, None);
        assert_eq!(spec.manifest, ManifestSpec::default());
    }

    #[test]
    fn every_field_error_is_reported_at_once() {
        let errs = create(r#"{"slug":"Bad Slug","name":"","exposed_ports":[0]}"#).unwrap_err();
        let locs: Vec<String> = errs
            .iter()
            .map(|e| e.loc[1].as_str().unwrap().to_owned())
            .collect();
        assert_eq!(locs, ["slug", "name", "exposed_ports"]);
    }

    #[test]
    fn a_patch_clears_what_may_be_cleared_and_refuses_null_elsewhere() {
        let (slug, mut spec) = create(
            r#"{"slug":"a","name":"A","model":"m","image":"i","client_tools":[{"name":"t"}]}"#,
        )
        .unwrap();
        let patch: AgentPatch =
            serde_json::from_str(r#"{"version":1,"model":null,"client_tools":null}"#).unwrap();
        patch.apply(&slug, &mut spec).unwrap();
        assert_eq!(spec.model, None);
        assert_eq!(spec.image.as_deref(), Some("i"));
        assert!(spec.client_tools.is_empty());

        let patch: AgentPatch =
            serde_json::from_str(r#"{"version":1,"name":null,"manifest":null}"#).unwrap();
        let errs = patch.apply(&slug, &mut spec).unwrap_err();
        assert_eq!(errs.len(), 2);
    }

    #[test]
    fn the_subagent_step_limit_is_1_to_100_and_null_is_the_default() {
        let (slug, mut spec) = create(r#"{"slug":"a","name":"A"}"#).unwrap();
        assert_eq!(spec.subagent_max_steps, None);
        for bad in [0, 101, -1] {
            let errs = create(&format!(
                r#"{{"slug":"a","name":"A","subagent_max_steps":{bad}}}"#
            ))
            .unwrap_err();
            assert_eq!(errs[0].loc[1], "subagent_max_steps", "{bad}");
            assert!(errs[0].msg.contains("1 to 100"), "{}", errs[0].msg);
        }
        let patch: AgentPatch =
            serde_json::from_str(r#"{"version":1,"subagent_max_steps":3}"#).unwrap();
        patch.apply(&slug, &mut spec).unwrap();
        assert_eq!(spec.subagent_max_steps, Some(3));
        let patch: AgentPatch =
            serde_json::from_str(r#"{"version":1,"subagent_max_steps":null}"#).unwrap();
        patch.apply(&slug, &mut spec).unwrap();
        assert_eq!(spec.subagent_max_steps, None);
        let patch: AgentPatch =
            serde_json::from_str(r#"{"version":1,"subagent_max_steps":101}"#).unwrap();
        assert!(patch.apply(&slug, &mut spec).is_err());
    }
}

/// An agent `{ref}` in a path: an id when it parses as one, otherwise a slug.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AgentRef {
    Id(AgentId),
    Slug(String),
}

impl AgentRef {
    pub fn parse(s: &str) -> Self {
        match AgentId::parse(s) {
            Some(id) => AgentRef::Id(id),
            None => AgentRef::Slug(s.to_owned()),
        }
    }
}

/// With the `python` capability the name `python` is the kernel's tool, so no client tool
/// may take it (422 at `loc`); without it the name is free, as it always was.
pub fn python_tool_is_free(
    capabilities: Option<&[Capability]>,
    tools: &[ClientTool],
    loc: &str,
    v: &mut Violations,
) {
    if !capabilities.is_some_and(|c| c.contains(&Capability::Python)) {
        return;
    }
    for (i, t) in tools.iter().enumerate() {
        if t.name == crate::notebook::PYTHON_TOOL {
            v.push(
                "value_error",
                &[loc, &i.to_string(), "name"],
                "'python' is the tool of the agent's python capability; give the client tool another name",
                Value::from(t.name.as_str()),
            );
        }
    }
}
