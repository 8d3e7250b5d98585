//! The HTTP surface of the control plane. [`router`] builds every route with its middleware,
//! and serves the web UI ([`ui`]) from whatever no route takes; [`openapi`] is the document
//! generated from the same routes.

pub mod auth;
pub mod authenticator;
pub mod cookie_session;
pub mod docs;
pub mod e2b;
pub mod error;
mod error_docs;
pub mod extract;
pub mod guard;
pub mod limits;
pub mod mcp;
pub mod metrics;
pub mod multipart;
mod nul;
pub mod pages;
pub mod preview;
pub mod principal;
pub mod project;
mod project_docs;
pub mod routes;
mod rules_docs;
mod security_docs;
pub mod sse;
pub mod state;
mod stream_docs;
pub mod ui;
mod unread_body;
pub mod web;

use axum::extract::DefaultBodyLimit;
use axum::http::{HeaderMap, HeaderName, Method, Request, StatusCode, Uri};
use axum::response::IntoResponse;
use axum::Router;
use routes::{
    agent_versions, agents, deliveries, events, identity, lifecycle, sessions, snapshots, system,
    webhooks,
};
use std::future::IntoFuture;
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::trace::{DefaultOnResponse, TraceLayer};
use tracing::Level;
use utoipa::OpenApi;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub use error::{ApiError, ApiResult};
pub use state::{ApiSettings, AppState, BackendInfo};

/// Largest JSON body accepted (agent manifests carry file contents inline). Upload routes set
/// their own, larger limits.
pub const JSON_BODY_LIMIT: usize = 8 * 1024 * 1024;

#[derive(OpenApi)]
#[openapi(
    info(
        title = "Sandbox Agents",
        description = "Control plane for AI agents that work inside sandboxed containers. \
                       Every endpoint is under /api; errors are {\"detail\": ...}.",
        license(name = "Apache-2.0")
    ),
    // Relative: the document is served by the deployment it describes (`/openapi.json`),
    // whatever its address.
    servers((url = "/", description = "The deployment serving this document")),
    tags(
        (name = "system", description = "Health and compute planes"),
        (name = "identity", description = "Who the caller is"),
        (name = "projects", description = "Projects: the unit of tenancy"),
        (name = "api-keys", description = "Credentials for services"),
        (name = "users", description = "People who sign in to the web UI"),
        (name = "git-keys", description = "Deploy keys the control plane clones with"),
        (name = "agents", description = "Reusable agent definitions"),
        (name = "schedules", description = "An agent's messages on a cron expression in a time zone, and their fires"),
        (name = "sessions", description = "Conversations and their sandboxes"),
        (name = "events", description = "The ordered event log and its SSE stream"),
        (name = "environments", description = "Named sandbox configurations (image, packages) that sessions start in"),
        (name = "secrets", description = "Values sandboxes get as environment variables; write-only"),
        (name = "skill-bundles", description = "Named skills trees that CI pushes to, and their numbered versions"),
        (name = "webhooks", description = "Signed HTTP deliveries of session events, and their attempt log"),
        (name = "usage", description = "What a project spent: tokens, requests and sandbox time over a window"),
    ),
    components(schemas(error::ErrorBody, error::ValidationErrorBody, sandbox_agents_domain::FieldError))
)]
struct ApiDoc;

