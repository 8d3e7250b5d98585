//! A session with everything its page shows (`GET /api/sessions/{id}`), read as of one
//! moment: the reads run in one `REPEATABLE READ` read-only transaction, so they all see one
//! snapshot. Read one by one, a run that finishes between the reads could show as running
//! in `runs` while the session's status and its sandbox time already count it ended.

use crate::agents;
use crate::environments::{self, SessionEnvironment};
use crate::runs::{self, RunRecord};
use crate::sessions::{self, Holder, SessionRecord};
use crate::{events, Db, Error, Result};
use sandbox_agents_domain::agent::{AgentRecord, AgentRef};
use sandbox_agents_domain::skills::SessionSkills;
use sandbox_agents_domain::{ProjectId, SessionId};
use time::OffsetDateTime;

/// What [`read`] returns: the parts of one snapshot.
#[derive(Debug)]
pub struct SessionView {
    pub session: SessionRecord,
    /// The session's own agent, at the version it runs (not the conversation's holder; see
    /// `holder`).
    pub agent: AgentRecord,
    /// The environment the session was created in; `None` for the server's default image.
    pub environment: Option<SessionEnvironment>,
    /// The boot and stop marks its sandbox time is counted from
    /// ([`events::boot_marks`]).
    pub boot_marks: Vec<(String, OffsetDateTime)>,
    /// Oldest first.
    pub runs: Vec<RunRecord>,
    pub skills: Option<SessionSkills>,
    pub holder: Holder,
}

/// The session `id` of `project` and what its page shows, as of one snapshot; `None` when
/// the project has no such session. `Error::NotFound` when its agent is gone.
#[tracing::instrument(skip_all, fields(session.id = %id))]
pub async fn read(db: &Db, project: ProjectId, id: SessionId) -> Result<Option<SessionView>> {
    let mut tx = db
        .begin_with("begin isolation level repeatable read, read only")
        .await?;
    let session = match sessions::get(&mut *tx, project, id).await {
        Err(Error::NotFound) => return Ok(None),
        other => other?,
    };
    let agent = agents::resolve(
        &mut *tx,
        project,
        &AgentRef::Id(session.agent_id),
        session.pins(),
    )
    .await?;
    let mut environment = environments::of_sessions(&mut *tx, &[id.0]).await?;
    let boot_marks = events::boot_marks(&mut *tx, id).await?;
    let runs = runs::list_for_session(&mut *tx, id).await?;
    let skills = sessions::skills(&mut *tx, id).await?;
    let holder = sessions::holder(&mut *tx, id).await?;
    // Nothing was written: ending the transaction either way releases the snapshot.
    tx.commit().await?;
    Ok(Some(SessionView {
        environment: environment.remove(&id.0),
        session,
        agent,
        boot_marks,
        runs,
        skills,
        holder,
    }))
}
