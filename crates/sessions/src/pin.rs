//! Which version of its agent a session runs: the pinned version's definition, and the pins
//! of every agent its subagents reach (as they are when it pins), written with the version.

use crate::Sessions;
use sandbox_agents_domain::agent::{AgentRecord, AgentRef};
use sandbox_agents_domain::agent_version::{self, AgentPins, VersionPin};
use sandbox_agents_domain::{ProjectId, SessionId};
use sandbox_agents_errors::{Result, ServiceError};
use sandbox_agents_store::{agents, sessions};
use serde_json::Value;
use sqlx::PgExecutor;

/// `agent` at its version `v`, for a session that pins it: a version it does not have is a
/// 422 that names `agent_version`.
pub(crate) async fn at_version(
    db: impl PgExecutor<'_>,
    agent: AgentRecord,
    v: i64,
) -> Result<AgentRecord> {
    match agents::version(db, agent.id, v).await {
        Ok((summary, spec)) => Ok(AgentRecord {
            spec,
            version: v,
            updated_at: summary.created_at,
            ..agent
        }),
        Err(sandbox_agents_store::Error::NotFound) => Err(ServiceError::field(
            &["agent_version"],
            format!(
                "agent '{}' has no version {v} (its versions are 1 to {})",
                agent.slug, agent.version
            ),
            Value::from(v),
        )),
        Err(e) => Err(e.into()),
    }
}

/// The pins of a session that runs `agent` (at its version): that version, and every agent
/// its subagents reach as they are now.
pub(crate) async fn pins_of(
    tx: &mut sqlx::PgConnection,
    project: ProjectId,
    agent: &AgentRecord,
) -> Result<AgentPins> {
    let slugs: Vec<String> = agent
        .spec
        .subagents
        .iter()
        .map(|s| s.agent.clone())
        .collect();
    let heads = agents::heads(&mut *tx, project).await?;
    Ok(agent_version::pins(agent.id, agent.version, &slugs, &heads))
}

impl Sessions {
    /// Makes the session run `pin` from its next turn (and its sandbox's next boot), its
    /// subagents pinned as they are now. The store's `NotFound` when there is no such
    /// session.
    #[tracing::instrument(skip_all, fields(session.id = %id))]
    pub async fn repin(&self, project: ProjectId, id: SessionId, pin: VersionPin) -> Result<()> {
        let mut tx = self.inner.db.begin().await?;
        let s = sessions::get(&mut *tx, project, id).await?;
        let pins = match pin {
            VersionPin::Latest => None,
            VersionPin::Version(v) => {
                let agent = agents::get(&mut *tx, project, &AgentRef::Id(s.agent_id)).await?;
                let agent = if agent.version == v {
                    agent
                } else {
                    at_version(&mut *tx, agent, v).await?
                };
                Some(pins_of(&mut tx, project, &agent).await?)
            }
        };
        sessions::set_agent_version(&mut *tx, project, id, pin.version(), pins.as_ref()).await?;
        tx.commit().await?;
        tracing::info!(agent_version = ?pin.version(), "session repinned");
        Ok(())
    }
}
