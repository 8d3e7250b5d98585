//! `/api/agents/{ref}/memory`: an agent's memory store (`MEMORY.md` and its summary), read and
//! replaced under its version. Sessions of agents with the `memory` capability start with it
//! under `memories/`, and what they learn is merged back when they stop.

use crate::error::{ApiError, ApiResult, NotFoundExt};
use crate::extract::ApiJson;
use crate::project::Project;
use crate::state::AppState;
use axum::extract::{Path, State};
use axum::Json;
use sandbox_agents_domain::agent::AgentRef;
use sandbox_agents_domain::memory::{check_sizes, AgentMemory, MemoryPut};
use sandbox_agents_store::{agent_memories, agents};

fn not_found(r: &str) -> impl FnOnce() -> String + '_ {
    move || format!("agent '{r}' not found in this project")
}

/// Get an agent's memory
///
/// The agent's memory store: `MEMORY.md`, its summary, and the version to send back on PUT.
/// An agent whose memory was never written has `{"memory": "", "summary": "", "version": 0,
/// "updated_at": null}`.
#[utoipa::path(get, path = "/api/agents/{ref}/memory", operation_id = "get_agent_memory", tag = "agents",
    params(("ref" = String, Path, description = "The agent's id or slug")),
    responses((status = 200, body = AgentMemory), (status = 404, description = "No such agent")))]
#[tracing::instrument(skip_all, fields(agent.r#ref = %r))]
pub async fn get(
    State(st): State<AppState>,
    Project(project): Project,
    Path(r): Path<String>,
) -> ApiResult<Json<AgentMemory>> {
    let agent = agents::get(&st.db, project, &AgentRef::parse(&r))
        .await
        .or_not_found(not_found(&r))?;
    Ok(Json(agent_memories::get(&st.db, project, agent.id).await?))
}

/// Replace an agent's memory
///
/// Writes the whole store under the optimistic lock: `version` must be the one the caller
/// read (0 for memory never written), or the write is a 409 and nothing changes. Returns the
/// store at the next version. `memory` is at most 256 KiB of UTF-8 and `summary` at most
/// 16,000 characters (413 above). Sessions running now keep the copy their boot staged; the
/// next boot stages this one.
#[utoipa::path(put, path = "/api/agents/{ref}/memory", operation_id = "put_agent_memory", tag = "agents",
    request_body = MemoryPut,
    params(("ref" = String, Path, description = "The agent's id or slug")),
    responses((status = 200, body = AgentMemory), (status = 404, description = "No such agent"),
              (status = 409, description = "`version` is stale"),
              (status = 413, description = "`memory` or `summary` is over its limit"),
              (status = 422, description = "The body is invalid")))]
#[tracing::instrument(skip_all, fields(agent.r#ref = %r))]
pub async fn put(
    State(st): State<AppState>,
    Project(project): Project,
    Path(r): Path<String>,
    ApiJson(body): ApiJson<MemoryPut>,
) -> ApiResult<Json<AgentMemory>> {
    check_sizes(&body.memory, &body.summary).map_err(ApiError::PayloadTooLarge)?;
    let agent = agents::get(&st.db, project, &AgentRef::parse(&r))
        .await
        .or_not_found(not_found(&r))?;
    let written = agent_memories::put(
        &st.db,
        project,
        agent.id,
        &body.memory,
        &body.summary,
        body.version,
    )
    .await?;
    match written {
        Some(m) => {
            tracing::info!(agent.id = %agent.id, version = m.version, "agent memory replaced");
            Ok(Json(m))
        }
        None => Err(ApiError::Conflict(format!(
            "the memory of agent '{r}' is no longer at version {}: someone changed it since you read it; read it again and redo your edit",
            body.version
        ))),
    }
}
