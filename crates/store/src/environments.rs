//! The `environments`, `environment_builds` and `environment_sessions` tables (see the
//! migration's invariants). An environment's row lock orders its deletion against agents
//! and sessions that start to name it: they hold it `for share` while they do.

use crate::error::{constraint, Error, Result};
use sandbox_agents_domain::environment::{
    Environment, EnvironmentBuild, EnvironmentBuildStatus, EnvironmentConfig, Packages,
};
use sandbox_agents_domain::state::{BuildStatus, SessionStatus};
use sandbox_agents_domain::{ProjectId, SessionId};
use sqlx::types::Json;
use sqlx::{PgConnection, PgExecutor};
use std::collections::BTreeMap;
use time::OffsetDateTime;
use uuid::Uuid;

/// An environment row, with the state of its current configuration's build.
#[derive(Clone, Debug)]
pub struct EnvironmentRecord {
    pub id: Uuid,
    pub project_id: ProjectId,
    pub name: String,
    pub description: String,
    pub config: Json<EnvironmentConfig>,
    pub metadata: Json<BTreeMap<String, String>>,
    pub build_digest: Option<String>,
    pub archived_at: Option<OffsetDateTime>,
    pub created_at: OffsetDateTime,
    pub updated_at: OffsetDateTime,
    pub build_status: Option<BuildStatus>,
    pub build_image: Option<String>,
    pub build_error: Option<String>,
}

impl EnvironmentRecord {
    pub fn to_wire(&self) -> Environment {
        let build = match self.build_status {
            None => EnvironmentBuild::none(),
            Some(status) => EnvironmentBuild {
                status: match status {
                    BuildStatus::Building => EnvironmentBuildStatus::Building,
                    BuildStatus::Ready => EnvironmentBuildStatus::Ready,
                    BuildStatus::Failed => EnvironmentBuildStatus::Failed,
                },
                image: (status == BuildStatus::Ready)
                    .then(|| self.build_image.clone())
                    .flatten(),
                error: self.build_error.clone(),
            },
        };
        Environment {
            id: self.id.to_string(),
            name: self.name.clone(),
            description: self.description.clone(),
            config: self.config.0.clone(),
            metadata: self.metadata.0.clone(),
            build,
            archived_at: self.archived_at,
            created_at: self.created_at,
            updated_at: self.updated_at,
        }
    }
}

/// A build row.
#[derive(Clone, Debug)]
pub struct BuildRecord {
    pub digest: String,
    pub image: String,
    pub base_image: String,
    pub packages: Json<Packages>,
    pub status: BuildStatus,
    pub error: Option<String>,
    pub log_key: Option<String>,
    pub attempts: i32,
}

/// How a path names an environment: its id or its name (names are never UUID-shaped).
#[derive(Clone, Debug)]
pub struct EnvironmentRef {
    id: Option<Uuid>,
    name: String,
}

impl EnvironmentRef {
    pub fn parse(raw: &str) -> Self {
        EnvironmentRef {
            id: Uuid::try_parse(raw).ok(),
            name: raw.to_owned(),
        }
    }
}

macro_rules! env_query {
    ($head:literal, $tail:literal $(, $arg:expr)* $(,)?) => {
        sqlx::query_as!(
            EnvironmentRecord,
            $head
                + r#"e.id, e.project_id as "project_id: ProjectId", e.name, e.description,
                     e.config as "config: Json<EnvironmentConfig>",
                     e.metadata as "metadata: Json<BTreeMap<String, String>>",
                     e.build_digest, e.archived_at, e.created_at, e.updated_at,
                     b.status as "build_status?: BuildStatus", b.image as "build_image?",
                     b.error as "build_error?""#
                + $tail
            $(, $arg)*
        )
    };
}

