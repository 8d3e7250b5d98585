//! The catalogue of a proxy's models, read through with a short cache: what `GET /api/models`
//! shows. Concurrent readers share one read of the proxy; a proxy that is down is an error,
//! never an empty list that would read as "no models".

use crate::client::ModelClient;
use crate::error::ModelError;
use crate::types::ModelInfo;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::Mutex;

/// How long a catalogue read from the proxy is served again before the next read.
pub const CACHE_FOR: Duration = Duration::from_secs(10);

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

    /// The catalogue, from the cache when it is fresh.
    pub async fn models(&self) -> Result<Vec<ModelInfo>, ModelError> {
        let mut cache = self.cache.lock().await;
        if let Some((at, models)) = cache.as_ref() {
            if at.elapsed() < CACHE_FOR {
                return Ok(models.clone());
            }
        }
        let models = self.client.list_models().await?;
        *cache = Some((Instant::now(), models.clone()));
        Ok(models)
    }
}