fn api_routes() -> OpenApiRouter<AppState> {
    let mut scoped = project_routes();
    project_docs::document(scoped.get_openapi_mut());
    OpenApiRouter::with_openapi(ApiDoc::openapi())
        .routes(routes!(system::health))
        .routes(routes!(system::backends))
        .routes(routes!(routes::models::list))
        .routes(routes!(identity::me))
        .routes(routes!(identity::auth_check))
        // The catalogue of event types: the same in every project.
        .routes(routes!(webhooks::event_types))
        .routes(routes!(routes::projects::list, routes::projects::create))
        .routes(routes!(
            routes::projects::get,
            routes::projects::update,
            routes::projects::delete
        ))
        .routes(routes!(routes::projects::spend))
        .routes(routes!(
            routes::projects::members,
            routes::projects::add_member
        ))
        .routes(routes!(routes::projects::remove_member))
        .routes(routes!(routes::users::list, routes::users::create))
        .routes(routes!(routes::users::recovery))
        .routes(routes!(routes::users::update, routes::users::delete))
        .routes(routes!(routes::sign_in::login))
        .routes(routes!(routes::sign_in::logout))
        .routes(routes!(routes::sign_in::recover))
        .routes(routes!(
            routes::sign_in::profile,
            routes::sign_in::update_profile
        ))
        .merge(scoped)
}

/// The routes that act in a project: each handler takes [`project::Project`] or
/// [`project::MaybeProject`] (the terminal resolves it itself, from the header or
/// `?project=`), so each operation reads `X-Project` (`project_docs` documents it; the API
/// test `openapi_routes` checks that these, and only these, resolve it).
fn project_routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::default()
        .routes(routes!(routes::api_keys::list, routes::api_keys::create))
        .routes(routes!(routes::api_keys::revoke))
        .routes(routes!(routes::api_keys::delete))
        .routes(routes!(routes::git_keys::list, routes::git_keys::create))
        .routes(routes!(routes::git_keys::test))
        .routes(routes!(routes::git_keys::delete))
        .routes(routes!(agents::list, agents::create))
        .routes(routes!(agents::get, agents::update, agents::delete))
        .routes(routes!(agents::archive))
        .routes(routes!(agents::unarchive))
        .routes(routes!(agents::mcp_servers))
        .routes(routes!(agent_versions::list))
        .routes(routes!(agent_versions::get))
        .routes(routes!(agent_versions::restore))
        .routes(routes!(routes::schedules::list, routes::schedules::create))
        .routes(routes!(
            routes::schedules::get,
            routes::schedules::update,
            routes::schedules::delete
        ))
        .routes(routes!(routes::schedules::fires))
        .routes(routes!(routes::memory::get, routes::memory::put))
        .routes(routes!(sessions::list, lifecycle::create))
        .routes(routes!(sessions::get, sessions::update, lifecycle::delete))
        .routes(routes!(lifecycle::start))
        .routes(routes!(lifecycle::stop))
        .routes(routes!(lifecycle::interrupt))
        .routes(routes!(routes::exec::exec))
        .routes(routes!(routes::runs::send_message))
        .routes(routes!(routes::runs::submit_tool_result))
        .routes(routes!(routes::runs::tool_calls))
        .routes(routes!(
            routes::runs::confirm_tool_call,
            routes::runs::tool_confirmations
        ))
        .routes(routes!(
            routes::files::list,
            routes::files::upload,
            routes::files::delete
        ))
        .routes(routes!(routes::files::content))
        .routes(routes!(routes::ports::get))
        .routes(routes!(routes::egress::get))
        .routes(routes!(routes::processes::list, routes::processes::start))
        .routes(routes!(routes::processes::get, routes::processes::kill))
        .routes(routes!(routes::notebook::get))
        .routes(routes!(routes::terminal::open))
        .routes(routes!(
            routes::sandbox_files::read,
            routes::sandbox_files::write
        ))
        .routes(routes!(snapshots::list, snapshots::create))
        .routes(routes!(snapshots::restore))
        .routes(routes!(events::page))
        .routes(routes!(events::stream))
        .routes(routes!(routes::secrets::list, routes::secrets::create))
        .routes(routes!(
            routes::secrets::get,
            routes::secrets::update,
            routes::secrets::delete
        ))
        .routes(routes!(webhooks::list, webhooks::create))
        .routes(routes!(webhooks::get, webhooks::update, webhooks::delete))
        .routes(routes!(webhooks::rotate_secret))
        .routes(routes!(deliveries::list))
        .routes(routes!(deliveries::attempts))
        .routes(routes!(deliveries::redeliver))
        .routes(routes!(deliveries::ping))
        .routes(routes!(
            routes::skill_bundles::list,
            routes::skill_bundles::create
        ))
        .routes(routes!(
            routes::skill_bundles::get,
            routes::skill_bundles::delete
        ))
        .routes(routes!(
            routes::skill_bundles::versions,
            routes::skill_bundles::push
        ))
        .routes(routes!(routes::skill_bundles::retire))
        .routes(routes!(routes::usage::report))
        .routes(routes!(
            routes::environments::list,
            routes::environments::create
        ))
        .routes(routes!(
            routes::environments::get,
            routes::environments::update,
            routes::environments::delete
        ))
        .routes(routes!(routes::environments::archive))
        .routes(routes!(routes::environments::build_log))
}

