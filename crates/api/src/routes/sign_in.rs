//! Signing in to the web UI: `POST /api/auth/login` with email and password sets the session
//! cookie, `/logout` ends it, `/recovery` sets a password with a recovery secret (once) and
//! signs in. Failed sign-ins are slowed per account and per
//! address (429 with Retry-After), and every failure reads the same.

use crate::auth::Principal;
use crate::error::{ApiError, ApiResult};
use crate::extract::ApiJson;
use crate::people::{hash_password, open_session, session_cookie, set_cookie, verify_password};
use crate::state::AppState;
use axum::extract::{ConnectInfo, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::Json;
use sandbox_agents_domain::identity::{password_problem, LoginBody, Profile, RecoveryBody};
use sandbox_agents_store::people;
use std::net::SocketAddr;

const WRONG: &str = "the email or the password is wrong";

fn secure(st: &AppState) -> bool {
    st.settings.public_url.starts_with("https://")
}

/// Sign in
///
/// Signs in: 204 with the session cookie; 401 for any wrong email or password.
/// The body is at most 64 KiB (413 above).
#[utoipa::path(post, path = "/api/auth/login", operation_id = "log_in", tag = "identity", request_body = LoginBody,
    responses((status = 204, description = "Signed in; the cookie is set"),
              (status = 401, description = "Wrong email or password"),
              (status = 429, description = "Too many attempts; retry after Retry-After")))]
#[tracing::instrument(skip_all)]
pub async fn login(
    State(st): State<AppState>,
    ConnectInfo(addr): ConnectInfo<SocketAddr>,
    ApiJson(body): ApiJson<LoginBody>,
) -> ApiResult<impl IntoResponse> {
    let email = body.email.trim().to_lowercase();
    st.settings.auth.check_sign_in(&email, addr.ip())?;
    let found = people::credentials(&st.db, &email).await?;
    let ok = match found {
        Some((person, Some(hash))) if person.state == "active" => {
            verify_password(body.password, hash).await.then_some(person)
        }
        _ => {
            // Spend the same time as a real check, so a wrong email is not faster.
            let _ = hash_password(body.password).await;
            None
        }
    };
    let Some(person) = ok else {
        tracing::info!("a sign-in failed");
        return Err(ApiError::Unauthorized(WRONG.into()));
    };
    let token = open_session(&st.db, person.id).await?;
    tracing::info!(person.id = %person.id, "signed in");
    Ok((
        StatusCode::NO_CONTENT,
        [(header::SET_COOKIE, set_cookie(Some(&token), secure(&st)))],
    ))
}

/// Sign out
///
/// Signs out: ends the session and clears the cookie.
#[utoipa::path(post, path = "/api/auth/logout", operation_id = "log_out", tag = "identity",
    responses((status = 204, description = "Signed out")))]
pub async fn logout(
    State(st): State<AppState>,
    headers: HeaderMap,
) -> ApiResult<impl IntoResponse> {
    if let Some(token) = session_cookie(&headers) {
        people::end_session(&st.db, &sandbox_agents_vault::tokens::digest(&token)).await?;
    }
    Ok((
        StatusCode::NO_CONTENT,
        [(header::SET_COOKIE, set_cookie(None, secure(&st)))],
    ))
}

/// Set a password with a recovery code
///
/// Sets a password with a recovery secret (which then stops working) and signs in.
/// The body is at most 64 KiB (413 above).
#[utoipa::path(post, path = "/api/auth/recovery", operation_id = "recover_account", tag = "identity", request_body = RecoveryBody,
    responses((status = 204, description = "Password set; signed in"),
              (status = 400, description = "The code is unknown, used or expired"),
              (status = 422, description = "The password is too short")))]
#[tracing::instrument(skip_all)]
pub async fn recover(
    State(st): State<AppState>,
    ConnectInfo(addr): ConnectInfo<SocketAddr>,
    ApiJson(body): ApiJson<RecoveryBody>,
) -> ApiResult<impl IntoResponse> {
    st.settings.auth.check_sign_in("recovery", addr.ip())?;
    if let Some(problem) = password_problem(&body.password) {
        return Err(ApiError::Validation(vec![
            sandbox_agents_domain::FieldError {
                kind: "value_error".into(),
                loc: vec!["body".into(), "password".into()],
                msg: problem,
                input: serde_json::Value::from("***"),
            },
        ]));
    }
    let hash = hash_password(body.password).await?;
    let mut tx = st.db.begin().await?;
    let person = people::recover(
        &mut tx,
        &sandbox_agents_vault::tokens::digest(body.code.trim()),
        &hash,
    )
    .await?;
    tx.commit().await?;
    let Some(person) = person else {
        return Err(ApiError::BadRequest(
            "the recovery code is unknown, used or expired; ask an operator for a new one".into(),
        ));
    };
    let token = open_session(&st.db, person.id).await?;
    tracing::info!(person.id = %person.id, "password set through recovery");
    Ok((
        StatusCode::NO_CONTENT,
        [(header::SET_COOKIE, set_cookie(Some(&token), secure(&st)))],
    ))
}

/// Get my profile
///
/// The signed-in person's own account; 409 for a key or the token (not a person).
#[utoipa::path(get, path = "/api/me/profile", operation_id = "get_profile", tag = "identity",
    responses((status = 200, body = Profile), (status = 409, description = "Not a person")))]
pub async fn profile(State(st): State<AppState>, p: Principal) -> ApiResult<Json<Profile>> {
    Ok(Json(profile_of(&st, &p).await?))
}

/// Rename myself
///
/// Changes the signed-in person's display name.
/// The body is at most 64 KiB (413 above).
#[utoipa::path(patch, path = "/api/me/profile", operation_id = "update_profile", tag = "identity",
    request_body = sandbox_agents_domain::identity::ProfilePatch,
    responses((status = 200, body = Profile), (status = 409, description = "Not a person")))]
pub async fn update_profile(
    State(st): State<AppState>,
    p: Principal,
    ApiJson(body): ApiJson<sandbox_agents_domain::identity::ProfilePatch>,
) -> ApiResult<Json<Profile>> {
    let Principal::Person { id, .. } = &p else {
        return Err(not_a_person());
    };
    people::set_name(&st.db, *id, body.name.trim()).await?;
    Ok(Json(profile_of(&st, &p).await?))
}

fn not_a_person() -> ApiError {
    ApiError::Conflict(
        "a profile belongs to a person; this credential is an API key or a token".into(),
    )
}

async fn profile_of(st: &AppState, p: &Principal) -> ApiResult<Profile> {
    let Principal::Person { id, projects, .. } = p else {
        return Err(not_a_person());
    };
    let person = people::get(&st.db, *id).await?;
    let mut listed = Vec::new();
    for (project, role) in projects {
        let r = sandbox_agents_store::projects::get(&st.db, *project).await?;
        listed.push(sandbox_agents_domain::identity::ProfileProject {
            id: r.id.to_string(),
            slug: r.slug,
            name: r.name,
            role: role.clone(),
        });
    }
    Ok(Profile {
        id: person.id.to_string(),
        email: person.email,
        name: person.name,
        verified: person.verified,
        created_at: Some(person.created_at),
        projects: listed,
        settings_url: Some(format!("{}/settings", st.settings.public_url)),
    })
}
