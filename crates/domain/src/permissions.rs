//! An agent's permissions: for each tool it has, whether a call runs (`allow`, the default),
//! waits for a person's decision (`ask`: the run parks as on a deferrable client tool until
//! `POST /api/sessions/{id}/tool-confirmations`), or is never offered to the model (`deny`).
//!
//! A permission is keyed by a tool's name (`shell`, `read_file`, `python`, a client tool's
//! name), a group of sandbox tools (`filesystem`: its four file tools; `skills`:
//! `load_skill`), or a subagent's slug. A tool's own name wins over its group.

use crate::notebook::PYTHON_TOOL;
use crate::skills::LOAD_SKILL_TOOL;
use crate::Violations;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use utoipa::ToSchema;

/// What happens to a call of the tool.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum PermissionMode {
    /// The call runs.
    #[default]
    Allow,
    /// The call waits for a person to allow or deny it.
    Ask,
    /// The tool is not offered to the model.
    Deny,
}

/// One tool's permission.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Permission {
    pub mode: PermissionMode,
    /// `shell` under `ask` only: commands that run without asking when they start with one of
    /// these (at a word boundary) and neither chain, substitute, expand nor redirect (no
    /// `;`, `&`, `|`, `` ` ``, `$`, `\`, `<`, `>` or newline: such a command always asks). A prefix
    /// vouches for every argument after it: give none that can run other programs (`find
    /// -exec`, `git -c`, git commands that run hooks). At most 100, each 1 to 200 characters.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schema(max_items = 100, value_type = Vec<CommandPrefix>)]
    pub allow_prefixes: Vec<String>,
}

/// A command prefix, as OpenAPI shows it (the field holds plain strings).
pub struct CommandPrefix;

impl utoipa::PartialSchema for CommandPrefix {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use utoipa::openapi::schema::{ObjectBuilder, SchemaType, Type};
        ObjectBuilder::new()
            .schema_type(SchemaType::Type(Type::String))
            .min_length(Some(1))
            .max_length(Some(MAX_PREFIX_CHARS))
            .into()
    }
}

impl ToSchema for CommandPrefix {}

/// An agent's permissions by tool, group or subagent.
pub type Permissions = BTreeMap<String, Permission>;

/// Most permissions an agent has, and most prefixes one has.
pub const MAX_PERMISSIONS: usize = 200;
pub const MAX_PREFIXES: usize = 100;
pub const MAX_PREFIX_CHARS: usize = 200;

/// The group a sandbox tool's permission is also found under.
pub fn group_of(tool: &str) -> Option<&'static str> {
    match tool {
        "read_file" | "write_file" | "edit_file" | "list_files" => Some("filesystem"),
        LOAD_SKILL_TOOL => Some("skills"),
        _ => None,
    }
}

/// The sandbox tools a group (or a tool's own name) stands for.
pub fn sandbox_tools(key: &str) -> &'static [&'static str] {
    match key {
        "shell" => &["shell"],
        "filesystem" => &["read_file", "write_file", "edit_file", "list_files"],
        "read_file" => &["read_file"],
        "write_file" => &["write_file"],
        "edit_file" => &["edit_file"],
        "list_files" => &["list_files"],
        PYTHON_TOOL => &[PYTHON_TOOL],
        "skills" | LOAD_SKILL_TOOL => &[LOAD_SKILL_TOOL],
        _ => &[],
    }
}

/// The permission that governs a call of `tool` (its name as offered) whose permission key
/// is `key` (a subagent's slug for a subagent, else the tool's name): its own, else its
/// group's, else allow.
pub fn permission_for<'a>(perms: &'a Permissions, key: &str) -> Option<&'a Permission> {
    perms
        .get(key)
        .or_else(|| group_of(key).and_then(|g| perms.get(g)))
        .or_else(|| crate::mcp::server_key(key).and_then(|g| perms.get(&g)))
}

/// What a call with these JSON-encoded `arguments` needs under `p`.
pub fn decide(p: Option<&Permission>, tool: &str, arguments: &str) -> PermissionMode {
    let Some(p) = p else {
        return PermissionMode::Allow;
    };
    if p.mode == PermissionMode::Ask && tool == "shell" && !p.allow_prefixes.is_empty() {
        let command = serde_json::from_str::<Value>(arguments)
            .ok()
            .and_then(|v| v.get("command").and_then(Value::as_str).map(str::to_owned));
        if let Some(c) = command {
            if p.allow_prefixes.iter().any(|pre| prefix_allows(pre, &c)) {
                return PermissionMode::Allow;
            }
        }
    }
    p.mode
}

