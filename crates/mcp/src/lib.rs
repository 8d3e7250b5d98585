//! MCP servers an agent uses (issue 39). Remote servers are reached over streamable HTTP by
//! the control plane (their credentials never enter the sandbox), through the same address
//! guard as webhooks; servers run in the sandbox are spoken to over their stdio through the
//! sandbox's daemon. Their tools are listed once per session's connection and called with
//! timeouts and size limits. `hub` keeps the connections, `remote` and `sandboxed` make
//! them, `guard` says where remote ones may go, `content` turns a result into the model's
//! text.

pub mod content;
pub mod guard;
pub mod hub;
pub mod remote;
pub mod sandboxed;

pub use hub::{Answer, Failure, Listing, McpHub, McpTool, SecretSource};
pub use sandboxed::{NoSandboxes, SandboxStdio, Stdio};
