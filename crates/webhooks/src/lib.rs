//! Webhooks: consumers that are not connected when something happens receive it as a signed
//! HTTP POST, at least once.
//!
//! The outbox rows are written by the event log itself (`store::events::append`); this crate
//! drains them ([`Dispatcher`]), signs ([`signing`]), decides where a request may go
//! ([`address`]) and when a failure is tried again ([`policy`]). [`Webhooks`] is what the API
//! needs: sealing secrets, checking URLs, and the test ping.

pub mod address;
pub mod dispatcher;
pub mod payload;
pub mod policy;
pub mod sender;
pub mod signing;

pub use dispatcher::Dispatcher;
pub use policy::RetryPolicy;
pub use sender::{SendOutcome, Sender};

use sandbox_agents_domain::ca::ExtraCaCerts;
use sandbox_agents_domain::webhook::PingResult;
use sandbox_agents_domain::{DeliveryId, WebhookId};
use sandbox_agents_store::webhooks::WebhookRecord;
use sandbox_agents_vault::MasterKey;
use std::time::Duration;

/// The deployment's webhook settings (server flags `--webhook-*`).
#[derive(Clone, Debug)]
pub struct WebhookSettings {
    /// Deliver to loopback, private and link-local addresses too.
    pub allow_private: bool,
    pub retry: RetryPolicy,
    /// Failed attempts in a row after which a subscription is deactivated (0 = never).
    pub deactivate_after: u32,
    /// Requests in flight at once, per process.
    pub concurrency: usize,
    /// Requests in flight at once for one subscription, per process: what a slow receiver
    /// can hold while the others' deliveries go on.
    pub per_subscription: usize,
    /// Deadline of one request, response included.
    pub timeout: Duration,
    /// How often due retries are looked for when nothing wakes the dispatcher.
    pub poll: Duration,
    /// Finished deliveries older than this many days are deleted (0 = kept).
    pub retention_days: u32,
    /// CA certificates trusted besides the built-in roots (`--extra-ca-certs`).
    pub extra_ca: Option<ExtraCaCerts>,
}

impl Default for WebhookSettings {
    fn default() -> Self {
        Self {
            allow_private: false,
            retry: RetryPolicy::default(),
            deactivate_after: 100,
            concurrency: 32,
            per_subscription: 8,
            timeout: Duration::from_secs(10),
            poll: Duration::from_secs(1),
            retention_days: 30,
            extra_ca: None,
        }
    }
}

/// Sealing, URL checks and sending, shared by the API and the dispatcher.
#[derive(Clone, Debug)]
pub struct Webhooks {
    pub settings: WebhookSettings,
    key: MasterKey,
    sender: Sender,
}

/// The secret of a subscription could not be opened.
#[derive(Debug, thiserror::Error)]
#[error("the webhook's signing secret cannot be opened (was SANDBOX_AGENTS_MASTER_KEY or <data-dir>/master.key changed?); rotate the secret")]
pub struct SecretUnreadable;

impl Webhooks {
    pub fn new(settings: WebhookSettings, key: MasterKey) -> anyhow::Result<Self> {
        let sender = Sender::new(
            settings.timeout,
            settings.allow_private,
            settings.extra_ca.as_ref(),
        )?;
        Ok(Self {
            settings,
            key,
            sender,
        })
    }

    /// Refuses a URL no delivery could go to (see [`address::check_url`]).
    pub fn check_url(&self, url: &str) -> Result<(), String> {
        address::check_url(url, self.settings.allow_private).map(|_| ())
    }

    /// A new secret and its sealed form for subscription `id`.
    pub fn new_secret(&self, id: WebhookId) -> anyhow::Result<(String, Vec<u8>)> {
        let secret = signing::new_secret();
        let sealed = self.key.seal(secret.as_bytes(), id.0.as_bytes())?;
        Ok((secret, sealed))
    }

    /// The plaintext secret of subscription `id`.
    pub fn open_secret(&self, id: WebhookId, sealed: &[u8]) -> Result<String, SecretUnreadable> {
        let bytes = self
            .key
            .open(sealed, id.0.as_bytes())
            .map_err(|_| SecretUnreadable)?;
        String::from_utf8(bytes).map_err(|_| SecretUnreadable)
    }

    /// Moves every signing secret sealed under a previous master key to the current one.
    pub async fn reseal_secrets(
        &self,
        db: &sandbox_agents_store::Db,
    ) -> sandbox_agents_store::Result<sandbox_agents_store::sealed::Resealed> {
        use sandbox_agents_store::sealed::{reseal, SealedColumn};
        reseal(db, SealedColumn::WebhookSecrets, |id, sealed| {
            self.key.reseal(sealed, id.as_bytes())
        })
        .await
    }

    pub fn sender(&self) -> &Sender {
        &self.sender
    }

    /// Sends a signed `ping` (no event, nothing recorded) and reports what the receiver said.
    #[tracing::instrument(skip_all, fields(webhook.id = %w.id))]
    pub async fn ping(&self, w: &WebhookRecord) -> Result<PingResult, SecretUnreadable> {
        let secret = self.open_secret(w.webhook_id(), &w.secret_sealed)?;
        let id = DeliveryId::new();
        let out = self
            .sender
            .send(&w.url, &secret, id, payload::PING, payload::ping_body(id))
            .await;
        Ok(PingResult {
            delivered: out.delivered(),
            status_code: out.status_code.map(i32::from),
            error: out.error,
            duration_ms: out.duration.as_millis() as i64,
        })
    }
}
