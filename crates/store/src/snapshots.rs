//! The `snapshots` table: workspace archives (and, where the backend keeps them, the sandbox's
//! filesystem as an image, a commit on Docker) that a session can be restored to or forked
//! from.

use crate::error::{Error, Result};
use sandbox_agents_domain::{ProjectId, SessionId};
use sqlx::PgExecutor;
use time::OffsetDateTime;
use uuid::Uuid;

#[derive(Clone, Debug, sqlx::FromRow)]
pub struct SnapshotRecord {
    pub id: Uuid,
    pub project_id: Uuid,
    pub session_id: Uuid,
    pub label: String,
    pub archive: String,
    pub size_bytes: i64,
    pub image: Option<String>,
    pub created_at: OffsetDateTime,
}

/// `query_as!` into [`SnapshotRecord`] with its columns spliced in at compile time between
/// `$head` and `$tail` (never `format!`, nor `*`, whose meaning changes with the schema).
macro_rules! snapshot_query {
    ($head:literal, $tail:literal $(, $arg:expr)* $(,)?) => {
        sqlx::query_as!(
            SnapshotRecord,
            $head + "id, project_id, session_id, label, archive, size_bytes, image, created_at" + $tail
            $(, $arg)*
        )
    };
}

pub struct NewSnapshot<'a> {
    pub id: Uuid,
    pub project: ProjectId,
    pub session: SessionId,
    pub label: &'a str,
    pub archive: &'a str,
    pub size_bytes: i64,
    pub image: Option<&'a str>,
}

pub async fn insert(db: impl PgExecutor<'_>, s: &NewSnapshot<'_>) -> Result<SnapshotRecord> {
    Ok(snapshot_query!(
        "insert into snapshots (id, project_id, session_id, label, archive, size_bytes, image)
         values ($1, $2, $3, $4, $5, $6, $7) returning ",
        "",
        s.id,
        s.project.0,
        s.session.0,
        s.label,
        s.archive,
        s.size_bytes,
        s.image,
    )
    .fetch_one(db)
    .await?)
}

/// A snapshot of any session of the project (forks may cross sessions).
pub async fn get(db: impl PgExecutor<'_>, project: ProjectId, id: Uuid) -> Result<SnapshotRecord> {
    snapshot_query!(
        "select ",
        " from snapshots where project_id = $1 and id = $2",
        project.0,
        id
    )
    .fetch_optional(db)
    .await?
    .ok_or(Error::NotFound)
}

/// A session's snapshots, oldest first.
pub async fn list(
    db: impl PgExecutor<'_>,
    project: ProjectId,
    session: SessionId,
) -> Result<Vec<SnapshotRecord>> {
    Ok(snapshot_query!(
        "select ",
        " from snapshots where project_id = $1 and session_id = $2 order by created_at, id",
        project.0,
        session.0,
    )
    .fetch_all(db)
    .await?)
}
