//! Who the caller is. Until tenancy lands the deployment is in open mode: no credential is
//! checked, and `/api/me` says so.

use axum::Json;
use serde::Serialize;
use utoipa::ToSchema;

/// `Me`: who the server thinks the caller is, and whether it checks credentials at all.
#[derive(Serialize, ToSchema)]
pub struct Me {
    pub authenticated: bool,
    pub auth_required: bool,
    /// `user` | `api_key` | `token`, or null when anonymous.
    pub kind: Option<String>,
    pub subject: Option<String>,
    pub label: Option<String>,
    pub login_url: Option<String>,
    pub logout_url: Option<String>,
    pub recovery_url: Option<String>,
    pub settings_url: Option<String>,
}

#[derive(Serialize, ToSchema)]
pub struct AuthCheck {
    pub ok: bool,
}

/// Who the caller is. Always 200, with or without a credential.
#[utoipa::path(get, path = "/api/me", tag = "identity", responses((status = 200, body = Me)))]
pub async fn me() -> Json<Me> {
    Json(Me {
        authenticated: false,
        auth_required: false,
        kind: None,
        subject: None,
        label: None,
        login_url: None,
        logout_url: None,
        recovery_url: None,
        settings_url: None,
    })
}

/// Legacy probe: 200 when the credential is accepted (every caller, in open mode).
#[utoipa::path(get, path = "/api/auth/check", tag = "identity",
    responses((status = 200, body = AuthCheck), (status = 401, description = "The credential is not accepted")))]
pub async fn auth_check() -> Json<AuthCheck> {
    Json(AuthCheck { ok: true })
}
