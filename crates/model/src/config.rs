//! Where the model is and how patient to be with it. API keys never appear in `Debug`.

use std::fmt;
use std::time::Duration;

use crate::error::ModelError;

/// The default OpenAI base URL.
pub const OPENAI_DEFAULT_BASE: &str = "https://api.openai.com/v1";

/// How the model is reached. Both speak the OpenAI chat-completions format with Bearer auth.
#[derive(Clone, PartialEq, Eq)]
pub enum Transport {
    /// A LiteLLM proxy: `base` is its root (e.g. `http://localhost:4000`); requests go to
    /// `{base}/v1/chat/completions`, and `/v1/models` plus `/model/info` list its models. A
    /// base that already ends in `/v1` is taken as is, not doubled.
    Proxy {
        base: String,
        api_key: Option<String>,
    },
    /// OpenAI or any OpenAI-compatible server: `base` ends in the version (default
    /// [`OPENAI_DEFAULT_BASE`]); requests go to `{base}/chat/completions`.
    Openai {
        base: String,
        api_key: Option<String>,
    },
}

impl fmt::Debug for Transport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (name, base, key) = match self {
            Transport::Proxy { base, api_key } => ("Proxy", base, api_key),
            Transport::Openai { base, api_key } => ("Openai", base, api_key),
        };
        f.debug_struct(name)
            .field("base", base)
            .field("api_key", &key.as_ref().map(|_| "[redacted]"))
            .finish()
    }
}

/// Reads a variable, treating an empty value as unset.
fn var(lookup: &dyn Fn(&str) -> Option<String>, name: &str) -> Option<String> {
    lookup(name)
        .map(|v| v.trim().to_owned())
        .filter(|v| !v.is_empty())
}

impl Transport {
    /// From `LITELLM_PROXY_API_BASE` (required) and `LITELLM_PROXY_API_KEY` (optional).
    pub fn proxy_from_env() -> Result<Transport, ModelError> {
        Transport::proxy_from(&|name| std::env::var(name).ok())
    }

    /// Like [`Transport::proxy_from_env`], reading variables through `lookup`.
    pub fn proxy_from(lookup: &dyn Fn(&str) -> Option<String>) -> Result<Transport, ModelError> {
        let base = var(lookup, "LITELLM_PROXY_API_BASE").ok_or_else(|| {
            ModelError::Config(
                "no LiteLLM proxy is configured: set LITELLM_PROXY_API_BASE to its address \
                 (e.g. http://localhost:4000)"
                    .to_owned(),
            )
        })?;
        Ok(Transport::Proxy {
            base,
            api_key: var(lookup, "LITELLM_PROXY_API_KEY"),
        })
    }

    /// From `OPENAI_BASE_URL` (default [`OPENAI_DEFAULT_BASE`]) and `OPENAI_API_KEY`. The key
    /// is required for the default base; a custom base (a local server) may go without.
    pub fn openai_from_env() -> Result<Transport, ModelError> {
        Transport::openai_from(&|name| std::env::var(name).ok())
    }

    /// Like [`Transport::openai_from_env`], reading variables through `lookup`.
    pub fn openai_from(lookup: &dyn Fn(&str) -> Option<String>) -> Result<Transport, ModelError> {
        let base = var(lookup, "OPENAI_BASE_URL");
        let api_key = var(lookup, "OPENAI_API_KEY");
        if base.is_none() && api_key.is_none() {
            return Err(ModelError::Config(
                "OpenAI is not configured: set OPENAI_API_KEY (and OPENAI_BASE_URL for an \
                 OpenAI-compatible server)"
                    .to_owned(),
            ));
        }
        Ok(Transport::Openai {
            base: base.unwrap_or_else(|| OPENAI_DEFAULT_BASE.to_owned()),
            api_key,
        })
    }

    pub fn api_key(&self) -> Option<&str> {
        match self {
            Transport::Proxy { api_key, .. } | Transport::Openai { api_key, .. } => {
                api_key.as_deref()
            }
        }
    }

    /// The OpenAI-style base, ending in the API version (`.../v1`).
    fn versioned_base(&self) -> String {
        match self {
            Transport::Proxy { base, .. } => {
                let base = base.trim_end_matches('/');
                if base.ends_with("/v1") {
                    base.to_owned()
                } else {
                    format!("{base}/v1")
                }
            }
            Transport::Openai { base, .. } => base.trim_end_matches('/').to_owned(),
        }
    }

    pub fn chat_url(&self) -> String {
        format!("{}/chat/completions", self.versioned_base())
    }

    pub fn models_url(&self) -> String {
        format!("{}/models", self.versioned_base())
    }

