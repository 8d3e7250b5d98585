//! The `skill_bundles` and `skill_bundle_versions` tables. A bundle's row lock orders every
//! change of its versions: numbering from `high_water` and moving `latest_version` happen
//! under it (see the migration's invariants).

use crate::error::{constraint, Error, Result};
use sandbox_agents_domain::bundle::{SkillBundle, SkillBundleVersion};
use sandbox_agents_domain::ProjectId;
use sqlx::{PgConnection, PgExecutor};
use time::OffsetDateTime;
use uuid::Uuid;

/// A bundle row.
#[derive(Clone, Debug)]
pub struct BundleRecord {
    pub id: Uuid,
    pub project_id: ProjectId,
    pub slug: String,
    pub description: String,
    pub latest_version: Option<i32>,
    pub created_at: OffsetDateTime,
    pub updated_at: OffsetDateTime,
}

impl BundleRecord {
    pub fn to_wire(&self) -> SkillBundle {
        SkillBundle {
            id: self.id.to_string(),
            slug: self.slug.clone(),
            description: self.description.clone(),
            latest_version: self.latest_version,
            created_at: self.created_at,
            updated_at: self.updated_at,
        }
    }
}

/// A version row; `retired_at` is set once it is retired.
#[derive(Clone, Debug)]
pub struct VersionRecord {
    pub bundle_id: Uuid,
    pub version: i32,
    pub blob_key: String,
    pub size_bytes: i64,
    pub file_count: i32,
    pub digest: String,
    pub skills: Vec<String>,
    pub created_at: OffsetDateTime,
    pub retired_at: Option<OffsetDateTime>,
}

impl VersionRecord {
    pub fn to_wire(&self) -> SkillBundleVersion {
        SkillBundleVersion {
            version: self.version,
            size_bytes: self.size_bytes,
            file_count: self.file_count,
            digest: self.digest.clone(),
            skills: self.skills.clone(),
            created_at: self.created_at,
        }
    }
}

/// How a path names a bundle: its id or its slug (a slug never parses as a UUID).
#[derive(Clone, Debug)]
pub struct BundleRef {
    id: Option<Uuid>,
    slug: String,
}

impl BundleRef {
    pub fn parse(raw: &str) -> Self {
        BundleRef {
            id: Uuid::try_parse(raw).ok(),
            slug: raw.to_owned(),
        }
    }
}

macro_rules! bundle_query {
    ($head:literal, $tail:literal $(, $arg:expr)* $(,)?) => {
        sqlx::query_as!(
            BundleRecord,
            $head
                + r#"id, project_id as "project_id: ProjectId", slug, description, latest_version,
                     created_at, updated_at"#
                + $tail
            $(, $arg)*
        )
    };
}

macro_rules! version_query {
    ($head:literal, $tail:literal $(, $arg:expr)* $(,)?) => {
        sqlx::query_as!(
            VersionRecord,
            $head
                + "bundle_id, version, blob_key, size_bytes, file_count, digest, skills, created_at,
                   retired_at"
                + $tail
            $(, $arg)*
        )
    };
}

/// Registers a bundle with nothing pushed. `Conflict` when the slug is taken in the project.
#[tracing::instrument(skip_all, fields(bundle.slug = %slug))]
pub async fn create(
    db: impl PgExecutor<'_>,
    project: ProjectId,
    id: Uuid,
    slug: &str,
    description: &str,
) -> Result<BundleRecord> {
    bundle_query!(
        "insert into skill_bundles (id, project_id, slug, description) values ($1, $2, $3, $4)
         returning ",
        "",
        id,
        project.0,
        slug,
        description,
    )
    .fetch_one(db)
    .await
    .map_err(|e| match constraint(&e) {
        Some("skill_bundles_project_slug_key") => Error::Conflict(format!(
            "a skill bundle with slug '{slug}' already exists in this project"
        )),
        _ => e.into(),
    })
}

/// The project's bundles, by slug.
pub async fn list(db: impl PgExecutor<'_>, project: ProjectId) -> Result<Vec<BundleRecord>> {
    Ok(bundle_query!(
        "select ",
        " from skill_bundles where project_id = $1 order by slug",
        project.0,
    )
    .fetch_all(db)
    .await?)
}

/// One bundle of the project, by id or slug.
pub async fn get(
    db: impl PgExecutor<'_>,
    project: ProjectId,
    r: &BundleRef,
) -> Result<BundleRecord> {
    bundle_query!(
        "select ",
        " from skill_bundles where project_id = $1 and (id = $2 or slug = $3)
          order by (id = $2) desc nulls last limit 1",
        project.0,
        r.id,
        r.slug,
    )
    .fetch_optional(db)
    .await?
    .ok_or(Error::NotFound)
}

/// Locks the bundle `for update` until the caller's transaction ends: every change of its
/// versions, and its deletion, goes through this.
async fn lock(db: &mut PgConnection, project: ProjectId, r: &BundleRef) -> Result<BundleRecord> {
    bundle_query!(
        "select ",
        " from skill_bundles where project_id = $1 and (id = $2 or slug = $3)
          order by (id = $2) desc nulls last limit 1 for update",
        project.0,
        r.id,
        r.slug,
    )
    .fetch_optional(db)
    .await?
    .ok_or(Error::NotFound)
}

