//! The `garbage` queue: blobs and images no row refers to any more, queued in the transaction
//! that dropped the last reference (see the migration's invariants) and removed afterwards by
//! the runtime.

use crate::error::Result;
use sandbox_agents_domain::{ProjectId, SessionId};
use sqlx::PgExecutor;

/// One thing to remove.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct Garbage {
    pub id: i64,
    /// `blob` (a blob-store key) or `image` (a sandbox image made by a snapshot).
    pub kind: String,
    pub r#ref: String,
}

/// Queues the workspace archive of a session that is about to be deleted. Call it in the
/// deleting transaction, before the delete.
pub async fn queue_session(
    db: impl PgExecutor<'_>,
    project: ProjectId,
    id: SessionId,
) -> Result<()> {
    sqlx::query!(
        "insert into garbage (kind, ref)
         select 'blob', workspace_archive from sessions
          where project_id = $1 and id = $2 and workspace_archive is not null",
        project.0,
        id.0,
    )
    .execute(db)
    .await?;
    Ok(())
}

/// Queues the session's workspace archive if `replacement` takes its place (a stop that made
/// a new one; `None` for a restore that drops it). Call it in the transaction that changes
/// the row, before the change.
pub async fn queue_replaced_archive(
    db: impl PgExecutor<'_>,
    id: SessionId,
    replacement: Option<&str>,
) -> Result<()> {
    sqlx::query!(
        "insert into garbage (kind, ref)
         select 'blob', workspace_archive from sessions
          where id = $1 and workspace_archive is not null
            and workspace_archive is distinct from $2",
        id.0,
        replacement,
    )
    .execute(db)
    .await?;
    Ok(())
}

/// Makes rows queued with [`queue_unless_done`] due now: what they name was not used after
/// all.
pub async fn due_now(db: impl PgExecutor<'_>, ids: &[i64]) -> Result<()> {
    sqlx::query!("update garbage set due_at = now() where id = any($1)", ids)
        .execute(db)
        .await?;
    Ok(())
}

/// Queues everything a project's rows point at outside the database: its sessions' workspace
/// archives, its snapshots' archives and images, and its skill bundles' archives. Call it in the transaction that deletes
/// the project, before the delete.
pub async fn queue_project(db: impl PgExecutor<'_>, project: ProjectId) -> Result<u64> {
    let r = sqlx::query!(
        "insert into garbage (kind, ref)
         select 'blob', workspace_archive from sessions
          where project_id = $1 and workspace_archive is not null
         union all
         select 'blob', archive from snapshots where project_id = $1
         union all
         select distinct 'image', image from snapshots where project_id = $1 and image is not null
         union all
         select 'blob', v.blob_key from skill_bundle_versions v
           join skill_bundles b on b.id = v.bundle_id
          where b.project_id = $1 and v.retired_at is null",
        project.0,
    )
    .execute(db)
    .await?;
    Ok(r.rows_affected())
}

/// Queues a thing that is in use now and is garbage if its user has not removed the row
/// within `after` (a spooled upload: a crash mid-way leaves it to the sweep). Returns the row.
pub async fn queue_unless_done(
    db: impl PgExecutor<'_>,
    kind: &str,
    r#ref: &str,
    after: std::time::Duration,
) -> Result<i64> {
    Ok(sqlx::query_scalar!(
        "insert into garbage (kind, ref, due_at)
         values ($1, $2, now() + make_interval(secs => $3)) returning id",
        kind,
        r#ref,
        after.as_secs_f64(),
    )
    .fetch_one(db)
    .await?)
}

/// How long a claim keeps its rows from other collectors: a collector that dies mid-way
/// leaves them due again after it.
const CLAIM_SECONDS: f64 = 600.0;

/// Claims up to `limit` due rows: each is due again only after [`CLAIM_SECONDS`], so other
/// collectors skip them while this one removes the things, with no transaction open across
/// the removals (blob deletes and image removals are slow; a transaction held across them
/// would hold a pooled connection too). [`done`] or [`failed`] ends the claim of each row.
pub async fn claim(db: impl PgExecutor<'_>, limit: i64) -> Result<Vec<Garbage>> {
    Ok(sqlx::query_as!(
        Garbage,
        "update garbage set due_at = now() + make_interval(secs => $2)
          where id in (select id from garbage where due_at <= now()
                        order by id limit $1 for update skip locked)
          returning id, kind, ref",
        limit,
        CLAIM_SECONDS,
    )
    .fetch_all(db)
    .await?)
}

/// The thing is gone.
pub async fn done(db: impl PgExecutor<'_>, id: i64) -> Result<()> {
    sqlx::query!("delete from garbage where id = $1", id)
        .execute(db)
        .await?;
    Ok(())
}

/// Removing it failed: try again later, backing off from 10 s to an hour. The exponent is
/// capped so that the delay stays representable however often a removal fails.
pub async fn failed(db: impl PgExecutor<'_>, id: i64, error: &str) -> Result<()> {
    sqlx::query!(
        "update garbage set attempts = attempts + 1, last_error = $2,
                due_at = now() + make_interval(secs => least(3600, 10 * power(2, least(attempts, 12))))
         where id = $1",
        id,
        error,
    )
    .execute(db)
    .await?;
    Ok(())
}
