//! What an agent declares besides its instructions: client tools, secret bindings, subagents,
//! and where its skills and workspace come from.

use crate::manifest::{default_host, default_ref, default_true};
use crate::validation::Violations;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::ToSchema;

/// Longest a caller may make an ordinary client-tool call wait, in seconds.
pub const MAX_CLIENT_TOOL_TIMEOUT_SECONDS: f64 = 3600.0;
/// How long an ordinary client-tool call waits when the declaration does not say.
pub const DEFAULT_CLIENT_TOOL_TIMEOUT_SECONDS: f64 = 120.0;

/// A tool the caller implements; the control plane never runs it. When the model calls it,
/// the log gets an `agent.client_tool_call` event and the caller answers with
/// `POST /api/sessions/{session_id}/tool-results`. An ordinary call holds the turn until the
/// answer comes or `timeout_seconds` pass (the model is told which); a deferrable one parks
/// the run (`stop_reason: requires_action`) until it is answered, however long that takes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ClientTool {
    /// The name the model calls it by: 1 to 64 ASCII letters, digits, `_` or `-`. Unique in
    /// its list, and not a sandbox tool's name (`shell`, `read_file`, `write_file`,
    /// `edit_file`, `list_files`).
    #[schema(pattern = "^[A-Za-z0-9_-]{1,64}$", min_length = 1, max_length = 64)]
    pub name: String,
    /// What the tool does, for the model. Default `""`.
    #[serde(default)]
    #[schema(default = "")]
    pub description: String,
    /// JSON Schema of the arguments, as the model provider takes it; must be an object.
    /// Default `{}`: no arguments.
    #[serde(default = "empty_object")]
    #[schema(value_type = Object, default = json!({}))]
    pub parameters: Value,
    /// A question for a person rather than a program: the turn parks instead of waiting,
    /// and the answer may come from any server process, minutes or deploys later. Default
    /// false.
    #[serde(default)]
    #[schema(default = false)]
    pub deferrable: bool,
    /// How long an ordinary call waits for its answer, in seconds: more than 0 and at most
    /// 3600; null: 120. A deferrable tool takes none (a value there is a 422).
    #[serde(default)]
    #[schema(exclusive_minimum = 0, maximum = 3600)]
    pub timeout_seconds: Option<f64>,
}

fn empty_object() -> Value {
    Value::Object(Map::new())
}

/// Tool names as model providers accept them.
pub fn is_tool_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// The sandbox tools the control plane runs itself. A client tool may not take one of these
/// names, whatever the agent's capabilities, so that a name always means one tool.
pub const BUILTIN_TOOLS: &[&str] = &[
    "shell",
    "read_file",
    "write_file",
    "edit_file",
    "list_files",
    crate::skills::LOAD_SKILL_TOOL,
];

/// Checks a list of client tools at `loc` (e.g. `["client_tools"]`).
pub fn validate_client_tools(tools: &[ClientTool], loc: &str, v: &mut Violations) {
    let mut seen = std::collections::HashSet::new();
    for (i, t) in tools.iter().enumerate() {
        let idx = i.to_string();
        let at = |f: &'static str| [loc, idx.as_str(), f];
        if !is_tool_name(&t.name) {
            v.push(
                "value_error",
                &at("name"),
                "a tool name is 1 to 64 letters, digits, '_' or '-'",
                Value::from(t.name.as_str()),
            );
        } else if BUILTIN_TOOLS.contains(&t.name.as_str()) {
            v.push(
                "value_error",
                &at("name"),
                format!(
                    "'{}' is a built-in sandbox tool; give the client tool another name",
                    t.name
                ),
                Value::from(t.name.as_str()),
            );
        } else if !seen.insert(t.name.as_str()) {
            v.push(
                "value_error",
                &at("name"),
                format!("the tool '{}' is declared twice", t.name),
                Value::from(t.name.as_str()),
            );
        }
        if !t.parameters.is_object() {
            v.push(
                "value_error",
                &at("parameters"),
                "parameters must be a JSON Schema object ({} for no arguments)",
                t.parameters.clone(),
            );
        }
        if let Some(secs) = t.timeout_seconds {
            if t.deferrable {
                v.push(
                    "value_error",
                    &at("timeout_seconds"),
                    "a deferrable tool does not wait, so it takes no timeout_seconds",
                    Value::from(secs),
                );
            } else if !(secs > 0.0 && secs <= MAX_CLIENT_TOOL_TIMEOUT_SECONDS) {
                v.push(
                    "value_error",
                    &at("timeout_seconds"),
                    "timeout_seconds must be more than 0 and at most 3600",
                    Value::from(secs),
                );
            }
        }
    }
}

