//! `session_memories`: what the last boot of a session staged of its agent's memory (see the
//! migration). The lifecycle writes it at every boot and reads it at a stop, to tell the
//! session's own edits of `memories/MEMORY.md` from what it was given; the run loop reads the
//! summary for the system prompt.

use crate::error::Result;
use sandbox_agents_domain::{AgentId, SessionId};
use sqlx::PgExecutor;

/// What one boot staged.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StagedMemory {
    pub agent_id: AgentId,
    /// The store's version staged (0: the empty store).
    pub version: i64,
    pub memory: String,
    pub summary: String,
    /// Stored conversation messages at the boot; a stop consolidates the ones after.
    pub conversation_start: i32,
    /// The session's `memories/MEMORY.md` as last read back from its sandbox since this boot
    /// (at the end of a run); `None` until one is. [`record`] ignores it (a boot starts over).
    pub last_read: Option<String>,
}

/// Records (or replaces) what a boot of `session` staged.
#[tracing::instrument(skip_all, fields(session.id = %session))]
pub async fn record(db: impl PgExecutor<'_>, session: SessionId, m: &StagedMemory) -> Result<()> {
    sqlx::query!(
        "insert into session_memories
                (session_id, agent_id, version, memory, summary, conversation_start)
         values ($1, $2, $3, $4, $5, $6)
         on conflict (session_id) do update
            set agent_id = excluded.agent_id, version = excluded.version,
                memory = excluded.memory, summary = excluded.summary,
                conversation_start = excluded.conversation_start, staged_at = now(),
                last_read = null",
        session.0,
        m.agent_id.0,
        m.version,
        m.memory,
        m.summary,
        m.conversation_start,
    )
    .execute(db)
    .await?;
    Ok(())
}

/// What the last boot of `session` staged; `None` when none staged memory (the agent has no
/// `memory` capability, or the session never booted).
#[tracing::instrument(skip_all, fields(session.id = %session))]
pub async fn get(db: impl PgExecutor<'_>, session: SessionId) -> Result<Option<StagedMemory>> {
    Ok(sqlx::query_as!(
        StagedMemory,
        r#"select agent_id as "agent_id: AgentId", version, memory, summary, conversation_start,
                  last_read
             from session_memories where session_id = $1"#,
        session.0,
    )
    .fetch_optional(db)
    .await?)
}

/// Keeps `text` as the session's `MEMORY.md` last read back from its sandbox; nothing when
/// its boot staged no memory.
#[tracing::instrument(skip_all, fields(session.id = %session))]
pub async fn record_read(db: impl PgExecutor<'_>, session: SessionId, text: &str) -> Result<()> {
    sqlx::query!(
        "update session_memories set last_read = $2 where session_id = $1",
        session.0,
        text,
    )
    .execute(db)
    .await?;
    Ok(())
}

/// Forgets what was staged (a boot of an agent that no longer has the capability).
#[tracing::instrument(skip_all, fields(session.id = %session))]
pub async fn clear(db: impl PgExecutor<'_>, session: SessionId) -> Result<()> {
    sqlx::query!(
        "delete from session_memories where session_id = $1",
        session.0
    )
    .execute(db)
    .await?;
    Ok(())
}
