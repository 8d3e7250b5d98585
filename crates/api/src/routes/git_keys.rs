//! `/api/git-keys`: deploy keys. The server generates each pair; responses carry the public
//! half only. (Agent writes check their `skills_source.ssh_key_id` with
//! `sandbox_agents_credentials::git_keys::hold_referenced_key`.)

use crate::error::{ApiError, ApiResult, NotFoundExt};
use crate::extract::ApiJson;
use crate::project::Project;
use crate::state::AppState;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use sandbox_agents_domain::git_key::{
    check_name, GitKey, GitKeyCreate, GitKeyTest, GitKeyTestRequest, GitRemote,
};
use sandbox_agents_domain::ids::GitKeyId;
use sandbox_agents_domain::Violations;
use sandbox_agents_store::git_keys;

/// Parses a key id from a path; anything that is not an id names no key.
fn key_id(raw: &str) -> ApiResult<GitKeyId> {
    GitKeyId::parse(raw).ok_or_else(|| ApiError::NotFound(not_found(raw)()))
}

fn not_found(raw: &str) -> impl FnOnce() -> String + '_ {
    move || format!("git key '{raw}' not found in this project")
}

/// List git deploy keys
///
/// The project's keys, oldest first.
#[utoipa::path(get, path = "/api/git-keys", operation_id = "list_git_keys", tag = "git-keys",
    responses((status = 200, body = Vec<GitKey>)))]
#[tracing::instrument(skip_all)]
pub async fn list(
    State(st): State<AppState>,
    Project(project): Project,
) -> ApiResult<Json<Vec<GitKey>>> {
    let all = git_keys::list(&st.db, project).await?;
    Ok(Json(all.iter().map(|k| k.to_wire()).collect()))
}

/// Create a git deploy key
///
/// Generates an ed25519 key pair. Register the returned `public_key` with the git host; the
/// private half never leaves the server. A name taken in the project is a 409.
/// The body is at most 64 KiB (413 above).
#[utoipa::path(post, path = "/api/git-keys", operation_id = "create_git_key", tag = "git-keys", request_body = GitKeyCreate,
    responses((status = 201, body = GitKey), (status = 409, description = "The name is taken"),
              (status = 422, description = "The body is invalid")))]
#[tracing::instrument(skip_all)]
pub async fn create(
    State(st): State<AppState>,
    Project(project): Project,
    ApiJson(body): ApiJson<GitKeyCreate>,
) -> ApiResult<(StatusCode, Json<GitKey>)> {
    let mut errors = Violations::new();
    check_name(&mut errors, &body.name);
    errors.into_result().map_err(ApiError::Validation)?;
    let key = st
        .credentials
        .create_git_key(project, body.name.trim())
        .await?;
    Ok((StatusCode::CREATED, Json(key.to_wire())))
}

/// Test a git deploy key
///
/// Tries to read a repository with the key (`git ls-remote`, from the control plane, within
/// 100 s). Failure is a 200 with `ok: false` and git's or ssh's words in `detail`; success
/// sets `last_used_at`. `host` is `[user@]hostname[:port]` (user `git` by default).
/// The body is at most 64 KiB (413 above).
#[utoipa::path(post, path = "/api/git-keys/{key_id}/test", operation_id = "test_git_key", tag = "git-keys",
    request_body = GitKeyTestRequest, params(("key_id" = String, Path, description = "The git key's id")),
    responses((status = 200, body = GitKeyTest), (status = 404, description = "No such key"),
              (status = 422, description = "The repo or host is not acceptable")))]
#[tracing::instrument(skip_all, fields(git_key.id = %raw))]
pub async fn test(
    State(st): State<AppState>,
    Project(project): Project,
    Path(raw): Path<String>,
    ApiJson(body): ApiJson<GitKeyTestRequest>,
) -> ApiResult<Json<GitKeyTest>> {
    let id = key_id(&raw)?;
    // A key that does not exist is a 404 before the body is judged.
    git_keys::get(&st.db, project, id)
        .await
        .or_not_found(not_found(&raw))?;
    let mut errors = Violations::new();
    let remote = GitRemote::parse(&mut errors, &body.repo, &body.host);
    errors.into_result().map_err(ApiError::Validation)?;
    let remote = remote.expect("a remote without violations");
    let outcome = st
        .credentials
        .test_git_key(project, id, &remote)
        .await
        .map_err(|e| match e {
            sandbox_agents_errors::ServiceError::Store(sandbox_agents_store::Error::NotFound) => {
                ApiError::NotFound(not_found(&raw)())
            }
            other => other.into(),
        })?;
    Ok(Json(outcome))
}

/// Delete a git deploy key
///
/// Deletes a key, refused with 409 while an agent's `skills_source` uses it.
#[utoipa::path(delete, path = "/api/git-keys/{key_id}", operation_id = "delete_git_key", tag = "git-keys",
    params(("key_id" = String, Path, description = "The git key's id")),
    responses((status = 204), (status = 404, description = "No such key"),
              (status = 409, description = "An agent still uses the key")))]
#[tracing::instrument(skip_all, fields(git_key.id = %raw))]
pub async fn delete(
    State(st): State<AppState>,
    Project(project): Project,
    Path(raw): Path<String>,
) -> ApiResult<StatusCode> {
    let id = key_id(&raw)?;
    st.credentials
        .delete_git_key(project, id)
        .await
        .or_not_found(not_found(&raw))?;
    tracing::info!(git_key.id = %id, "git key deleted");
    Ok(StatusCode::NO_CONTENT)
}
