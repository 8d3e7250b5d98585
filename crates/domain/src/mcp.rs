//! MCP servers an agent uses (issue 39): remote servers over streamable HTTP, which the
//! control plane calls (their credentials stay on it), and local servers started inside the
//! sandbox over stdio. Their tools are offered to the model as `mcp__<server>__<tool>`.

use crate::manifest::is_env_name;
use crate::validation::Violations;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use utoipa::ToSchema;

/// Most MCP servers one agent declares.
pub const MAX_SERVERS: usize = 16;
/// Longest server name: `mcp__<name>__<tool>` must leave room for the tool within the 64
/// characters model providers take.
pub const MAX_NAME: usize = 24;
/// Most headers of one remote server.
pub const MAX_HEADERS: usize = 32;
/// Longest URL.
pub const MAX_URL: usize = 2048;
/// Most words of a stdio server's command, and the longest word.
pub const MAX_COMMAND_WORDS: usize = 64;
pub const MAX_COMMAND_WORD: usize = 4096;
/// Most variables of a stdio server's `env`.
pub const MAX_ENV: usize = 64;
/// Most names in `allowed_tools`.
pub const MAX_ALLOWED_TOOLS: usize = 256;
/// How long one tool call may take when the server does not say, and at most.
pub const DEFAULT_TIMEOUT_SECONDS: u32 = 60;
pub const MAX_TIMEOUT_SECONDS: u32 = 600;
/// The prefix of every MCP tool's name as the model sees it.
pub const TOOL_PREFIX: &str = "mcp__";

/// Strings as OpenAPI shows them: bounded (the fields hold plain strings).
macro_rules! bounded_text {
    ($name:ident, $max:expr, $doc:literal) => {
        #[doc = $doc]
        pub struct $name;

        impl utoipa::PartialSchema for $name {
            fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
                use utoipa::openapi::schema::{ObjectBuilder, SchemaType, Type};
                ObjectBuilder::new()
                    .schema_type(SchemaType::Type(Type::String))
                    .max_length(Some($max))
                    .into()
            }
        }

        impl ToSchema for $name {}
    };
}

bounded_text!(ToolNameText, 64, "A tool's name on its server.");
bounded_text!(CommandWord, MAX_COMMAND_WORD, "A word of a command.");
bounded_text!(EnvValue, 32 * 1024, "An environment variable's value.");
bounded_text!(HeaderText, 8192, "A header's value, or its format.");
bounded_text!(SecretName, 128, "A secret's name.");
bounded_text!(ServerName, MAX_NAME, "An MCP server's name in its agent.");

/// One MCP server of an agent: `url` (remote, over streamable HTTP, called by the control
/// plane) or `command` (started inside the sandbox, spoken to over stdio), never both.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct McpServer {
    /// Unique in the agent: 1 to 24 ASCII letters, digits, `_` or `-`, without `__`, not ending with `_`. Its
    /// tools are offered as `mcp__<name>__<tool>`.
    #[schema(pattern = "^[A-Za-z0-9_-]{1,24}$", min_length = 1, max_length = 24)]
    pub name: String,
    /// A remote server's endpoint (`https://…/mcp`, or `http://`). Private, loopback and
    /// metadata addresses are refused unless the operator allows them
    /// (`--mcp-allow-private`), here and again at every connection.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(max_length = 2048)]
    pub url: Option<String>,
    /// Headers sent with every request to a remote server: a plain value, or a project
    /// secret's (`{"secret": "GITHUB_TOKEN", "format": "Bearer {value}"}`), read on the
    /// control plane when it connects and never sent into the sandbox. At most 32.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, McpHeader>,
    /// A local server's command, run in the sandbox (`["python", "-m", "server"]`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(min_items = 1, max_items = 64, value_type = Option<Vec<CommandWord>>)]
    pub command: Option<Vec<String>>,
    /// A local server's extra environment variables, added to the session's own (which hold
    /// the secrets bound to the session with `secret_bindings`: bind secrets there, not
    /// here). At most 64.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schema(value_type = BTreeMap<String, EnvValue>)]
    pub env: BTreeMap<String, String>,
    /// The server's tools the model is offered (their names as the server gives them); null:
    /// every tool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(max_items = 256, value_type = Option<Vec<ToolNameText>>)]
    pub allowed_tools: Option<Vec<String>>,
    /// Whether the session's turns need the server: a required server that cannot be reached
    /// fails the run; another becomes an event and a tool error. Default false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    #[schema(default = false)]
    pub required: bool,
    /// How long one tool call may take, in seconds: 1 to 600; null: 60.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 1, maximum = 600)]
    pub timeout_seconds: Option<u32>,
}

/// A header's value: text, or a project secret's value in `format` (`{value}` is replaced).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum McpHeader {
    Plain(String),
    Secret(McpSecretHeader),
}

