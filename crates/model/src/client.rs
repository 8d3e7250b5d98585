//! The client: one streamed chat completion, with retries.
//!
//! Invariant: **an attempt is retried only while nothing from it has reached the caller.**
//! Once a text or reasoning delta has been yielded, any failure (a broken connection, an idle
//! timeout, an error chunk) ends the stream with an error: a retry would repeat deltas the
//! caller has already shown. Before that point, 429/500/502/503/504, connection errors and
//! timeouts are retried up to `max_retries` times, waiting for `Retry-After` when the provider
//! sends it and for a jittered exponential backoff otherwise.

use std::sync::Arc;
use std::time::Duration;

use futures::{Stream, StreamExt};
use reqwest::header::CONTENT_TYPE;

use crate::config::ModelConfig;
use crate::error::{describe, provider_message, ModelError};
use crate::pricing::PriceBook;
use crate::types::{ChatRequest, Completion, StreamEvent};
use crate::{retry, sse, wire};

/// A model client. Cheap to clone; clones share one connection pool.
#[derive(Clone, Debug)]
pub struct ModelClient {
    pub(crate) inner: Arc<Inner>,
}

#[derive(Debug)]
pub(crate) struct Inner {
    pub(crate) config: ModelConfig,
    pub(crate) http: reqwest::Client,
    /// The catalogue's prices, for calls the provider did not price itself.
    pub(crate) prices: PriceBook,
}

/// A failed attempt: the error, and the provider's `Retry-After` if it sent one.
pub(crate) struct Failure {
    pub(crate) error: ModelError,
    pub(crate) retry_after: Option<Duration>,
}

impl From<ModelError> for Failure {
    fn from(error: ModelError) -> Self {
        Failure {
            error,
            retry_after: None,
        }
    }
}

impl ModelClient {
    /// Builds the HTTP client (rustls; the built-in roots and the config's extra ones; connect
    /// timeout from the config). No request is made.
    pub fn new(config: ModelConfig) -> Result<ModelClient, ModelError> {
        let mut builder = reqwest::Client::builder().connect_timeout(config.connect_timeout);
        for cert in &config.extra_roots {
            builder = builder.add_root_certificate(cert.clone());
        }
        let http = builder.build().map_err(|e| {
            ModelError::Config(format!(
                "could not set up the HTTP client: {}",
                describe(&e)
            ))
        })?;
        Ok(ModelClient {
            inner: Arc::new(Inner {
                config,
                http,
                prices: PriceBook::default(),
            }),
        })
    }

    pub fn config(&self) -> &ModelConfig {
        &self.inner.config
    }

    /// Streams one completion: text and reasoning deltas as they arrive, then one `Done` with
    /// the whole answer (tool calls assembled, usage and its cost). After an `Err` the stream
    /// ends.
    pub fn stream(
        &self,
        req: ChatRequest,
    ) -> impl Stream<Item = Result<StreamEvent, ModelError>> + Send + 'static {
        let call = crate::metrics::CallMetrics::start(&req.model);
        let model = req.model.clone();
        let events = self.attempts(req);
        let this = self.clone();
        // The call's outcome, for the process's metrics: its answer, or its first error.
        async_stream::stream! {
            let mut call = Some(call);
            futures::pin_mut!(events);
            while let Some(mut event) = events.next().await {
                if let Ok(StreamEvent::Done(c)) = &mut event {
                    this.price(&model, &mut c.usage).await;
                }
                match &event {
                    Ok(StreamEvent::Done(c)) => if let Some(m) = call.take() { m.ok(&c.usage) },
                    Err(e) => if let Some(m) = call.take() { m.failed(e) },
                    Ok(_) => {}
                }
                yield event;
            }
        }
    }

    /// The call itself, retried as the policy allows.
    fn attempts(
        &self,
        req: ChatRequest,
    ) -> impl Stream<Item = Result<StreamEvent, ModelError>> + Send + 'static {
        let inner = Arc::clone(&self.inner);
        async_stream::stream! {
            let config = &inner.config;
            let url = config.transport.chat_url();
            let body = wire::request_body(&req);
            let mut attempt: u32 = 0;
            'attempts: loop {
                let failure = match inner.open(&url, &body).await {
                    Err(failure) => failure,
                    Ok(response) => {
                        let mut assembler = wire::Assembler::default();
                        assembler.header_cost = crate::pricing::header_cost(response.headers());
                        let frames = sse::data(response.bytes_stream(), config.idle_timeout);
                        futures::pin_mut!(frames);
                        let mut emitted = false;
                        loop {
                            let data = match frames.next().await {
                                Some(Ok(data)) => data,
                                Some(Err(error)) => {
                                    if emitted {
                                        yield Err(not_retried(error));
                                        return;
                                    }
                                    break Failure::from(error);
                                }
                                None => {
                                    // Some servers end the body without `[DONE]`; a finish
                                    // reason means the answer is complete all the same.
                                    if assembler.finished() {
                                        yield assembler.finish().map(StreamEvent::Done);
                                        return;
                                    }
                                    break Failure::from(ModelError::Connect(
                                        "the model provider closed the connection before its \
                                         answer was complete".to_owned(),
                                    ));
                                }
                            };
                            if data.trim() == "[DONE]" {
                                yield assembler.finish().map(StreamEvent::Done);
                                return;
                            }
                            match assembler.push(&data) {
                                Ok(events) => for event in events {
                                    emitted = true;
                                    yield Ok(event);
                                },
                                Err(error) => {
                                    yield Err(error);
                                    return;
                                }
                            }
                        }
                    }
                };
                if failure.error.is_transient() && attempt < config.max_retries {
                    let wait = retry::delay(config, attempt, failure.retry_after);
                    tracing::warn!(
                        attempt = attempt + 1,
                        wait_ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX),
                        error = %failure.error,
                        "model call failed; retrying"
                    );
                    tokio::time::sleep(wait).await;
                    attempt += 1;
                    continue 'attempts;
                }
                yield Err(gave_up(failure.error, attempt + 1));
                return;
            }
        }
    }

    /// Prices a call the provider did not price from the catalogue's per-token prices, when
    /// it has some for `model` (`crate::pricing`).
    async fn price(&self, model: &str, usage: &mut crate::Usage) {
        if usage.unpriced_requests == 0 {
            return;
        }
        let Some(url) = self.inner.config.transport.model_info_url() else {
            return;
        };
        let prices = self
            .inner
            .prices
            .prices(model, || async {
                match self.get_json(&url).await {
                    Ok(info) => Some(crate::pricing::prices_by_name(&info)),
                    Err(error) => {
                        tracing::warn!(%error, "could not read the model catalogue's prices; the call stays unpriced");
                        None
                    }
                }
            })
            .await;
        if let Some(p) = prices {
            usage.cost_usd = p.cost(usage);
            usage.unpriced_requests = 0;
        }
    }

    /// Runs [`ModelClient::stream`] to the end and returns the completion.
    pub async fn complete(&self, req: ChatRequest) -> Result<Completion, ModelError> {
        let stream = self.stream(req);
        futures::pin_mut!(stream);
        while let Some(event) = stream.next().await {
            if let StreamEvent::Done(completion) = event? {
                return Ok(completion);
            }
        }
        Err(ModelError::Protocol(
            "the model stream ended without a completion".to_owned(),
        ))
    }
}

