//! The HTTP side: routes, the shared state (script, rule budgets, request log) and handlers.
//!
//! Invariants: every request to a model route (chat completions, model listings) is recorded
//! **before** it is answered, so a test that counts requests sees retries even when they fail;
//! control routes (`/_script`, `/_requests`) are never recorded. A rule's `times` budget is
//! spent when the rule is chosen, under the same lock that chose it, so concurrent requests
//! never overspend it. Replacing the script resets every budget.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::matching::Conversation;
use crate::script::{Reply, Script};
use crate::wire::{error_body, Answer};

/// One request the server received, as `GET /_requests` lists it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RecordedRequest {
    pub method: String,
    pub path: String,
    /// The `Authorization` header, verbatim.
    pub authorization: Option<String>,
    /// The body as JSON; a body that is not JSON is kept as a JSON string; none is null.
    pub body: Value,
    /// When it arrived, in milliseconds since the Unix epoch.
    pub received_at_ms: u64,
}

/// The server's state, shared by every connection (cheap to clone).
#[derive(Clone, Default)]
pub struct FakeState(Arc<Inner>);

#[derive(Default)]
struct Inner {
    script: Mutex<Scripted>,
    requests: Mutex<Vec<RecordedRequest>>,
    answered: AtomicU64,
}

#[derive(Default)]
struct Scripted {
    script: Script,
    /// How many requests each rule has answered, index for index with `script.rules`.
    used: Vec<u32>,
}

/// A poisoned lock only means a handler panicked; the data is still fine for a test server.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl FakeState {
    pub fn new(script: Script) -> Self {
        let state = FakeState::default();
        state.set_script(script);
        state
    }

    /// Replaces the script and resets every rule's budget.
    pub fn set_script(&self, script: Script) {
        let used = vec![0; script.rules.len()];
        *lock(&self.0.script) = Scripted { script, used };
    }

    pub fn script(&self) -> Script {
        lock(&self.0.script).script.clone()
    }

    /// The requests received so far, oldest first.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        lock(&self.0.requests).clone()
    }

    pub fn clear_requests(&self) {
        lock(&self.0.requests).clear();
    }

    fn record(&self, method: &Method, uri: &Uri, headers: &HeaderMap, body: &[u8]) {
        let body = if body.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(body)
                .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(body).into_owned()))
        };
        lock(&self.0.requests).push(RecordedRequest {
            method: method.to_string(),
            path: uri.path().to_owned(),
            authorization: headers
                .get(header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned),
            body,
            received_at_ms: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
                .unwrap_or_default(),
        });
    }

    /// The first rule that matches and has budget left, with its budget spent.
    fn choose(&self, conversation: &Conversation) -> Option<Reply> {
        let mut guard = lock(&self.0.script);
        let Scripted { script, used } = &mut *guard;
        let (rule, used) = script
            .rules
            .iter()
            .zip(used.iter_mut())
            .find(|(rule, used)| {
                rule.times.is_none_or(|n| **used < n) && conversation.matches(&rule.when)
            })?;
        *used += 1;
        Some(rule.reply.clone())
    }
}

/// The routes. Chat completions answer under both `/v1/...` and `/...`, so a client whose base
/// URL already ends in `/v1` works as well as one that adds it.
pub fn router(state: FakeState) -> Router {
    Router::new()
        .route("/v1/chat/completions", post(chat))
        .route("/chat/completions", post(chat))
        .route("/v1/models", get(models))
        .route("/models", get(models))
        .route("/model/info", get(model_info))
        .route("/v1/model/info", get(model_info))
        .route("/_script", put(put_script).get(get_script))
        .route("/_requests", get(get_requests).delete(delete_requests))
        .fallback(not_found)
        .with_state(state)
}

fn error(status: StatusCode, message: &str) -> Response {
    (status, Json(error_body(status.as_u16(), message))).into_response()
}