/// The OpenAPI document, generated from the routes themselves.
pub fn openapi() -> utoipa::openapi::OpenApi {
    stream_docs::document(error_docs::document(security_docs::document(
        rules_docs::document(api_routes().split_for_parts().1),
    )))
}

/// Every route, with request ids, tracing, body limits, and 404/405 answers as
/// `{"detail": ...}` like every other error; the web UI answers what no route takes (see
/// [`ui`] for what it never shadows).
pub fn router(state: AppState) -> Router {
    let (api, doc) = api_routes().split_for_parts();
    let doc = stream_docs::document(error_docs::document(security_docs::document(
        rules_docs::document(doc),
    )));
    let request_id = HeaderName::from_static("x-request-id");
    let assets = state.settings.ui.clone();
    let e2b_domain: Option<std::sync::Arc<str>> = state.e2b.domain().map(Into::into);
    let checks = std::sync::Arc::new(guard::Guard {
        hosts: state.settings.hosts.clone(),
        page_csp: guard::page_csp(&state.settings.preview.frame_sources()),
    });
    // `/mcp` runs its tools through this very router (set below, once it is built).
    let whole = std::sync::Arc::new(std::sync::OnceLock::new());
    let mcp = mcp::service(whole.clone(), state.db.clone(), state.shutdown.clone());
    let app = api
        .route_service("/mcp", mcp)
        .merge(e2b::routes())
        .merge(docs::routes(doc))
        .merge(preview::moved())
        .merge(pages::routes())
        .merge(metrics::routes())
        .fallback(move |method: Method, uri: Uri, headers: HeaderMap| {
            let assets = assets.clone();
            async move { ui::fallback(&assets, &method, &uri, &headers).await }
        })
        .method_not_allowed_fallback(|| async {
            (StatusCode::METHOD_NOT_ALLOWED, axum::Json(serde_json::json!({"detail": "Method Not Allowed"})))
        })
        .layer(DefaultBodyLimit::max(JSON_BODY_LIMIT))
        .layer(axum::middleware::from_fn(nul::layer))
        .layer(axum::middleware::from_fn(limits::layer))
        // Inside the routes (it reads their templates), outside the refusals' answers too:
        // a 401 or 403 is a request like any other.
        .layer(axum::middleware::from_fn(metrics::layer))
        .layer(axum::middleware::from_fn_with_state(state.clone(), auth::layer))
        // Outside the auth layer: a rebound or cross-site request is refused before any
        // credential is looked at.
        .layer(axum::middleware::from_fn_with_state(checks, guard::layer))
        // Outermost of the refusals: any of them may answer before the body is read.
        .layer(axum::middleware::from_fn(unread_body::layer))
        // Around every refusal: on the E2B API's paths, each speaks E2B's error shape.
        .layer(axum::middleware::from_fn(e2b::errors::layer))
        .layer(
            TraceLayer::new_for_http()
                .make_span_with(|req: &Request<_>| {
                    let id = req.headers().get("x-request-id").and_then(|v| v.to_str().ok()).unwrap_or("");
                    tracing::info_span!("request", method = %req.method(), path = %req.uri().path(), request_id = %id, principal = tracing::field::Empty)
                })
                .on_response(DefaultOnResponse::new().level(Level::INFO).latency_unit(tower_http::LatencyUnit::Millis)),
        )
        .layer(PropagateRequestIdLayer::new(request_id.clone()))
        .layer(SetRequestIdLayer::new(request_id, MakeRequestUuid))
        .with_state(state);
    let _ = whole.set(app.clone());
    match e2b_domain {
        // Outside the router, so the path it rewrites is the one routed.
        Some(domain) => {
            Router::new()
                .fallback_service(app)
                .layer(axum::middleware::from_fn_with_state(
                    domain,
                    e2b::hosts::layer,
                ))
        }
        None => app,
    }
}

