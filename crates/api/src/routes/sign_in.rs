//! Signing in to the web UI: `POST /api/auth/login` with email and password sets the session
//! cookie, `/logout` ends it, `/recovery` sets a password with a recovery secret (once) and
//! signs in. Failed sign-ins are slowed per account and per
//! address (429 with Retry-After), and every failure reads the same.

use crate::auth::Principal;
use crate::cookie_session::{session_cookie, set_cookie};
use crate::error::{ApiError, ApiResult};
use crate::extract::ApiJson;
use crate::state::AppState;
use axum::extract::{ConnectInfo, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::Json;
use sandbox_agents_credentials::people::normalize_email;
use sandbox_agents_domain::identity::{LoginBody, Profile, RecoveryBody};
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
    let email = normalize_email(&body.email);
    st.settings.auth.check_sign_in(&email, addr.ip())?;
    let signed_in = st
        .credentials
        .sign_in(&email, body.password)
        .await?
        .ok_or_else(|| ApiError::Unauthorized(WRONG.into()))?;
    Ok((
        StatusCode::NO_CONTENT,
        [(
            header::SET_COOKIE,
            set_cookie(Some(&signed_in.token), secure(&st)),
        )],
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
        st.credentials.sign_out(&token).await?;
    }
    Ok((
        StatusCode::NO_CONTENT,
        [(header::SET_COOKIE, set_cookie(None, secure(&st)))],
    ))
}

/// Set a password with a recovery code
///
/// Sets a password with a recovery secret (which then stops working) and signs in.
/// Attempts are limited per address, as sign-ins are (429 with Retry-After).
/// The body is at most 64 KiB (413 above).
#[utoipa::path(post, path = "/api/auth/recovery", operation_id = "recover_account", tag = "identity", request_body = RecoveryBody,
    responses((status = 204, description = "Password set; signed in"),
              (status = 400, description = "The code is unknown, used or expired"),
              (status = 422, description = "The password is too short"),
              (status = 429, description = "Too many attempts; retry after Retry-After")))]
#[tracing::instrument(skip_all)]
pub async fn recover(
    State(st): State<AppState>,
    ConnectInfo(addr): ConnectInfo<SocketAddr>,
    ApiJson(body): ApiJson<RecoveryBody>,
) -> ApiResult<impl IntoResponse> {
    st.settings.auth.check_sign_in("recovery", addr.ip())?;
    let signed_in = st
        .credentials
        .recover(&body.code, body.password)
        .await?
        .ok_or_else(|| {
            ApiError::BadRequest(
                "the recovery code is unknown, used or expired; ask an operator for a new one"
                    .into(),
            )
        })?;
    Ok((
        StatusCode::NO_CONTENT,
        [(
            header::SET_COOKIE,
            set_cookie(Some(&signed_in.token), secure(&st)),
        )],
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
    st.credentials.rename_person(*id, &body.name).await?;
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
    let mut profile = st.credentials.profile(*id, projects).await?;
    profile.settings_url = Some(format!("{}/settings", st.settings.public_url));
    Ok(profile)
}
