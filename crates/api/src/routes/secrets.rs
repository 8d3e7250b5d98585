//! `/api/secrets`: values a project's sandboxes get as environment
//! variables through `secret_bindings`. Values are write-only: no response carries one, and a
//! 422 for a body with a value echoes nothing of it.

use crate::error::{ApiResult, NotFoundExt};
use crate::extract::WriteOnlyJson;
use crate::project::Project;
use crate::state::AppState;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use sandbox_agents_domain::secret::{Secret, SecretCreate, SecretUpdate};
use sandbox_agents_store::secrets::{self, SecretRef};

fn not_found(raw: &str) -> impl FnOnce() -> String + '_ {
    move || format!("secret '{raw}' not found")
}

/// A runtime error whose store `NotFound` names the secret.
fn named(raw: &str, e: sandbox_agents_errors::ServiceError) -> crate::ApiError {
    match e {
        sandbox_agents_errors::ServiceError::Store(sandbox_agents_store::Error::NotFound) => {
            crate::ApiError::NotFound(not_found(raw)())
        }
        other => other.into(),
    }
}

/// List secrets
///
/// The project's secrets, by name; never their values.
#[utoipa::path(get, path = "/api/secrets", operation_id = "list_secrets", tag = "secrets",
    responses((status = 200, body = [Secret])))]
pub async fn list(
    State(st): State<AppState>,
    Project(project): Project,
) -> ApiResult<Json<Vec<Secret>>> {
    let all = secrets::list(&st.db, project).await?;
    Ok(Json(all.iter().map(|s| s.to_wire()).collect()))
}

/// Create a secret
///
/// Stores a secret, encrypted at rest. The value is never returned. A name taken in the
/// project is a 409.
/// The body is at most 256 KiB (413 above).
#[utoipa::path(post, path = "/api/secrets", operation_id = "create_secret", tag = "secrets", request_body = SecretCreate,
    responses((status = 201, body = Secret), (status = 409, description = "The name is taken"),
              (status = 422, description = "The body is invalid")))]
pub async fn create(
    State(st): State<AppState>,
    Project(project): Project,
    WriteOnlyJson(body): WriteOnlyJson<SecretCreate>,
) -> ApiResult<(StatusCode, Json<Secret>)> {
    let record = st.credentials.create_secret(project, body).await?;
    Ok((StatusCode::CREATED, Json(record.to_wire())))
}

/// Get a secret
///
/// One secret, by id or name; never its value.
#[utoipa::path(get, path = "/api/secrets/{secret_id}", operation_id = "get_secret", tag = "secrets",
    params(("secret_id" = String, Path, description = "The secret's id or name")),
    responses((status = 200, body = Secret), (status = 404, description = "No such secret here")))]
pub async fn get(
    State(st): State<AppState>,
    Project(project): Project,
    Path(raw): Path<String>,
) -> ApiResult<Json<Secret>> {
    let s = secrets::get(&st.db, project, &SecretRef::parse(&raw))
        .await
        .or_not_found(not_found(&raw))?;
    Ok(Json(s.to_wire()))
}

/// Update or rotate a secret
///
/// Changes the description and/or rotates the value (absent fields are unchanged). A rotation
/// reaches each session at its next boot; running sandboxes keep the value they booted with.
/// The body is at most 256 KiB (413 above).
#[utoipa::path(put, path = "/api/secrets/{secret_id}", operation_id = "update_secret", tag = "secrets", request_body = SecretUpdate,
    params(("secret_id" = String, Path, description = "The secret's id or name")),
    responses((status = 200, body = Secret), (status = 404, description = "No such secret here"),
              (status = 422, description = "The body is invalid")))]
pub async fn update(
    State(st): State<AppState>,
    Project(project): Project,
    Path(raw): Path<String>,
    WriteOnlyJson(body): WriteOnlyJson<SecretUpdate>,
) -> ApiResult<Json<Secret>> {
    let record = st
        .credentials
        .update_secret(project, &SecretRef::parse(&raw), body)
        .await
        .map_err(|e| named(&raw, e))?;
    Ok(Json(record.to_wire()))
}

/// Delete a secret
///
/// Deletes a secret; 409 while an agent or a session binds it.
#[utoipa::path(delete, path = "/api/secrets/{secret_id}", operation_id = "delete_secret", tag = "secrets",
    params(("secret_id" = String, Path, description = "The secret's id or name")),
    responses((status = 204, description = "Deleted"), (status = 404, description = "No such secret here"),
              (status = 409, description = "An agent or session still binds it")))]
pub async fn delete(
    State(st): State<AppState>,
    Project(project): Project,
    Path(raw): Path<String>,
) -> ApiResult<StatusCode> {
    st.credentials
        .delete_secret(project, &SecretRef::parse(&raw))
        .await
        .map_err(|e| named(&raw, e))?;
    Ok(StatusCode::NO_CONTENT)
}