/// Accepted connections send each write at once (`TCP_NODELAY`). With Nagle's algorithm an
/// SSE frame written while the previous one is unacknowledged waits for the peer's delayed
/// ACK (up to 40 ms on Linux): the tail of every live stream, and of text deltas, paid it.
fn no_delay(
    listener: tokio::net::TcpListener,
) -> axum::serve::TapIo<
    tokio::net::TcpListener,
    impl FnMut(&mut tokio::net::TcpStream) + Send + 'static,
> {
    use axum::serve::ListenerExt as _;
    listener.tap_io(|tcp| {
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!(error = %e, "could not set TCP_NODELAY on a connection");
        }
    })
}

/// A handler for panics: the client sees a JSON 500, the log sees the panic.
pub fn panic_response(_: Box<dyn std::any::Any + Send + 'static>) -> axum::response::Response {
    ApiError::Internal(anyhow::anyhow!("a handler panicked")).into_response()
}

/// The sockets a server answers on: the API (with its docs and pages), and the previews'
/// origin of their own (None: previews are not served by this process).
pub struct Listeners {
    pub api: tokio::net::TcpListener,
    pub preview: Option<tokio::net::TcpListener>,
    /// `--metrics-bind`: `GET /metrics` without a credential, for a scraper on a private
    /// interface (None: only the API listener's, for operators).
    pub metrics: Option<tokio::net::TcpListener>,
}

/// Serves `router(state)` on the API listener and the preview proxy on the preview listener
/// until `state.shutdown` is cancelled, then stops accepting, lets in-flight requests finish
/// (event streams end at once: the token stops their feeds, which close them; terminals
/// watch it themselves) and returns. This is the seam tests use
/// to own a server's lifetime.
pub async fn serve(listeners: Listeners, state: AppState) -> std::io::Result<()> {
    let shutdown = state.shutdown.clone();
    let catch = || tower_http::catch_panic::CatchPanicLayer::custom(panic_response);
    if let Some(listener) = listeners.metrics {
        let app = metrics::listener_router(state.clone()).layer(catch());
        let s = shutdown.clone();
        tokio::spawn(async move {
            let served = axum::serve(no_delay(listener), app)
                .with_graceful_shutdown(async move { s.cancelled().await })
                .await;
            if let Err(e) = served {
                tracing::error!(error = %e, "the metrics listener failed");
            }
        });
    }
    // Connection info lets the preview proxy say who the client is (X-Forwarded-For).
    let api = router(state.clone())
        .layer(catch())
        .into_make_service_with_connect_info::<std::net::SocketAddr>();
    let api = axum::serve(no_delay(listeners.api), api).with_graceful_shutdown({
        let s = shutdown.clone();
        async move { s.cancelled().await }
    });
    let Some(preview_listener) = listeners.preview else {
        return api.await;
    };
    let preview = preview::router(state)
        .layer(catch())
        .into_make_service_with_connect_info::<std::net::SocketAddr>();
    let preview = axum::serve(no_delay(preview_listener), preview)
        .with_graceful_shutdown(async move { shutdown.cancelled().await });
    let (a, p) = tokio::join!(api.into_future(), preview.into_future());
    a.and(p)
}
