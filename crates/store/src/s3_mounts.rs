//! `s3_mounts`: what each boot staged of a session's `s3_mount` entries (see the migration).
//! The rows are the lifecycle's memory between a boot and the stop or snapshot that writes a
//! mount back; `objects` is the workspace crate's listing, stored as it is.

use crate::error::Result;
use sandbox_agents_domain::SessionId;
use sqlx::PgExecutor;

/// One staged mount.
#[derive(Clone, Debug)]
pub struct S3MountRecord {
    pub path: String,
    pub bucket: String,
    pub prefix: String,
    pub read_only: bool,
    pub objects: serde_json::Value,
}

/// Forgets what earlier boots of the session staged (a boot calls it before staging).
#[tracing::instrument(skip_all, fields(session.id = %session))]
pub async fn clear(db: impl PgExecutor<'_>, session: SessionId) -> Result<()> {
    sqlx::query!("delete from s3_mounts where session_id = $1", session.0)
        .execute(db)
        .await?;
    Ok(())
}

/// Records (or replaces) what was staged at, or written back to, the mount at `m.path`.
#[tracing::instrument(skip_all, fields(session.id = %session, mount = %m.path))]
pub async fn record(db: impl PgExecutor<'_>, session: SessionId, m: &S3MountRecord) -> Result<()> {
    sqlx::query!(
        "insert into s3_mounts (session_id, path, bucket, prefix, read_only, objects)
         values ($1, $2, $3, $4, $5, $6)
         on conflict (session_id, path) do update
            set bucket = excluded.bucket, prefix = excluded.prefix,
                read_only = excluded.read_only, objects = excluded.objects, staged_at = now()",
        session.0,
        m.path,
        m.bucket,
        m.prefix,
        m.read_only,
        m.objects,
    )
    .execute(db)
    .await?;
    Ok(())
}

/// The session's staged mounts, in path order.
#[tracing::instrument(skip_all, fields(session.id = %session))]
pub async fn list(db: impl PgExecutor<'_>, session: SessionId) -> Result<Vec<S3MountRecord>> {
    Ok(sqlx::query_as!(
        S3MountRecord,
        "select path, bucket, prefix, read_only, objects from s3_mounts
          where session_id = $1 order by path",
        session.0,
    )
    .fetch_all(db)
    .await?)
}
