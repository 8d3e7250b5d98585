//! `/api/sessions`: listing, reading and labelling sessions. The lifecycle (create, start,
//! stop, interrupt, delete, exec) is in `lifecycle`, turns in `runs`.

use crate::error::{ApiError, ApiResult, NotFoundExt};
use crate::extract::{page_window, query_error, ApiJson, ApiQuery, SessionPath};
use crate::project::Project;
use crate::state::AppState;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::Json;
use sandbox_agents_domain::agent::AgentRef;
use sandbox_agents_domain::session::{Session, SessionDetail, SessionPatch, SessionStatus};
use sandbox_agents_domain::Patch;
use sandbox_agents_store::{agents, sessions};
use serde::Deserialize;
use serde_json::Value;
use utoipa::IntoParams;

pub use crate::extract::{session_id, session_not_found};

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListQuery {
    /// Only sessions of this agent (id or slug); an unknown agent has none.
    pub agent_id: Option<String>,
    /// Only sessions created in this environment (id or name); an unknown one has none. An
    /// addition to the contract.
    pub environment_id: Option<String>,
    /// Only sessions in this state (exact match); anything else is a 422.
    #[param(value_type = Option<SessionStatus>, inline)]
    pub status: Option<String>,
    /// Page size: 1 to 1000, default 100.
    #[param(minimum = 1, maximum = 1000, default = 100)]
    pub limit: Option<i64>,
    /// Rows to skip: 0 or more, default 0.
    #[param(minimum = 0, default = 0)]
    pub offset: Option<i64>,
}

/// List sessions
///
/// The project's sessions, newest first, one page at a time (`limit`, `offset`);
/// `X-Total-Count` carries the number matching the filters, ignoring the page.
#[utoipa::path(get, path = "/api/sessions", operation_id = "list_sessions", tag = "sessions", params(ListQuery),
    responses((status = 200, body = Vec<Session>, headers(("X-Total-Count" = i64, description = "Rows matching the filter")))))]
#[tracing::instrument(skip_all)]
pub async fn list(
    State(st): State<AppState>,
    Project(project): Project,
    ApiQuery(q): ApiQuery<ListQuery>,
) -> ApiResult<(HeaderMap, Json<Vec<Session>>)> {
    let status = match q.status.as_deref() {
        None => None,
        Some(s) => Some(SessionStatus::parse(s).ok_or_else(|| {
            query_error(
                "status",
                "Input should be 'provisioning', 'running', 'stopped' or 'error'",
                Value::from(s),
            )
        })?),
    };
    let (limit, offset) = page_window(q.limit, q.offset, 100)?;
    let mut conn = st.db.acquire().await?;
    let agent = match q.agent_id.as_deref() {
        None => None,
        Some(r) => match agents::get(&mut *conn, project, &AgentRef::parse(r)).await {
            Ok(a) => Some(a.id),
            // An agent that does not exist has no sessions.
            Err(sandbox_agents_store::Error::NotFound) => {
                return Ok((total_header(0), Json(Vec::new())))
            }
            Err(e) => return Err(e.into()),
        },
    };
    let environment = match q.environment_id.as_deref() {
        None => None,
        Some(r) => {
            let r = sandbox_agents_store::environments::EnvironmentRef::parse(r);
            match sandbox_agents_store::environments::get(&mut *conn, project, &r).await {
                Ok(e) => Some(e.id),
                // An environment that does not exist has no sessions.
                Err(sandbox_agents_store::Error::NotFound) => {
                    return Ok((total_header(0), Json(Vec::new())))
                }
                Err(e) => return Err(e.into()),
            }
        }
    };
    let filter = sessions::ListFilter {
        agent,
        status,
        environment,
    };
    let (rows, total) = sessions::list(&mut conn, project, &filter, limit, offset).await?;
    Ok((total_header(total), Json(wire(&mut *conn, &rows).await?)))
}

/// The wire form of `rows`, each with the environment it was created in (one query for all
/// of them).
pub(crate) async fn wire(
    db: impl sqlx::PgExecutor<'_>,
    rows: &[sessions::SessionRecord],
) -> ApiResult<Vec<Session>> {
    let ids: Vec<uuid::Uuid> = rows.iter().map(|r| r.id.0).collect();
    let mut environments = sandbox_agents_store::environments::of_sessions(db, &ids).await?;
    Ok(rows
        .iter()
        .map(|r| in_environment(r, environments.remove(&r.id.0)))
        .collect())
}

/// The wire form of `row`, created in `environment` (`None`: the server's default image).
fn in_environment(
    row: &sessions::SessionRecord,
    environment: Option<sandbox_agents_store::environments::SessionEnvironment>,
) -> Session {
    let mut s = row.to_wire();
    if let Some(e) = environment {
        s.environment_id = Some(e.id.to_string());
        s.environment_name = Some(e.name);
    }
    s
}

