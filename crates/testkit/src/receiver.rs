//! A webhook receiver for tests and benchmarks: a real HTTP server on 127.0.0.1 that records
//! every request and answers as told (2xx, an error status, a redirect, or never).

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// How the receiver answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Answer {
    Ok,
    Status(u16),
    /// 302 to `/elsewhere`.
    Redirect,
    /// Never answers (until the receiver stops).
    Hang,
    /// 200 with a body far larger than anyone should read.
    Huge,
}

/// One request as it arrived.
#[derive(Clone, Debug)]
pub struct Received {
    pub path: String,
    pub headers: HeaderMap,
    pub body: Bytes,
    pub at: Instant,
    /// What the receiver answered.
    pub answer: Answer,
}

impl Received {
    pub fn header(&self, name: &str) -> &str {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).expect("a JSON body")
    }
}

struct Shared {
    answer: Mutex<Answer>,
    received: Mutex<Vec<Received>>,
    arrived: Notify,
    stop: CancellationToken,
}

#[derive(Clone)]
pub struct Receiver {
    pub url: String,
    pub addr: std::net::SocketAddr,
    shared: Arc<Shared>,
}

impl Receiver {
    /// A receiver on a fresh port of 127.0.0.1.
    pub async fn start(answer: Answer) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("binding a receiver");
        Self::serve(listener, answer)
    }

    /// A receiver on `addr` (a port a subscription already points at).
    pub async fn start_on(addr: std::net::SocketAddr, answer: Answer) -> Self {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .expect("binding the receiver's port again");
        Self::serve(listener, answer)
    }

    fn serve(listener: tokio::net::TcpListener, answer: Answer) -> Self {
        let addr = listener.local_addr().expect("local addr");
        let shared = Arc::new(Shared {
            answer: Mutex::new(answer),
            received: Mutex::new(Vec::new()),
            arrived: Notify::new(),
            stop: CancellationToken::new(),
        });
        let app = axum::Router::new()
            .fallback(handle)
            .with_state(shared.clone());
        let stop = shared.stop.clone();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(async move { stop.cancelled().await })
                .await;
        });
        Receiver {
            url: format!("http://{addr}/hook"),
            addr,
            shared,
        }
    }

    pub fn set_answer(&self, answer: Answer) {
        *self.shared.answer.lock().expect("answer") = answer;
    }

    pub fn received(&self) -> Vec<Received> {
        self.shared.received.lock().expect("received").clone()
    }

    /// Waits until `done(received)` holds, failing after `within`.
    pub async fn wait_for(
        &self,
        within: Duration,
        what: &str,
        done: impl Fn(&[Received]) -> bool,
    ) -> Vec<Received> {
        let deadline = Instant::now() + within;
        loop {
            let notified = self.shared.arrived.notified();
            let now = self.received();
            if done(&now) {
                return now;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(
                !left.is_zero(),
                "the receiver did not see {what} within {within:?}; it got {} requests",
                now.len()
            );
            let _ = tokio::time::timeout(left.min(Duration::from_millis(200)), notified).await;
        }
    }

    /// Stops listening; hanging requests are dropped.
    pub fn stop(&self) {
        self.shared.stop.cancel();
    }
}

async fn handle(
    State(shared): State<Arc<Shared>>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let answer = *shared.answer.lock().expect("answer");
    shared.received.lock().expect("received").push(Received {
        path: uri.path().to_owned(),
        headers,
        body,
        at: Instant::now(),
        answer,
    });
    shared.arrived.notify_waiters();
    match answer {
        Answer::Ok => StatusCode::NO_CONTENT.into_response(),
        Answer::Status(s) => (
            StatusCode::from_u16(s).expect("a status"),
            "the receiver says no",
        )
            .into_response(),
        Answer::Redirect => (StatusCode::FOUND, [("location", "/elsewhere")]).into_response(),
        Answer::Hang => {
            shared.stop.cancelled().await;
            StatusCode::SERVICE_UNAVAILABLE.into_response()
        }
        Answer::Huge => (StatusCode::OK, vec![b'x'; 8 * 1024 * 1024]).into_response(),
    }
}