macro_rules! build_query {
    ($head:literal, $tail:literal $(, $arg:expr)* $(,)?) => {
        sqlx::query_as!(
            BuildRecord,
            $head
                + r#"digest, image, base_image, packages as "packages: Json<Packages>",
                     status as "status: BuildStatus", error, log_key, attempts"#
                + $tail
            $(, $arg)*
        )
    };
}

fn name_taken(name: &str) -> Error {
    Error::Conflict(format!(
        "an environment named '{name}' already exists in this project; pick another name"
    ))
}

/// What a new environment row holds.
#[derive(Clone, Debug)]
pub struct NewEnvironment<'a> {
    pub id: Uuid,
    pub project: ProjectId,
    pub name: &'a str,
    pub description: &'a str,
    pub config: &'a EnvironmentConfig,
    pub metadata: &'a BTreeMap<String, String>,
    pub build_digest: Option<&'a str>,
}

/// Inserts an environment. `Conflict` when the name is taken in the project. Its build row
/// (if any) must exist already.
#[tracing::instrument(skip_all, fields(environment.name = %e.name))]
pub async fn insert(tx: &mut PgConnection, e: &NewEnvironment<'_>) -> Result<EnvironmentRecord> {
    sqlx::query!(
        "insert into environments (id, project_id, name, description, config, metadata, build_digest)
         values ($1, $2, $3, $4, $5, $6, $7)",
        e.id,
        e.project.0,
        e.name,
        e.description,
        Json(e.config) as _,
        Json(e.metadata) as _,
        e.build_digest,
    )
    .execute(&mut *tx)
    .await
    .map_err(|err| match constraint(&err) {
        Some("environments_project_name_key") => name_taken(e.name),
        _ => err.into(),
    })?;
    get(
        &mut *tx,
        e.project,
        &EnvironmentRef::parse(&e.id.to_string()),
    )
    .await
}

/// The project's environments by name; archived ones only when asked.
pub async fn list(
    db: impl PgExecutor<'_>,
    project: ProjectId,
    include_archived: bool,
) -> Result<Vec<EnvironmentRecord>> {
    Ok(env_query!(
        "select ",
        " from environments e left join environment_builds b on b.digest = e.build_digest
          where e.project_id = $1 and ($2 or e.archived_at is null)
          order by e.name",
        project.0,
        include_archived,
    )
    .fetch_all(db)
    .await?)
}

/// One environment of the project, by id or name (the id first).
pub async fn get(
    db: impl PgExecutor<'_>,
    project: ProjectId,
    r: &EnvironmentRef,
) -> Result<EnvironmentRecord> {
    env_query!(
        "select ",
        " from environments e left join environment_builds b on b.digest = e.build_digest
          where e.project_id = $1 and (e.id = $2 or e.name = $3)
          order by (e.id = $2) desc nulls last limit 1",
        project.0,
        r.id,
        r.name,
    )
    .fetch_optional(db)
    .await?
    .ok_or(Error::NotFound)
}

/// The environment's id, locked `for update` until the caller's transaction ends (updates,
/// archive, delete).
pub async fn lock(tx: &mut PgConnection, project: ProjectId, r: &EnvironmentRef) -> Result<Uuid> {
    sqlx::query_scalar!(
        "select id from environments
          where project_id = $1 and (id = $2 or name = $3)
          order by (id = $2) desc nulls last limit 1 for update",
        project.0,
        r.id,
        r.name,
    )
    .fetch_optional(&mut *tx)
    .await?
    .ok_or(Error::NotFound)
}

/// The environment, held `for share` until the caller's transaction ends: an agent or a
/// session that starts to name it commits before a delete can look, or after it.
pub async fn hold(
    tx: &mut PgConnection,
    project: ProjectId,
    r: &EnvironmentRef,
) -> Result<EnvironmentRecord> {
    let id = sqlx::query_scalar!(
        "select id from environments
          where project_id = $1 and (id = $2 or name = $3)
          order by (id = $2) desc nulls last limit 1 for share",
        project.0,
        r.id,
        r.name,
    )
    .fetch_optional(&mut *tx)
    .await?
    .ok_or(Error::NotFound)?;
    get(&mut *tx, project, &EnvironmentRef::parse(&id.to_string())).await
}