/// The bundle's versions not retired, newest first.
pub async fn versions(db: impl PgExecutor<'_>, bundle: Uuid) -> Result<Vec<VersionRecord>> {
    Ok(version_query!(
        "select ",
        " from skill_bundle_versions where bundle_id = $1 and retired_at is null
          order by version desc",
        bundle,
    )
    .fetch_all(db)
    .await?)
}

/// One version, retired or not (a boot pinned to a retired one says so).
pub async fn version(db: impl PgExecutor<'_>, bundle: Uuid, version: i32) -> Result<VersionRecord> {
    version_query!(
        "select ",
        " from skill_bundle_versions where bundle_id = $1 and version = $2",
        bundle,
        version,
    )
    .fetch_optional(db)
    .await?
    .ok_or(Error::NotFound)
}

/// What a checked push stores.
#[derive(Clone, Debug)]
pub struct NewVersion<'a> {
    pub blob_key: &'a str,
    pub size_bytes: i64,
    pub file_count: i32,
    pub digest: &'a str,
    pub skills: &'a [String],
}

/// Stores a checked archive as the bundle's next version (one more than any number ever
/// issued) and makes it the latest, inside the caller's transaction. `NotFound` when the
/// bundle is gone (deleted while the archive was being checked).
#[tracing::instrument(skip_all, fields(bundle.slug = %r.slug))]
pub async fn add_version(
    tx: &mut PgConnection,
    project: ProjectId,
    r: &BundleRef,
    v: &NewVersion<'_>,
) -> Result<(BundleRecord, VersionRecord)> {
    let bundle = lock(&mut *tx, project, r).await?;
    let bundle = bundle_query!(
        "update skill_bundles
            set high_water = high_water + 1, latest_version = high_water + 1, updated_at = now()
          where id = $1
          returning ",
        "",
        bundle.id,
    )
    .fetch_one(&mut *tx)
    .await?;
    let number = bundle
        .latest_version
        .ok_or_else(|| Error::Corrupt("a bundle without a latest version after a push".into()))?;
    let version = version_query!(
        "insert into skill_bundle_versions
             (bundle_id, version, blob_key, size_bytes, file_count, digest, skills)
         values ($1, $2, $3, $4, $5, $6, $7)
         returning ",
        "",
        bundle.id,
        number,
        v.blob_key,
        v.size_bytes,
        v.file_count,
        v.digest,
        v.skills,
    )
    .fetch_one(&mut *tx)
    .await?;
    Ok((bundle, version))
}

/// Retires a version: it is no longer listed or booted, its number is never issued again,
/// its archive is queued as garbage and `latest_version` moves to the highest version left
/// (or null). `NotFound` for an unknown or already retired version.
#[tracing::instrument(skip_all, fields(bundle.slug = %r.slug, version))]
pub async fn retire_version(
    tx: &mut PgConnection,
    project: ProjectId,
    r: &BundleRef,
    version: i32,
) -> Result<()> {
    let bundle = lock(&mut *tx, project, r).await?;
    let key = sqlx::query_scalar!(
        "update skill_bundle_versions set retired_at = now()
          where bundle_id = $1 and version = $2 and retired_at is null
          returning blob_key",
        bundle.id,
        version,
    )
    .fetch_optional(&mut *tx)
    .await?
    .ok_or(Error::NotFound)?;
    sqlx::query!("insert into garbage (kind, ref) values ('blob', $1)", key)
        .execute(&mut *tx)
        .await?;
    sqlx::query!(
        "update skill_bundles
            set latest_version = (select max(version) from skill_bundle_versions
                                   where bundle_id = $1 and retired_at is null),
                updated_at = now()
          where id = $1",
        bundle.id,
    )
    .execute(&mut *tx)
    .await?;
    Ok(())
}

/// The slugs of the project's agents (archived ones included) whose skills come from this
/// bundle.
pub async fn referencing_agents(
    db: impl PgExecutor<'_>,
    project: ProjectId,
    slug: &str,
) -> Result<Vec<String>> {
    Ok(sqlx::query_scalar!(
        "select slug from agents
         where project_id = $1
           and spec -> 'skills_source' ->> 'kind' = 'bundle'
           and spec -> 'skills_source' ->> 'bundle' = $2
         order by slug",
        project.0,
        slug,
    )
    .fetch_all(db)
    .await?)
}

/// Deletes the bundle and queues its archives as garbage, unless an agent names it
/// (`Conflict`, naming the agents). Inside a transaction: the row lock makes the check and
/// the delete one step against a concurrent push.
#[tracing::instrument(skip_all, fields(bundle.slug = %r.slug))]
pub async fn delete_unreferenced(
    tx: &mut PgConnection,
    project: ProjectId,
    r: &BundleRef,
) -> Result<()> {
    let bundle = lock(&mut *tx, project, r).await?;
    let agents = referencing_agents(&mut *tx, project, &bundle.slug).await?;
    if !agents.is_empty() {
        return Err(Error::Conflict(format!(
            "the skill bundle '{}' is still the skills_source of agent(s) {}; point them elsewhere first",
            bundle.slug,
            agents.join(", ")
        )));
    }
    sqlx::query!(
        "insert into garbage (kind, ref)
         select 'blob', blob_key from skill_bundle_versions
          where bundle_id = $1 and retired_at is null",
        bundle.id,
    )
    .execute(&mut *tx)
    .await?;
    sqlx::query!("delete from skill_bundles where id = $1", bundle.id)
        .execute(&mut *tx)
        .await?;
    Ok(())
}