pub use crate::secret_binding::{validate_secret_bindings, SecretBinding, MAX_SECRET_BINDINGS};

/// How an agent uses a subagent: `tool` calls it with a task and gets its answer back, the
/// conversation staying put; `handoff` gives it the conversation, which it keeps (answering
/// the next prompts too) until it hands back.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum SubagentMode {
    Tool,
    Handoff,
}

/// Another agent of the same project this one can call (`tool`) or hand over to (`handoff`),
/// in the same sandbox. The project's subagents form no cycle (saving one is a 422), and a
/// chain of them runs to a depth of three below the agent that holds the conversation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Subagent {
    /// The slug of another agent in the same project (not this one); an unknown slug is a
    /// 422.
    #[schema(pattern = "^[a-z0-9][a-z0-9-]{0,62}$", min_length = 1, max_length = 63)]
    pub agent: String,
    /// Default `tool`.
    #[serde(default = "default_mode")]
    #[schema(default = "tool")]
    pub mode: SubagentMode,
    /// The tool name the model sees; null: the slug in `tool` mode, `transfer_to_<slug>` in
    /// `handoff` mode.
    #[serde(default)]
    pub tool_name: Option<String>,
    /// What the subagent is for, for the model; `""` (the default): the subagent's own
    /// description.
    #[serde(default)]
    #[schema(default = "")]
    pub description: String,
}

fn default_mode() -> SubagentMode {
    SubagentMode::Tool
}

/// Where an agent's skills come from, tagged by `kind`: a git repository, a directory on the
/// control-plane host (under the server's `--local-dir-roots`), or a skill bundle. Every skill
/// is a folder holding a `SKILL.md` under `subpath`; it is staged at `.agents/<folder>` of the
/// workspace, at boot or (`lazy`, with the `skills` capability) when the model loads it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum SkillsSource {
    /// A git repository: public, or read with one of the project's deploy keys
    /// (`ssh_key_id`), which never enters the sandbox.
    GitRepo {
        /// The repository's path on the host, e.g. `owner/name`.
        repo: String,
        /// The branch, tag or commit. Default `main`.
        #[serde(rename = "ref", default = "default_ref")]
        #[schema(default = "main")]
        git_ref: String,
        /// The git host. Default `github.com`.
        #[serde(default = "default_host")]
        #[schema(default = "github.com")]
        host: String,
        /// The directory of the repository that holds the skills; null: its root.
        #[serde(default)]
        subpath: Option<String>,
        /// A git key of this project (`GET /api/git-keys`) to clone with; an unknown one is a
        /// 422, and a key an agent uses cannot be deleted (409).
        #[serde(default)]
        ssh_key_id: Option<String>,
    },
    /// A directory on the control-plane host.
    LocalDir {
        /// Its absolute path on the host.
        src: String,
        /// The directory under `src` that holds the skills; null: `src` itself.
        #[serde(default)]
        subpath: Option<String>,
        /// Index the skills first and load each on demand. Default true.
        #[serde(default = "default_true")]
        #[schema(default = true)]
        lazy: bool,
    },
    /// A skill bundle of the project.
    Bundle {
        /// The bundle's slug.
        bundle: String,
        #[serde(default)]
        #[schema(schema_with = crate::openapi::bundle_version)]
        version: BundleVersion,
        /// The directory of the bundle that holds the skills; null: its root.
        #[serde(default)]
        subpath: Option<String>,
        /// Index the skills first and load each on demand. Default true.
        #[serde(default = "default_true")]
        #[schema(default = true)]
        lazy: bool,
    },
}

/// A bundle version: a pinned number, or `"latest"`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(untagged)]
pub enum BundleVersion {
    Pinned(u32),
    Label(String),
}

impl Default for BundleVersion {
    fn default() -> Self {
        BundleVersion::Label("latest".into())
    }
}

impl SkillsSource {
    pub fn validate(&self, loc: &str, v: &mut Violations) {
        let SkillsSource::Bundle { version, .. } = self else {
            return;
        };
        match version {
            BundleVersion::Label(l) if l != "latest" => v.push(
                "value_error",
                &[loc, "version"],
                "version is a version number or \"latest\"",
                Value::from(l.as_str()),
            ),
            // Versions are numbered in an `int4`: a larger number could never name one.
            BundleVersion::Pinned(n) if i32::try_from(*n).is_err() => v.push(
                "value_error",
                &[loc, "version"],
                "version is a version number, at most 2147483647, or \"latest\"",
                Value::from(*n),
            ),
            BundleVersion::Label(_) | BundleVersion::Pinned(_) => {}
        }
    }
}

