//! The model clients runs call, one per configured transport.

use sandbox_agents_domain::agent::Transport;
use sandbox_agents_model::ModelClient;

/// The model clients, one per configured transport.
#[derive(Clone, Debug, Default)]
pub struct ModelClients {
    /// `proxy` and `litellm`: a LiteLLM proxy.
    pub proxy: Option<ModelClient>,
    /// `openai`: OpenAI directly.
    pub openai: Option<ModelClient>,
}

impl ModelClients {
    /// The client for a transport, or the reason there is none.
    pub fn for_transport(&self, t: Transport) -> std::result::Result<&ModelClient, String> {
        match t {
            Transport::Proxy | Transport::Litellm => self.proxy.as_ref().ok_or_else(|| {
                "no model proxy is configured for this agent's transport; set LITELLM_PROXY_API_BASE (and LITELLM_PROXY_API_KEY) on the server".into()
            }),
            Transport::Openai => self.openai.as_ref().ok_or_else(|| {
                "OpenAI is not configured for this agent's transport 'openai'; set OPENAI_API_KEY (and OPENAI_BASE_URL) on the server".into()
            }),
        }
    }
}