    /// LiteLLM's `/model/info` (at the proxy's root), for the proxy only.
    pub fn model_info_url(&self) -> Option<String> {
        match self {
            Transport::Proxy { .. } => {
                let base = self.versioned_base();
                let root = base.strip_suffix("/v1").unwrap_or(&base);
                Some(format!("{root}/model/info"))
            }
            Transport::Openai { .. } => None,
        }
    }
}

/// The client's settings. Defaults: 4 retries, connect timeout 10 s, idle-read timeout 120 s,
/// backoff 0.5 s doubling to at most 8 s (times a jitter of 0.5–1.5), `Retry-After` honoured up
/// to 60 s, and 10 s for each model-listing request.
#[derive(Clone, Debug)]
pub struct ModelConfig {
    pub transport: Transport,
    /// Retries after the first attempt (so `max_retries + 1` attempts in all).
    pub max_retries: u32,
    pub connect_timeout: Duration,
    /// The longest wait for the response head, and between two chunks of a streamed answer.
    pub idle_timeout: Duration,
    /// The whole of each `list_models` request (the API must answer within 30 s).
    pub list_timeout: Duration,
    pub backoff_base: Duration,
    pub backoff_max: Duration,
    /// A longer `Retry-After` is cut to this.
    pub retry_after_max: Duration,
    /// Root certificates trusted besides the built-in ones (`--extra-ca-certs`: a network
    /// that inspects TLS, a provider behind a private CA).
    pub extra_roots: Vec<reqwest::Certificate>,
}

impl ModelConfig {
    pub fn new(transport: Transport) -> Self {
        ModelConfig {
            transport,
            max_retries: 4,
            connect_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(120),
            list_timeout: Duration::from_secs(10),
            backoff_base: Duration::from_millis(500),
            backoff_max: Duration::from_secs(8),
            retry_after_max: Duration::from_secs(60),
            extra_roots: Vec::new(),
        }
    }

    /// Also trusts the certificates of `pem` (one or more PEM certificates).
    pub fn with_extra_roots_pem(mut self, pem: &str) -> Result<Self, ModelError> {
        let certs = reqwest::Certificate::from_pem_bundle(pem.as_bytes()).map_err(|e| {
            ModelError::Config(format!("the extra CA certificates are not usable: {e}"))
        })?;
        self.extra_roots.extend(certs);
        Ok(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |name| {
            pairs
                .iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| (*v).to_owned())
        }
    }

    #[test]
    fn urls_follow_the_transport() {
        let proxy = Transport::Proxy {
            base: "http://localhost:4000/".into(),
            api_key: None,
        };
        assert_eq!(
            proxy.chat_url(),
            "http://localhost:4000/v1/chat/completions"
        );
        assert_eq!(proxy.models_url(), "http://localhost:4000/v1/models");
        assert_eq!(
            proxy.model_info_url().unwrap(),
            "http://localhost:4000/model/info"
        );
        let proxy_v1 = Transport::Proxy {
            base: "http://p:4000/v1".into(),
            api_key: None,
        };
        assert_eq!(proxy_v1.chat_url(), "http://p:4000/v1/chat/completions");
        assert_eq!(
            proxy_v1.model_info_url().unwrap(),
            "http://p:4000/model/info"
        );
        let openai = Transport::openai_from(&env(&[("OPENAI_API_KEY", "sk-1")])).unwrap();
        assert_eq!(
            openai.chat_url(),
            "https://api.openai.com/v1/chat/completions"
        );
        assert_eq!(openai.model_info_url(), None);
    }

    #[test]
    fn keys_come_from_the_environment_and_never_show_in_debug() {
        let lookup = env(&[
            ("LITELLM_PROXY_API_BASE", "http://localhost:4000"),
            ("LITELLM_PROXY_API_KEY", "sk-secret"),
        ]);
        let proxy = Transport::proxy_from(&lookup).unwrap();
        assert_eq!(proxy.api_key(), Some("sk-secret"));
        let shown = format!("{:?}", ModelConfig::new(proxy));
        assert!(
            !shown.contains("sk-secret") && shown.contains("[redacted]"),
            "{shown}"
        );

        let err = Transport::proxy_from(&env(&[("LITELLM_PROXY_API_BASE", " ")])).unwrap_err();
        assert!(err.to_string().contains("LITELLM_PROXY_API_BASE"));
        assert!(Transport::openai_from(&env(&[])).is_err());
        let local = Transport::openai_from(&env(&[("OPENAI_BASE_URL", "http://l/v1")])).unwrap();
        assert_eq!(local.chat_url(), "http://l/v1/chat/completions");
    }
}
