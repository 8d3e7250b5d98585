//! `/api/api-keys`: credentials for services. Managing keys is an operator
//! action. A key made while a project resolves is bound to it; otherwise it is unbound and
//! reaches every project. Operators see the resolved project's keys and the unbound ones.

use crate::auth::{require_operator, Principal};
use crate::error::{ApiError, ApiResult};
use crate::extract::ApiJson;
use crate::project::MaybeProject;
use crate::state::AppState;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use sandbox_agents_domain::identity::{ApiKey, ApiKeyCreate, ApiKeyCreated};
use sandbox_agents_domain::ProjectId;
use sandbox_agents_store::api_keys;
use uuid::Uuid;

/// Which keys a request sees: those of `project` (when one resolves) and, for callers that
/// reach every project, the unbound ones.
fn scope(p: &Principal, project: Option<ProjectId>) -> (ProjectId, bool) {
    let unbound = !matches!(
        p,
        Principal::ApiKey {
            project: Some(_),
            ..
        }
    );
    // Without a project only the unbound keys are visible; the nil id matches no project.
    (
        project.unwrap_or(ProjectId(Uuid::nil())),
        unbound || project.is_none(),
    )
}

fn key_id(raw: &str) -> ApiResult<Uuid> {
    Uuid::try_parse(raw).map_err(|_| ApiError::NotFound(format!("API key '{raw}' not found")))
}

/// List API keys
///
/// The keys visible here, newest first; never their secrets.
#[utoipa::path(get, path = "/api/api-keys", operation_id = "list_api_keys", tag = "api-keys",
    responses((status = 200, body = [ApiKey]), (status = 403, description = "Not an operator")))]
pub async fn list(
    State(st): State<AppState>,
    p: Principal,
    MaybeProject(project): MaybeProject,
) -> ApiResult<Json<Vec<ApiKey>>> {
    require_operator(&p, &st.settings.auth)?;
    let (project, unbound) = scope(&p, project);
    Ok(Json(
        api_keys::list(&st.db, project, unbound)
            .await?
            .iter()
            .map(|k| k.to_wire())
            .collect(),
    ))
}

/// Create an API key
///
/// Makes a key and returns it once, whole (`key`); only its SHA-256 is stored.
/// The body is at most 64 KiB (413 above).
#[utoipa::path(post, path = "/api/api-keys", operation_id = "create_api_key", tag = "api-keys", request_body = ApiKeyCreate,
    responses((status = 201, body = ApiKeyCreated), (status = 403, description = "Not an operator"),
              (status = 422, description = "The body is invalid")))]
#[tracing::instrument(skip_all)]
pub async fn create(
    State(st): State<AppState>,
    p: Principal,
    MaybeProject(project): MaybeProject,
    ApiJson(body): ApiJson<ApiKeyCreate>,
) -> ApiResult<(StatusCode, Json<ApiKeyCreated>)> {
    require_operator(&p, &st.settings.auth)?;
    // A key made by a bound key stays in that key's project.
    let project = match &p {
        Principal::ApiKey {
            project: Some(b), ..
        } => Some(*b),
        _ => project,
    };
    let created_by = p.subject().unwrap_or_default();
    let minted = st
        .credentials
        .create_api_key(&body, project, &created_by)
        .await?;
    st.settings.auth.credential_created();
    Ok((
        StatusCode::CREATED,
        Json(ApiKeyCreated {
            key_info: minted.record.to_wire(),
            key: minted.key,
        }),
    ))
}

/// Revoke an API key
///
/// Revokes a key: it stops working at once and stays listed. Revoking twice is harmless.
#[utoipa::path(post, path = "/api/api-keys/{key_id}/revoke", operation_id = "revoke_api_key", tag = "api-keys",
    params(("key_id" = String, Path, description = "The API key's id")),
    responses((status = 200, body = ApiKey), (status = 403, description = "Not an operator"),
              (status = 404, description = "No such key here")))]
#[tracing::instrument(skip_all, fields(key.id = %raw))]
pub async fn revoke(
    State(st): State<AppState>,
    p: Principal,
    MaybeProject(project): MaybeProject,
    Path(raw): Path<String>,
) -> ApiResult<Json<ApiKey>> {
    require_operator(&p, &st.settings.auth)?;
    let id = key_id(&raw)?;
    let (project, unbound) = scope(&p, project);
    let k = api_keys::revoke(&st.db, project, unbound, id)
        .await
        .map_err(|e| match e {
            sandbox_agents_store::Error::NotFound => {
                ApiError::NotFound(format!("API key '{raw}' not found"))
            }
            other => other.into(),
        })?;
    Ok(Json(k.to_wire()))
}

/// Delete an API key
///
/// Forgets a key entirely.
#[utoipa::path(delete, path = "/api/api-keys/{key_id}", operation_id = "delete_api_key", tag = "api-keys",
    params(("key_id" = String, Path, description = "The API key's id")),
    responses((status = 204, description = "Deleted"), (status = 403, description = "Not an operator"),
              (status = 404, description = "No such key here")))]
#[tracing::instrument(skip_all, fields(key.id = %raw))]
pub async fn delete(
    State(st): State<AppState>,
    p: Principal,
    MaybeProject(project): MaybeProject,
    Path(raw): Path<String>,
) -> ApiResult<StatusCode> {
    require_operator(&p, &st.settings.auth)?;
    let id = key_id(&raw)?;
    let (project, unbound) = scope(&p, project);
    api_keys::delete(&st.db, project, unbound, id)
        .await
        .map_err(|e| match e {
            sandbox_agents_store::Error::NotFound => {
                ApiError::NotFound(format!("API key '{raw}' not found"))
            }
            other => other.into(),
        })?;
    Ok(StatusCode::NO_CONTENT)
}