/// What an update writes: every column (the service has applied the patch).
#[derive(Clone, Debug)]
pub struct EnvironmentUpdate<'a> {
    pub name: &'a str,
    pub description: &'a str,
    pub config: &'a EnvironmentConfig,
    pub metadata: &'a BTreeMap<String, String>,
    pub build_digest: Option<&'a str>,
}

/// Writes an update of a locked environment. `Conflict` when the new name is taken.
pub async fn update(
    tx: &mut PgConnection,
    project: ProjectId,
    id: Uuid,
    u: &EnvironmentUpdate<'_>,
) -> Result<EnvironmentRecord> {
    sqlx::query!(
        "update environments
            set name = $3, description = $4, config = $5, metadata = $6, build_digest = $7,
                updated_at = now()
          where project_id = $1 and id = $2",
        project.0,
        id,
        u.name,
        u.description,
        Json(u.config) as _,
        Json(u.metadata) as _,
        u.build_digest,
    )
    .execute(&mut *tx)
    .await
    .map_err(|err| match constraint(&err) {
        Some("environments_project_name_key") => name_taken(u.name),
        _ => err.into(),
    })?;
    get(&mut *tx, project, &EnvironmentRef::parse(&id.to_string())).await
}

/// Archives the environment (one-way; archiving again changes nothing).
pub async fn archive(
    tx: &mut PgConnection,
    project: ProjectId,
    r: &EnvironmentRef,
) -> Result<EnvironmentRecord> {
    let id = lock(&mut *tx, project, r).await?;
    sqlx::query!(
        "update environments set archived_at = now(), updated_at = now()
          where id = $1 and archived_at is null",
        id,
    )
    .execute(&mut *tx)
    .await?;
    get(&mut *tx, project, &EnvironmentRef::parse(&id.to_string())).await
}

/// Deletes the environment unless an agent defaults to it or a session ran in it
/// (`Conflict`, saying which). Inside a transaction: the row lock makes the checks and the
/// delete one step against agents and sessions that start to name it.
pub async fn delete_unused(
    tx: &mut PgConnection,
    project: ProjectId,
    r: &EnvironmentRef,
) -> Result<()> {
    let id = lock(&mut *tx, project, r).await?;
    let agents = sqlx::query_scalar!(
        "select slug from agents
          where project_id = $1 and spec ->> 'environment_id' = $2
          order by slug",
        project.0,
        id.to_string(),
    )
    .fetch_all(&mut *tx)
    .await?;
    if !agents.is_empty() {
        return Err(Error::Conflict(format!(
            "the environment is the default of agent(s) {}; point them elsewhere or archive the environment instead",
            agents.join(", ")
        )));
    }
    let sessions = sqlx::query_scalar!(
        r#"select count(*) as "n!" from environment_sessions where environment_id = $1"#,
        id,
    )
    .fetch_one(&mut *tx)
    .await?;
    if sessions > 0 {
        return Err(Error::Conflict(format!(
            "{sessions} session(s) ran in this environment; archive it instead (or delete those sessions first)"
        )));
    }
    sqlx::query!("delete from environments where id = $1", id)
        .execute(&mut *tx)
        .await?;
    Ok(())
}

/// What a build is made of.
#[derive(Clone, Debug)]
pub struct NewBuild<'a> {
    pub digest: &'a str,
    pub image: &'a str,
    pub base_image: &'a str,
    pub packages: &'a Packages,
}

