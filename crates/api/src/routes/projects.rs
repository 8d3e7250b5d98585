//! `/api/projects` (API.md §2.2, §8.7): the projects the caller reaches. Project management is
//! not project-scoped: `{ref}` (id or slug) names the project, `X-Project` is ignored.

use crate::auth::{require_operator, Principal};
use crate::error::{ApiError, ApiResult};
use crate::extract::ApiJson;
use crate::project::{by_ref, reaches};
use crate::state::AppState;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use sandbox_agents_domain::identity::{slug_from_name, Project, ProjectCreate, ProjectPatch};
use sandbox_agents_domain::{ProjectId, Violations};
use sandbox_agents_store::projects;

/// The caller's role in a project: none for credentials (people come with memberships).
const NO_ROLE: Option<&str> = None;

/// The projects the caller can reach, oldest first.
#[utoipa::path(get, path = "/api/projects", tag = "projects",
    responses((status = 200, body = [Project])))]
pub async fn list(State(st): State<AppState>, p: Principal) -> ApiResult<Json<Vec<Project>>> {
    let all = projects::list(&st.db).await?;
    Ok(Json(
        all.iter()
            .filter(|x| reaches(&p, x.project_id()))
            .map(|x| x.to_wire(NO_ROLE))
            .collect(),
    ))
}

/// Creates a project (operators). An empty `slug` is derived from the name, with a numeric
/// suffix when taken; a slug given and taken is a 409. Slugs never change afterwards.
#[utoipa::path(post, path = "/api/projects", tag = "projects", request_body = ProjectCreate,
    responses((status = 201, body = Project), (status = 403, description = "Not an operator"),
              (status = 409, description = "The slug is taken"), (status = 422, description = "The body is invalid")))]
#[tracing::instrument(skip_all)]
pub async fn create(
    State(st): State<AppState>,
    p: Principal,
    ApiJson(body): ApiJson<ProjectCreate>,
) -> ApiResult<(StatusCode, Json<Project>)> {
    require_operator(&p, &st.settings.auth)?;
    let mut v = Violations::new();
    body.validate(&mut v);
    v.into_result().map_err(ApiError::Validation)?;
    let slug = if body.slug.is_empty() {
        projects::free_slug(&st.db, &slug_from_name(&body.name)).await?
    } else {
        body.slug.clone()
    };
    let created = projects::insert(
        &st.db,
        ProjectId::new(),
        &slug,
        body.name.trim(),
        &body.description,
    )
    .await?;
    tracing::info!(project.id = %created.id, slug = %created.slug, "project created");
    Ok((StatusCode::CREATED, Json(created.to_wire(NO_ROLE))))
}

/// A project the caller reaches; 404 otherwise.
#[utoipa::path(get, path = "/api/projects/{ref}", tag = "projects",
    params(("ref" = String, Path, description = "Id or slug")),
    responses((status = 200, body = Project), (status = 404, description = "Not found or not reachable")))]
pub async fn get(
    State(st): State<AppState>,
    p: Principal,
    Path(r): Path<String>,
) -> ApiResult<Json<Project>> {
    Ok(Json(by_ref(&st.db, &p, &r).await?.to_wire(NO_ROLE)))
}

/// Changes the name and/or description (operators); the slug is immutable.
#[utoipa::path(patch, path = "/api/projects/{ref}", tag = "projects",
    params(("ref" = String, Path, description = "Id or slug")), request_body = ProjectPatch,
    responses((status = 200, body = Project), (status = 403, description = "Not an operator"),
              (status = 404, description = "Not found or not reachable"), (status = 422, description = "The body is invalid")))]
pub async fn update(
    State(st): State<AppState>,
    p: Principal,
    Path(r): Path<String>,
    ApiJson(body): ApiJson<ProjectPatch>,
) -> ApiResult<Json<Project>> {
    let project = by_ref(&st.db, &p, &r).await?;
    require_operator(&p, &st.settings.auth)?;
    if body.name.as_deref().is_some_and(|n| n.trim().is_empty()) {
        return Err(ApiError::Validation(vec![
            sandbox_agents_domain::FieldError {
                kind: "string_too_short".into(),
                loc: vec!["body".into(), "name".into()],
                msg: "name must not be empty".into(),
                input: serde_json::Value::from(""),
            },
        ]));
    }
    let updated = projects::update(
        &st.db,
        project.project_id(),
        body.name.as_deref().map(str::trim),
        body.description.as_deref(),
    )
    .await?;
    Ok(Json(updated.to_wire(NO_ROLE)))
}

/// Deletes a project and everything in it (operators). 409 while any of its sessions still
/// has a sandbox: stop or delete them first.
#[utoipa::path(delete, path = "/api/projects/{ref}", tag = "projects",
    params(("ref" = String, Path, description = "Id or slug")),
    responses((status = 204, description = "Deleted"), (status = 403, description = "Not an operator"),
              (status = 404, description = "Not found or not reachable"),
              (status = 409, description = "A session of the project still has a sandbox")))]
#[tracing::instrument(skip_all, fields(project = %r))]
pub async fn delete(
    State(st): State<AppState>,
    p: Principal,
    Path(r): Path<String>,
) -> ApiResult<StatusCode> {
    let project = by_ref(&st.db, &p, &r).await?;
    require_operator(&p, &st.settings.auth)?;
    let mut tx = st
        .db
        .begin()
        .await
        .map_err(sandbox_agents_store::Error::from)?;
    projects::delete(&mut tx, project.project_id()).await?;
    tx.commit()
        .await
        .map_err(sandbox_agents_store::Error::from)?;
    tracing::info!(project.id = %project.id, "project deleted");
    Ok(StatusCode::NO_CONTENT)
}