impl utoipa::PartialSchema for McpHeader {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use utoipa::openapi::schema::OneOfBuilder;
        OneOfBuilder::new()
            .item(<HeaderText as utoipa::PartialSchema>::schema())
            .item(utoipa::openapi::Ref::from_schema_name("McpSecretHeader"))
            .description(Some(
                "A header's value: text, or `{\"secret\", \"format\"}`.",
            ))
            .into()
    }
}

impl ToSchema for McpHeader {
    fn schemas(
        schemas: &mut Vec<(
            String,
            utoipa::openapi::RefOr<utoipa::openapi::schema::Schema>,
        )>,
    ) {
        schemas.push((
            "McpSecretHeader".into(),
            <McpSecretHeader as utoipa::PartialSchema>::schema(),
        ));
        <McpSecretHeader as ToSchema>::schemas(schemas);
    }
}

/// A header whose value comes from a project secret.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct McpSecretHeader {
    /// The secret's name (it must exist when the agent is saved).
    #[schema(value_type = SecretName)]
    pub secret: String,
    /// The header's value, with `{value}` standing for the secret's; default `"{value}"`.
    #[serde(default = "value_only")]
    #[schema(default = "{value}", value_type = HeaderText)]
    pub format: String,
}

fn value_only() -> String {
    "{value}".into()
}

impl McpServer {
    /// How long one call may take.
    pub fn timeout(&self) -> std::time::Duration {
        std::time::Duration::from_secs(u64::from(
            self.timeout_seconds.unwrap_or(DEFAULT_TIMEOUT_SECONDS),
        ))
    }

    /// Whether the model is offered `tool` of this server.
    pub fn allows(&self, tool: &str) -> bool {
        self.allowed_tools
            .as_ref()
            .is_none_or(|a| a.iter().any(|t| t == tool))
    }

    /// The secrets its headers read.
    pub fn secrets(&self) -> impl Iterator<Item = &str> {
        self.headers.values().filter_map(|h| match h {
            McpHeader::Secret(s) => Some(s.secret.as_str()),
            McpHeader::Plain(_) => None,
        })
    }
}

/// An agent's MCP server as the control plane finds it now (`GET
/// /api/agents/{ref}/mcp-servers`): a remote one is connected to and listed; one run in the
/// sandbox is listed when a session's turn starts.
#[derive(Clone, Debug, PartialEq, Serialize, ToSchema)]
pub struct McpServerStatus {
    pub name: String,
    /// `remote` (`url`) or `sandbox` (`command`).
    #[schema(example = "remote")]
    pub kind: String,
    pub url: Option<String>,
    pub required: bool,
    /// The protocol revision the connection speaks (`2026-07-28`, `2025-11-25`...); null when
    /// there is no connection.
    pub protocol: Option<String>,
    /// Its tools, those `allowed_tools` leaves out included (`offered: false`); null when it
    /// could not be listed (or runs in the sandbox).
    pub tools: Option<Vec<McpToolStatus>>,
    /// Why it could not be reached or listed; null when it was.
    pub error: Option<String>,
}

/// One tool of a server, as [`McpServerStatus`] lists it.
#[derive(Clone, Debug, PartialEq, Serialize, ToSchema)]
pub struct McpToolStatus {
    /// Its name on the server.
    pub name: String,
    /// The name the model calls it by: `mcp__<server>__<tool>`.
    pub offered_as: String,
    pub description: String,
    /// Whether `allowed_tools` lets the model have it.
    pub offered: bool,
}

/// The name the model calls `tool` of `server` by.
pub fn tool_name(server: &str, tool: &str) -> String {
    format!("{TOOL_PREFIX}{server}__{tool}")
}

/// The server and tool an `mcp__<server>__<tool>` name stands for.
pub fn split_tool_name(name: &str) -> Option<(&str, &str)> {
    let rest = name.strip_prefix(TOOL_PREFIX)?;
    let (server, tool) = rest.split_once("__")?;
    (!server.is_empty() && !tool.is_empty()).then_some((server, tool))
}

/// The permission key standing for every tool of a server: `mcp__<server>`.
pub fn server_key(name: &str) -> Option<String> {
    split_tool_name(name).map(|(s, _)| format!("{TOOL_PREFIX}{s}"))
}

/// A server's name never holds `__` nor ends with `_`: the first `__` after the prefix of
/// `mcp__<server>__<tool>` must end the name, or a permission keyed by it would never match
/// (`gh_`'s tools would read as server `gh`, tool `_x`, and run unasked).
fn is_server_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME
        && !name.contains("__")
        && !name.ends_with('_')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// Whether `name` is a header name HTTP takes.
