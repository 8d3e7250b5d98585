//! Listing the models a proxy serves, with their token limits when it says.
//!
//! `GET /v1/models` gives the names; LiteLLM's `GET /model/info` gives the limits. The list is
//! the answer: when `/model/info` is missing (404, a plain OpenAI-compatible server) or fails,
//! the limits are None rather than the whole call failing. Both are GETs without side effects,
//! so transient failures are retried, but at most twice and with a whole-request timeout, so
//! that an API handler reading through stays well inside its own 30 s.

use std::collections::HashMap;

use serde_json::Value;

use crate::client::{gave_up, http_failure, send_error, Failure, ModelClient};
use crate::error::ModelError;
use crate::retry;
use crate::types::ModelInfo;

/// Retries for each listing request, whatever `max_retries` says.
const LIST_RETRIES: u32 = 2;

impl ModelClient {
    /// The models the proxy (or OpenAI-compatible server) lists, in its order. A proxy that is
    /// down is a `Connect` error (an API maps it to 502).
    pub async fn list_models(&self) -> Result<Vec<ModelInfo>, ModelError> {
        let transport = &self.inner.config.transport;
        let listing = self.get_json(&transport.models_url()).await?;
        let data = listing
            .get("data")
            .and_then(Value::as_array)
            .ok_or_else(|| {
                ModelError::Protocol(format!(
                    "the model provider's model list at {} has no `data` array",
                    transport.models_url()
                ))
            })?;
        let limits = match transport.model_info_url() {
            Some(url) => match self.get_json(&url).await {
                Ok(info) => limits_by_name(&info),
                Err(error) => {
                    if error.status() != Some(404) {
                        tracing::warn!(%error, "could not read model limits; listing without them");
                    }
                    HashMap::new()
                }
            },
            None => HashMap::new(),
        };
        let models = data
            .iter()
            .filter_map(|m| {
                let id = m.get("id")?.as_str()?.to_owned();
                let (max_input_tokens, max_output_tokens) =
                    limits.get(&id).copied().unwrap_or_default();
                Some(ModelInfo {
                    owned_by: m
                        .get("owned_by")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_owned(),
                    id,
                    max_input_tokens,
                    max_output_tokens,
                })
            })
            .collect();
        Ok(models)
    }

    /// GETs a JSON document, retrying transient failures up to [`LIST_RETRIES`] times.
    pub(crate) async fn get_json(&self, url: &str) -> Result<Value, ModelError> {
        let config = &self.inner.config;
        let retries = config.max_retries.min(LIST_RETRIES);
        let mut attempt = 0;
        loop {
            let failure = match self.get_once(url).await {
                Ok(value) => return Ok(value),
                Err(failure) => failure,
            };
            if !failure.error.is_transient() || attempt >= retries {
                return Err(gave_up(failure.error, attempt + 1));
            }
            let wait = retry::delay(config, attempt, failure.retry_after);
            tokio::time::sleep(wait.min(config.list_timeout)).await;
            attempt += 1;
        }
    }

    async fn get_once(&self, url: &str) -> Result<Value, Failure> {
        let config = &self.inner.config;
        let mut request = self.inner.http.get(url).timeout(config.list_timeout);
        if let Some(key) = config.transport.api_key() {
            request = request.bearer_auth(key);
        }
        let response = request.send().await.map_err(|e| send_error(url, &e))?;
        if !response.status().is_success() {
            return Err(http_failure(response, config.list_timeout).await);
        }
        response.json().await.map_err(|e| {
            let error = if e.is_timeout() {
                send_error(url, &e)
            } else {
                ModelError::Protocol(format!(
                    "the model provider answered {url} with something that is not JSON: {}",
                    crate::error::describe(&e)
                ))
            };
            Failure::from(error)
        })
    }
}

/// `model_name` → (max input, max output) from LiteLLM's `/model/info`. The first entry with
/// a name wins (a proxy may list several deployments of one name); `max_tokens` stands in for
/// a missing `max_output_tokens`, as older LiteLLM versions only report that.
fn limits_by_name(info: &Value) -> HashMap<String, (Option<u64>, Option<u64>)> {
    let mut limits = HashMap::new();
    for entry in info
        .get("data")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let Some(name) = entry.get("model_name").and_then(Value::as_str) else {
            continue;
        };
        let model_info = entry.get("model_info");
        let get = |key: &str| model_info.and_then(|i| i.get(key)).and_then(Value::as_u64);
        limits.entry(name.to_owned()).or_insert((
            get("max_input_tokens"),
            get("max_output_tokens").or_else(|| get("max_tokens")),
        ));
    }
    limits
}
