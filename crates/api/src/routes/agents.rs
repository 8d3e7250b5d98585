//! `/api/agents`: reusable agent definitions.

use crate::auth::Principal;
use crate::error::{ApiError, ApiResult, NotFoundExt};
use crate::extract::{lenient_bool, ApiJson, ApiQuery};
use crate::project::Project;
use crate::state::AppState;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use sandbox_agents_agent::definitions;
use sandbox_agents_domain::agent::{Agent, AgentCreate, AgentPatch, AgentRecord, AgentRef};
use sandbox_agents_domain::mcp::McpServerStatus;
use sandbox_agents_domain::ProjectId;
use sandbox_agents_store::agents;
use serde::Deserialize;
use utoipa::IntoParams;

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListQuery {
    /// Also list archived agents. Default false. Takes `true`/`false` (and `1`/`0`,
    /// `yes`/`no`, `on`/`off`, `t`/`f`, `y`/`n`, in any case).
    #[serde(default, deserialize_with = "lenient_bool")]
    #[param(value_type = Option<bool>, default = false)]
    pub include_archived: bool,
}

fn wire(st: &AppState, a: &AgentRecord) -> Agent {
    a.to_wire(&st.settings.default_model)
}

fn not_found(r: &str) -> impl FnOnce() -> String + '_ {
    move || format!("agent '{r}' not found in this project")
}

/// List agents
///
/// The project's agents, in one unpaged list; archived ones only with `include_archived=true`.
#[utoipa::path(get, path = "/api/agents", operation_id = "list_agents", tag = "agents", params(ListQuery),
    responses((status = 200, body = Vec<Agent>)))]
#[tracing::instrument(skip_all)]
pub async fn list(
    State(st): State<AppState>,
    Project(project): Project,
    ApiQuery(q): ApiQuery<ListQuery>,
) -> ApiResult<Json<Vec<Agent>>> {
    let all = agents::list(&st.db, project, q.include_archived).await?;
    Ok(Json(all.iter().map(|a| wire(&st, a)).collect()))
}

/// Create an agent
///
/// Creates an agent at version 1. A duplicate slug is a 409; every field error is reported
/// at once in one 422. A `skills_source.ssh_key_id` must name a git key of the project, and
/// subagents other agents of it. The body is at most 8 MiB (413 above): manifests carry file
/// contents inline.
#[utoipa::path(post, path = "/api/agents", operation_id = "create_agent", tag = "agents", request_body = AgentCreate,
    responses((status = 201, body = Agent), (status = 409, description = "The slug is taken"),
              (status = 422, description = "The body is invalid")))]
#[tracing::instrument(skip_all)]
pub async fn create(
    State(st): State<AppState>,
    Project(project): Project,
    p: Principal,
    ApiJson(body): ApiJson<AgentCreate>,
) -> ApiResult<(StatusCode, Json<Agent>)> {
    let (slug, spec) = body.into_spec().map_err(ApiError::Validation)?;
    st.runs.check_mcp_urls(&spec.mcp_servers)?;
    let offered = &st.sessions.settings().runtime_classes;
    let by = p.changed_by();
    let agent = definitions::create(&st.db, project, &slug, spec, offered, by.as_ref()).await?;
    Ok((StatusCode::CREATED, Json(wire(&st, &agent))))
}

/// Get an agent
///
/// One agent, by id or slug. Archived agents are still readable.
#[utoipa::path(get, path = "/api/agents/{ref}", operation_id = "get_agent", tag = "agents",
    params(("ref" = String, Path, description = "The agent's id or slug")),
    responses((status = 200, body = Agent), (status = 404, description = "No such agent")))]
#[tracing::instrument(skip_all, fields(agent.r#ref = %r))]
pub async fn get(
    State(st): State<AppState>,
    Project(project): Project,
    Path(r): Path<String>,
) -> ApiResult<Json<Agent>> {
    let agent = agents::get(&st.db, project, &AgentRef::parse(&r))
        .await
        .or_not_found(not_found(&r))?;
    Ok(Json(wire(&st, &agent)))
}

/// Update an agent
///
/// A partial edit under the optimistic lock: `version` must be the one the caller read, or
/// the edit is a 409 and nothing changes. Every accepted edit is a new version on record
/// (`GET /api/agents/{ref}/versions`), even one that changes nothing. Absent fields are unchanged; see the body for what
/// null means per field. Allowed on archived agents. The body is at most 8 MiB (413 above).
#[utoipa::path(patch, path = "/api/agents/{ref}", operation_id = "update_agent", tag = "agents", request_body = AgentPatch,
    params(("ref" = String, Path, description = "The agent's id or slug")),
    responses((status = 200, body = Agent), (status = 404, description = "No such agent"),
              (status = 409, description = "`version` is stale"), (status = 422, description = "The body is invalid")))]