impl Inner {
    /// Sends the request and waits (at most the idle timeout) for a successful response head.
    async fn open(
        &self,
        url: &str,
        body: &serde_json::Value,
    ) -> Result<reqwest::Response, Failure> {
        let mut request = self.http.post(url).json(body);
        if let Some(key) = self.config.transport.api_key() {
            request = request.bearer_auth(key);
        }
        let response = match tokio::time::timeout(self.config.idle_timeout, request.send()).await {
            Err(_) => {
                return Err(ModelError::Timeout(format!(
                    "the model provider at {url} did not start answering within {} s",
                    self.config.idle_timeout.as_secs_f64()
                ))
                .into())
            }
            Ok(Err(e)) => return Err(send_error(url, &e).into()),
            Ok(Ok(response)) => response,
        };
        if !response.status().is_success() {
            return Err(http_failure(response, self.config.idle_timeout).await);
        }
        let content_type = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        if content_type.starts_with("application/json") {
            return Err(ModelError::Protocol(format!(
                "the model provider at {url} answered with a single JSON body instead of a \
                 stream; it must support `stream: true`"
            ))
            .into());
        }
        Ok(response)
    }
}

/// An error response: the status, the provider's message, and its `Retry-After`.
pub(crate) async fn http_failure(response: reqwest::Response, wait: Duration) -> Failure {
    let status = response.status();
    let retry_after = retry::retry_after(response.headers());
    let body = match tokio::time::timeout(wait, response.text()).await {
        Ok(Ok(text)) => text,
        _ => String::new(),
    };
    let message = if body.trim().is_empty() {
        status
            .canonical_reason()
            .unwrap_or("no error message")
            .to_owned()
    } else {
        provider_message(&body)
    };
    Failure {
        error: ModelError::Http {
            status: status.as_u16(),
            message,
        },
        retry_after,
    }
}

/// A request that failed before any response head arrived.
pub(crate) fn send_error(url: &str, e: &reqwest::Error) -> ModelError {
    if e.is_timeout() {
        ModelError::Timeout(format!(
            "the model provider at {url} did not answer in time: {}",
            describe(e)
        ))
    } else if e.is_connect() {
        ModelError::Connect(format!(
            "could not reach the model provider at {url}: {}; check that it is running and \
             that the base URL is right",
            describe(e)
        ))
    } else {
        ModelError::Connect(format!(
            "the connection to the model provider at {url} broke before it answered: {}",
            describe(e)
        ))
    }
}

/// Says how many attempts were made, for the errors where that helps a person.
pub(crate) fn gave_up(error: ModelError, attempts: u32) -> ModelError {
    if attempts < 2 {
        return error;
    }
    match error {
        ModelError::Connect(m) => {
            ModelError::Connect(format!("{m} (gave up after {attempts} attempts)"))
        }
        ModelError::Timeout(m) => {
            ModelError::Timeout(format!("{m} (gave up after {attempts} attempts)"))
        }
        other => other,
    }
}

fn not_retried(error: ModelError) -> ModelError {
    match error {
        ModelError::Connect(m) => ModelError::Connect(format!(
            "{m}; not retried, because part of the answer had already been streamed"
        )),
        ModelError::Timeout(m) => ModelError::Timeout(format!(
            "{m}; not retried, because part of the answer had already been streamed"
        )),
        other => other,
    }
}
