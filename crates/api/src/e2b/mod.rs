//! The E2B-compatible API (issue 40): `/e2b` is E2B's control plane (`E2B_API_URL=<public
//! url>/e2b`), answered by the `e2b` service over our sessions. Thin handlers
//! (`sandboxes.rs`); E2B's error shape, `{"code", "message"}`, for every refusal of these
//! paths, the auth and guard layers' included (`errors.rs`). Requests authenticate with
//! `X-API-KEY: <an API key of ours>` (the auth layer reads it for these paths); its project
//! is the sandbox's. `/e2b-sandbox` is the sandbox's data plane (`E2B_SANDBOX_URL`), envd's
//! Connect services over our daemon (`envd.rs`, `connect.rs`), each request proven by the
//! sandbox's own access token instead. `docs/e2b.md` says what is served and what differs
//! from E2B.

pub mod connect;
pub mod envd;
pub mod errors;
mod files;
pub mod hosts;
mod interpreter;
mod sandboxes;
mod target;

use crate::state::AppState;
use axum::routing::{any, get, post};
use axum::Router;

/// The header the E2B SDKs send their API key in.
pub const API_KEY_HEADER: &str = "x-api-key";
/// The prefix of the control plane's paths.
pub const PREFIX: &str = "/e2b";

/// Whether `path` is one of the E2B API's.
pub fn is_e2b(path: &str) -> bool {
    path == PREFIX || path.starts_with("/e2b/")
}

/// The control plane's routes, under [`PREFIX`].
pub fn routes() -> Router<AppState> {
    let sandboxes = Router::new()
        // `POST /sandboxes` is 2.46's create, `/v2/sandboxes` the newer SDKs'.
        .route("/sandboxes", post(sandboxes::create).get(sandboxes::list))
        .route(
            "/v2/sandboxes",
            post(sandboxes::create).get(sandboxes::list),
        )
        .route(
            "/sandboxes/{id}",
            get(sandboxes::get).delete(sandboxes::kill),
        )
        .route("/sandboxes/{id}/timeout", post(sandboxes::set_timeout))
        .route("/sandboxes/{id}/pause", post(sandboxes::pause))
        .route("/sandboxes/{id}/connect", post(sandboxes::connect))
        .route("/v2/sandboxes/{id}/connect", post(sandboxes::connect))
        .route("/sandboxes/{id}/resume", post(sandboxes::resume))
        .fallback(errors::not_found);
    Router::new()
        .nest(PREFIX, sandboxes)
        // The data plane: envd, by the sandbox and port the headers name (`envd.rs`).
        .route("/e2b-sandbox/{*rest}", any(envd::data_plane))
}
