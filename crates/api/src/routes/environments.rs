//! `/api/environments`: named sandbox configurations of the project that sessions start in.
//! On a backend that builds images (Docker's does) a configuration with packages is built into
//! an image when it is saved; see `sandbox_agents_environments::Environments`.

use crate::error::ApiResult;
use crate::extract::{lenient_bool, ApiJson, ApiQuery};
use crate::project::Project;
use crate::state::AppState;
use axum::extract::{Path, State};
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::Json;
use sandbox_agents_domain::environment::{Environment, EnvironmentCreate, EnvironmentPatch};
use serde::Deserialize;
use utoipa::IntoParams;

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListQuery {
    /// Also list archived environments. Default false.
    #[serde(default, deserialize_with = "lenient_bool")]
    #[param(value_type = Option<bool>, default = false)]
    pub include_archived: bool,
}

/// List environments
///
/// The project's environments by name; archived ones only with `include_archived=true`.
#[utoipa::path(get, path = "/api/environments", operation_id = "list_environments", tag = "environments",
    params(ListQuery), responses((status = 200, body = Vec<Environment>)))]
#[tracing::instrument(skip_all)]
pub async fn list(
    State(st): State<AppState>,
    Project(project): Project,
    ApiQuery(q): ApiQuery<ListQuery>,
) -> ApiResult<Json<Vec<Environment>>> {
    Ok(Json(
        st.environments.list(project, q.include_archived).await?,
    ))
}

/// Create an environment
///
/// With packages, on Docker, the image starts building at once: `build.status` is
/// `building`, then `ready` (with `build.image`) or `failed` (with `build.error`, naming the
/// package manager). Sessions created meanwhile wait in `provisioning`. A name taken in the
/// project is a 409; a `config.backend` not in `GET /api/backends`, or `networking.type`
/// `limited`, a 400.
#[utoipa::path(post, path = "/api/environments", operation_id = "create_environment", tag = "environments",
    request_body = EnvironmentCreate,
    responses((status = 201, body = Environment),
              (status = 400, description = "A backend this server cannot run, or limited networking"),
              (status = 409, description = "The name is taken"),
              (status = 422, description = "The body is invalid")))]
#[tracing::instrument(skip_all)]
pub async fn create(
    State(st): State<AppState>,
    Project(project): Project,
    ApiJson(body): ApiJson<EnvironmentCreate>,
) -> ApiResult<(StatusCode, Json<Environment>)> {
    Ok((
        StatusCode::CREATED,
        Json(st.environments.create(project, body).await?),
    ))
}

/// Get an environment
#[utoipa::path(get, path = "/api/environments/{ref}", operation_id = "get_environment", tag = "environments",
    params(("ref" = String, Path, description = "The environment's id or name")),
    responses((status = 200, body = Environment), (status = 404, description = "No such environment")))]
#[tracing::instrument(skip_all, fields(environment = %r))]
pub async fn get(
    State(st): State<AppState>,
    Project(project): Project,
    Path(r): Path<String>,
) -> ApiResult<Json<Environment>> {
    Ok(Json(st.environments.get(project, &r).await?))
}

/// Update an environment
///
/// Fields left out are unchanged; none may be null. `config` replaces the whole
/// configuration, and `metadata` the whole map (keys left out are removed; it is not
/// merged). A changed configuration with packages builds again unless its image exists.
/// Applies to sessions created afterwards. An archived environment is read-only (409).
#[utoipa::path(patch, path = "/api/environments/{ref}", operation_id = "update_environment", tag = "environments",
    params(("ref" = String, Path, description = "The environment's id or name")),
    request_body = EnvironmentPatch,
    responses((status = 200, body = Environment),
              (status = 400, description = "A backend this server cannot run, or limited networking"),
              (status = 404, description = "No such environment"),
              (status = 409, description = "The name is taken, or the environment is archived"),
              (status = 422, description = "The body is invalid")))]
#[tracing::instrument(skip_all, fields(environment = %r))]
pub async fn update(
    State(st): State<AppState>,
    Project(project): Project,
    Path(r): Path<String>,
    ApiJson(body): ApiJson<EnvironmentPatch>,
) -> ApiResult<Json<Environment>> {
    Ok(Json(st.environments.update(project, &r, body).await?))
}

/// Archive an environment
///
/// One-way (there is no unarchive): new sessions in it are refused with a 409, running
/// ones go on, and it is hidden from the list unless `include_archived=true`.
#[utoipa::path(post, path = "/api/environments/{ref}/archive", operation_id = "archive_environment", tag = "environments",
    params(("ref" = String, Path, description = "The environment's id or name")),
    responses((status = 200, body = Environment), (status = 404, description = "No such environment")))]
#[tracing::instrument(skip_all, fields(environment = %r))]
pub async fn archive(
    State(st): State<AppState>,
    Project(project): Project,
    Path(r): Path<String>,
) -> ApiResult<Json<Environment>> {
    Ok(Json(st.environments.archive(project, &r).await?))
}

/// Delete an environment
///
/// A 409 while an agent defaults to it or any session ran in it; archive it instead.
#[utoipa::path(delete, path = "/api/environments/{ref}", operation_id = "delete_environment", tag = "environments",
    params(("ref" = String, Path, description = "The environment's id or name")),
    responses((status = 204), (status = 404, description = "No such environment"),
              (status = 409, description = "An agent defaults to it or a session ran in it")))]
#[tracing::instrument(skip_all, fields(environment = %r))]
pub async fn delete(
    State(st): State<AppState>,
    Project(project): Project,
    Path(r): Path<String>,
) -> ApiResult<StatusCode> {
    st.environments.delete(project, &r).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Get an environment's build log
///
/// The output of the last finished attempt to build the current configuration's image (the
/// Dockerfile first), as plain text. 404 while there is none: no packages, or the first
/// build still running. An addition to the contract.
#[utoipa::path(get, path = "/api/environments/{ref}/build-log", operation_id = "get_environment_build_log", tag = "environments",
    params(("ref" = String, Path, description = "The environment's id or name")),
    responses((status = 200, content_type = "text/plain", body = String),
              (status = 404, description = "No such environment, or no finished build yet")))]
#[tracing::instrument(skip_all, fields(environment = %r))]
pub async fn build_log(
    State(st): State<AppState>,
    Project(project): Project,
    Path(r): Path<String>,
) -> ApiResult<impl IntoResponse> {
    let text = st.environments.build_log(project, &r).await?;
    Ok(([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], text))
}
