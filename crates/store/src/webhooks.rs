//! The `webhooks` table: subscriptions, project-scoped. The signing secret is stored sealed
//! (see the vault crate); this module never sees the plaintext.

use crate::error::{Error, Result};
use sandbox_agents_domain::webhook::Webhook;
use sandbox_agents_domain::{ProjectId, WebhookId};
use sqlx::PgExecutor;
use time::OffsetDateTime;
use uuid::Uuid;

#[derive(Clone, Debug, sqlx::FromRow)]
pub struct WebhookRecord {
    pub id: Uuid,
    pub project_id: Uuid,
    pub name: String,
    pub url: String,
    pub event_types: Vec<String>,
    pub agent_id: Option<Uuid>,
    pub active: bool,
    pub secret_sealed: Vec<u8>,
    pub consecutive_failures: i32,
    pub deactivated_reason: Option<String>,
    pub created_at: OffsetDateTime,
    pub updated_at: OffsetDateTime,
}

impl WebhookRecord {
    pub fn webhook_id(&self) -> WebhookId {
        WebhookId(self.id)
    }

    pub fn to_wire(&self) -> Webhook {
        Webhook {
            id: self.id.to_string(),
            name: self.name.clone(),
            url: self.url.clone(),
            event_types: self.event_types.clone(),
            agent_id: self.agent_id.map(|a| a.to_string()),
            active: self.active,
            consecutive_failures: self.consecutive_failures,
            deactivated_reason: self.deactivated_reason.clone(),
            created_at: self.created_at,
            updated_at: self.updated_at,
        }
    }
}

/// `query_as!` into [`WebhookRecord`] with its columns spliced in at compile time between
/// `$head` and `$tail` (never `format!`: no SQL is built at run time).
macro_rules! webhook_query {
    ($head:literal, $tail:literal $(, $arg:expr)* $(,)?) => {
        sqlx::query_as!(
            WebhookRecord,
            $head
                + "id, project_id, name, url, event_types, agent_id, active, secret_sealed,
                   consecutive_failures, deactivated_reason, created_at, updated_at"
                + $tail
            $(, $arg)*
        )
    };
}

/// A subscription about to be inserted; `secret_sealed` is sealed for `id` already.
pub struct NewWebhook<'a> {
    pub id: WebhookId,
    pub project: ProjectId,
    pub name: &'a str,
    pub url: &'a str,
    pub event_types: &'a [String],
    pub agent_id: Option<Uuid>,
    pub active: bool,
    pub secret_sealed: &'a [u8],
}

#[tracing::instrument(skip_all, fields(webhook.id = %w.id))]
pub async fn insert(db: impl PgExecutor<'_>, w: &NewWebhook<'_>) -> Result<WebhookRecord> {
    Ok(webhook_query!(
        "insert into webhooks (id, project_id, name, url, event_types, agent_id, active, secret_sealed)
         values ($1, $2, $3, $4, $5, $6, $7, $8) returning ",
        "",
        w.id.0,
        w.project.0,
        w.name,
        w.url,
        w.event_types,
        w.agent_id,
        w.active,
        w.secret_sealed,
    )
    .fetch_one(db)
    .await?)
}

/// The project's subscriptions, oldest first.
pub async fn list(db: impl PgExecutor<'_>, project: ProjectId) -> Result<Vec<WebhookRecord>> {
    Ok(webhook_query!(
        "select ",
        " from webhooks where project_id = $1 order by created_at, id",
        project.0
    )
    .fetch_all(db)
    .await?)
}

pub async fn get(
    db: impl PgExecutor<'_>,
    project: ProjectId,
    id: WebhookId,
) -> Result<WebhookRecord> {
    webhook_query!(
        "select ",
        " from webhooks where id = $1 and project_id = $2",
        id.0,
        project.0,
    )
    .fetch_optional(db)
    .await?
    .ok_or(Error::NotFound)
}

/// A partial update: `None` leaves a field alone. `agent_id: Some(None)` clears the filter.
/// Activating a subscription (`active: Some(true)`) also resets its failure count and the
/// reason it was deactivated.
#[derive(Debug, Default)]
pub struct WebhookUpdate {
    pub name: Option<String>,
    pub url: Option<String>,
    pub event_types: Option<Vec<String>>,
    pub agent_id: Option<Option<Uuid>>,
    pub active: Option<bool>,
}

#[tracing::instrument(skip_all, fields(webhook.id = %id))]
pub async fn update(
    db: impl PgExecutor<'_>,
    project: ProjectId,
    id: WebhookId,
    u: &WebhookUpdate,
) -> Result<WebhookRecord> {
    // In SET, every column reference reads the row's old value.
    webhook_query!(
        "update webhooks set
             name = coalesce($3, name),
             url = coalesce($4, url),
             event_types = coalesce($5, event_types),
             agent_id = case when $6 then $7 else agent_id end,
             active = coalesce($8, active),
             consecutive_failures = case when $8 is true then 0 else consecutive_failures end,
             deactivated_reason = case when $8 is true then null else deactivated_reason end,
             updated_at = now()
         where id = $1 and project_id = $2
         returning ",
        "",
        id.0,
        project.0,
        u.name.as_deref(),
        u.url.as_deref(),
        u.event_types.as_deref(),
        u.agent_id.is_some(),
        u.agent_id.flatten(),
        u.active,
    )
    .fetch_optional(db)
    .await?
    .ok_or(Error::NotFound)
}

/// Replaces the sealed secret. Deliveries read the secret when they are claimed, so every
/// attempt from now on, retries included, is signed with the new one.
#[tracing::instrument(skip_all, fields(webhook.id = %id))]
pub async fn set_secret(
    db: impl PgExecutor<'_>,
    project: ProjectId,
    id: WebhookId,
    sealed: &[u8],
) -> Result<WebhookRecord> {
    webhook_query!(
        "update webhooks set secret_sealed = $3, updated_at = now()
         where id = $1 and project_id = $2 returning ",
        "",
        id.0,
        project.0,
        sealed,
    )
    .fetch_optional(db)
    .await?
    .ok_or(Error::NotFound)
}

/// Deletes a subscription and, by cascade, its deliveries and their attempts.
#[tracing::instrument(skip_all, fields(webhook.id = %id))]
pub async fn delete(db: impl PgExecutor<'_>, project: ProjectId, id: WebhookId) -> Result<()> {
    let done = sqlx::query!(
        "delete from webhooks where id = $1 and project_id = $2",
        id.0,
        project.0
    )
    .execute(db)
    .await?;
    if done.rows_affected() == 0 {
        return Err(Error::NotFound);
    }
    Ok(())
}
