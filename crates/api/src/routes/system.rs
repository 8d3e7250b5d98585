//! Health and the catalogue of compute planes.

use crate::error::{ApiError, ApiResult};
use crate::state::{AppState, BackendInfo};
use axum::extract::State;
use axum::Json;
use serde::Serialize;
use utoipa::ToSchema;

/// The server's health, for telling "the server is down" from "my key is wrong".
#[derive(Serialize, ToSchema)]
pub struct Health {
    /// `ok` when the database answers (a 503 otherwise).
    pub status: String,
    /// `ok` when the database answers.
    pub database: String,
    /// Whether live fan-out from other server processes is connected (streams fall back to
    /// polling while it is not).
    pub event_listener: bool,
}

/// Check the server and its database
///
/// Whether the server and its database are up. Needs no credential.
#[utoipa::path(get, path = "/api/health", operation_id = "health", tag = "system",
    responses((status = 200, body = Health), (status = 503, description = "The database is unreachable")))]
#[tracing::instrument(skip_all)]
pub async fn health(State(st): State<AppState>) -> ApiResult<Json<Health>> {
    sandbox_agents_store::ping(&st.db).await.map_err(|e| {
        tracing::warn!(error = %e, "health check: the database does not answer");
        ApiError::Unavailable("the database is unreachable".into())
    })?;
    Ok(Json(Health {
        status: "ok".into(),
        database: "ok".into(),
        event_listener: st.hub.is_listening(),
    }))
}

/// List compute planes
///
/// The compute planes this deployment can run; the default comes first.
#[utoipa::path(get, path = "/api/backends", operation_id = "list_backends", tag = "system", responses((status = 200, body = Vec<BackendInfo>)))]
pub async fn backends(State(st): State<AppState>) -> Json<Vec<BackendInfo>> {
    Json(st.settings.backends.clone())
}
