//! The OpenAPI document's security: the credentials a request may carry, every operation but
//! the public ones requiring one of them, and their 401. Written once here, from the same
//! list of public routes the auth layer uses ([`crate::auth::is_public`]), instead of in each
//! handler's annotation.
//!
//! A deployment started without a token (`Principal::Open`, loopback only) checks no
//! credential at all; the document describes the secured deployment, which is what a
//! generated client must be ready for.

use crate::auth::{is_public, CSRF_HEADER};
use crate::cookie_session::SESSION_COOKIE;
use utoipa::openapi::security::{
    ApiKey, ApiKeyValue, HttpAuthScheme, HttpBuilder, SecurityRequirement, SecurityScheme,
};
use utoipa::openapi::{OpenApi, Response};

/// The bearer scheme's name in the document.
const BEARER: &str = "bearer";
/// The browser session's scheme's name in the document.
const SESSION: &str = "session";

/// `doc` with its security schemes, the requirement every non-public operation has, and the
/// 401 those answer without a valid credential.
pub fn document(mut doc: OpenApi) -> OpenApi {
    let components = doc.components.get_or_insert_with(Default::default);
    components.add_security_scheme(
        BEARER,
        SecurityScheme::Http(
            HttpBuilder::new()
                .scheme(HttpAuthScheme::Bearer)
                .description(Some(format!(
                    "The operator token (`--token` / `SANDBOX_AGENTS_TOKEN`), or an API key \
                     (`{}...`, bound to one project or to all)",
                    sandbox_agents_vault::tokens::KEY_PREFIX
                )))
                .build(),
        ),
    );
    components.add_security_scheme(
        SESSION,
        SecurityScheme::ApiKey(ApiKey::Cookie(ApiKeyValue::with_description(
            SESSION_COOKIE,
            &format!(
                "A person's browser session, set by `POST /api/auth/login`; a change made \
                 with it must also carry the `{CSRF_HEADER}` header"
            ),
        ))),
    );
    doc.security = Some(vec![
        SecurityRequirement::new(BEARER, Vec::<String>::new()),
        SecurityRequirement::new(SESSION, Vec::<String>::new()),
    ]);
    for (path, item) in doc.paths.paths.iter_mut() {
        let public = is_public(path);
        for operation in crate::error_docs::operations_mut(item) {
            if public {
                // An empty requirement: no credential needed.
                operation.security = Some(vec![SecurityRequirement::default()]);
            } else {
                operation
                    .responses
                    .responses
                    .entry("401".into())
                    .or_insert_with(|| {
                        Response::new("No valid credential: a missing, unknown, revoked or expired token, key or session").into()
                    });
            }
        }
    }
    doc
}