/// Where the workspace tree comes from: `same_as_skills`, the skills source's own tree.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum WorkspaceSourceKind {
    SameAsSkills,
}

/// Stage the skills source's whole tree in the workspace too, so that skills which refer to
/// the repository around them work. Staged when the workspace starts fresh (a restored
/// workspace keeps its own copy); skills are then used from the tree.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct WorkspaceSource {
    /// Default `same_as_skills`.
    #[serde(default = "same_as_skills")]
    #[schema(default = "same_as_skills")]
    pub kind: WorkspaceSourceKind,
    /// The workspace-relative directory the tree lands in. Default `pstack`.
    #[serde(default = "default_dest")]
    #[schema(default = "pstack")]
    pub dest: String,
    /// The file of the tree that documents it for the agent. Default `CLAUDE.md`.
    #[serde(default = "default_docs_file")]
    #[schema(default = "CLAUDE.md")]
    pub docs_file: String,
    /// Extra instructions about the tree; null: none.
    #[serde(default)]
    pub instructions: Option<String>,
    /// Workspace-relative directories created if missing. Default `[]`.
    #[serde(default)]
    pub ensure_dirs: Vec<String>,
}

fn same_as_skills() -> WorkspaceSourceKind {
    WorkspaceSourceKind::SameAsSkills
}
fn default_dest() -> String {
    "pstack".into()
}
fn default_docs_file() -> String {
    "CLAUDE.md".into()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(json: &str) -> ClientTool {
        serde_json::from_str(json).unwrap()
    }

    fn errors(tools: &[ClientTool]) -> usize {
        let mut v = Violations::new();
        validate_client_tools(tools, "client_tools", &mut v);
        v.into_result().err().map_or(0, |e| e.len())
    }

    #[test]
    fn client_tools_may_not_take_a_builtin_name() {
        assert_eq!(errors(&[tool(r#"{"name":"shell"}"#)]), 1);
        assert_eq!(errors(&[tool(r#"{"name":"edit_file"}"#)]), 1);
        assert_eq!(errors(&[tool(r#"{"name":"shell_2"}"#)]), 0);
    }

    #[test]
    fn client_tool_defaults_fill_in() {
        let t = tool(r#"{"name":"open_account"}"#);
        assert_eq!(t.parameters, serde_json::json!({}));
        assert!(!t.deferrable);
        assert_eq!(t.timeout_seconds, None);
    }

    #[test]
    fn client_tool_timeouts_are_bounded_and_never_on_deferrable_tools() {
        assert_eq!(errors(&[tool(r#"{"name":"a","timeout_seconds":3600}"#)]), 0);
        assert_eq!(errors(&[tool(r#"{"name":"a","timeout_seconds":3601}"#)]), 1);
        assert_eq!(errors(&[tool(r#"{"name":"a","timeout_seconds":0}"#)]), 1);
        assert_eq!(
            errors(&[tool(
                r#"{"name":"a","deferrable":true,"timeout_seconds":5}"#
            )]),
            1
        );
        assert_eq!(
            errors(&[tool(r#"{"name":"a"}"#), tool(r#"{"name":"a"}"#)]),
            1
        );
        assert_eq!(errors(&[tool(r#"{"name":"has space"}"#)]), 1);
    }

    #[test]
    fn bundle_version_is_a_number_or_latest() {
        let s: SkillsSource = serde_json::from_str(r#"{"kind":"bundle","bundle":"b"}"#).unwrap();
        assert!(
            matches!(s, SkillsSource::Bundle { version: BundleVersion::Label(ref l), lazy: true, .. } if l == "latest")
        );
        let s: SkillsSource =
            serde_json::from_str(r#"{"kind":"bundle","bundle":"b","version":3}"#).unwrap();
        assert!(matches!(
            s,
            SkillsSource::Bundle {
                version: BundleVersion::Pinned(3),
                ..
            }
        ));
        let s: SkillsSource =
            serde_json::from_str(r#"{"kind":"bundle","bundle":"b","version":"newest"}"#).unwrap();
        let mut v = Violations::new();
        s.validate("skills_source", &mut v);
        assert!(!v.is_empty());
    }
}
