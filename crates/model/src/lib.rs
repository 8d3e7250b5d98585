//! The model client: OpenAI-compatible chat completions through a LiteLLM proxy or directly.
//!
//! [`ModelClient::stream`] sends one streamed chat-completions request and yields text and
//! reasoning deltas as they arrive, then one [`StreamEvent::Done`] with the whole
//! [`Completion`] (tool calls assembled from their indexed deltas, finish reason, usage).
//! Transient failures are retried with backoff **only while nothing has been streamed** for
//! the attempt, so a caller never sees a delta twice. [`ModelClient::list_models`] reads the
//! proxy's models and their limits.
//!
//! ```no_run
//! # async fn demo() -> Result<(), sandbox_agents_model::ModelError> {
//! use futures::StreamExt;
//! use sandbox_agents_model::{ChatRequest, Message, ModelClient, ModelConfig, StreamEvent, Transport};
//! let client = ModelClient::new(ModelConfig::new(Transport::proxy_from_env()?))?;
//! let stream = client.stream(ChatRequest::new("gpt-4o", vec![Message::user("hi")]));
//! futures::pin_mut!(stream);
//! while let Some(event) = stream.next().await {
//!     match event? {
//!         StreamEvent::TextDelta(text) => print!("{text}"),
//!         StreamEvent::ReasoningDelta(_) => {}
//!         StreamEvent::Done(completion) => println!("\n{:?}", completion.usage),
//!     }
//! }
//! # Ok(()) }
//! ```

mod catalogue;
mod client;
mod config;
mod error;
mod metrics;
mod models;
mod pricing;
mod retry;
mod sse;
mod types;
mod wire;

pub use catalogue::Catalogue;
pub use client::ModelClient;
pub use config::{ModelConfig, Transport, OPENAI_DEFAULT_BASE};
pub use error::ModelError;
pub use pricing::Prices;
pub use types::{
    ChatRequest, Completion, Message, ModelInfo, StreamEvent, ToolCall, ToolSpec, Usage,
};
