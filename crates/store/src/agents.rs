//! The `agents` table. The definition is one jsonb document (`AgentSpec`); `version` is the
//! optimistic lock: every definition edit is `... where version = $expected`, so two editors
//! can never both win.

use crate::error::{constraint, Error, Result};
use sandbox_agents_domain::agent::{AgentRecord, AgentRef, AgentSpec};
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

/// Creates an agent at version 1. A slug already used in the project is a conflict.
#[tracing::instrument(skip_all, fields(project.id = %project, agent.slug = %slug))]
pub async fn insert(
    db: impl PgExecutor<'_>,
    project: ProjectId,
    slug: &Slug,
    spec: &AgentSpec,
) -> Result<AgentRecord> {
    let row = agent_query!(
        "insert into agents (id, project_id, slug, spec) values ($1, $2, $3, $4) returning ",
        "",
        AgentId::new().0,
        project.0,
        slug.as_str(),
        spec_json(spec) as _,
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

/// Replaces the definition if the stored version is still `expected`, and bumps the version.
/// Returns `Conflict` naming both versions when somebody else edited first.
#[tracing::instrument(skip_all, fields(project.id = %project, agent.id = %id))]
pub async fn update(
    db: &mut sqlx::PgConnection,
    project: ProjectId,
    id: AgentId,
    expected: i64,
    spec: &AgentSpec,
) -> Result<AgentRecord> {
    let row = agent_query!(
        "update agents set spec = $4, version = version + 1, updated_at = now()
         where project_id = $1 and id = $2 and version = $3
         returning ",
        "",
        project.0,
        id.0,
        expected,
        spec_json(spec) as _,
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

/// Hard delete, refused while a session references the agent (the foreign key says so).
#[tracing::instrument(skip_all, fields(project.id = %project, agent.id = %id))]
pub async fn delete(db: &mut sqlx::PgConnection, project: ProjectId, id: AgentId) -> Result<()> {
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
        Err(e) if constraint(&e) == Some("sessions_agent_id_fkey") => {
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

/// The project's subagent graph: each agent's slug with the slugs its definition names as
/// subagents (archived agents included: they still run in sessions that use them).
pub async fn subagent_graph(
    db: impl PgExecutor<'_>,
    project: ProjectId,
) -> Result<Vec<(String, Vec<String>)>> {
    let rows = sqlx::query!(
        r#"select slug,
                  coalesce(array(select s->>'agent' from jsonb_array_elements(spec->'subagents') s),
                           '{}') as "subagents!: Vec<String>"
           from agents where project_id = $1"#,
        project.0,
    )
    .fetch_all(db)
    .await?;
    Ok(rows.into_iter().map(|r| (r.slug, r.subagents)).collect())
}
