//! Who the caller is: `/api/me` answers every caller, with or
//! without a credential; `/api/auth/check` is the legacy probe.

use crate::auth::Principal;
use crate::error::ApiResult;
use crate::state::AppState;
use axum::extract::State;
use axum::Json;
use serde::Serialize;
use utoipa::ToSchema;

/// Who the server thinks the caller is, and whether it checks credentials at all. Ask it
/// first when a 401 surprises you.
#[derive(Serialize, ToSchema)]
pub struct Me {
    /// A credential was sent and accepted (false in open mode and without one).
    pub authenticated: bool,
    /// Whether credentials are checked: false while the deployment is open (no shared token
    /// and no API key), when every caller acts as an operator.
    pub auth_required: bool,
    /// Which credential was seen: `user` (a signed-in person), `api_key`, `token` (the shared
    /// token); null when anonymous or in open mode.
    pub kind: Option<String>,
    /// The principal's id: the person's or the key's id, `token` for the shared token; null
    /// when anonymous.
    pub subject: Option<String>,
    /// For people: the person's email, the key's name, or `shared token`; null when
    /// anonymous.
    pub label: Option<String>,
    /// Whether the caller may do operators' work: manage people, API keys and every
    /// project. True in open mode, for the shared token and for operator people (and for an
    /// unbound API key while no shared token is configured); false when anonymous. A UI
    /// shows those pages only when this is true; the routes check it themselves (403).
    pub operator: bool,
    /// The sign-in page.
    pub login_url: Option<String>,
    /// The sign-out page.
    pub logout_url: Option<String>,
    /// The page that sets a password with a recovery code.
    pub recovery_url: Option<String>,
    /// The page where a person changes their password.
    pub settings_url: Option<String>,
}

/// The legacy probe's answer.
#[derive(Serialize, ToSchema)]
pub struct AuthCheck {
    /// Always true: a refused credential is a 401 instead.
    pub ok: bool,
}

/// Who am I
///
/// Who the caller is. Always 200, with or without a credential: `auth_required` says whether
/// credentials are checked, `kind` which one was seen (`api_key`, `token`, `user`; null when
/// anonymous or in open mode), `operator` whether operators' routes (people, API keys,
/// every project) will answer. The projects the caller reaches, with its role in each, are
/// `GET /api/projects`.
#[utoipa::path(get, path = "/api/me", operation_id = "get_me", tag = "identity", responses((status = 200, body = Me)))]
pub async fn me(State(st): State<AppState>, principal: Principal) -> ApiResult<Json<Me>> {
    let auth_required = st.settings.auth.auth_required(&st.db).await?;
    let (authenticated, label) = match &principal {
        Principal::Token => (true, Some("shared token".to_owned())),
        Principal::ApiKey { name, .. } => (true, Some(name.clone())),
        Principal::Person { email, .. } => (true, Some(email.clone())),
        Principal::Open | Principal::Anonymous { .. } => (false, None),
    };
    let operator = crate::auth::require_operator(&principal, &st.settings.auth).is_ok();
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
        operator,
        login_url: page("login"),
        logout_url: page("logout"),
        recovery_url: page("recovery"),
        settings_url: page("settings"),
    }))
}

/// Check a credential (legacy)
///
/// Legacy probe: 200 when the credential is accepted (every caller, in open mode); the auth
/// layer answers 401 before this runs otherwise.
#[utoipa::path(get, path = "/api/auth/check", operation_id = "check_auth", tag = "identity",
    responses((status = 200, body = AuthCheck), (status = 401, description = "The credential is not accepted")))]
pub async fn auth_check() -> Json<AuthCheck> {
    Json(AuthCheck { ok: true })
}
