//! `/api/projects`: the projects the caller reaches. Project management is
//! not project-scoped: `{ref}` (id or slug) names the project, `X-Project` is ignored.

use crate::auth::{require_operator, Principal};
use crate::error::{ApiError, ApiResult, NotFoundExt};
use crate::extract::ApiJson;
use crate::project::{by_ref, reaches};
use crate::state::AppState;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use sandbox_agents_domain::identity::{MemberCreate, ProjectMember};
use sandbox_agents_domain::identity::{Project, ProjectCreate, ProjectPatch, ProjectSpend};
use sandbox_agents_domain::ProjectId;
use sandbox_agents_store::memberships::{self, MemberRecord};
use sandbox_agents_store::projects;

/// Project changes: operators, and the project's admins.
fn require_admin(p: &Principal, project: ProjectId, st: &AppState) -> ApiResult<()> {
    if p.role_in(project) == Some("admin") {
        return Ok(());
    }
    require_operator(p, &st.settings.auth).map_err(|_| {
        ApiError::Forbidden("only the project's admins and operators may do this".into())
    })
}

/// List projects
///
/// The projects the caller can reach, oldest first.
#[utoipa::path(get, path = "/api/projects", operation_id = "list_projects", tag = "projects",
    responses((status = 200, body = [Project])))]
pub async fn list(State(st): State<AppState>, p: Principal) -> ApiResult<Json<Vec<Project>>> {
    let all = projects::list(&st.db).await?;
    Ok(Json(
        all.iter()
            .filter(|x| reaches(&p, x.project_id()))
            .map(|x| x.to_wire(p.role_in(x.project_id())))
            .collect(),
    ))
}

/// Create a project
///
/// Creates a project (operators and people, who become its admin). An empty `slug` is derived
/// from the name, with a numeric suffix when taken; a slug given and taken is a 409. Slugs
/// never change afterwards.
/// The body is at most 64 KiB (413 above).
#[utoipa::path(post, path = "/api/projects", operation_id = "create_project", tag = "projects", request_body = ProjectCreate,
    responses((status = 201, body = Project), (status = 403, description = "Not an operator"),
              (status = 409, description = "The slug is taken"), (status = 422, description = "The body is invalid")))]
#[tracing::instrument(skip_all)]
pub async fn create(
    State(st): State<AppState>,
    p: Principal,
    ApiJson(body): ApiJson<ProjectCreate>,
) -> ApiResult<(StatusCode, Json<Project>)> {
    if !matches!(p, Principal::Person { .. }) {
        require_operator(&p, &st.settings.auth)?;
    }
    let admin = match &p {
        Principal::Person { id, .. } => Some(*id),
        _ => None,
    };
    let created = st.credentials.create_project(&body, admin).await;
    // Whether or not it answered Ok, the change may have committed.
    st.project_ids.invalidate();
    let created = created?;
    let role = admin.map(|_| "admin");
    Ok((StatusCode::CREATED, Json(created.to_wire(role))))
}

/// Get a project
///
/// A project the caller reaches; 404 otherwise.
#[utoipa::path(get, path = "/api/projects/{ref}", operation_id = "get_project", tag = "projects",
    params(("ref" = String, Path, description = "The project's id or slug")),
    responses((status = 200, body = Project), (status = 404, description = "Not found or not reachable")))]
pub async fn get(
    State(st): State<AppState>,
    p: Principal,
    Path(r): Path<String>,
) -> ApiResult<Json<Project>> {
    let project = by_ref(&st.db, &p, &r).await?;
    Ok(Json(project.to_wire(p.role_in(project.project_id()))))
}

/// Update a project
///
/// Changes the name and/or description (operators and the project's admins); the slug is
/// immutable. `limits` (the monthly spend limit, the sandboxes and turns in flight it may
/// have, its requests per minute) replaces the project's limits, and only an operator may
/// change it: a limit the project's own admins could lift would not limit them (403). The body is at most 64 KiB (413 above).
#[utoipa::path(patch, path = "/api/projects/{ref}", operation_id = "update_project", tag = "projects",
    params(("ref" = String, Path, description = "The project's id or slug")), request_body = ProjectPatch,
    responses((status = 200, body = Project), (status = 403, description = "Not an operator"),
              (status = 404, description = "Not found or not reachable"), (status = 422, description = "The body is invalid")))]
pub async fn update(
    State(st): State<AppState>,
    p: Principal,
    Path(r): Path<String>,
    ApiJson(body): ApiJson<ProjectPatch>,
) -> ApiResult<Json<Project>> {
    let project = by_ref(&st.db, &p, &r).await?;
    require_admin(&p, project.project_id(), &st)?;
    if body.limits.is_some() {
        require_operator(&p, &st.settings.auth).map_err(|_| {
            ApiError::Forbidden(
                "only an operator may change a project's limits (its admins may not lift their own)"
                    .into(),
            )
        })?;
    }
    let updated = st
        .credentials
        .update_project(project.project_id(), &body)
        .await;
    st.project_ids.invalidate();
    let updated = updated?;
    if body.limits.is_some() {
        // A raised `max_sandboxes` lets queued sessions boot now, not at the next sweep
        // (queued turns ask again within a second on their own).
        st.sessions.admit_queued();
    }
    Ok(Json(updated.to_wire(p.role_in(updated.project_id()))))
}

