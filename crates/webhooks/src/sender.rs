//! One signed POST to a receiver, with everything a hostile or broken receiver could exploit
//! taken away: redirects are not followed, the whole exchange has a deadline, the response
//! body is read only up to a cap, and internal addresses are refused (see [`crate::address`]).

use crate::address::{check_target, GuardedResolver};
use crate::signing::{signature, DELIVERY_HEADER, EVENT_HEADER, SIGNATURE_HEADER};
use reqwest::Url;
use sandbox_agents_domain::DeliveryId;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The most response-body bytes read; the rest is dropped with the connection.
pub const MAX_RESPONSE_BYTES: usize = 64 * 1024;
/// How much of a non-2xx body is kept in the delivery's `error`.
const ERROR_SNIPPET: usize = 200;

/// What one POST came to.
#[derive(Clone, Debug)]
pub struct SendOutcome {
    /// The receiver's status; None when there was no response.
    pub status_code: Option<u16>,
    /// Why the attempt does not count as delivered; None for a 2xx.
    pub error: Option<String>,
    pub duration: Duration,
}

impl SendOutcome {
    pub fn delivered(&self) -> bool {
        self.error.is_none()
    }
}

#[derive(Clone, Debug)]
pub struct Sender {
    client: reqwest::Client,
    allow_private: bool,
}

impl Sender {
    /// `timeout` bounds the whole exchange: connect, send, and reading the response.
    /// `extra_ca`: root certificates trusted besides the built-in ones.
    pub fn new(
        timeout: Duration,
        allow_private: bool,
        extra_ca: Option<&sandbox_agents_domain::ca::ExtraCaCerts>,
    ) -> anyhow::Result<Self> {
        let mut builder = reqwest::Client::builder();
        if let Some(extra) = extra_ca {
            for cert in reqwest::Certificate::from_pem_bundle(extra.pem().as_bytes())? {
                builder = builder.add_root_certificate(cert);
            }
        }
        let client = builder
            .redirect(reqwest::redirect::Policy::none())
            .timeout(timeout)
            .connect_timeout(timeout.min(Duration::from_secs(5)))
            .dns_resolver(Arc::new(GuardedResolver { allow_private }))
            .user_agent(concat!(
                "sandbox-agents-webhooks/",
                env!("CARGO_PKG_VERSION")
            ))
            .pool_idle_timeout(Duration::from_secs(30))
            .build()?;
        Ok(Self {
            client,
            allow_private,
        })
    }

    /// POSTs `body`, signed with `secret` at this moment.
    #[tracing::instrument(skip_all, fields(delivery.id = %delivery, r#type = event_type))]
    pub async fn send(
        &self,
        url: &str,
        secret: &str,
        delivery: DeliveryId,
        event_type: &str,
        body: Vec<u8>,
    ) -> SendOutcome {
        let started = Instant::now();
        let outcome = |status_code, error| SendOutcome {
            status_code,
            error,
            duration: started.elapsed(),
        };
        let url = match Url::parse(url) {
            Ok(u) => u,
            Err(e) => return outcome(None, Some(format!("the url is not valid: {e}"))),
        };
        if let Err(refused) = check_target(&url, self.allow_private) {
            return outcome(None, Some(refused));
        }
        let t = time::OffsetDateTime::now_utc().unix_timestamp();
        let request = self
            .client
            .post(url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header(SIGNATURE_HEADER, signature(secret, t, &body))
            .header(EVENT_HEADER, event_type)
            .header(DELIVERY_HEADER, delivery.to_string())
            .body(body);
        let mut response = match request.send().await {
            Ok(r) => r,
            Err(e) => return outcome(None, Some(describe(&e))),
        };
        let status = response.status();
        let mut snippet = Vec::new();
        let mut read = 0usize;
        let mut read_error = None;
        while read < MAX_RESPONSE_BYTES {
            match response.chunk().await {
                Ok(Some(chunk)) => {
                    read += chunk.len();
                    if snippet.len() < ERROR_SNIPPET {
                        let take = (ERROR_SNIPPET - snippet.len()).min(chunk.len());
                        snippet.extend_from_slice(&chunk[..take]);
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    read_error = Some(describe(&e));
                    break;
                }
            }
        }
        let code = Some(status.as_u16());
        if status.is_success() {
            // The receiver said yes; a body cut short afterwards does not change that.
            return outcome(code, None);
        }
        let text = String::from_utf8_lossy(&snippet).trim().to_owned();
        let mut error = if status.is_redirection() {
            format!(
                "HTTP {}: redirects are not followed; point the webhook at the final URL",
                status.as_u16()
            )
        } else if text.is_empty() {
            format!("HTTP {}", status.as_u16())
        } else {
            format!("HTTP {}: {text}", status.as_u16())
        };
        if let Some(e) = read_error {
            error.push_str(&format!(" (reading the response failed: {e})"));
        }
        outcome(code, Some(error))
    }
}

/// A transport error with its causes, for the attempt log (never includes the secret: the
/// request's headers are not part of reqwest's errors).
fn describe(e: &reqwest::Error) -> String {
    let kind = if e.is_timeout() {
        "timed out"
    } else if e.is_connect() {
        "could not connect"
    } else {
        "request failed"
    };
    let mut parts = Vec::new();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        let text = s.to_string();
        if !parts.contains(&text) {
            parts.push(text);
        }
        source = s.source();
    }
    let mut out = if parts.is_empty() {
        kind.to_owned()
    } else {
        format!("{kind}: {}", parts.join(": "))
    };
    if out.len() > 500 {
        let mut cut = 500;
        while !out.is_char_boundary(cut) {
            cut -= 1;
        }
        out.truncate(cut);
    }
    out
}
