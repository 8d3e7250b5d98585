//! Who the caller is (API.md §1.2, §3.1, §9.5): `/api/me` answers every caller, with or
//! without a credential; `/api/auth/check` is the legacy probe.

use crate::auth::Principal;
use crate::error::ApiResult;
use crate::state::AppState;
use axum::extract::State;
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

/// Who the caller is. Always 200, with or without a credential: `auth_required` says whether
/// credentials are checked, `kind` which one was seen (`api_key`, `token`; null when
/// anonymous or in open mode).
#[utoipa::path(get, path = "/api/me", tag = "identity", responses((status = 200, body = Me)))]
pub async fn me(State(st): State<AppState>, principal: Principal) -> ApiResult<Json<Me>> {
    let auth_required = st.settings.auth.auth_required(&st.db).await?;
    let (authenticated, label) = match &principal {
        Principal::Token => (true, Some("shared token".to_owned())),
        Principal::ApiKey { name, .. } => (true, Some(name.clone())),
        Principal::Person { email, .. } => (true, Some(email.clone())),
        Principal::Open | Principal::Anonymous { .. } => (false, None),
    };
    let page = |p: &str| Some(format!("{}/{p}", st.settings.public_url));
    Ok(Json(Me {
        authenticated,
        auth_required,
        kind: principal.kind().map(str::to_owned),
        subject: match principal {
            Principal::ApiKey { .. } | Principal::Token | Principal::Person { .. } => {
                principal.subject()
            }
            _ => None,
        },
        label,
        login_url: page("login"),
        logout_url: page("logout"),
        recovery_url: page("recovery"),
        settings_url: page("settings"),
    }))
}

/// Legacy probe: 200 when the credential is accepted (every caller, in open mode); the auth
/// layer answers 401 before this runs otherwise.
#[utoipa::path(get, path = "/api/auth/check", tag = "identity",
    responses((status = 200, body = AuthCheck), (status = 401, description = "The credential is not accepted")))]
pub async fn auth_check() -> Json<AuthCheck> {
    Json(AuthCheck { ok: true })
}