/// Get a project's spend this month
///
/// What the project's model calls cost in the current calendar month (UTC), every server
/// process together, against its limits: how close it is to `monthly_cost_usd`. Calls
/// without a price are counted apart (`unpriced_requests`). Also what it runs now against
/// `max_sandboxes` and `max_runs`: its sandboxes and turns in flight, and those queued.
#[utoipa::path(get, path = "/api/projects/{ref}/spend", operation_id = "get_project_spend", tag = "projects",
    params(("ref" = String, Path, description = "The project's id or slug")),
    responses((status = 200, body = ProjectSpend), (status = 404, description = "Not found or not reachable")))]
pub async fn spend(
    State(st): State<AppState>,
    p: Principal,
    Path(r): Path<String>,
) -> ApiResult<Json<ProjectSpend>> {
    let project = by_ref(&st.db, &p, &r).await?;
    let s = sandbox_agents_store::project_spend::standing(&st.db, project.project_id()).await?;
    let (sandboxes, sandboxes_queued, runs, runs_queued) =
        sandbox_agents_store::admission::project_counts(&st.db, project.project_id()).await?;
    Ok(Json(ProjectSpend {
        sandboxes,
        sandboxes_queued,
        runs,
        runs_queued,
        month: s.spend.month_name(),
        cost_usd: s.spend.cost_usd,
        requests: s.spend.requests,
        unpriced_requests: s.spend.unpriced_requests,
        limits: s.limits,
        warned_at: s.spend.warned_at,
    }))
}

/// Delete a project
///
/// Deletes a project and everything in it (operators). 409 while any of its sessions still
/// has a sandbox: stop or delete them first.
#[utoipa::path(delete, path = "/api/projects/{ref}", operation_id = "delete_project", tag = "projects",
    params(("ref" = String, Path, description = "The project's id or slug")),
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
    require_admin(&p, project.project_id(), &st)?;
    let deleted = st.sessions.delete_project(project.project_id()).await;
    st.project_ids.invalidate();
    deleted?;
    Ok(StatusCode::NO_CONTENT)
}

fn member_wire(m: &MemberRecord) -> ProjectMember {
    ProjectMember {
        id: m.id.to_string(),
        subject: m.person_id.to_string(),
        label: m.email.clone(),
        role: m.role.clone(),
        created_at: Some(m.created_at),
    }
}

/// List members
///
/// The people of a project.
#[utoipa::path(get, path = "/api/projects/{ref}/members", operation_id = "list_members", tag = "projects",
    params(("ref" = String, Path, description = "The project's id or slug")),
    responses((status = 200, body = [ProjectMember]), (status = 404, description = "Not found or not reachable")))]
pub async fn members(
    State(st): State<AppState>,
    p: Principal,
    Path(r): Path<String>,
) -> ApiResult<Json<Vec<ProjectMember>>> {
    let project = by_ref(&st.db, &p, &r).await?;
    Ok(Json(
        memberships::list(&st.db, project.project_id())
            .await?
            .iter()
            .map(member_wire)
            .collect(),
    ))
}

/// Add a member
///
/// Adds an existing person by email (admins and operators); an unknown email is a 404.
/// The body is at most 64 KiB (413 above).
#[utoipa::path(post, path = "/api/projects/{ref}/members", operation_id = "add_member", tag = "projects",
    params(("ref" = String, Path, description = "The project's id or slug")), request_body = MemberCreate,
    responses((status = 201, body = ProjectMember), (status = 403, description = "Not an admin"),
              (status = 404, description = "No such project or person"),
              (status = 409, description = "Already a member"), (status = 422, description = "The body is invalid")))]
pub async fn add_member(
    State(st): State<AppState>,
    p: Principal,
    Path(r): Path<String>,
    ApiJson(body): ApiJson<MemberCreate>,
) -> ApiResult<(StatusCode, Json<ProjectMember>)> {
    let project = by_ref(&st.db, &p, &r).await?;
    require_admin(&p, project.project_id(), &st)?;
    let added = st
        .credentials
        .add_member(project.project_id(), &body.email, &body.role)
        .await?;
    Ok((StatusCode::CREATED, Json(member_wire(&added))))
}

/// Remove a member
///
/// Removes a membership (admins and operators); the last admin cannot be removed (409).
#[utoipa::path(delete, path = "/api/projects/{ref}/members/{member_id}", operation_id = "remove_member", tag = "projects",
    params(("ref" = String, Path, description = "The project's id or slug"), ("member_id" = String, Path, description = "The membership's id (`ProjectMember.id`)")),
    responses((status = 204, description = "Removed"), (status = 403, description = "Not an admin"),
              (status = 404, description = "No such project or member"),
              (status = 409, description = "The project's last admin")))]
pub async fn remove_member(
    State(st): State<AppState>,
    p: Principal,
    Path((r, member)): Path<(String, String)>,
) -> ApiResult<StatusCode> {
    let project = by_ref(&st.db, &p, &r).await?;
    require_admin(&p, project.project_id(), &st)?;
    let id = uuid::Uuid::try_parse(&member)
        .map_err(|_| ApiError::NotFound(format!("member '{member}' not found")))?;
    st.credentials
        .remove_member(project.project_id(), id)
        .await
        .or_not_found(|| format!("member '{member}' not found"))?;
    Ok(StatusCode::NO_CONTENT)
}
