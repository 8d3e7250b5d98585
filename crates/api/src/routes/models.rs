//! `GET /api/models`: the LiteLLM proxy's catalogue (`sandbox_agents_model::Catalogue`, read
//! through with a short cache).

use crate::error::{ApiError, ApiResult};
use crate::state::AppState;
use axum::extract::State;
use axum::Json;
use serde::Serialize;
use utoipa::ToSchema;

/// A model the LiteLLM proxy serves: a name an agent's `model` takes with the `proxy` and
/// `litellm` transports.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct ModelInfo {
    /// The model's name, as `Agent.model` takes it.
    pub id: String,
    /// Who provides it, as the proxy reports; may be `""`.
    pub owned_by: String,
    /// The context window's input limit in tokens; null when the proxy has no data.
    pub max_input_tokens: Option<u64>,
    /// The longest answer in tokens; null when the proxy has no data.
    pub max_output_tokens: Option<u64>,
}

/// List models
///
/// The model names agents can use with the `proxy` and `litellm` transports, with their
/// context limits when the proxy knows them. A proxy that is down is a 502, never an empty
/// list that would read as "no models".
#[utoipa::path(get, path = "/api/models", operation_id = "list_models", tag = "system",
    responses((status = 200, body = Vec<ModelInfo>),
              (status = 502, description = "The LiteLLM proxy is down, or none is configured")))]
#[tracing::instrument(skip_all)]
pub async fn list(State(st): State<AppState>) -> ApiResult<Json<Vec<ModelInfo>>> {
    let Some(catalogue) = &st.settings.model_proxy else {
        return Err(ApiError::BadGateway(
            "no LiteLLM proxy is configured: set LITELLM_PROXY_API_BASE (and LITELLM_PROXY_API_KEY) on the server".into(),
        ));
    };
    let models = catalogue.models().await.map_err(|e| {
        tracing::warn!(error = %e, "the model proxy did not answer");
        ApiError::BadGateway(format!("the LiteLLM proxy did not answer: {e}"))
    })?;
    let models = models
        .into_iter()
        .map(|m| ModelInfo {
            id: m.id,
            owned_by: m.owned_by,
            max_input_tokens: m.max_input_tokens,
            max_output_tokens: m.max_output_tokens,
        })
        .collect();
    Ok(Json(models))
}
