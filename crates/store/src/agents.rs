//! The `agents` table and its versions. The definition is one jsonb document (`AgentSpec`);
//! `version` is the optimistic lock: every definition edit is `... where version = $expected`,
//! so two editors can never both win. Invariant: the statement that writes a definition also
//! writes its `agent_versions` row, so every version an agent had is on record, immutable.

use crate::error::{constraint, Error, Result};
use sandbox_agents_domain::agent::{AgentRecord, AgentRef, AgentSpec};
use sandbox_agents_domain::agent_version::{AgentHead, AgentPins, AgentVersionSummary, ChangedBy};
use sandbox_agents_domain::{AgentId, ProjectId, Slug};
use sqlx::types::Json;
use sqlx::PgExecutor;
use time::OffsetDateTime;
use uuid::Uuid;

#[derive(sqlx::FromRow)]
struct Row {
    id: Uuid,
    slug: String,
    spec: Json<serde_json::Value>,
    version: i64,
    archived_at: Option<OffsetDateTime>,
    created_at: OffsetDateTime,
    updated_at: OffsetDateTime,
}

impl TryFrom<Row> for AgentRecord {
    type Error = Error;

    fn try_from(r: Row) -> Result<Self> {
        let spec: AgentSpec = serde_json::from_value(r.spec.0)
            .map_err(|e| Error::Corrupt(format!("agent {}: {e}", r.id)))?;
        let slug = Slug::parse(&r.slug).map_err(Error::Corrupt)?;
        Ok(AgentRecord {
            id: AgentId(r.id),
            slug,
            spec,
            version: r.version,
            archived_at: r.archived_at,
            created_at: r.created_at,
            updated_at: r.updated_at,
        })
    }
}

/// `query_as!` into [`Row`] with its columns spliced in at compile time between `$head` and
/// `$tail` (never `format!`).
macro_rules! agent_query {
    ($head:literal, $tail:literal $(, $arg:expr)* $(,)?) => {
        sqlx::query_as!(
            Row,
            $head
                + r#"id, slug, spec as "spec: Json<serde_json::Value>", version, archived_at, created_at, updated_at"#
                + $tail
            $(, $arg)*
        )
    };
}

fn spec_json(spec: &AgentSpec) -> Json<serde_json::Value> {
    Json(serde_json::to_value(spec).expect("an AgentSpec always serializes"))
}

/// Creates an agent at version 1, and its version 1. A slug already used in the project is
/// a conflict.
#[tracing::instrument(skip_all, fields(project.id = %project, agent.slug = %slug))]
pub async fn insert(
    db: impl PgExecutor<'_>,
    project: ProjectId,
    slug: &Slug,
    spec: &AgentSpec,
    by: Option<&ChangedBy>,
) -> Result<AgentRecord> {
    let row = agent_query!(
        "with a as (insert into agents (id, project_id, slug, spec) values ($1, $2, $3, $4) returning *),
              v as (insert into agent_versions (agent_id, version, spec, changed_by)
                    select id, version, spec, $5 from a)
         select ",
        " from a",
        AgentId::new().0,
        project.0,
        slug.as_str(),
        spec_json(spec) as _,
        by.map(Json) as _,
    )
    .fetch_one(db)
    .await
    .map_err(|e| match constraint(&e) {
        Some("agents_project_slug_key") => Error::Conflict(format!(
            "an agent with the slug '{slug}' already exists in this project"
        )),
        _ => e.into(),
    })?;
    row.try_into()
}

/// Finds an agent by id or slug; archived agents are found too.
#[tracing::instrument(skip_all, fields(project.id = %project))]
pub async fn get(
    db: impl PgExecutor<'_>,
    project: ProjectId,
    agent: &AgentRef,
) -> Result<AgentRecord> {
    let row: Option<Row> = match agent {
        AgentRef::Id(id) => {
            agent_query!(
                "select ",
                " from agents where project_id = $1 and id = $2",
                project.0,
                id.0,
            )
            .fetch_optional(db)
            .await?
        }
        AgentRef::Slug(slug) => {
            agent_query!(
                "select ",
                " from agents where project_id = $1 and slug = $2",
                project.0,
                slug,
            )
            .fetch_optional(db)
            .await?
        }
    };
    row.ok_or(Error::NotFound)?.try_into()
}

/// The project's agents, oldest first; archived ones only when asked for.
#[tracing::instrument(skip_all, fields(project.id = %project))]
pub async fn list(
    db: impl PgExecutor<'_>,
    project: ProjectId,
    include_archived: bool,
) -> Result<Vec<AgentRecord>> {
    let rows = agent_query!(
        "select ",
        " from agents
         where project_id = $1 and ($2 or archived_at is null)
         order by created_at, id",
        project.0,
        include_archived,
    )
    .fetch_all(db)
    .await?;
    rows.into_iter().map(TryInto::try_into).collect()
}

/// What a definition edit records besides the definition.
#[derive(Clone, Copy, Debug, Default)]
pub struct Edit<'a> {
    pub by: Option<&'a ChangedBy>,
    /// The version whose fields a restore copies.
    pub restored_from: Option<i64>,
}

