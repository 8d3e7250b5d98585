//! Which sandbox a data-plane request is for, once its token (or signature) proved it: what
//! envd's handlers, `/files` and the code interpreter act on.

use sandbox_agents_domain::{ProjectId, SessionId};

pub(super) struct Target {
    pub(super) project: ProjectId,
    pub(super) id: SessionId,
    /// Opened by a signed file URL: the one path (as the URL names it) it may read or write.
    pub(super) only_path: Option<String>,
}
