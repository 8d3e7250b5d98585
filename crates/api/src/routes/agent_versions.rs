//! `/api/agents/{ref}/versions`: an agent's history, one version whole, and restoring one.

use crate::auth::Principal;
use crate::error::{ApiError, ApiResult, NotFoundExt};
use crate::extract::{page_window, ApiJson, ApiQuery};
use crate::project::Project;
use crate::state::AppState;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::Json;
use sandbox_agents_agent::definitions;
use sandbox_agents_domain::agent::{Agent, AgentRecord, AgentRef};
use sandbox_agents_domain::agent_version::{AgentVersion, AgentVersionSummary, RestoreVersion};
use sandbox_agents_store::agents;
use serde::Deserialize;
use utoipa::IntoParams;

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListQuery {
    /// Page size (default 50, at most 1000).
    #[param(minimum = 1, maximum = 1000, default = 50)]
    pub limit: Option<i64>,
    /// Rows to skip (default 0).
    #[param(minimum = 0, maximum = 9223372036854775807_i64, default = 0)]
    pub offset: Option<i64>,
}

fn agent_not_found(r: &str) -> impl FnOnce() -> String + '_ {
    move || format!("agent '{r}' not found in this project")
}

/// A version in a path: a number the agent has, else a 404 that names it.
fn version_number(a: &AgentRecord, raw: &str) -> ApiResult<i64> {
    raw.parse::<i64>()
        .ok()
        .filter(|v| *v >= 1)
        .ok_or_else(|| no_version(a, raw))
}

fn no_version(a: &AgentRecord, v: &str) -> ApiError {
    ApiError::NotFound(no_version_text(a, v))
}

fn no_version_text(a: &AgentRecord, v: &str) -> String {
    format!(
        "agent '{}' has no version '{v}' (its versions are 1 to {})",
        a.slug, a.version
    )
}

/// List an agent's versions
///
/// Every accepted definition of the agent, newest first: when, by whom, which fields changed
/// from the version before, and whether it restored an older one. `X-Total-Count` carries how
/// many versions it has.
#[utoipa::path(get, path = "/api/agents/{ref}/versions", operation_id = "list_agent_versions", tag = "agents",
    params(("ref" = String, Path, description = "The agent's id or slug"), ListQuery),
    responses((status = 200, body = Vec<AgentVersionSummary>, headers(("X-Total-Count" = i64, description = "The agent's versions"))),
              (status = 404, description = "No such agent"), (status = 422, description = "A bad `limit` or `offset`")))]
#[tracing::instrument(skip_all, fields(agent.r#ref = %r))]
pub async fn list(
    State(st): State<AppState>,
    Project(project): Project,
    Path(r): Path<String>,
    ApiQuery(q): ApiQuery<ListQuery>,
) -> ApiResult<(HeaderMap, Json<Vec<AgentVersionSummary>>)> {
    let (limit, offset) = page_window(q.limit, q.offset, 50)?;
    let mut conn = st.db.acquire().await?;
    let agent = agents::get(&mut *conn, project, &AgentRef::parse(&r))
        .await
        .or_not_found(agent_not_found(&r))?;
    let (rows, total) = agents::versions(&mut conn, agent.id, limit, offset).await?;
    let mut h = HeaderMap::new();
    h.insert("x-total-count", total.into());
    Ok((h, Json(rows)))
}

/// Get an agent version
///
/// One version whole: the definition as it was (what a session pinned to it runs), with who
/// made it and when.
#[utoipa::path(get, path = "/api/agents/{ref}/versions/{version}", operation_id = "get_agent_version", tag = "agents",
    params(("ref" = String, Path, description = "The agent's id or slug"),
           ("version" = i64, Path, description = "The version number")),
    responses((status = 200, body = AgentVersion), (status = 404, description = "No such agent, or no such version of it")))]
#[tracing::instrument(skip_all, fields(agent.r#ref = %r, version = %v))]
pub async fn get(
    State(st): State<AppState>,
    Project(project): Project,
    Path((r, v)): Path<(String, String)>,
) -> ApiResult<Json<AgentVersion>> {
    let mut conn = st.db.acquire().await?;
    let agent = agents::get(&mut *conn, project, &AgentRef::parse(&r))
        .await
        .or_not_found(agent_not_found(&r))?;
    let version = version_number(&agent, &v)?;
    let (summary, spec) = agents::version(&mut *conn, agent.id, version)
        .await
        .or_not_found(|| no_version_text(&agent, &v))?;
    let then = AgentRecord {
        spec,
        version,
        updated_at: summary.created_at,
        ..agent
    };
    Ok(Json(AgentVersion {
        summary,
        agent: then.to_wire(&st.settings.default_model),
    }))
}

/// Restore an agent version
///
/// Makes an old version's fields the agent's again, as a new version (`restored_from` names
/// the old one), under the optimistic lock: `version` in the body must be the agent's
/// current one, or it is a 409 and nothing changes. Checked as an edit of every field: a
/// subagent, deploy key or environment the old version names that is gone now is a 422.
/// Sessions pinned to other versions are unaffected.
#[utoipa::path(post, path = "/api/agents/{ref}/versions/{version}/restore", operation_id = "restore_agent_version", tag = "agents",
    request_body = RestoreVersion,
    params(("ref" = String, Path, description = "The agent's id or slug"),
           ("version" = i64, Path, description = "The version whose fields to restore")),
    responses((status = 200, body = Agent), (status = 404, description = "No such agent, or no such version of it"),
              (status = 409, description = "`version` is stale"), (status = 422, description = "The body is invalid, or the old definition is not valid now")))]
#[tracing::instrument(skip_all, fields(agent.r#ref = %r, version = %v))]
pub async fn restore(
    State(st): State<AppState>,
    Project(project): Project,
    p: Principal,
    Path((r, v)): Path<(String, String)>,
    ApiJson(body): ApiJson<RestoreVersion>,
) -> ApiResult<Json<Agent>> {
    let agent = agents::get(&st.db, project, &AgentRef::parse(&r))
        .await
        .or_not_found(agent_not_found(&r))?;
    let version = version_number(&agent, &v)?;
    let offered = &st.sessions.settings().runtime_classes;
    let by = p.changed_by();
    let restored = definitions::restore(
        &st.db,
        project,
        &AgentRef::Id(agent.id),
        version,
        body.version,
        offered,
        by.as_ref(),
    )
    .await
    .or_not_found(|| no_version_text(&agent, &v))?;
    Ok(Json(restored.to_wire(&st.settings.default_model)))
}