/// Replaces the definition if the stored version is still `expected`, bumps the version and
/// records it (with the top-level fields that changed). Returns `Conflict` naming both
/// versions when somebody else edited first.
#[tracing::instrument(skip_all, fields(project.id = %project, agent.id = %id))]
pub async fn update(
    db: &mut sqlx::PgConnection,
    project: ProjectId,
    id: AgentId,
    expected: i64,
    spec: &AgentSpec,
    edit: Edit<'_>,
) -> Result<AgentRecord> {
    // Every sub-statement sees one snapshot: `old` is version `expected`'s definition, and
    // `v` writes a row only when `a` updated one (a stale `expected` updates none).
    let row = agent_query!(
        "with old as (select spec from agents where project_id = $1 and id = $2 and version = $3),
              a as (update agents set spec = $4, version = version + 1, updated_at = now()
                    where project_id = $1 and id = $2 and version = $3
                    returning *),
              v as (insert into agent_versions (agent_id, version, spec, changed, changed_by, restored_from)
                    select a.id, a.version, a.spec,
                           array(select key from jsonb_each(old.spec) o full join jsonb_each(a.spec) n using (key)
                                 where o.value is distinct from n.value order by key),
                           $5, $6
                    from a, old)
         select ",
        " from a",
        project.0,
        id.0,
        expected,
        spec_json(spec) as _,
        edit.by.map(Json) as _,
        edit.restored_from,
    )
    .fetch_optional(&mut *db)
    .await?;
    match row {
        Some(r) => r.try_into(),
        None => {
            let current = get(&mut *db, project, &AgentRef::Id(id)).await?;
            Err(stale(expected, current.version))
        }
    }
}

/// The 409 for a stale `version`.
pub fn stale(expected: i64, current: i64) -> Error {
    Error::Conflict(format!(
        "agent was modified (version {expected} is stale; current is {current}); read it again and re-apply your change"
    ))
}

/// Archives or unarchives. Not a definition edit, so `version` stays; `updated_at` moves.
#[tracing::instrument(skip_all, fields(project.id = %project, agent.id = %id))]
pub async fn set_archived(
    db: impl PgExecutor<'_>,
    project: ProjectId,
    id: AgentId,
    archived: bool,
) -> Result<AgentRecord> {
    let row = agent_query!(
        "update agents
         set archived_at = case when $3 then coalesce(archived_at, now()) else null end, updated_at = now()
         where project_id = $1 and id = $2
         returning ",
        "",
        project.0,
        id.0,
        archived,
    )
    .fetch_optional(db)
    .await?;
    row.ok_or(Error::NotFound)?.try_into()
}

/// Hard delete, refused while a session references the agent (the foreign key says so), or
/// runs a version of it as a subagent (its pins: a pinned session must never run what it did
/// not pin, nor lose the version it did).
#[tracing::instrument(skip_all, fields(project.id = %project, agent.id = %id))]
pub async fn delete(db: &mut sqlx::PgConnection, project: ProjectId, id: AgentId) -> Result<()> {
    let pinned = sqlx::query_scalar!(
        r#"select count(*) as "n!" from sessions
           where project_id = $1 and agent_id <> $2 and agent_pins ? ($2::uuid)::text"#,
        project.0,
        id.0,
    )
    .fetch_one(&mut *db)
    .await?;
    if pinned > 0 {
        return Err(Error::Conflict(format!(
            "the agent runs as a subagent in {pinned} session(s) pinned to its version; archive it instead, or delete those sessions first"
        )));
    }
    let result = sqlx::query!(
        "delete from agents where project_id = $1 and id = $2",
        project.0,
        id.0
    )
    .execute(&mut *db)
    .await;
    match result {
        Ok(r) if r.rows_affected() == 0 => Err(Error::NotFound),
        Ok(_) => Ok(()),
        Err(e)
            if matches!(
                constraint(&e),
                Some("sessions_agent_id_fkey" | "sessions_agent_version_fkey")
            ) =>
        {
            let n = sqlx::query_scalar!(
                r#"select count(*) as "n!" from sessions where agent_id = $1"#,
                id.0
            )
            .fetch_one(&mut *db)
            .await?;
            Err(Error::Conflict(format!(
                "the agent is still referenced by {n} session(s); archive it instead, or delete those sessions first"
            )))
        }
        Err(e) => Err(e.into()),
    }
}

/// Which of `slugs` name agents of this project.
pub async fn existing_slugs(
    db: impl PgExecutor<'_>,
    project: ProjectId,
    slugs: &[String],
) -> Result<Vec<String>> {
    Ok(sqlx::query_scalar!(
        "select slug from agents where project_id = $1 and slug = any($2)",
        project.0,
        slugs,
    )
    .fetch_all(db)
    .await?)
}

/// The first key of the subagent graph's advisory lock (the second is the project id's
/// `hashtext`; a collision only serialises two projects' edits).
pub const GRAPH_LOCK_CLASS: i32 = 0x5341_5347; // "SASG"