/// Makes sure the build of `digest` exists, inside the caller's transaction: a new one is
/// `building`; a `failed` one is tried again (saving a configuration asks for its image); a
/// `ready` or `building` one is left alone. Returns the row as it now is.
pub async fn ensure_build(tx: &mut PgConnection, b: &NewBuild<'_>) -> Result<BuildRecord> {
    Ok(build_query!(
        "insert into environment_builds (digest, image, base_image, packages)
         values ($1, $2, $3, $4)
         on conflict (digest) do update
            set status = case when environment_builds.status = 'failed' then 'building'
                              else environment_builds.status end,
                error = case when environment_builds.status = 'failed' then null
                             else environment_builds.error end,
                updated_at = now()
         returning ",
        "",
        b.digest,
        b.image,
        b.base_image,
        Json(b.packages) as _,
    )
    .fetch_one(&mut *tx)
    .await?)
}

/// A `ready` build whose image is gone (removed by hand) goes back to `building`.
pub async fn rebuild(db: impl PgExecutor<'_>, digest: &str) -> Result<()> {
    sqlx::query!(
        "update environment_builds set status = 'building', error = null, updated_at = now()
          where digest = $1 and status = 'ready'",
        digest,
    )
    .execute(db)
    .await?;
    Ok(())
}

pub async fn get_build(db: impl PgExecutor<'_>, digest: &str) -> Result<BuildRecord> {
    build_query!(
        "select ",
        " from environment_builds where digest = $1",
        digest
    )
    .fetch_optional(db)
    .await?
    .ok_or(Error::NotFound)
}

/// Every build still `building`: each has a builder, or lost it (see the migration).
pub async fn building(db: impl PgExecutor<'_>) -> Result<Vec<String>> {
    Ok(sqlx::query_scalar!(
        "select digest from environment_builds where status = 'building' order by created_at"
    )
    .fetch_all(db)
    .await?)
}

/// Counts an attempt of a build being started.
pub async fn start_attempt(db: impl PgExecutor<'_>, digest: &str) -> Result<()> {
    sqlx::query!(
        "update environment_builds set attempts = attempts + 1, updated_at = now()
          where digest = $1",
        digest
    )
    .execute(db)
    .await?;
    Ok(())
}

/// Records a finished attempt (ready, or failed with `error`) and its log, queueing the log
/// of the attempt before as garbage. Nothing when the build is no longer `building`.
pub async fn finish_build(
    tx: &mut PgConnection,
    digest: &str,
    error: Option<&str>,
    log_key: &str,
) -> Result<bool> {
    let status = if error.is_some() {
        BuildStatus::Failed
    } else {
        BuildStatus::Ready
    };
    sqlx::query!(
        "insert into garbage (kind, ref)
         select 'blob', log_key from environment_builds
          where digest = $1 and status = 'building' and log_key is not null",
        digest,
    )
    .execute(&mut *tx)
    .await?;
    let done = sqlx::query!(
        "update environment_builds
            set status = $2, error = $3, log_key = $4, updated_at = now()
          where digest = $1 and status = 'building'",
        digest,
        status as BuildStatus,
        error,
        log_key,
    )
    .execute(&mut *tx)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Records that a new session starts in `environment` with `build` (in the session's
/// creating transaction).
pub async fn attach_session(
    db: impl PgExecutor<'_>,
    session: SessionId,
    environment: Uuid,
    build: Option<&str>,
) -> Result<()> {
    sqlx::query!(
        "insert into environment_sessions (session_id, environment_id, build_digest)
         values ($1, $2, $3)",
        session.0,
        environment,
        build,
    )
    .execute(db)
    .await?;
    Ok(())
}

/// The environment a session started in and the state of the build it was created with.
#[derive(Clone, Debug)]
pub struct SessionBuild {
    pub environment: String,
    pub status: BuildStatus,
    pub error: Option<String>,
}

/// The environment a session booted in: its id and name.
#[derive(Clone, Debug)]
pub struct SessionEnvironment {
    pub id: Uuid,
    pub name: String,
}

/// The environments `sessions` were created in, by session; a session in the server's
/// default image has no entry. One query for a whole page of a list.
pub async fn of_sessions(
    db: impl PgExecutor<'_>,
    sessions: &[Uuid],
) -> Result<std::collections::HashMap<Uuid, SessionEnvironment>> {
    let rows = sqlx::query!(
        "select s.session_id, e.id, e.name
           from environment_sessions s
           join environments e on e.id = s.environment_id
          where s.session_id = any($1)",
        sessions,
    )
    .fetch_all(db)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| {
            (
                r.session_id,
                SessionEnvironment {
                    id: r.id,
                    name: r.name,
                },
            )
        })
        .collect())
}

