//! The `api_keys` table. Keys are found by the hash of the presented secret; lists and
//! changes are confined to what the caller may see (a project's keys and the unbound ones).

use crate::error::{Error, Result};
use sandbox_agents_domain::identity::ApiKey;
use sandbox_agents_domain::ProjectId;
use sqlx::PgExecutor;
use time::OffsetDateTime;
use uuid::Uuid;

/// A key row (without its hash).
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct ApiKeyRecord {
    pub id: Uuid,
    pub project_id: Option<Uuid>,
    pub name: String,
    pub description: String,
    pub prefix: String,
    pub created_by: Option<String>,
    pub created_at: OffsetDateTime,
    pub last_used_at: Option<OffsetDateTime>,
    pub expires_at: Option<OffsetDateTime>,
    pub revoked_at: Option<OffsetDateTime>,
}

/// `query_as!` into [`ApiKeyRecord`] with its columns spliced in at compile time between
/// `$head` and `$tail` (never `format!`).
macro_rules! api_key_query {
    ($head:literal, $tail:literal $(, $arg:expr)* $(,)?) => {
        sqlx::query_as!(
            ApiKeyRecord,
            $head
                + "id, project_id, name, description, prefix, created_by, created_at, last_used_at, expires_at, revoked_at"
                + $tail
            $(, $arg)*
        )
    };
}

impl ApiKeyRecord {
    pub fn to_wire(&self) -> ApiKey {
        ApiKey {
            id: self.id.to_string(),
            name: self.name.clone(),
            description: self.description.clone(),
            project_id: self.project_id.map(|p| p.to_string()),
            prefix: self.prefix.clone(),
            created_by: self.created_by.clone(),
            created_at: Some(self.created_at),
            last_used_at: self.last_used_at,
            expires_at: self.expires_at,
            revoked_at: self.revoked_at,
        }
    }

    /// Neither revoked nor expired at `now`.
    pub fn is_active(&self, now: OffsetDateTime) -> bool {
        self.revoked_at.is_none() && self.expires_at.is_none_or(|e| e > now)
    }
}

/// A key to store.
#[derive(Clone, Debug)]
pub struct NewApiKey<'a> {
    pub id: Uuid,
    pub project: Option<ProjectId>,
    pub name: &'a str,
    pub description: &'a str,
    pub prefix: &'a str,
    pub hash: &'a [u8],
    pub created_by: &'a str,
    pub expires_at: Option<OffsetDateTime>,
}

pub async fn insert(db: impl PgExecutor<'_>, k: &NewApiKey<'_>) -> Result<ApiKeyRecord> {
    Ok(api_key_query!(
        "insert into api_keys (id, project_id, name, description, prefix, hash, created_by, expires_at)
         values ($1, $2, $3, $4, $5, $6, $7, $8) returning ",
        "",
        k.id,
        k.project.map(|p| p.0),
        k.name,
        k.description,
        k.prefix,
        k.hash,
        k.created_by,
        k.expires_at,
    )
    .fetch_one(db)
    .await?)
}

/// The key whose secret hashes to `hash`, whatever its state.
pub async fn by_hash(db: impl PgExecutor<'_>, hash: &[u8]) -> Result<Option<ApiKeyRecord>> {
    Ok(
        api_key_query!("select ", " from api_keys where hash = $1", hash)
            .fetch_optional(db)
            .await?,
    )
}

/// Whether any key exists (revoked ones included): a deployment with keys is not open.
pub async fn any(db: impl PgExecutor<'_>) -> Result<bool> {
    Ok(
        sqlx::query_scalar!(r#"select exists (select 1 from api_keys) as "any!""#)
            .fetch_one(db)
            .await?,
    )
}

/// The keys visible from `project`: its own and, when `unbound`, those bound to no project;
/// newest first.
pub async fn list(
    db: impl PgExecutor<'_>,
    project: ProjectId,
    unbound: bool,
) -> Result<Vec<ApiKeyRecord>> {
    Ok(api_key_query!(
        "select ",
        " from api_keys
         where project_id = $1 or ($2 and project_id is null)
         order by created_at desc, id",
        project.0,
        unbound,
    )
    .fetch_all(db)
    .await?)
}

/// Revokes a visible key (idempotent: the first revocation time stays).
pub async fn revoke(
    db: impl PgExecutor<'_>,
    project: ProjectId,
    unbound: bool,
    id: Uuid,
) -> Result<ApiKeyRecord> {
    api_key_query!(
        "update api_keys set revoked_at = coalesce(revoked_at, now())
         where id = $1 and (project_id = $2 or ($3 and project_id is null))
         returning ",
        "",
        id,
        project.0,
        unbound,
    )
    .fetch_optional(db)
    .await?
    .ok_or(Error::NotFound)
}

/// Deletes a visible key.
pub async fn delete(
    db: impl PgExecutor<'_>,
    project: ProjectId,
    unbound: bool,
    id: Uuid,
) -> Result<()> {
    let r = sqlx::query!(
        "delete from api_keys where id = $1 and (project_id = $2 or ($3 and project_id is null))",
        id,
        project.0,
        unbound,
    )
    .execute(db)
    .await?;
    if r.rows_affected() == 0 {
        return Err(Error::NotFound);
    }
    Ok(())
}

/// Records that keys were used (called at most once a minute per key by each process).
pub async fn touch(db: impl PgExecutor<'_>, ids: &[Uuid]) -> Result<()> {
    sqlx::query!(
        "update api_keys set last_used_at = now() where id = any($1)",
        ids
    )
    .execute(db)
    .await?;
    Ok(())
}