/// Serialises edits of the project's subagent graph: taken (for the transaction) by every
/// write that sets subagents, so two concurrent edits cannot each close half of a cycle.
pub async fn lock_subagent_graph(tx: &mut sqlx::PgConnection, project: ProjectId) -> Result<()> {
    sqlx::query!(
        "select from pg_advisory_xact_lock($1, hashtext($2::uuid::text))",
        GRAPH_LOCK_CLASS,
        project.0,
    )
    .execute(&mut *tx)
    .await?;
    Ok(())
}

/// The agent `agent` names, at the version `pins` holds for it (its current definition when
/// `pins` is None or has no entry for it): what a session with those pins runs. Archived
/// agents are found too.
#[tracing::instrument(skip_all, fields(project.id = %project))]
pub async fn resolve(
    db: impl PgExecutor<'_>,
    project: ProjectId,
    agent: &AgentRef,
    pins: Option<&AgentPins>,
) -> Result<AgentRecord> {
    let (id, slug) = match agent {
        AgentRef::Id(id) => (Some(id.0), None),
        AgentRef::Slug(slug) => (None, Some(slug.as_str())),
    };
    let row = sqlx::query_as!(
        Row,
        r#"select a.id, a.slug, coalesce(v.spec, a.spec) as "spec!: Json<serde_json::Value>",
                  coalesce(v.version, a.version) as "version!", a.archived_at, a.created_at,
                  coalesce(v.created_at, a.updated_at) as "updated_at!"
           from agents a
           left join agent_versions v
             on v.agent_id = a.id and v.version = ($4::jsonb ->> a.id::text)::bigint
           where a.project_id = $1 and (a.id = $2 or a.slug = $3)"#,
        project.0,
        id,
        slug,
        pins.map(Json) as _,
    )
    .fetch_optional(db)
    .await?;
    row.ok_or(Error::NotFound)?.try_into()
}

/// Every agent of the project as it is now, with the slugs its definition names as subagents
/// (archived agents included: they still run in sessions that use them). The subagent
/// graph, and what a session pins.
pub async fn heads(db: impl PgExecutor<'_>, project: ProjectId) -> Result<Vec<AgentHead>> {
    let rows = sqlx::query!(
        r#"select id, slug, version,
                  coalesce(array(select s->>'agent' from jsonb_array_elements(spec->'subagents') s),
                           '{}') as "subagents!: Vec<String>"
           from agents where project_id = $1"#,
        project.0,
    )
    .fetch_all(db)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| AgentHead {
            id: AgentId(r.id),
            slug: r.slug,
            version: r.version,
            subagents: r.subagents,
        })
        .collect())
}

struct VersionRow {
    version: i64,
    changed: Vec<String>,
    changed_by: Option<Json<ChangedBy>>,
    restored_from: Option<i64>,
    created_at: OffsetDateTime,
}

impl From<VersionRow> for AgentVersionSummary {
    fn from(r: VersionRow) -> Self {
        AgentVersionSummary {
            version: r.version,
            created_at: r.created_at,
            changed_by: r.changed_by.map(|j| j.0),
            changed: r.changed,
            restored_from: r.restored_from,
        }
    }
}

/// A page of the agent's versions, newest first, and how many it has.
#[tracing::instrument(skip_all, fields(agent.id = %agent))]
pub async fn versions(
    db: &mut sqlx::PgConnection,
    agent: AgentId,
    limit: i64,
    offset: i64,
) -> Result<(Vec<AgentVersionSummary>, i64)> {
    let rows = sqlx::query_as!(
        VersionRow,
        r#"select version, changed, changed_by as "changed_by: Json<ChangedBy>", restored_from, created_at
           from agent_versions where agent_id = $1
           order by version desc limit $2 offset $3"#,
        agent.0,
        limit,
        offset,
    )
    .fetch_all(&mut *db)
    .await?;
    let total = sqlx::query_scalar!(
        r#"select count(*) as "n!" from agent_versions where agent_id = $1"#,
        agent.0
    )
    .fetch_one(&mut *db)
    .await?;
    Ok((rows.into_iter().map(Into::into).collect(), total))
}

/// One version of the agent: its summary and definition. `NotFound` when it has no such
/// version.
#[tracing::instrument(skip_all, fields(agent.id = %agent, version))]
pub async fn version(
    db: impl PgExecutor<'_>,
    agent: AgentId,
    version: i64,
) -> Result<(AgentVersionSummary, AgentSpec)> {
    let row = sqlx::query!(
        r#"select version, changed, changed_by as "changed_by: Json<ChangedBy>", restored_from,
                  created_at, spec as "spec: Json<serde_json::Value>"
           from agent_versions where agent_id = $1 and version = $2"#,
        agent.0,
        version,
    )
    .fetch_optional(db)
    .await?
    .ok_or(Error::NotFound)?;
    let spec = serde_json::from_value(row.spec.0)
        .map_err(|e| Error::Corrupt(format!("agent {agent} version {version}: {e}")))?;
    let summary = VersionRow {
        version: row.version,
        changed: row.changed,
        changed_by: row.changed_by,
        restored_from: row.restored_from,
        created_at: row.created_at,
    };
    Ok((summary.into(), spec))
}