#[tracing::instrument(skip_all, fields(agent.r#ref = %r))]
pub async fn update(
    State(st): State<AppState>,
    Project(project): Project,
    p: Principal,
    Path(r): Path<String>,
    ApiJson(patch): ApiJson<AgentPatch>,
) -> ApiResult<Json<Agent>> {
    if let sandbox_agents_domain::Patch::Value(servers) = &patch.mcp_servers {
        st.runs.check_mcp_urls(servers)?;
    }
    let offered = &st.sessions.settings().runtime_classes;
    let by = p.changed_by();
    let updated = definitions::update(
        &st.db,
        project,
        &AgentRef::parse(&r),
        patch,
        offered,
        by.as_ref(),
    )
    .await
    .or_not_found(not_found(&r))?;
    Ok(Json(wire(&st, &updated)))
}

async fn set_archived(
    st: &AppState,
    project: ProjectId,
    r: &str,
    archived: bool,
) -> ApiResult<Json<Agent>> {
    let agent = agents::get(&st.db, project, &AgentRef::parse(r))
        .await
        .or_not_found(not_found(r))?;
    let agent = agents::set_archived(&st.db, project, agent.id, archived)
        .await
        .or_not_found(not_found(r))?;
    Ok(Json(wire(st, &agent)))
}

/// Archive an agent
///
/// Soft delete: sets `archived_at`; the agent drops out of the default listing and new
/// sessions of it are refused (409), while existing sessions go on; its schedules do not fire
/// until it is unarchived (what falls due meanwhile is missed). `version` is unchanged.
/// Archiving an archived agent keeps its first `archived_at`.
#[utoipa::path(post, path = "/api/agents/{ref}/archive", operation_id = "archive_agent", tag = "agents",
    params(("ref" = String, Path, description = "The agent's id or slug")),
    responses((status = 200, body = Agent), (status = 404, description = "No such agent")))]
#[tracing::instrument(skip_all, fields(agent.r#ref = %r))]
pub async fn archive(
    State(st): State<AppState>,
    Project(project): Project,
    Path(r): Path<String>,
) -> ApiResult<Json<Agent>> {
    set_archived(&st, project, &r, true).await
}

/// Unarchive an agent
///
/// Undoes an archive: clears `archived_at`, so the agent is listed and starts sessions again.
/// `version` is unchanged.
#[utoipa::path(post, path = "/api/agents/{ref}/unarchive", operation_id = "unarchive_agent", tag = "agents",
    params(("ref" = String, Path, description = "The agent's id or slug")),
    responses((status = 200, body = Agent), (status = 404, description = "No such agent")))]
#[tracing::instrument(skip_all, fields(agent.r#ref = %r))]
pub async fn unarchive(
    State(st): State<AppState>,
    Project(project): Project,
    Path(r): Path<String>,
) -> ApiResult<Json<Agent>> {
    set_archived(&st, project, &r, false).await
}

/// Delete an agent
///
/// Hard delete, refused with 409 while any session references the agent (archive it
/// instead, or delete its sessions first).
#[utoipa::path(delete, path = "/api/agents/{ref}", operation_id = "delete_agent", tag = "agents",
    params(("ref" = String, Path, description = "The agent's id or slug")),
    responses((status = 204), (status = 404, description = "No such agent"),
              (status = 409, description = "A session still references the agent")))]
#[tracing::instrument(skip_all, fields(agent.r#ref = %r))]
pub async fn delete(
    State(st): State<AppState>,
    Project(project): Project,
    Path(r): Path<String>,
) -> ApiResult<StatusCode> {
    let mut conn = st.db.acquire().await?;
    let agent = agents::get(&mut *conn, project, &AgentRef::parse(&r))
        .await
        .or_not_found(not_found(&r))?;
    agents::delete(&mut conn, project, agent.id)
        .await
        .or_not_found(not_found(&r))?;
    tracing::info!(agent.id = %agent.id, "agent deleted");
    Ok(StatusCode::NO_CONTENT)
}

/// An agent's MCP servers, as they are now
///
/// Each of the agent's `mcp_servers`: a remote one is connected to now, from the control
/// plane, and listed (the protocol revision it speaks, all its tools, `offered` telling those
/// `allowed_tools` lets the model have), or says why it could not be (`error`); one run in
/// the sandbox is listed when a session's turn starts, so it is shown as declared. Servers
/// are tried together, each within its `timeout_seconds`.
#[utoipa::path(get, path = "/api/agents/{ref}/mcp-servers", operation_id = "list_agent_mcp_servers", tag = "agents",
    params(("ref" = String, Path, description = "The agent's id or slug")),
    responses((status = 200, body = Vec<McpServerStatus>), (status = 404, description = "No such agent")))]
#[tracing::instrument(skip_all, fields(agent.r#ref = %r))]
pub async fn mcp_servers(
    State(st): State<AppState>,
    Project(project): Project,
    Path(r): Path<String>,
) -> ApiResult<Json<Vec<McpServerStatus>>> {
    let agent = agents::get(&st.db, project, &AgentRef::parse(&r))
        .await
        .or_not_found(not_found(&r))?;
    Ok(Json(
        st.runs.probe_mcp(project, &agent.spec.mcp_servers).await,
    ))
}
