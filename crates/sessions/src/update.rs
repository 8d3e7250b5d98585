//! Changing a session in any sandbox state: its labels (title, metadata) and its own network
//! policy. The inherited policy layers (agent, environment) are fixed when the session is
//! created and never change here.

use crate::Sessions;
use sandbox_agents_domain::{ProjectId, SessionId};
use sandbox_agents_errors::Result;
use sandbox_agents_store::sessions::{self, SessionRecord, SessionUpdate};

impl Sessions {
    /// Applies `u` in one statement (a missing session is the store's `NotFound`); when it
    /// set or removed the session's own network policy, tells [`Sessions::network_changed`]
    /// once the change is committed.
    #[tracing::instrument(skip_all, fields(session.id = %id))]
    pub async fn update(
        &self,
        project: ProjectId,
        id: SessionId,
        u: &SessionUpdate<'_>,
    ) -> Result<SessionRecord> {
        let row = sessions::update(&self.inner.db, project, id, u).await?;
        if u.network.is_some() {
            self.network_changed(&row);
        }
        Ok(row)
    }

    /// The session's network policy changed (committed; `session.network_layers()` is the
    /// new one). The point where an egress proxy that caches a sandbox's policy is told to
    /// drop it. Nothing is cached today: the proxy reads the layers on every connection
    /// (`store::sessions::network_layers_by_sandbox`), which is what makes a change apply
    /// to the next connection without a restart, in every server process. A cache added
    /// later must be dropped in every process, not only this one (a `NOTIFY` in the
    /// updating statement, say); an in-process call here is not enough on its own.
    pub fn network_changed(&self, session: &SessionRecord) {
        tracing::debug!(
            session.id = %session.id,
            sandbox.id = session.sandbox_id.as_deref().unwrap_or(""),
            layers = session.network().layers().len(),
            "network policy changed; it applies from the sandbox's next connection"
        );
    }
}
