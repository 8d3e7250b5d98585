//! The project a request acts in (API.md §1.3).
//!
//! Until tenancy lands there is exactly one project, `default`, so resolution is unambiguous
//! and `X-Project` naming it (by id or slug) or nothing at all both land there. Naming any
//! other project is a 404, as it will be for a project the caller cannot reach.

use crate::error::ApiError;
use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use sandbox_agents_domain::ProjectId;
use sandbox_agents_store::projects::DEFAULT_PROJECT;

/// Extracts the resolved project for project-scoped routes.
#[derive(Clone, Copy, Debug)]
pub struct Project(pub ProjectId);

impl<S: Send + Sync> FromRequestParts<S> for Project {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        match parts
            .headers
            .get("x-project")
            .map(|v| v.to_str().unwrap_or("").trim())
        {
            None | Some("") => Ok(Project(DEFAULT_PROJECT)),
            Some(r) if r == "default" || r == DEFAULT_PROJECT.to_string() => {
                Ok(Project(DEFAULT_PROJECT))
            }
            Some(r) => Err(ApiError::NotFound(format!("project '{r}' not found"))),
        }
    }
}
