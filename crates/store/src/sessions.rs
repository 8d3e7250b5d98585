//! The `sessions` table. Appends to a session's event log lock its row (see
//! [`crate::events::append`]), so every transaction that changes a session's row and announces
//! it takes the lock in the same order: row first, then events.

use crate::error::{Error, Result};
use sandbox_agents_domain::manifest::ManifestSpec;
use sandbox_agents_domain::session::{Session, SessionStatus};
use sandbox_agents_domain::{AgentId, ProjectId, SessionId};
use serde_json::{Map, Value};
use sqlx::types::Json;
use sqlx::PgExecutor;
use time::OffsetDateTime;
use uuid::Uuid;

/// A session row.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct SessionRecord {
    pub id: Uuid,
    pub project_id: Uuid,
    pub agent_id: Uuid,
    pub title: String,
    pub status: String,
    pub activity: String,
    pub error: Option<String>,
    pub stopped_reason: Option<String>,
    pub backend: String,
    pub container_id: Option<String>,
    pub exposed_ports: Vec<i32>,
    pub workdir: String,
    pub model: Option<String>,
    pub instructions: Option<String>,
    pub manifest: Option<Json<ManifestSpec>>,
    pub usage: Json<Map<String, Value>>,
    pub metadata: Json<Map<String, Value>>,
    pub created_at: OffsetDateTime,
    pub updated_at: OffsetDateTime,
    pub last_event_at: Option<OffsetDateTime>,
}

impl SessionRecord {
    pub fn session_id(&self) -> SessionId {
        SessionId(self.id)
    }

    pub fn to_wire(&self) -> Session {
        Session {
            id: self.id.to_string(),
            agent_id: self.agent_id.to_string(),
            title: self.title.clone(),
            status: self.status.clone(),
            activity: self.activity.clone(),
            error: self.error.clone(),
            stopped_reason: self.stopped_reason.clone(),
            backend: self.backend.clone(),
            container_id: self.container_id.clone(),
            exposed_ports: self.exposed_ports.clone(),
            workdir: self.workdir.clone(),
            model: self.model.clone(),
            usage: self.usage.0.clone(),
            metadata: self.metadata.0.clone(),
            created_at: self.created_at,
            updated_at: self.updated_at,
            last_event_at: self.last_event_at,
        }
    }
}

/// What a new session row starts from. Status is always `provisioning`: the row exists before
/// any container does.
#[derive(Clone, Debug)]
pub struct NewSession {
    pub id: SessionId,
    pub project: ProjectId,
    pub agent: AgentId,
    pub title: String,
    pub backend: String,
    pub exposed_ports: Vec<i32>,
    pub model: Option<String>,
    pub instructions: Option<String>,
    pub manifest: Option<ManifestSpec>,
    pub metadata: Map<String, Value>,
}

#[tracing::instrument(skip_all, fields(session.id = %s.id))]
pub async fn insert(db: impl PgExecutor<'_>, s: &NewSession) -> Result<SessionRecord> {
    Ok(sqlx::query_as(
        "insert into sessions (id, project_id, agent_id, title, backend, exposed_ports, model, instructions, manifest, metadata)
         values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
         returning *",
    )
    .bind(s.id.0)
    .bind(s.project.0)
    .bind(s.agent.0)
    .bind(&s.title)
    .bind(&s.backend)
    .bind(&s.exposed_ports)
    .bind(&s.model)
    .bind(&s.instructions)
    .bind(s.manifest.as_ref().map(Json))
    .bind(Json(&s.metadata))
    .fetch_one(db)
    .await?)
}

#[tracing::instrument(skip_all, fields(session.id = %id))]
pub async fn get(
    db: impl PgExecutor<'_>,
    project: ProjectId,
    id: SessionId,
) -> Result<SessionRecord> {
    sqlx::query_as("select * from sessions where project_id = $1 and id = $2")
        .bind(project.0)
        .bind(id.0)
        .fetch_optional(db)
        .await?
        .ok_or(Error::NotFound)
}

/// Filters of `GET /api/sessions`.
#[derive(Clone, Debug, Default)]
pub struct ListFilter {
    pub agent: Option<AgentId>,
    pub status: Option<SessionStatus>,
}

/// One page, newest first, and the number of rows matching the filter.
#[tracing::instrument(skip_all, fields(project.id = %project))]
pub async fn list(
    db: &mut sqlx::PgConnection,
    project: ProjectId,
    filter: &ListFilter,
    limit: i64,
    offset: i64,
) -> Result<(Vec<SessionRecord>, i64)> {
    let agent = filter.agent.map(|a| a.0);
    let status = filter.status.map(|s| s.as_str());
    let rows: Vec<SessionRecord> = sqlx::query_as(
        "select * from sessions
         where project_id = $1 and ($2::uuid is null or agent_id = $2) and ($3::text is null or status = $3)
         order by created_at desc, id desc
         limit $4 offset $5",
    )
    .bind(project.0)
    .bind(agent)
    .bind(status)
    .bind(limit)
    .bind(offset)
    .fetch_all(&mut *db)
    .await?;
    let (total,): (i64,) = sqlx::query_as(
        "select count(*) from sessions
         where project_id = $1 and ($2::uuid is null or agent_id = $2) and ($3::text is null or status = $3)",
    )
    .bind(project.0)
    .bind(agent)
    .bind(status)
    .fetch_one(&mut *db)
    .await?;
    Ok((rows, total))
}

/// Changes the title and merges metadata: keys with a value are set, keys with null removed,
/// others kept (API.md §1.9). Works in any sandbox state.
#[tracing::instrument(skip_all, fields(session.id = %id))]
pub async fn update_title_and_metadata(
    db: impl PgExecutor<'_>,
    project: ProjectId,
    id: SessionId,
    title: Option<&str>,
    metadata: Option<&Map<String, Value>>,
) -> Result<SessionRecord> {
    let (set, remove): (Map<String, Value>, Vec<String>) = match metadata {
        None => (Map::new(), Vec::new()),
        Some(m) => (
            m.iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            m.iter()
                .filter(|(_, v)| v.is_null())
                .map(|(k, _)| k.clone())
                .collect(),
        ),
    };
    sqlx::query_as(
        "update sessions
         set title = coalesce($3, title), metadata = (metadata || $4) - $5::text[], updated_at = now()
         where project_id = $1 and id = $2
         returning *",
    )
    .bind(project.0)
    .bind(id.0)
    .bind(title)
    .bind(Json(set))
    .bind(remove)
    .fetch_optional(db)
    .await?
    .ok_or(Error::NotFound)
}

/// Whether any session references the agent.
pub async fn count_for_agent(
    db: impl PgExecutor<'_>,
    project: ProjectId,
    agent: AgentId,
) -> Result<i64> {
    let (n,): (i64,) =
        sqlx::query_as("select count(*) from sessions where project_id = $1 and agent_id = $2")
            .bind(project.0)
            .bind(agent.0)
            .fetch_one(db)
            .await?;
    Ok(n)
}

/// Deletes a session and, through the cascade, its runs and its log; tells live streams
/// in the same transaction, so they end once it commits.
#[tracing::instrument(skip_all, fields(session.id = %id))]
pub async fn delete(tx: &mut sqlx::PgConnection, project: ProjectId, id: SessionId) -> Result<()> {
    let r = sqlx::query("delete from sessions where project_id = $1 and id = $2")
        .bind(project.0)
        .bind(id.0)
        .execute(&mut *tx)
        .await?;
    if r.rows_affected() == 0 {
        return Err(Error::NotFound);
    }
    crate::events::notify_deleted(&mut *tx, id).await
}
