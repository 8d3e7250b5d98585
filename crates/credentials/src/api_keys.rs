//! API keys: credentials for services, `ak_` and a random secret, shown once whole and
//! stored as their SHA-256 with a prefix to recognise them by. A key bound to a project
//! reaches only that project; an unbound one reaches every project.

use crate::Credentials;
use sandbox_agents_domain::identity::ApiKeyCreate;
use sandbox_agents_domain::{ProjectId, Violations};
use sandbox_agents_errors::{Result, ServiceError};
use sandbox_agents_store::api_keys::{self, ApiKeyRecord, NewApiKey};
use sandbox_agents_vault::tokens;
use uuid::Uuid;

/// A key just made: its row, and the whole secret, which nothing stores.
pub struct ApiKeyMinted {
    pub record: ApiKeyRecord,
    pub key: String,
}

impl Credentials {
    /// Mints a key from `body` (validated here), bound to `project` when one is given, and
    /// records who made it (`created_by`, a principal's subject).
    #[tracing::instrument(skip_all)]
    pub async fn create_api_key(
        &self,
        body: &ApiKeyCreate,
        project: Option<ProjectId>,
        created_by: &str,
    ) -> Result<ApiKeyMinted> {
        let mut v = Violations::new();
        let expires_at = body.validate(&mut v);
        v.into_result().map_err(ServiceError::Validation)?;
        let (key, prefix) = tokens::new_api_key().map_err(|e| ServiceError::Internal(e.into()))?;
        let record = api_keys::insert(
            &self.db,
            &NewApiKey {
                id: Uuid::now_v7(),
                project,
                name: body.name.trim(),
                description: &body.description,
                prefix: &prefix,
                hash: &tokens::digest(&key),
                created_by,
                expires_at,
            },
        )
        .await?;
        tracing::info!(key.id = %record.id, project = ?project.map(|p| p.to_string()), "API key created");
        Ok(ApiKeyMinted { record, key })
    }
}
