//! `/api/agents/{ref}/schedules`: an agent's schedules and their fires.

use crate::auth::Principal;
use crate::error::ApiResult;
use crate::extract::{page_window, ApiJson, ApiQuery};
use crate::project::Project;
use crate::state::AppState;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::Json;
use sandbox_agents_domain::schedule::{Schedule, ScheduleCreate, ScheduleFire, SchedulePatch};
use serde::Deserialize;
use utoipa::IntoParams;

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct FiresQuery {
    /// Page size (default 50, at most 1000).
    #[param(minimum = 1, maximum = 1000, default = 50)]
    pub limit: Option<i64>,
    /// Rows to skip (default 0).
    #[param(minimum = 0, maximum = 9223372036854775807_i64, default = 0)]
    pub offset: Option<i64>,
}

/// Create a schedule
///
/// Sends `message` to the agent on `cron` in `timezone`: in a new session per fire
/// (`session: "new"`, the default) or in one session of the agent that every fire continues.
/// Fired once per due time whatever the number of server processes; missed due times (no
/// server ran) are skipped or run once (`missed`); a continued session that is busy skips the
/// fire or waits for it until the next due time (`busy`). An expression or zone that does not
/// parse is a 422 naming it, and so is an archived agent (`ref`) or one that has 100
/// schedules already (`ref`: the most an agent has).
#[utoipa::path(post, path = "/api/agents/{ref}/schedules", operation_id = "create_schedule", tag = "schedules",
    request_body = ScheduleCreate,
    params(("ref" = String, Path, description = "The agent's id or slug")),
    responses((status = 201, body = Schedule), (status = 404, description = "No such agent"),
              (status = 422, description = "The body is invalid, or the agent is archived or has 100 schedules")))]
#[tracing::instrument(skip_all, fields(agent.r#ref = %r))]
pub async fn create(
    State(st): State<AppState>,
    Project(project): Project,
    p: Principal,
    Path(r): Path<String>,
    ApiJson(body): ApiJson<ScheduleCreate>,
) -> ApiResult<(StatusCode, Json<Schedule>)> {
    let by = p.changed_by();
    let s = st.schedules.create(project, &r, body, by.as_ref()).await?;
    Ok((StatusCode::CREATED, Json(s)))
}

/// List an agent's schedules
///
/// The agent's schedules, oldest first, each with its next due time.
#[utoipa::path(get, path = "/api/agents/{ref}/schedules", operation_id = "list_schedules", tag = "schedules",
    params(("ref" = String, Path, description = "The agent's id or slug")),
    responses((status = 200, body = Vec<Schedule>), (status = 404, description = "No such agent")))]
#[tracing::instrument(skip_all, fields(agent.r#ref = %r))]
pub async fn list(
    State(st): State<AppState>,
    Project(project): Project,
    Path(r): Path<String>,
) -> ApiResult<Json<Vec<Schedule>>> {
    Ok(Json(st.schedules.list(project, &r).await?))
}

/// Get a schedule
#[utoipa::path(get, path = "/api/agents/{ref}/schedules/{schedule_id}", operation_id = "get_schedule", tag = "schedules",
    params(("ref" = String, Path, description = "The agent's id or slug"),
           ("schedule_id" = String, Path, description = "The schedule's id")),
    responses((status = 200, body = Schedule), (status = 404, description = "No such agent or schedule")))]
#[tracing::instrument(skip_all, fields(agent.r#ref = %r, schedule.id = %id))]
pub async fn get(
    State(st): State<AppState>,
    Project(project): Project,
    Path((r, id)): Path<(String, String)>,
) -> ApiResult<Json<Schedule>> {
    Ok(Json(st.schedules.get(project, &r, &id).await?))
}

/// Update a schedule
///
/// Changes any field but `session`; `"paused": true` pauses it, `false` resumes it from now
/// (what fell due while it was paused does not fire). A change of the expression, the zone or
/// `paused` computes the next due time from now.
#[utoipa::path(patch, path = "/api/agents/{ref}/schedules/{schedule_id}", operation_id = "update_schedule", tag = "schedules",
    request_body = SchedulePatch,
    params(("ref" = String, Path, description = "The agent's id or slug"),
           ("schedule_id" = String, Path, description = "The schedule's id")),
    responses((status = 200, body = Schedule), (status = 404, description = "No such agent or schedule"),
              (status = 422, description = "The body is invalid")))]
#[tracing::instrument(skip_all, fields(agent.r#ref = %r, schedule.id = %id))]
pub async fn update(
    State(st): State<AppState>,
    Project(project): Project,
    Path((r, id)): Path<(String, String)>,
    ApiJson(patch): ApiJson<SchedulePatch>,
) -> ApiResult<Json<Schedule>> {
    Ok(Json(st.schedules.update(project, &r, &id, patch).await?))
}

/// Delete a schedule
///
/// Removes it and its history; what its fires started goes on.
#[utoipa::path(delete, path = "/api/agents/{ref}/schedules/{schedule_id}", operation_id = "delete_schedule", tag = "schedules",
    params(("ref" = String, Path, description = "The agent's id or slug"),
           ("schedule_id" = String, Path, description = "The schedule's id")),
    responses((status = 204), (status = 404, description = "No such agent or schedule")))]
#[tracing::instrument(skip_all, fields(agent.r#ref = %r, schedule.id = %id))]
pub async fn delete(
    State(st): State<AppState>,
    Project(project): Project,
    Path((r, id)): Path<(String, String)>,
) -> ApiResult<StatusCode> {
    st.schedules.delete(project, &r, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// List a schedule's fires
///
/// What became of each due time, newest first: `started` (with the session, and the run it
/// started), `skipped` (missed, or its session busy) or `failed` (with why). `X-Total-Count`
/// carries how many there are. Each fire's session and run are in the event log and reach
/// webhooks as any other.
#[utoipa::path(get, path = "/api/agents/{ref}/schedules/{schedule_id}/fires", operation_id = "list_schedule_fires", tag = "schedules",
    params(("ref" = String, Path, description = "The agent's id or slug"),
           ("schedule_id" = String, Path, description = "The schedule's id"), FiresQuery),
    responses((status = 200, body = Vec<ScheduleFire>, headers(("X-Total-Count" = i64, description = "The schedule's fires"))),
              (status = 404, description = "No such agent or schedule"), (status = 422, description = "A bad `limit` or `offset`")))]
#[tracing::instrument(skip_all, fields(agent.r#ref = %r, schedule.id = %id))]
pub async fn fires(
    State(st): State<AppState>,
    Project(project): Project,
    Path((r, id)): Path<(String, String)>,
    ApiQuery(q): ApiQuery<FiresQuery>,
) -> ApiResult<(HeaderMap, Json<Vec<ScheduleFire>>)> {
    let (limit, offset) = page_window(q.limit, q.offset, 50)?;
    let (rows, total) = st.schedules.fires(project, &r, &id, limit, offset).await?;
    let mut h = HeaderMap::new();
    h.insert("x-total-count", total.into());
    Ok((h, Json(rows)))
}