fn is_header_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 256
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// Headers the transport sets itself: a server's own would be overwritten or confuse it.
const RESERVED_HEADERS: &[&str] = &[
    "host",
    "content-length",
    "content-type",
    "accept",
    "connection",
    "transfer-encoding",
    "mcp-session-id",
    "mcp-protocol-version",
    "last-event-id",
];

/// Checks a list of MCP servers at `loc` (e.g. `mcp_servers`). The address rules and the
/// secrets' existence are checked where the deployment's settings and the project are known.
pub fn validate_servers(servers: &[McpServer], loc: &str, v: &mut Violations) {
    if servers.len() > MAX_SERVERS {
        v.push(
            "too_long",
            &[loc],
            format!("at most {MAX_SERVERS} MCP servers"),
            Value::from(servers.len()),
        );
        return;
    }
    let mut seen = std::collections::HashSet::new();
    for (i, s) in servers.iter().enumerate() {
        let idx = i.to_string();
        let at = |f: &'static str| [loc, idx.as_str(), f];
        if !is_server_name(&s.name) {
            v.push(
                "value_error",
                &at("name"),
                format!("a server's name is 1 to {MAX_NAME} ASCII letters, digits, '_' or '-', without '__' and not ending with '_'"),
                Value::from(s.name.as_str()),
            );
        } else if !seen.insert(s.name.to_ascii_lowercase()) {
            v.push(
                "value_error",
                &at("name"),
                format!("two servers are named '{}'", s.name),
                Value::from(s.name.as_str()),
            );
        }
        match (&s.url, &s.command) {
            (Some(_), Some(_)) | (None, None) => v.push(
                "value_error",
                &[loc, idx.as_str()],
                "a server has a url (remote, over streamable HTTP) or a command (run in the sandbox over stdio), and not both",
                Value::Null,
            ),
            (Some(url), None) => validate_remote(s, url, &at, v),
            (None, Some(command)) => validate_local(s, command, &at, v),
        }
        if let Some(allowed) = &s.allowed_tools {
            if allowed.len() > MAX_ALLOWED_TOOLS {
                v.push(
                    "too_long",
                    &at("allowed_tools"),
                    format!("at most {MAX_ALLOWED_TOOLS} tools"),
                    Value::from(allowed.len()),
                );
            } else if let Some(bad) = allowed
                .iter()
                .find(|t| !crate::tools::is_tool_name(&tool_name(&s.name, t)))
            {
                v.push(
                    "value_error",
                    &at("allowed_tools"),
                    format!("'mcp__{}__{bad}' is not a name models take (1 to 64 ASCII letters, digits, '_' or '-')", s.name),
                    Value::from(bad.as_str()),
                );
            }
        }
        if let Some(t) = s.timeout_seconds {
            if !(1..=MAX_TIMEOUT_SECONDS).contains(&t) {
                v.push(
                    "value_error",
                    &at("timeout_seconds"),
                    format!("timeout_seconds is 1 to {MAX_TIMEOUT_SECONDS}; null: {DEFAULT_TIMEOUT_SECONDS}"),
                    Value::from(t),
                );
            }
        }
    }
}

fn validate_remote<'a>(
    s: &McpServer,
    url: &str,
    at: &dyn Fn(&'static str) -> [&'a str; 3],
    v: &mut Violations,
) {
    if url.len() > MAX_URL {
        v.push(
            "string_too_long",
            &at("url"),
            format!("url is at most {MAX_URL} bytes"),
            Value::Null,
        );
    } else if !(url.starts_with("https://") || url.starts_with("http://")) {
        v.push(
            "value_error",
            &at("url"),
            "url must start with https:// or http://",
            Value::from(url),
        );
    }
    if !s.env.is_empty() {
        v.push(
            "value_error",
            &at("env"),
            "env is for a server run in the sandbox (command); a remote server takes headers",
            Value::Null,
        );
    }
    if s.headers.len() > MAX_HEADERS {
        v.push(
            "too_long",
            &at("headers"),
            format!("at most {MAX_HEADERS} headers"),
            Value::from(s.headers.len()),
        );
    }
    for (name, h) in &s.headers {
        if !is_header_name(name) || RESERVED_HEADERS.contains(&name.to_ascii_lowercase().as_str()) {
            v.push(
                "value_error",
                &at("headers"),
                format!("'{name}' is not a header a server may be given (a token of HTTP, and not one the transport sets)"),
                Value::from(name.as_str()),
            );
            continue;
        }
        let text = match h {
            McpHeader::Plain(t) => t.as_str(),
            McpHeader::Secret(sh) => {
                if !is_env_name(&sh.secret) {
                    v.push(
                        "value_error",
                        &at("headers"),
                        format!("'{}' is not a secret's name", sh.secret),
                        Value::from(sh.secret.as_str()),
                    );
                }
                if !sh.format.contains("{value}") {
                    v.push(
                        "value_error",
                        &at("headers"),
                        format!("the format of header '{name}' must contain {{value}}"),
                        Value::from(sh.format.as_str()),
                    );
                }
                sh.format.as_str()
            }
        };
        if text.len() > 8192 || text.chars().any(|c| c.is_control() && c != '\t') {
            v.push(
                "value_error",
                &at("headers"),
                format!(
                    "the value of header '{name}' must be at most 8 KiB without control characters"
                ),
                Value::Null,
            );
        }
    }
}

