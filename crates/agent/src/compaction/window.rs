//! A model's input window: `max_input_tokens` from the catalogue of the proxy the run's client
//! calls (LiteLLM's `/model/info`, read through `Catalogue`'s short cache, one catalogue per
//! proxy), else the server's `--default-max-input-tokens`.

use sandbox_agents_model::{Catalogue, ModelClient};
use std::collections::HashMap;
use std::sync::Mutex;

/// The catalogues runs read windows from, one per proxy address, made on first use.
#[derive(Default)]
pub(crate) struct Windows {
    catalogues: Mutex<HashMap<String, Catalogue>>,
}

impl Windows {
    /// `model`'s input window as the catalogue of `client`'s proxy says, or `default` when it
    /// says nothing: OpenAI directly has no catalogue of limits, a proxy may list none for the
    /// model, and a proxy that cannot be read is no reason to fail a run (its model call
    /// would say so).
    pub(crate) async fn max_input_tokens(
        &self,
        client: &ModelClient,
        model: &str,
        default: u64,
    ) -> u64 {
        let transport = &client.config().transport;
        if transport.model_info_url().is_none() {
            return default;
        }
        let catalogue = self
            .catalogues
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .entry(transport.models_url())
            .or_insert_with(|| Catalogue::new(client.clone()))
            .clone();
        match catalogue.models().await {
            Ok(models) => models
                .iter()
                .find(|m| m.id == model)
                .and_then(|m| m.max_input_tokens)
                .filter(|n| *n > 0)
                .unwrap_or(default),
            Err(error) => {
                tracing::warn!(%error, model, default, "could not read the model's input window; using the server's default");
                default
            }
        }
    }
}
