//! Who is calling. Every `/api` request (and `/metrics`, `/mcp` and the E2B API's `/e2b`) is authenticated by [`layer`] before its handler
//! runs, with the credential checker of `credentials`; handlers read the result with the
//! [`Principal`] extractor. Public without a credential: `GET /api/health`, `GET /api/me`
//! (which says whether credentials are checked) and the sign-in routes.

use crate::error::ApiError;
use crate::state::AppState;
use axum::extract::{FromRequestParts, Request, State};
use axum::http::request::Parts;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

pub use crate::authenticator::{require_operator, Auth, RateLimit};
pub use crate::principal::Principal;

/// The header that cookie-authenticated changes must carry (any value).
pub const CSRF_HEADER: &str = "x-requested-with";

/// Routes anyone may call (the OpenAPI document's public operations too).
pub(crate) fn is_public(path: &str) -> bool {
    matches!(
        path,
        "/api/health" | "/api/me" | "/api/auth/login" | "/api/auth/logout" | "/api/auth/recovery"
    )
}

/// Authenticates every `/api` request; anything but a public route needs a principal.
pub async fn layer(State(st): State<AppState>, mut req: Request, next: Next) -> Response {
    let path = req.uri().path().to_owned();
    let e2b = crate::e2b::is_e2b(&path);
    if !path.starts_with("/api/") && path != "/api" && path != "/metrics" && path != "/mcp" && !e2b
    {
        return next.run(req).await;
    }
    let public = is_public(&path);
    let mut header = req
        .headers()
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    if e2b && header.is_none() {
        // The E2B SDKs send the key as `X-API-KEY`: the same key, another header.
        header = req
            .headers()
            .get(crate::e2b::API_KEY_HEADER)
            .and_then(|v| v.to_str().ok())
            .map(|k| format!("Bearer {}", k.trim()));
    }
    let cookie = crate::cookie_session::session_cookie(req.headers());
    let principal = match st
        .settings
        .auth
        .authenticate(&st.db, header.as_deref(), cookie.as_deref())
        .await
    {
        Ok(p) => p,
        Err(e) => return e.into_response(),
    };
    if let Principal::Anonymous { reason } = &principal {
        if !public {
            return ApiError::Unauthorized((*reason).into()).into_response();
        }
    }
    // A browser sends the session cookie with requests other sites make it send; a custom
    // header it sends only for pages of this origin (anything else needs a CORS preflight,
    // which this server never grants). People are authenticated by the cookie alone.
    if matches!(principal, Principal::Person { .. })
        && crate::guard::changes_state(req.method())
        && !req.headers().contains_key(CSRF_HEADER)
    {
        return ApiError::Forbidden(format!(
            "a change made with a browser session must carry the {CSRF_HEADER} header \
             (the web UI sends it; pages of other sites cannot)"
        ))
        .into_response();
    }
    if path != "/api/health" {
        let who = match &principal {
            Principal::ApiKey { id, .. } => format!("key:{id}"),
            Principal::Person { id, .. } => format!("person:{id}"),
            Principal::Token => "token".to_owned(),
            Principal::Open | Principal::Anonymous { .. } => match req
                .extensions()
                .get::<axum::extract::ConnectInfo<
                std::net::SocketAddr,
            >>() {
                Some(c) => format!("ip:{}", c.0.ip()),
                None => "ip:unknown".to_owned(),
            },
        };
        let checked = match project_rate(&st, &principal, req.headers()).await {
            Some((project, per_minute)) => st.settings.auth.check_project_rate(project, per_minute),
            None => st.settings.auth.check_rate(&who),
        };
        if let Err(e) = checked {
            tracing::info!(who = %who, "rate limited");
            return e.into_response();
        }
    }
    tracing::Span::current().record("principal", tracing::field::debug(principal.kind()));
    req.extensions_mut().insert(principal);
    next.run(req).await
}

/// The project the request acts in and its own requests-per-minute limit, when it has one
/// (its bucket then takes the place of the caller's). Read from the process's caches; a
/// request whose project cannot be told is left to the credential's bucket (its handler
/// answers the 400 or 404). Operators are not the project's callers: they keep their own
/// bucket, so that one can always lift a project's limit however busy the project is.
async fn project_rate(
    st: &AppState,
    principal: &Principal,
    headers: &axum::http::HeaderMap,
) -> Option<(sandbox_agents_domain::ProjectId, u32)> {
    if matches!(principal, Principal::Anonymous { .. }) || principal.is_operator() {
        return None;
    }
    let named = crate::project::named_in(headers);
    let project = crate::project::resolve(&st.project_ids, principal, named.as_deref())
        .await
        .ok()??;
    let per_minute = st
        .project_ids
        .limits(project)
        .await
        .ok()?
        .requests_per_minute?;
    Some((project, u32::try_from(per_minute).unwrap_or(u32::MAX)))
}

impl<S: Send + Sync> FromRequestParts<S> for Principal {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        parts
            .extensions
            .get::<Principal>()
            .cloned()
            .ok_or_else(|| ApiError::Internal(anyhow::anyhow!("the auth layer did not run")))
    }
}