fn validate_local<'a>(
    s: &McpServer,
    command: &[String],
    at: &dyn Fn(&'static str) -> [&'a str; 3],
    v: &mut Violations,
) {
    if command.is_empty() || command[0].trim().is_empty() {
        v.push(
            "value_error",
            &at("command"),
            "command names a program, then its arguments",
            Value::Null,
        );
    } else if command.len() > MAX_COMMAND_WORDS
        || command
            .iter()
            .any(|w| w.len() > MAX_COMMAND_WORD || w.contains('\0'))
    {
        v.push(
            "value_error",
            &at("command"),
            format!("command has at most {MAX_COMMAND_WORDS} words of at most {MAX_COMMAND_WORD} bytes, without NUL"),
            Value::Null,
        );
    }
    if !s.headers.is_empty() {
        v.push(
            "value_error",
            &at("headers"),
            "headers are for a remote server (url)",
            Value::Null,
        );
    }
    if s.env.len() > MAX_ENV {
        v.push(
            "value_error",
            &at("env"),
            format!("at most {MAX_ENV} variables"),
            Value::Null,
        );
    }
    if let Some(bad) = s.env.keys().find(|k| !is_env_name(k)) {
        v.push(
            "value_error",
            &at("env"),
            format!("'{bad}' is not an environment variable's name"),
            Value::from(bad.as_str()),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(v: Value) -> McpServer {
        serde_json::from_value(v).unwrap()
    }

    fn errors(servers: &[McpServer]) -> Vec<String> {
        let mut v = Violations::new();
        validate_servers(servers, "mcp_servers", &mut v);
        v.into_result()
            .err()
            .unwrap_or_default()
            .into_iter()
            .map(|e| e.msg)
            .collect()
    }

    #[test]
    fn a_remote_and_a_local_server_pass() {
        let remote = server(serde_json::json!({
            "name": "github", "url": "https://example.com/mcp",
            "headers": {"Authorization": {"secret": "GITHUB_TOKEN", "format": "Bearer {value}"}, "X-Team": "a"},
            "allowed_tools": ["create_issue"], "required": true,
        }));
        assert_eq!(errors(std::slice::from_ref(&remote)), Vec::<String>::new());
        let local =
            server(serde_json::json!({"name": "fs", "command": ["python", "-m", "server"]}));
        assert_eq!(errors(&[local]), Vec::<String>::new());
        assert_eq!(remote.secrets().collect::<Vec<_>>(), ["GITHUB_TOKEN"]);
        assert!(remote.allows("create_issue") && !remote.allows("delete_repo"));
    }

    #[test]
    fn bad_servers_say_what_is_wrong() {
        let both =
            server(serde_json::json!({"name": "a", "url": "https://x/mcp", "command": ["x"]}));
        let neither = server(serde_json::json!({"name": "b"}));
        let bad_name = server(serde_json::json!({"name": "a__b", "url": "ftp://x"}));
        let trailing = server(serde_json::json!({"name": "gh_", "url": "https://x/mcp"}));
        let dup = server(serde_json::json!({"name": "A", "command": ["x"]}));
        let bad_header = server(serde_json::json!({"name": "h", "url": "https://x",
            "headers": {"Mcp-Session-Id": "x", "Authorization": {"secret": "T", "format": "Bearer"}}}));
        let errs = errors(&[both, neither, bad_name, dup, bad_header, trailing]);
        assert_eq!(errs.len(), 8, "{errs:?}");
        assert!(errs.iter().any(|e| e.contains("not ending with '_'")));
        assert!(errs.iter().any(|e| e.contains("two servers are named 'A'")));
        assert!(errs.iter().any(|e| e.contains("must contain {value}")));
    }

    #[test]
    fn names_split_back() {
        assert_eq!(tool_name("gh", "create_issue"), "mcp__gh__create_issue");
        assert_eq!(
            split_tool_name("mcp__gh__create__issue"),
            Some(("gh", "create__issue"))
        );
        assert_eq!(split_tool_name("mcp__gh"), None);
        assert_eq!(
            server_key("mcp__gh__create_issue").as_deref(),
            Some("mcp__gh")
        );
    }
}
