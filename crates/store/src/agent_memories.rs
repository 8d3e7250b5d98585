//! `agent_memories`: each agent's memory store (see the migration). Every write is a
//! compare-and-set on `version`: `put` names the version its writer read and changes nothing
//! when that is stale, so two writers never both win and neither loses the other's update
//! unknowingly (the loser re-reads and writes again).

use crate::error::Result;
use sandbox_agents_domain::memory::AgentMemory;
use sandbox_agents_domain::{AgentId, ProjectId};
use sqlx::PgExecutor;

/// The agent's store; the empty one at version 0 when it has never been written.
#[tracing::instrument(skip_all, fields(agent.id = %agent))]
pub async fn get(
    db: impl PgExecutor<'_>,
    project: ProjectId,
    agent: AgentId,
) -> Result<AgentMemory> {
    let row = sqlx::query_as!(
        AgentMemory,
        r#"select memory, summary, version, updated_at as "updated_at?" from agent_memories
            where agent_id = $1 and project_id = $2"#,
        agent.0,
        project.0,
    )
    .fetch_optional(db)
    .await?;
    Ok(row.unwrap_or_else(AgentMemory::empty))
}

/// Writes the store if its version is still `expected` (0: it was never written), and
/// returns it at `expected + 1`; `None` when `expected` is stale, and then nothing changed.
/// The caller has checked that the agent is the project's.
#[tracing::instrument(skip_all, fields(agent.id = %agent, expected))]
pub async fn put(
    db: impl PgExecutor<'_>,
    project: ProjectId,
    agent: AgentId,
    memory: &str,
    summary: &str,
    expected: i64,
) -> Result<Option<AgentMemory>> {
    if expected == 0 {
        // The first write: only while there is no row (a concurrent first write wins once).
        return Ok(sqlx::query_as!(
            AgentMemory,
            r#"insert into agent_memories (agent_id, project_id, memory, summary, version)
               values ($1, $2, $3, $4, 1)
               on conflict (agent_id) do nothing
               returning memory, summary, version, updated_at as "updated_at?""#,
            agent.0,
            project.0,
            memory,
            summary,
        )
        .fetch_optional(db)
        .await?);
    }
    Ok(sqlx::query_as!(
        AgentMemory,
        r#"update agent_memories
              set memory = $3, summary = $4, version = version + 1, updated_at = now()
            where agent_id = $1 and project_id = $2 and version = $5
           returning memory, summary, version, updated_at as "updated_at?""#,
        agent.0,
        project.0,
        memory,
        summary,
        expected,
    )
    .fetch_optional(db)
    .await?)
}
