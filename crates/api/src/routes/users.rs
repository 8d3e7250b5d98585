//! `/api/users`: the people who can sign in, managed by operators. An
//! account made without a password gets a single-use recovery link instead; operators never
//! set anyone's password.

use crate::auth::{require_operator, Principal};
use crate::error::{ApiError, ApiResult, NotFoundExt};
use crate::extract::ApiJson;
use crate::state::AppState;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use sandbox_agents_credentials::people::PersonCreated;
use sandbox_agents_domain::identity::{Recovery, User, UserCreate, UserCreated, UserPatch};
use sandbox_agents_store::people::{self, PersonRecord};
use uuid::Uuid;

pub(crate) fn wire(p: &PersonRecord) -> User {
    User {
        id: p.id.to_string(),
        email: p.email.clone(),
        name: p.name.clone(),
        state: p.state.clone(),
        verified: p.verified,
        operator: p.operator,
        created_at: Some(p.created_at),
    }
}

/// The link that sets a password with `code`.
pub(crate) fn recovery_url(st: &AppState, code: &str) -> String {
    format!("{}/recovery?code={code}", st.settings.public_url)
}

/// Without a shared token people are the only operators, so the last one must stay one.
fn keep_an_operator(st: &AppState) -> bool {
    !st.settings.auth.token_configured()
}

fn person_id(raw: &str) -> ApiResult<Uuid> {
    Uuid::try_parse(raw).map_err(|_| ApiError::NotFound(format!("user '{raw}' not found")))
}

/// List people
///
/// Everyone who can sign in, oldest first (operators).
#[utoipa::path(get, path = "/api/users", operation_id = "list_users", tag = "users",
    responses((status = 200, body = [User]), (status = 403, description = "Not an operator")))]
pub async fn list(State(st): State<AppState>, p: Principal) -> ApiResult<Json<Vec<User>>> {
    require_operator(&p, &st.settings.auth)?;
    Ok(Json(people::list(&st.db).await?.iter().map(wire).collect()))
}

/// Create a person
///
/// Makes an account (operators). Without a password, the answer carries the single-use
/// recovery link (and code) that sets one; it appears nowhere else.
/// The body is at most 64 KiB (413 above).
#[utoipa::path(post, path = "/api/users", operation_id = "create_user", tag = "users", request_body = UserCreate,
    responses((status = 201, body = UserCreated), (status = 403, description = "Not an operator"),
              (status = 409, description = "The email is taken"), (status = 422, description = "The body is invalid")))]
#[tracing::instrument(skip_all)]
pub async fn create(
    State(st): State<AppState>,
    p: Principal,
    ApiJson(body): ApiJson<UserCreate>,
) -> ApiResult<(StatusCode, Json<UserCreated>)> {
    require_operator(&p, &st.settings.auth)?;
    // An account made in open mode is an operator: once it exists the deployment is no longer
    // open, and someone must still be able to manage it.
    let PersonCreated {
        person,
        recovery_code,
    } = st
        .credentials
        .create_person(&body, matches!(p, Principal::Open))
        .await?;
    st.settings.auth.credential_created();
    Ok((
        StatusCode::CREATED,
        Json(UserCreated {
            user: wire(&person),
            recovery_url: recovery_code.as_deref().map(|c| recovery_url(&st, c)),
            recovery_code,
        }),
    ))
}

/// Issue a recovery link
///
/// A fresh single-use recovery secret for the account (operators). Issued, never a reset.
#[utoipa::path(post, path = "/api/users/{identity_id}/recovery", operation_id = "issue_recovery", tag = "users",
    params(("identity_id" = String, Path, description = "The person's id (`User.id`)")),
    responses((status = 200, body = Recovery), (status = 403, description = "Not an operator"),
              (status = 404, description = "No such user")))]
pub async fn recovery(
    State(st): State<AppState>,
    p: Principal,
    Path(raw): Path<String>,
) -> ApiResult<Json<Recovery>> {
    require_operator(&p, &st.settings.auth)?;
    let id = person_id(&raw)?;
    let code = st
        .credentials
        .issue_recovery(id)
        .await
        .or_not_found(|| format!("user '{raw}' not found"))?;
    Ok(Json(Recovery {
        recovery_url: recovery_url(&st, &code),
        recovery_code: code,
    }))
}

/// Delete a person
///
/// Deletes the account, its sessions and memberships (operators).
#[utoipa::path(delete, path = "/api/users/{identity_id}", operation_id = "delete_user", tag = "users",
    params(("identity_id" = String, Path, description = "The person's id (`User.id`)")),
    responses((status = 204, description = "Deleted"), (status = 403, description = "Not an operator"),
              (status = 404, description = "No such user")))]
pub async fn delete(
    State(st): State<AppState>,
    p: Principal,
    Path(raw): Path<String>,
) -> ApiResult<StatusCode> {
    require_operator(&p, &st.settings.auth)?;
    let id = person_id(&raw)?;
    st.credentials
        .delete_person(id, keep_an_operator(&st))
        .await
        .or_not_found(|| format!("user '{raw}' not found"))?;
    Ok(StatusCode::NO_CONTENT)
}

/// Update a person
///
/// Renames a person or makes them an operator, or not (operators; an addition to the client's
/// routes). Without a shared token the last operator cannot stop being one (409).
/// The body is at most 64 KiB (413 above).
#[utoipa::path(patch, path = "/api/users/{identity_id}", operation_id = "update_user", tag = "users", request_body = UserPatch,
    params(("identity_id" = String, Path, description = "The person's id (`User.id`)")),
    responses((status = 200, body = User), (status = 403, description = "Not an operator"),
              (status = 404, description = "No such user"),
              (status = 409, description = "The only operator would be demoted")))]
#[tracing::instrument(skip_all, fields(person.id = %raw))]
pub async fn update(
    State(st): State<AppState>,
    p: Principal,
    Path(raw): Path<String>,
    ApiJson(body): ApiJson<UserPatch>,
) -> ApiResult<Json<User>> {
    require_operator(&p, &st.settings.auth)?;
    let id = person_id(&raw)?;
    let person = st
        .credentials
        .update_person(id, &body, keep_an_operator(&st))
        .await
        .or_not_found(|| format!("user '{raw}' not found"))?;
    Ok(Json(wire(&person)))
}
