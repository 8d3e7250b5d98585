//! `GET /api/models`: the LiteLLM proxy's catalogue, read through with a short cache.

use crate::error::{ApiError, ApiResult};
use crate::state::AppState;
use axum::extract::State;
use axum::Json;
use sandbox_agents_model::{ModelClient, ModelError};
use serde::Serialize;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::Mutex;
use utoipa::ToSchema;

/// How long a catalogue read from the proxy is served again before the next read.
pub const CACHE_FOR: Duration = Duration::from_secs(10);

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

/// A catalogue and when it was read.
type Cached = Option<(Instant, Vec<ModelInfo>)>;

/// The proxy client and the last catalogue it returned.
#[derive(Clone)]
pub struct Catalogue {
    client: ModelClient,
    cache: Arc<Mutex<Cached>>,
}

impl std::fmt::Debug for Catalogue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Catalogue").finish_non_exhaustive()
    }
}

impl Catalogue {
    pub fn new(client: ModelClient) -> Self {
        Catalogue {
            client,
            cache: Arc::new(Mutex::new(None)),
        }
    }

    /// The catalogue, from the cache when it is fresh. Concurrent callers share one read.
    async fn models(&self) -> Result<Vec<ModelInfo>, ModelError> {
        let mut cache = self.cache.lock().await;
        if let Some((at, models)) = cache.as_ref() {
            if at.elapsed() < CACHE_FOR {
                return Ok(models.clone());
            }
        }
        let models: Vec<ModelInfo> = self
            .client
            .list_models()
            .await?
            .into_iter()
            .map(|m| ModelInfo {
                id: m.id,
                owned_by: m.owned_by,
                max_input_tokens: m.max_input_tokens,
                max_output_tokens: m.max_output_tokens,
            })
            .collect();
        *cache = Some((Instant::now(), models.clone()));
        Ok(models)
    }
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
    catalogue.models().await.map(Json).map_err(|e| {
        tracing::warn!(error = %e, "the model proxy did not answer");
        ApiError::BadGateway(format!("the LiteLLM proxy did not answer: {e}"))
    })
}