/// Whether `command` runs without asking under `prefix`: it starts with the prefix at a word
/// boundary and does nothing a prefix cannot vouch for (chain, substitute, redirect, expand).
/// Every `$` and `\` asks: where `/bin/sh` is bash, expansions such as `${x@P}` or an array
/// subscript run commands without any `$(`, and escapes hide what the words are.
pub fn prefix_allows(prefix: &str, command: &str) -> bool {
    const UNSAFE: &[&str] = &[";", "&", "|", "`", "$", "\\", "<", ">", "\n", "\r"];
    let command = command.trim_start();
    let Some(rest) = command.strip_prefix(prefix) else {
        return false;
    };
    let boundary = rest.is_empty()
        || rest.starts_with(char::is_whitespace)
        || prefix.ends_with(char::is_whitespace);
    boundary && !UNSAFE.iter().any(|u| command.contains(u))
}

/// Checks `perms` against the tools the agent has: `sandbox` (the names its capabilities
/// offer), its subagents (`(slug, handoff)`) and its client tools' names. An unknown key, a
/// prefix rule off `shell`, or `ask` on a handoff is a 422 under `permissions.<key>`.
pub fn validate(
    perms: &Permissions,
    sandbox: &[&str],
    subagents: &[(&str, bool)],
    client_tools: &[&str],
    mcp_servers: &[&str],
    v: &mut Violations,
) {
    if perms.len() > MAX_PERMISSIONS {
        v.push(
            "value_error",
            &["permissions"],
            format!("an agent has at most {MAX_PERMISSIONS} permissions"),
            Value::from(perms.len()),
        );
        return;
    }
    for (key, p) in perms {
        let at = ["permissions", key.as_str()];
        let tools = sandbox_tools(key);
        let sandbox_has = !tools.is_empty() && tools.iter().any(|t| sandbox.contains(t));
        let subagent = subagents.iter().find(|(s, _)| *s == key);
        // `mcp__<server>` (every tool of it) or `mcp__<server>__<tool>`: the tools are known
        // only when a run lists them, so the server is what must exist.
        let mcp = key
            .strip_prefix(crate::mcp::TOOL_PREFIX)
            .map(|rest| rest.split_once("__").map_or(rest, |(s, _)| s))
            .is_some_and(|s| mcp_servers.contains(&s));
        if !sandbox_has && subagent.is_none() && !client_tools.contains(&key.as_str()) && !mcp {
            v.push(
                "value_error",
                &at,
                format!("the agent has no tool, group or subagent '{key}' (its capabilities, client_tools, subagents and mcp_servers name what it has)"),
                Value::from(key.as_str()),
            );
            continue;
        }
        let hands_off = subagents.iter().any(|(s, handoff)| *s == key && *handoff);
        if hands_off && p.mode == PermissionMode::Ask {
            v.push(
                "value_error",
                &at,
                format!("'{key}' is a handoff, which cannot wait for a person: allow or deny it"),
                Value::from("ask"),
            );
        }
        if !p.allow_prefixes.is_empty() {
            let prefixes_at = ["permissions", key.as_str(), "allow_prefixes"];
            if key != "shell" || p.mode != PermissionMode::Ask {
                v.push(
                    "value_error",
                    &prefixes_at,
                    "allow_prefixes is a rule of the shell tool under ask",
                    Value::from(p.allow_prefixes.len()),
                );
            } else if p.allow_prefixes.len() > MAX_PREFIXES {
                v.push(
                    "value_error",
                    &prefixes_at,
                    format!("at most {MAX_PREFIXES} prefixes"),
                    Value::from(p.allow_prefixes.len()),
                );
            } else if let Some(bad) = p
                .allow_prefixes
                .iter()
                .find(|x| x.trim().is_empty() || x.chars().count() > MAX_PREFIX_CHARS)
            {
                v.push(
                    "value_error",
                    &prefixes_at,
                    format!("a prefix is 1 to {MAX_PREFIX_CHARS} characters, not blank"),
                    Value::from(bad.as_str()),
                );
            }
        }
    }
}

/// The body of `POST /api/sessions/{session_id}/tool-confirmations`: a person's decision on
/// a call that waits for one.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolConfirmationCreate {
    /// The `call_id` of the `agent.tool_use` event marked `awaiting_approval`.
    pub call_id: String,
    /// `allow`: the call runs as the run continues (a client call goes to the caller);
    /// `deny`: the model gets the denial (with `message`) as the tool's error.
    pub decision: crate::state::ToolDecision,
    /// Why, for the model (with a denial) and the log. At most 4000 characters.
    #[serde(default)]
    #[schema(max_length = 4000)]
    pub message: Option<String>,
}

/// Most characters of a decision's message.
pub const MAX_DECISION_MESSAGE: usize = 4000;

/// Which subagent frame made a call: `payload.subagent` of its events.
#[derive(ToSchema)]
#[allow(dead_code)]
pub struct SubagentMark {
    /// The subagent's slug.
    agent: String,
    /// The call of the frame above that started the subagent.
    call_id: String,
}

