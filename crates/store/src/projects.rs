//! The `projects` table: the unit of tenancy. A `default` project exists from the first start
//! (so that open mode and the single-project rule work at once). Slugs are immutable once
//! created.

use crate::error::{constraint, Error, Result};
use sandbox_agents_domain::budget::ProjectLimits;
use sandbox_agents_domain::identity::Project;
use sandbox_agents_domain::ProjectId;
use sqlx::types::Json;
use sqlx::PgExecutor;
use time::OffsetDateTime;
use uuid::Uuid;

/// The id the first migration gives the `default` project.
pub const DEFAULT_PROJECT: ProjectId =
    ProjectId(Uuid::from_u128(0x00000000_0000_7000_8000_000000000001));

/// A project row.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct ProjectRecord {
    pub id: Uuid,
    pub slug: String,
    pub name: String,
    pub description: String,
    pub created_at: OffsetDateTime,
    pub updated_at: OffsetDateTime,
    pub limits: Json<ProjectLimits>,
}

impl ProjectRecord {
    pub fn project_id(&self) -> ProjectId {
        ProjectId(self.id)
    }

    /// The wire shape, with the caller's `role` in it.
    pub fn to_wire(&self, role: Option<&str>) -> Project {
        Project {
            id: self.id.to_string(),
            slug: self.slug.clone(),
            name: self.name.clone(),
            description: self.description.clone(),
            created_at: Some(self.created_at),
            updated_at: Some(self.updated_at),
            role: role.map(str::to_owned),
            limits: self.limits.0,
        }
    }
}

/// `query_as!` into [`ProjectRecord`] with its columns spliced in at compile time between
/// `$head` and `$tail` (never `format!`, nor `*`, whose meaning changes with the schema).
macro_rules! project_query {
    ($head:literal, $tail:literal $(, $arg:expr)* $(,)?) => {
        sqlx::query_as!(
            ProjectRecord,
            $head + r#"id, slug, name, description, created_at, updated_at,
                       limits as "limits: Json<ProjectLimits>""# + $tail
            $(, $arg)*
        )
    };
}

/// A project by id or slug.
pub async fn by_ref(db: impl PgExecutor<'_>, r: &str) -> Result<Option<ProjectRecord>> {
    Ok(match Uuid::try_parse(r) {
        Ok(id) => {
            project_query!("select ", " from projects where id = $1", id)
                .fetch_optional(db)
                .await?
        }
        Err(_) => {
            project_query!("select ", " from projects where slug = $1", r)
                .fetch_optional(db)
                .await?
        }
    })
}

pub async fn get(db: impl PgExecutor<'_>, id: ProjectId) -> Result<ProjectRecord> {
    project_query!("select ", " from projects where id = $1", id.0)
        .fetch_optional(db)
        .await?
        .ok_or(Error::NotFound)
}

/// A project's limits (none when it does not exist: it has nothing to limit).
pub async fn limits(db: impl PgExecutor<'_>, id: ProjectId) -> Result<ProjectLimits> {
    Ok(sqlx::query_scalar!(
        r#"select limits as "limits!: Json<ProjectLimits>" from projects where id = $1"#,
        id.0
    )
    .fetch_optional(db)
    .await?
    .map(|l| l.0)
    .unwrap_or_default())
}

/// Every project, oldest first.
pub async fn list(db: impl PgExecutor<'_>) -> Result<Vec<ProjectRecord>> {
    Ok(
        project_query!("select ", " from projects order by created_at, id")
            .fetch_all(db)
            .await?,
    )
}

/// The only project, when the deployment has exactly one.
pub async fn only(db: impl PgExecutor<'_>) -> Result<Option<ProjectRecord>> {
    let mut rows = project_query!("select ", " from projects limit 2")
        .fetch_all(db)
        .await?;
    Ok(if rows.len() == 1 { rows.pop() } else { None })
}

/// Creates a project; `slug` taken is a conflict.
pub async fn insert(
    db: impl PgExecutor<'_>,
    id: ProjectId,
    slug: &str,
    name: &str,
    description: &str,
) -> Result<ProjectRecord> {
    project_query!(
        "insert into projects (id, slug, name, description) values ($1, $2, $3, $4) returning ",
        "",
        id.0,
        slug,
        name,
        description,
    )
    .fetch_one(db)
    .await
    .map_err(|e| match constraint(&e) {
        Some("projects_slug_key") => {
            Error::Conflict(format!("a project with the slug '{slug}' exists already"))
        }
        _ => e.into(),
    })
}

/// The first free slug among `base`, `base-2`, `base-3`, ...
pub async fn free_slug(db: impl PgExecutor<'_>, base: &str) -> Result<String> {
    let taken: std::collections::HashSet<String> = sqlx::query_scalar!(
        "select slug from projects where slug = $1 or slug like $1 || '-%'",
        base
    )
    .fetch_all(db)
    .await?
    .into_iter()
    .collect();
    if !taken.contains(base) {
        return Ok(base.to_owned());
    }
    Ok((2..)
        .map(|n| format!("{base}-{n}"))
        .find(|s| !taken.contains(s))
        .expect("an unbounded range has a free suffix"))
}

/// Changes the name and/or description.
pub async fn update(
    db: impl PgExecutor<'_>,
    id: ProjectId,
    name: Option<&str>,
    description: Option<&str>,
    limits: Option<&ProjectLimits>,
) -> Result<ProjectRecord> {
    project_query!(
        "update projects set name = coalesce($2, name), description = coalesce($3, description),
                             limits = coalesce($4, limits), updated_at = now()
         where id = $1 returning ",
        "",
        id.0,
        name,
        description,
        limits.map(Json) as _,
    )
    .fetch_optional(db)
    .await?
    .ok_or(Error::NotFound)
}

/// Deletes a project and, by cascade, everything in it, unless one of its sessions still has
/// a sandbox (409). Every session row of the project is locked first, idle ones included, so
/// none starts booting (and reading an archive queued below) between the check and the delete.
pub async fn delete(tx: &mut sqlx::PgConnection, id: ProjectId) -> Result<u64> {
    let sessions = sqlx::query!(
        r#"select id, (status not in ('stopped', 'error') or sandbox_id is not null) as "busy!"
           from sessions where project_id = $1 for update"#,
        id.0
    )
    .fetch_all(&mut *tx)
    .await?;
    let busy: Vec<Uuid> = sessions.iter().filter(|s| s.busy).map(|s| s.id).collect();
    if !busy.is_empty() {
        return Err(Error::Conflict(format!(
            "{} session(s) of this project still have a sandbox; stop or delete them first",
            busy.len()
        )));
    }
    let queued = crate::garbage::queue_project(&mut *tx, id).await?;
    let r = sqlx::query!("delete from projects where id = $1", id.0)
        .execute(&mut *tx)
        .await?;
    if r.rows_affected() == 0 {
        return Err(Error::NotFound);
    }
    Ok(queued)
}