/// [`wire`] of one session.
pub(crate) async fn wire_one(
    db: impl sqlx::PgExecutor<'_>,
    row: &sessions::SessionRecord,
) -> ApiResult<Session> {
    Ok(wire(db, std::slice::from_ref(row))
        .await?
        .pop()
        .expect("one row in, one session out"))
}

fn total_header(total: i64) -> HeaderMap {
    let mut h = HeaderMap::new();
    h.insert("x-total-count", total.into());
    h
}

/// Get a session
///
/// A session with the agent it resolves, its runs (oldest first) and its sandbox time. The
/// waiting helpers read `status` and `error` here.
#[utoipa::path(get, path = "/api/sessions/{session_id}", operation_id = "get_session", tag = "sessions",
    params(("session_id" = String, Path, description = "The session's id")),
    responses((status = 200, body = SessionDetail), (status = 404, description = "No such session")))]
#[tracing::instrument(skip_all, fields(session.id = %raw))]
pub async fn get(
    State(st): State<AppState>,
    Project(project): Project,
    SessionPath { id, raw }: SessionPath,
) -> ApiResult<Json<SessionDetail>> {
    let view = sandbox_agents_store::session_view::read(&st.db, project, id)
        .await?
        .ok_or_else(|| ApiError::NotFound(session_not_found(&raw)()))?;
    Ok(Json(SessionDetail {
        conversation_agent: view
            .holder
            .agent
            .unwrap_or_else(|| view.agent.slug.to_string()),
        session: in_environment(&view.session, view.environment),
        agent: Some(view.agent.to_wire(&st.settings.default_model)),
        runs: view.runs.iter().map(|r| r.to_wire()).collect(),
        sandbox_seconds: sandbox_agents_domain::session::sandbox_seconds(
            &view.boot_marks,
            time::OffsetDateTime::now_utc(),
        ),
        skills: view.skills,
    }))
}

/// Update a session
///
/// Renames a session, merges its metadata (a key sent as null is removed), sets or removes
/// its own network policy and its budget, and changes the version of its agent it runs, in
/// any sandbox state. A new policy applies from the sandbox's next connection, without a
/// restart; a new budget and agent version from the next turn.
/// The body is at most 64 KiB (413 above).
#[utoipa::path(patch, path = "/api/sessions/{session_id}", operation_id = "update_session", tag = "sessions", request_body = SessionPatch,
    params(("session_id" = String, Path, description = "The session's id")),
    responses((status = 200, body = Session), (status = 404, description = "No such session"),
              (status = 422, description = "The body is invalid")))]
#[tracing::instrument(skip_all, fields(session.id = %raw))]
pub async fn update(
    State(st): State<AppState>,
    Project(project): Project,
    SessionPath { id, raw }: SessionPath,
    ApiJson(patch): ApiJson<SessionPatch>,
) -> ApiResult<Json<Session>> {
    let mut errors = sandbox_agents_domain::Violations::new();
    let title = match patch.title {
        Patch::Absent => None,
        Patch::Null => {
            errors.null(&["title"]);
            None
        }
        Patch::Value(t) => Some(t),
    };
    let metadata = match patch.metadata {
        Patch::Absent => None,
        Patch::Null => {
            errors.null(&["metadata"]);
            None
        }
        Patch::Value(m) => Some(m),
    };
    let network = patch.network.into_option();
    if let Some(Some(n)) = &network {
        n.validate(&mut errors, &["network"]);
    }
    // `{}` sets no limit: stored as none.
    let budget = patch
        .budget
        .into_option()
        .map(|b| b.filter(|b| !b.is_empty()));
    if let Some(Some(b)) = &budget {
        b.validate(&mut errors, &["budget"]);
    }
    let agent_version = match patch.agent_version {
        Patch::Absent => None,
        Patch::Null => {
            errors.null(&["agent_version"]);
            None
        }
        Patch::Value(v) => Some(v),
    };
    errors.into_result().map_err(ApiError::Validation)?;
    if let Some(pin) = agent_version {
        st.sessions
            .repin(project, id, pin)
            .await
            .or_not_found(session_not_found(&raw))?;
    }
    let update = sessions::SessionUpdate {
        title: title.as_deref(),
        metadata: metadata.as_ref(),
        network: network.as_ref().map(Option::as_ref),
        budget: budget.as_ref().map(Option::as_ref),
    };
    let session = st
        .sessions
        .update(project, id, &update)
        .await
        .or_not_found(session_not_found(&raw))?;
    Ok(Json(wire_one(&st.db, &session).await?))
}