/// The runtime class the configuration of the environment `session` was created in names,
/// if it was created in one that names one (read at each boot: an edit applies from the next).
pub async fn session_runtime_class(
    db: impl PgExecutor<'_>,
    session: SessionId,
) -> Result<Option<String>> {
    Ok(sqlx::query_scalar!(
        "select e.config ->> 'runtime_class'
           from environment_sessions s
           join environments e on e.id = s.environment_id
          where s.session_id = $1",
        session.0,
    )
    .fetch_optional(db)
    .await?
    .flatten())
}

/// `None` when the session has no environment build to wait for.
pub async fn session_build(
    db: impl PgExecutor<'_>,
    session: SessionId,
) -> Result<Option<SessionBuild>> {
    Ok(sqlx::query_as!(
        SessionBuild,
        r#"select e.name as environment, b.status as "status: BuildStatus", b.error
             from environment_sessions s
             join environments e on e.id = s.environment_id
             join environment_builds b on b.digest = s.build_digest
            where s.session_id = $1"#,
        session.0,
    )
    .fetch_optional(db)
    .await?)
}

/// Sessions still `provisioning` that were created with the build of `digest`.
pub async fn waiting_sessions(db: impl PgExecutor<'_>, digest: &str) -> Result<Vec<SessionId>> {
    Ok(sqlx::query_scalar!(
        r#"select s.session_id as "id: SessionId"
             from environment_sessions s join sessions x on x.id = s.session_id
            where s.build_digest = $1 and x.status = $2"#,
        digest,
        SessionStatus::Provisioning as SessionStatus,
    )
    .fetch_all(db)
    .await?)
}

/// Deletes the builds that no environment and no session names (and are not `building`),
/// queueing their images and logs as garbage in the same statement. Rows another
/// transaction holds are skipped. Returns how many builds went.
pub async fn collect_unused(db: impl PgExecutor<'_>) -> Result<u64> {
    let n = sqlx::query_scalar!(
        r#"with unused as (
              select digest from environment_builds b
               where b.status <> 'building'
                 and not exists (select 1 from environments e where e.build_digest = b.digest)
                 and not exists (select 1 from environment_sessions s
                                  where s.build_digest = b.digest)
               for update skip locked
           ), gone as (
              delete from environment_builds where digest in (select digest from unused)
              returning image, log_key, status
           ), queued as (
              insert into garbage (kind, ref)
              select 'image', image from gone where status = 'ready'
              union all
              select 'blob', log_key from gone where log_key is not null
              returning 1
           )
           select count(*) as "n!" from gone"#
    )
    .fetch_one(db)
    .await?;
    Ok(n as u64)
}

/// The first key of every build's advisory lock (the second is the digest's `hashtext`).
pub const BUILD_LOCK_CLASS: i32 = 0x5341_4542; // "SAEB"

/// Takes the advisory lock of the build of `digest` on `conn` if nobody holds it: whoever
/// holds it is the build's one builder, for as long as its connection lives.
pub async fn try_lock_build(conn: &mut PgConnection, digest: &str) -> Result<bool> {
    Ok(sqlx::query_scalar!(
        r#"select pg_try_advisory_lock($1, hashtext($2)) as "got!""#,
        BUILD_LOCK_CLASS,
        digest,
    )
    .fetch_one(&mut *conn)
    .await?)
}
