//! The `git_keys` table: deploy keys, project-scoped. The private half is stored sealed (see
//! the vault crate); this module never sees the plaintext, and [`GitKeyRecord`]'s `Debug`
//! leaves the sealed bytes out too.
//!
//! References from agents (`skills_source.ssh_key_id`) live in the agents' jsonb specs, so no
//! foreign key keeps them real. Instead: an agent write calls [`hold`] in its transaction
//! (`for share` on the key row) and [`delete_unreferenced`] takes the row `for update` before
//! it looks for agents. Whichever locks first wins; the other sees its committed result.

use crate::error::{constraint, Error, Result};
use sandbox_agents_domain::git_key::GitKey;
use sandbox_agents_domain::ids::GitKeyId;
use sandbox_agents_domain::ProjectId;
use sqlx::{PgConnection, PgExecutor};
use std::fmt;
use time::OffsetDateTime;
use uuid::Uuid;

#[derive(Clone, sqlx::FromRow)]
pub struct GitKeyRecord {
    pub id: Uuid,
    pub project_id: Uuid,
    pub name: String,
    pub public_key: String,
    pub fingerprint: String,
    pub private_key_sealed: Vec<u8>,
    pub created_at: OffsetDateTime,
    pub last_used_at: Option<OffsetDateTime>,
}

impl fmt::Debug for GitKeyRecord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GitKeyRecord")
            .field("id", &self.id)
            .field("project_id", &self.project_id)
            .field("name", &self.name)
            .field("fingerprint", &self.fingerprint)
            .finish_non_exhaustive()
    }
}

impl GitKeyRecord {
    pub fn key_id(&self) -> GitKeyId {
        GitKeyId(self.id)
    }

    pub fn to_wire(&self) -> GitKey {
        GitKey {
            id: self.id.to_string(),
            name: self.name.clone(),
            public_key: self.public_key.clone(),
            fingerprint: self.fingerprint.clone(),
            created_at: self.created_at,
            last_used_at: self.last_used_at,
        }
    }
}

/// `query_as!` into [`GitKeyRecord`] with its columns spliced in at compile time between
/// `$head` and `$tail` (never `format!`).
macro_rules! git_key_query {
    ($head:literal, $tail:literal $(, $arg:expr)* $(,)?) => {
        sqlx::query_as!(
            GitKeyRecord,
            $head
                + "id, project_id, name, public_key, fingerprint, private_key_sealed, created_at, last_used_at"
                + $tail
            $(, $arg)*
        )
    };
}

/// A key about to be inserted; `private_key_sealed` is sealed for `id` already.
pub struct NewGitKey<'a> {
    pub id: GitKeyId,
    pub project: ProjectId,
    pub name: &'a str,
    pub public_key: &'a str,
    pub fingerprint: &'a str,
    pub private_key_sealed: &'a [u8],
}

/// Inserts a key; a name already used in the project is a conflict.
#[tracing::instrument(skip_all, fields(git_key.id = %k.id))]
pub async fn insert(db: impl PgExecutor<'_>, k: &NewGitKey<'_>) -> Result<GitKeyRecord> {
    git_key_query!(
        "insert into git_keys (id, project_id, name, public_key, fingerprint, private_key_sealed)
         values ($1, $2, $3, $4, $5, $6) returning ",
        "",
        k.id.0,
        k.project.0,
        k.name,
        k.public_key,
        k.fingerprint,
        k.private_key_sealed,
    )
    .fetch_one(db)
    .await
    .map_err(|e| match constraint(&e) {
        Some("git_keys_project_name_key") => Error::Conflict(format!(
            "a git key named '{}' already exists in this project; pick another name or delete that key first",
            k.name
        )),
        _ => e.into(),
    })
}

/// The project's keys, oldest first.
pub async fn list(db: impl PgExecutor<'_>, project: ProjectId) -> Result<Vec<GitKeyRecord>> {
    Ok(git_key_query!(
        "select ",
        " from git_keys where project_id = $1 order by created_at, id",
        project.0
    )
    .fetch_all(db)
    .await?)
}

pub async fn get(
    db: impl PgExecutor<'_>,
    project: ProjectId,
    id: GitKeyId,
) -> Result<GitKeyRecord> {
    git_key_query!(
        "select ",
        " from git_keys where id = $1 and project_id = $2",
        id.0,
        project.0,
    )
    .fetch_optional(db)
    .await?
    .ok_or(Error::NotFound)
}

/// Records a successful use of the key.
#[tracing::instrument(skip_all, fields(git_key.id = %id))]
pub async fn touch(db: impl PgExecutor<'_>, project: ProjectId, id: GitKeyId) -> Result<()> {
    sqlx::query!(
        "update git_keys set last_used_at = now() where id = $1 and project_id = $2",
        id.0,
        project.0,
    )
    .execute(db)
    .await?;
    Ok(())
}

/// Locks the key `for share` until the caller's transaction ends, so that it cannot be
/// deleted while an agent that references it is being written. `NotFound` when the project
/// has no such key (or it was deleted by a transaction that committed first).
#[tracing::instrument(skip_all, fields(git_key.id = %id))]
pub async fn hold(db: &mut PgConnection, project: ProjectId, id: GitKeyId) -> Result<()> {
    sqlx::query_scalar!(
        "select id from git_keys where id = $1 and project_id = $2 for share",
        id.0,
        project.0,
    )
    .fetch_optional(db)
    .await?
    .map(|_| ())
    .ok_or(Error::NotFound)
}

/// The slugs of the project's agents (archived ones included) whose skills come from a git
/// repository through this key.
pub async fn referencing_agents(
    db: impl PgExecutor<'_>,
    project: ProjectId,
    id: GitKeyId,
) -> Result<Vec<String>> {
    Ok(sqlx::query_scalar!(
        "select slug from agents
         where project_id = $1
           and spec -> 'skills_source' ->> 'kind' = 'git_repo'
           and spec -> 'skills_source' ->> 'ssh_key_id' = $2
         order by slug",
        project.0,
        id.to_string(),
    )
    .fetch_all(db)
    .await?)
}

/// Deletes the key unless an agent references it (`Conflict`, naming the agents). Call it
/// inside a transaction: the `for update` lock is what makes the check and the delete one
/// step against concurrent agent writes (see the module's doc).
#[tracing::instrument(skip_all, fields(git_key.id = %id))]
pub async fn delete_unreferenced(
    db: &mut PgConnection,
    project: ProjectId,
    id: GitKeyId,
) -> Result<()> {
    sqlx::query_scalar!(
        "select id from git_keys where id = $1 and project_id = $2 for update",
        id.0,
        project.0,
    )
    .fetch_optional(&mut *db)
    .await?
    .ok_or(Error::NotFound)?;
    let agents = referencing_agents(&mut *db, project, id).await?;
    if !agents.is_empty() {
        return Err(Error::Conflict(format!(
            "the git key is still used by agent(s) {}; remove it from their skills_source first",
            agents.join(", ")
        )));
    }
    sqlx::query!(
        "delete from git_keys where id = $1 and project_id = $2",
        id.0,
        project.0,
    )
    .execute(&mut *db)
    .await?;
    Ok(())
}
