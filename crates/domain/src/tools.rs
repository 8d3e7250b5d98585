//! What an agent declares besides its instructions: client tools, secret bindings, subagents,
//! and where its skills and workspace come from (API.md §3.2, §6).

use crate::manifest::{default_host, default_ref, default_true, is_env_name};
use crate::validation::Violations;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::ToSchema;

/// Longest a caller may make an ordinary client-tool call wait (API.md §6.1).
pub const MAX_CLIENT_TOOL_TIMEOUT_SECONDS: f64 = 3600.0;
/// How long an ordinary client-tool call waits when the declaration does not say.
pub const DEFAULT_CLIENT_TOOL_TIMEOUT_SECONDS: f64 = 120.0;

/// A tool the caller implements; the control plane never runs it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ClientTool {
    pub name: String,
    #[serde(default)]
    pub description: String,
    /// JSON Schema of the arguments; `{}` takes none.
    #[serde(default = "empty_object")]
    #[schema(value_type = Object)]
    pub parameters: Value,
    /// A question for a person: the turn parks instead of waiting.
    #[serde(default)]
    pub deferrable: bool,
    /// How long an ordinary call waits for its answer; null = 120 s, at most 3600.
    #[serde(default)]
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
/// names, whatever the agent's capabilities (API.md §9.15).
pub const BUILTIN_TOOLS: &[&str] = &[
    "shell",
    "read_file",
    "write_file",
    "edit_file",
    "list_files",
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

/// A secret, by name, that becomes an environment variable when the container is created.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct SecretBinding {
    pub secret: String,
    pub env: String,
}

/// Most bindings an agent, or a session, may have. Every sandbox command carries every bound
/// value (each up to 32 KiB), and the kernel bounds a command's environment.
pub const MAX_SECRET_BINDINGS: usize = 32;

pub fn validate_secret_bindings(bindings: &[SecretBinding], loc: &str, v: &mut Violations) {
    if bindings.len() > MAX_SECRET_BINDINGS {
        v.push(
            "too_long",
            &[loc],
            format!("at most {MAX_SECRET_BINDINGS} secret bindings"),
            Value::from(bindings.len()),
        );
    }
    for (i, b) in bindings.iter().enumerate() {
        let idx = i.to_string();
        if b.secret.trim().is_empty() {
            v.push(
                "value_error",
                &[loc, &idx, "secret"],
                "secret must name a secret",
                Value::from(""),
            );
        }
        if !is_env_name(&b.env) {
            v.push(
                "value_error",
                &[loc, &idx, "env"],
                format!("'{}' is not a valid environment variable name", b.env),
                Value::from(b.env.as_str()),
            );
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum SubagentMode {
    Tool,
    Handoff,
}

/// Another agent of the same project this one can call (`tool`) or hand over to (`handoff`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Subagent {
    /// The slug of another agent in the same project.
    pub agent: String,
    #[serde(default = "default_mode")]
    pub mode: SubagentMode,
    #[serde(default)]
    pub tool_name: Option<String>,
    #[serde(default)]
    pub description: String,
}

fn default_mode() -> SubagentMode {
    SubagentMode::Tool
}

/// Where skills come from, tagged by `kind`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum SkillsSource {
    GitRepo {
        repo: String,
        #[serde(rename = "ref", default = "default_ref")]
        git_ref: String,
        #[serde(default = "default_host")]
        host: String,
        #[serde(default)]
        subpath: Option<String>,
        #[serde(default)]
        ssh_key_id: Option<String>,
    },
    LocalDir {
        src: String,
        #[serde(default)]
        subpath: Option<String>,
        #[serde(default = "default_true")]
        lazy: bool,
    },
    Bundle {
        bundle: String,
        #[serde(default)]
        version: BundleVersion,
        #[serde(default)]
        subpath: Option<String>,
        #[serde(default = "default_true")]
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
        if let SkillsSource::Bundle {
            version: BundleVersion::Label(l),
            ..
        } = self
        {
            if l != "latest" {
                v.push(
                    "value_error",
                    &[loc, "version"],
                    "version is a version number or \"latest\"",
                    Value::from(l.as_str()),
                );
            }
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum WorkspaceSourceKind {
    SameAsSkills,
}

/// Stage the skills source's whole tree as the workspace too.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct WorkspaceSource {
    #[serde(default = "same_as_skills")]
    pub kind: WorkspaceSourceKind,
    #[serde(default = "default_dest")]
    pub dest: String,
    #[serde(default = "default_docs_file")]
    pub docs_file: String,
    #[serde(default)]
    pub instructions: Option<String>,
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
