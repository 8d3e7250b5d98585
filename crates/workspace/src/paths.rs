//! Workspace paths in messages and errors: parsing a caller's path, naming it back, and what
//! each way a path can fail means for the caller (missing, a directory, leaving the
//! workspace through a link). The lexical check itself is `sandbox::path::WorkspacePath`.

use sandbox_agents_errors::{Result, ServiceError};
use sandbox_agents_sandbox::path::WorkspacePath;
use sandbox_agents_sandbox::{SandboxError, WORKDIR};

/// What an operation was, for the "is a directory" message.
#[derive(Clone, Copy)]
pub enum Op {
    List,
    Read,
    Upload,
    Delete,
}

pub fn parse(raw: &str) -> Result<WorkspacePath> {
    WorkspacePath::parse(raw).map_err(ServiceError::BadRequest)
}

/// How a path is named in messages: workspace-relative, `.` for the root.
pub fn shown(p: &WorkspacePath) -> String {
    if p.is_root() {
        ".".into()
    } else {
        p.relative().to_owned()
    }
}

pub fn missing(p: &WorkspacePath) -> ServiceError {
    ServiceError::Sandbox(SandboxError::NoSuchPath(shown(p)))
}

pub fn escapes(p: &WorkspacePath) -> ServiceError {
    ServiceError::BadRequest(format!(
        "path leaves the workspace: '{}' resolves outside {WORKDIR} through a symbolic link",
        shown(p)
    ))
}

pub fn is_dir(p: &WorkspacePath, op: Op) -> ServiceError {
    let name = shown(p);
    ServiceError::BadRequest(match op {
        Op::Read => format!("'{name}' is a directory; list it with GET /files instead"),
        Op::Delete => format!("'{name}' is a directory; pass recursive=true to delete it"),
        Op::Upload => format!("'{name}' is a directory; name a file to upload to"),
        Op::List => format!("'{name}' is a directory"),
    })
}

/// A sandbox that vanished under a running session (a concurrent stop) is a conflict.
pub fn gone(e: SandboxError) -> ServiceError {
    match e {
        SandboxError::NotFound(_) => ServiceError::Conflict(
            "session is not running any more (its sandbox is gone); start it first".into(),
        ),
        other => other.into(),
    }
}
