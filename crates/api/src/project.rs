//! The project a request acts in.
//!
//! `X-Project` names it by id or slug. Without the header the answer must be unambiguous: an
//! API key bound to one project, or a deployment with exactly one project; otherwise 400
//! ("never guess"). A project that does not exist, or that the caller cannot reach (a key
//! bound to another), is a 404 that does not confirm it exists.

use crate::error::ApiError;
use crate::principal::Principal;
use crate::state::AppState;
use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use sandbox_agents_domain::ProjectId;
use sandbox_agents_store::projects::{self, ProjectRecord};
use sandbox_agents_store::ProjectIds;

/// Extracts the resolved project for project-scoped routes.
#[derive(Clone, Copy, Debug)]
pub struct Project(pub ProjectId);

/// The `X-Project` header, trimmed; None when absent or empty.
fn header(parts: &Parts) -> Option<String> {
    named_in(&parts.headers)
}

/// The `X-Project` of `headers`, trimmed; None when absent or empty.
pub(crate) fn named_in(headers: &axum::http::HeaderMap) -> Option<String> {
    headers
        .get("x-project")
        .map(|v| v.to_str().unwrap_or("\u{fffd}").trim().to_owned())
        .filter(|v| !v.is_empty())
}

fn not_found(r: &str) -> ApiError {
    ApiError::NotFound(format!("project '{r}' not found"))
}

/// Whether `principal` may act in `project`.
pub fn reaches(principal: &Principal, project: ProjectId) -> bool {
    match principal {
        Principal::Open | Principal::Token => true,
        Principal::ApiKey { project: bound, .. } => bound.is_none_or(|b| b == project),
        Principal::Person { projects, .. } => projects.iter().any(|(p, _)| *p == project),
        Principal::Anonymous { .. } => false,
    }
}

/// A project by `{ref}` (id or slug) that `principal` reaches; 404 otherwise.
pub async fn by_ref(
    db: &sandbox_agents_store::Db,
    principal: &Principal,
    r: &str,
) -> Result<ProjectRecord, ApiError> {
    match projects::by_ref(db, r).await? {
        Some(p) if reaches(principal, p.project_id()) => Ok(p),
        _ => Err(not_found(r)),
    }
}

/// Resolves the request's project; `Ok(None)` only when nothing names one and several are
/// possible (callers that can act without a project use that; [`Project`] refuses it).
/// Answered from the process's cache of project ids when it can be (`store::project_ids`).
pub async fn resolve(
    ids: &ProjectIds,
    principal: &Principal,
    named: Option<&str>,
) -> Result<Option<ProjectId>, ApiError> {
    if let Some(r) = named {
        return match ids.by_ref(r).await? {
            Some(p) if reaches(principal, p) => Ok(Some(p)),
            _ => Err(not_found(r)),
        };
    }
    match principal {
        Principal::ApiKey {
            project: Some(p), ..
        } => return Ok(Some(*p)),
        // A person with exactly one membership needs no header (it is unambiguous); with
        // none, there is nothing to act in: 409.
        Principal::Person { projects, .. } => {
            return match projects.as_slice() {
                [] => Err(ApiError::Conflict("you are not in any project yet".into())),
                [(p, _)] => Ok(Some(*p)),
                _ => Ok(None),
            }
        }
        _ => {}
    }
    Ok(ids.only().await?)
}

impl FromRequestParts<AppState> for Project {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, st: &AppState) -> Result<Self, Self::Rejection> {
        let principal = Principal::from_request_parts(parts, st).await?;
        let named = header(parts);
        match resolve(&st.project_ids, &principal, named.as_deref()).await? {
            Some(p) => Ok(Project(p)),
            None => Err(ApiError::BadRequest(
                "several projects are available; name one with the X-Project header".into(),
            )),
        }
    }
}

/// The resolved project when there is one, or None when several are possible and the
/// request names none (a 404 for a named project the caller cannot reach still applies).
#[derive(Clone, Copy, Debug)]
pub struct MaybeProject(pub Option<ProjectId>);

impl FromRequestParts<AppState> for MaybeProject {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, st: &AppState) -> Result<Self, Self::Rejection> {
        let principal = Principal::from_request_parts(parts, st).await?;
        let named = header(parts);
        Ok(MaybeProject(
            resolve(&st.project_ids, &principal, named.as_deref()).await?,
        ))
    }
}
