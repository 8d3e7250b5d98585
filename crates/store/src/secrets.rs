//! The `secrets` table, project-scoped. Values are stored sealed (see the runtime's
//! `credentials::secrets`); this module never sees a plaintext, and only [`sealed_by_names`]
//! hands sealed values out, to the code that resolves bindings.

use crate::error::{constraint, Error, Result};
use sandbox_agents_domain::secret::Secret;
use sandbox_agents_domain::ProjectId;
use sqlx::PgExecutor;
use time::OffsetDateTime;
use uuid::Uuid;

/// A secret row without its value.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct SecretRecord {
    pub id: Uuid,
    pub project_id: Uuid,
    pub name: String,
    pub description: String,
    pub created_at: OffsetDateTime,
    pub updated_at: OffsetDateTime,
    pub last_used_at: Option<OffsetDateTime>,
}

/// `query_as!` into [`SecretRecord`] with its columns spliced in at compile time between
/// `$head` and `$tail` (never `format!`).
macro_rules! secret_query {
    ($head:literal, $tail:literal $(, $arg:expr)* $(,)?) => {
        sqlx::query_as!(
            SecretRecord,
            $head + "id, project_id, name, description, created_at, updated_at, last_used_at" + $tail
            $(, $arg)*
        )
    };
}

impl SecretRecord {
    pub fn to_wire(&self) -> Secret {
        Secret {
            id: self.id.to_string(),
            name: self.name.clone(),
            description: self.description.clone(),
            created_at: Some(self.created_at),
            updated_at: Some(self.updated_at),
            last_used_at: self.last_used_at,
        }
    }
}

/// How a path names a secret: its id or its name. A name can look like an id (32 hex digits
/// are an identifier too), so both are tried, the id first.
#[derive(Clone, Debug)]
pub struct SecretRef {
    id: Option<Uuid>,
    name: String,
}

impl SecretRef {
    pub fn parse(raw: &str) -> Self {
        SecretRef {
            id: Uuid::try_parse(raw).ok(),
            name: raw.to_owned(),
        }
    }
}

fn duplicate(name: &str) -> impl FnOnce(sqlx::Error) -> Error + '_ {
    move |e| {
        if constraint(&e) == Some("secrets_project_id_name_key") {
            Error::Conflict(format!(
                "a secret named '{name}' exists already in this project"
            ))
        } else {
            e.into()
        }
    }
}

pub async fn insert(
    db: impl PgExecutor<'_>,
    project: ProjectId,
    id: Uuid,
    name: &str,
    description: &str,
    sealed: &[u8],
) -> Result<SecretRecord> {
    secret_query!(
        "insert into secrets (id, project_id, name, description, value_sealed)
         values ($1, $2, $3, $4, $5) returning ",
        "",
        id,
        project.0,
        name,
        description,
        sealed,
    )
    .fetch_one(db)
    .await
    .map_err(duplicate(name))
}

/// The project's secrets by name.
pub async fn list(db: impl PgExecutor<'_>, project: ProjectId) -> Result<Vec<SecretRecord>> {
    Ok(secret_query!(
        "select ",
        " from secrets where project_id = $1 order by name",
        project.0
    )
    .fetch_all(db)
    .await?)
}

pub async fn get(
    db: impl PgExecutor<'_>,
    project: ProjectId,
    r: &SecretRef,
) -> Result<SecretRecord> {
    secret_query!(
        "select ",
        " from secrets
         where project_id = $1 and (id = $2 or name = $3)
         order by (id = $2) is true desc limit 1",
        project.0,
        r.id,
        r.name.as_str(),
    )
    .fetch_optional(db)
    .await?
    .ok_or(Error::NotFound)
}

/// Changes the description and/or replaces the sealed value (a rotation); `None` leaves a field
/// alone. `updated_at` moves only when something was given.
pub async fn update(
    db: impl PgExecutor<'_>,
    project: ProjectId,
    id: Uuid,
    description: Option<&str>,
    sealed: Option<&[u8]>,
) -> Result<SecretRecord> {
    secret_query!(
        "update secrets
         set description = coalesce($3, description), value_sealed = coalesce($4, value_sealed),
             updated_at = case when $3::text is null and $4::bytea is null then updated_at else now() end
         where project_id = $1 and id = $2
         returning ",
        "",
        project.0,
        id,
        description,
        sealed,
    )
    .fetch_optional(db)
    .await?
    .ok_or(Error::NotFound)
}

/// Deletes a secret unless an agent or a session of the project binds it (by name): 409 then,
/// naming who. The row is locked first, so a session created meanwhile (which locks the
/// secrets it binds, see [`sealed_by_names`]) is either seen here or never sees the secret.
pub async fn delete(tx: &mut sqlx::PgConnection, project: ProjectId, id: Uuid) -> Result<()> {
    let name = sqlx::query_scalar!(
        "select name from secrets where project_id = $1 and id = $2 for update",
        project.0,
        id,
    )
    .fetch_optional(&mut *tx)
    .await?
    .ok_or(Error::NotFound)?;
    let binders: Vec<String> = sqlx::query_scalar!(
        r#"select 'agent ' || slug as "who!" from agents
          where project_id = $1 and spec -> 'secret_bindings' @> jsonb_build_array(jsonb_build_object('secret', $2::text))
         union all
         select 'session ' || id::text from sessions
          where project_id = $1 and secret_bindings @> jsonb_build_array(jsonb_build_object('secret', $2::text))
         limit 5"#,
        project.0,
        &name,
    )
    .fetch_all(&mut *tx)
    .await?;
    if !binders.is_empty() {
        return Err(Error::Conflict(format!(
            "secret '{name}' is still bound (by {}); remove those bindings first",
            binders.join(", ")
        )));
    }
    sqlx::query!(
        "delete from secrets where project_id = $1 and id = $2",
        project.0,
        id
    )
    .execute(&mut *tx)
    .await?;
    Ok(())
}

/// A secret as a boot resolves it: its id (the associated data of its seal) and sealed value.
#[derive(Clone, sqlx::FromRow)]
pub struct SealedSecret {
    pub id: Uuid,
    pub name: String,
    pub value_sealed: Vec<u8>,
}

impl std::fmt::Debug for SealedSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SealedSecret({}, {})", self.id, self.name)
    }
}

/// The project's secrets with these names, locked against deletion until the transaction
/// ends. Names that name nothing are simply not in the answer.
pub async fn sealed_by_names(
    tx: &mut sqlx::PgConnection,
    project: ProjectId,
    names: &[String],
) -> Result<Vec<SealedSecret>> {
    Ok(sqlx::query_as!(
        SealedSecret,
        "select id, name, value_sealed from secrets
         where project_id = $1 and name = any($2) order by name for share",
        project.0,
        names,
    )
    .fetch_all(&mut *tx)
    .await?)
}

/// Records that a boot resolved these secrets.
pub async fn mark_used(db: impl PgExecutor<'_>, project: ProjectId, ids: &[Uuid]) -> Result<()> {
    if ids.is_empty() {
        return Ok(());
    }
    sqlx::query!(
        "update secrets set last_used_at = now() where project_id = $1 and id = any($2)",
        project.0,
        ids,
    )
    .execute(db)
    .await?;
    Ok(())
}