/// A call the session waits on a person's decision for (`GET .../tool-confirmations`).
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct AwaitingConfirmation {
    /// Decide it with this id (`POST .../tool-confirmations`).
    pub call_id: String,
    /// The tool's name as the model called it.
    pub tool: String,
    /// What kind of call it is: `sandbox` (runs in the sandbox), `subagent` or `client`
    /// (goes to the caller once allowed).
    pub kind: crate::state::ApprovalFor,
    /// The arguments the model passed, JSON-encoded (a string, not an object).
    pub arguments: String,
    /// The run waiting on it.
    pub run_id: String,
    /// The seq of its `agent.tool_use` event.
    pub seq: i64,
    /// The subagent whose call it is (as events mark it); null for the session's agent.
    #[schema(value_type = Option<SubagentMark>)]
    pub subagent: Option<Value>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ask_shell(prefixes: &[&str]) -> Permission {
        Permission {
            mode: PermissionMode::Ask,
            allow_prefixes: prefixes.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn a_prefix_vouches_only_for_a_plain_command_that_starts_with_it_at_a_word() {
        let p = ask_shell(&["ls", "git status", "cat "]);
        let d = |c: &str| {
            decide(
                Some(&p),
                "shell",
                &serde_json::json!({"command": c}).to_string(),
            )
        };
        assert_eq!(d("ls"), PermissionMode::Allow);
        assert_eq!(d("  ls -la /workspace"), PermissionMode::Allow);
        assert_eq!(d("git status --short"), PermissionMode::Allow);
        assert_eq!(d("cat notes.txt"), PermissionMode::Allow);
        for asks in [
            "lsblk",
            "rm -rf /",
            "ls; rm -rf /",
            "ls && curl x",
            "ls | sh",
            "ls `rm x`",
            "ls $(rm x)",
            "ls ${x=\\$\\(id\\)} ${x@P}",
            "ls $HOME",
            "ls \\$\\(id\\)",
            "ls > /etc/passwd",
            "ls\nrm x",
            "git statusx",
        ] {
            assert_eq!(d(asks), PermissionMode::Ask, "{asks}");
        }
        assert_eq!(decide(Some(&p), "shell", "not json"), PermissionMode::Ask);
        assert_eq!(decide(None, "shell", "{}"), PermissionMode::Allow);
    }

    #[test]
    fn a_tools_own_permission_wins_over_its_groups() {
        let mut perms = Permissions::new();
        perms.insert(
            "filesystem".into(),
            Permission {
                mode: PermissionMode::Ask,
                ..Default::default()
            },
        );
        perms.insert("read_file".into(), Permission::default());
        assert_eq!(
            permission_for(&perms, "read_file").unwrap().mode,
            PermissionMode::Allow
        );
        assert_eq!(
            permission_for(&perms, "write_file").unwrap().mode,
            PermissionMode::Ask
        );
        assert!(permission_for(&perms, "shell").is_none());
    }

    #[test]
    fn every_permission_must_name_something_the_agent_has() {
        let mut perms = Permissions::new();
        let ask = Permission {
            mode: PermissionMode::Ask,
            ..Default::default()
        };
        perms.insert("python".into(), ask.clone());
        perms.insert("filesystem".into(), ask.clone());
        perms.insert("helper".into(), ask.clone());
        perms.insert("back".into(), ask.clone());
        perms.insert("both".into(), ask.clone());
        perms.insert("approve".into(), ask.clone());
        perms.insert("filesystem2".into(), ask.clone());
        perms.insert("mcp__gh".into(), ask.clone());
        perms.insert("mcp__gh__create_issue".into(), ask.clone());
        perms.insert("mcp__other__x".into(), ask.clone());
        perms.insert("write_file".into(), ask_shell(&["ls"]));
        perms.insert("shell".into(), ask_shell(&["   "]));
        let mut v = Violations::new();
        validate(
            &perms,
            &[
                "shell",
                "read_file",
                "write_file",
                "edit_file",
                "list_files",
            ],
            &[
                ("helper", false),
                ("back", true),
                ("both", false),
                ("both", true),
            ],
            &["approve"],
            &["gh"],
            &mut v,
        );
        let errors = v.into_result().unwrap_err();
        let locs: Vec<String> = errors
            .iter()
            .map(|e| serde_json::to_string(&e.loc).unwrap())
            .collect();
        assert_eq!(
            locs,
            [
                r#"["body","permissions","back"]"#,
                r#"["body","permissions","both"]"#,
                r#"["body","permissions","filesystem2"]"#,
                r#"["body","permissions","mcp__other__x"]"#,
                r#"["body","permissions","python"]"#,
                r#"["body","permissions","shell","allow_prefixes"]"#,
                r#"["body","permissions","write_file","allow_prefixes"]"#,
            ],
            "{errors:?}"
        );
    }
}