async fn chat(
    State(state): State<FakeState>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    state.record(&method, &uri, &headers, &body);
    let conversation = match serde_json::from_slice::<Value>(&body)
        .map_err(|e| format!("the request body is not JSON: {e}"))
        .and_then(|v| Conversation::parse(&v))
    {
        Ok(conversation) => conversation,
        Err(message) => return error(StatusCode::BAD_REQUEST, &format!("fake-model: {message}")),
    };
    let Some(reply) = state.choose(&conversation) else {
        let last_user = conversation
            .last_user_text()
            .map_or_else(|| "none".to_owned(), |t| format!("{t:?}"));
        let message = format!(
            "fake-model: no script rule matches this conversation (last user message: {last_user}, \
             {} messages, turn {}); add a rule for it (PUT /_script)",
            conversation.messages.len(),
            conversation.turn()
        );
        let mut response = error(StatusCode::BAD_REQUEST, &message);
        if let Ok(value) = HeaderValue::from_str("no_matching_rule") {
            response.headers_mut().insert("x-fake-model", value);
        }
        return response;
    };
    if let Some(ms) = reply.delay_ms {
        tokio::time::sleep(Duration::from_millis(ms)).await;
    }
    if let Some(scripted) = &reply.error {
        let status = StatusCode::from_u16(scripted.status).unwrap_or(StatusCode::BAD_GATEWAY);
        let body = match &scripted.body {
            None => error_body(scripted.status, "fake-model: scripted error"),
            Some(Value::String(message)) => error_body(scripted.status, message),
            Some(other) => other.clone(),
        };
        let mut response = (status, Json(body)).into_response();
        if let Some(secs) = scripted.retry_after {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        return response;
    }
    let request_no = state.0.answered.fetch_add(1, Ordering::Relaxed) + 1;
    let answer = Answer::new(&reply, &conversation, request_no);
    if !conversation.stream {
        return Json(answer.completion()).into_response();
    }
    stream_answer(
        answer.chunks(conversation.include_usage),
        reply.chunk_delay_ms.map(Duration::from_millis),
        reply.disconnect_after_chunks,
    )
}

/// An SSE body: `data: <chunk>` per chunk, then `data: [DONE]`. With `disconnect_after` the
/// body fails after that many chunks, which makes hyper abort the connection mid-answer
/// (with `Some(0)`, before the response head is even sent).
fn stream_answer(
    chunks: Vec<Value>,
    delay: Option<Duration>,
    disconnect_after: Option<usize>,
) -> Response {
    let body = async_stream::stream! {
        for (i, chunk) in chunks.into_iter().enumerate() {
            if disconnect_after == Some(i) {
                if i > 0 {
                    // Let hyper flush what was sent, so the client sees a 200 and some chunks
                    // before the connection breaks (with 0 it breaks before the status line).
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                yield Err(std::io::Error::other("fake-model: scripted disconnect"));
                return;
            }
            if let (Some(delay), true) = (delay, i > 0) {
                tokio::time::sleep(delay).await;
            }
            yield Ok(Bytes::from(format!("data: {chunk}\n\n")));
        }
        yield Ok::<_, std::io::Error>(Bytes::from_static(b"data: [DONE]\n\n"));
    };
    Response::builder()
        .header(header::CONTENT_TYPE, "text/event-stream")
        .header(header::CACHE_CONTROL, "no-cache")
        .body(Body::from_stream(body))
        .unwrap_or_else(|_| {
            error(
                StatusCode::INTERNAL_SERVER_ERROR,
                "fake-model: bad response",
            )
        })
}

async fn models(
    State(state): State<FakeState>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
) -> Json<Value> {
    state.record(&method, &uri, &headers, &[]);
    let data: Vec<Value> = state
        .script()
        .listed_models()
        .into_iter()
        .map(|m| json!({ "id": m.id, "object": "model", "created": 0, "owned_by": m.owned_by }))
        .collect();
    Json(json!({ "object": "list", "data": data }))
}

async fn model_info(
    State(state): State<FakeState>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    state.record(&method, &uri, &headers, &[]);
    let script = state.script();
    if !script.model_info {
        return error(
            StatusCode::NOT_FOUND,
            "fake-model: /model/info is switched off",
        );
    }
    let data: Vec<Value> = script
        .listed_models()
        .into_iter()
        .map(|m| {
            json!({
                "model_name": m.id,
                "litellm_params": { "model": format!("openai/{}", m.id) },
                "model_info": {
                    "max_input_tokens": m.max_input_tokens,
                    "max_output_tokens": m.max_output_tokens,
                    "max_tokens": m.max_output_tokens,
                    "input_cost_per_token": m.input_cost_per_token,
                    "output_cost_per_token": m.output_cost_per_token,
                },
            })
        })
        .collect();
    Json(json!({ "data": data })).into_response()
}

async fn put_script(State(state): State<FakeState>, body: Bytes) -> Response {
    let parsed = std::str::from_utf8(&body)
        .map_err(|e| e.to_string())
        .and_then(|text| Script::from_json(text).map_err(|e| e.to_string()));
    match parsed {
        Ok(script) => {
            state.set_script(script);
            StatusCode::NO_CONTENT.into_response()
        }
        Err(e) => error(
            StatusCode::BAD_REQUEST,
            &format!("fake-model: that is not a valid script: {e}"),
        ),
    }
}

async fn get_script(State(state): State<FakeState>) -> Json<Script> {
    Json(state.script())
}

async fn get_requests(State(state): State<FakeState>) -> Json<Vec<RecordedRequest>> {
    Json(state.requests())
}

async fn delete_requests(State(state): State<FakeState>) -> StatusCode {
    state.clear_requests();
    StatusCode::NO_CONTENT
}

async fn not_found(
    State(state): State<FakeState>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    state.record(&method, &uri, &headers, &[]);
    error(
        StatusCode::NOT_FOUND,
        &format!("fake-model: no route {method} {}", uri.path()),
    )
}
