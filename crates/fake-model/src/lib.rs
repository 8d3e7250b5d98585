//! A scripted fake model server speaking the OpenAI chat-completions wire format.
//!
//! Tests outside our control need a model; this is it. A [`Script`] says "when the
//! conversation looks like X, answer Y" (text, tool calls, reasoning, usage, HTTP errors,
//! delays, a broken connection). The server answers `POST /v1/chat/completions` (streaming and
//! not), `GET /v1/models` and the LiteLLM-style `GET /model/info`; `PUT /_script` replaces the
//! script and `GET /_requests` / `DELETE /_requests` expose the request log, so a Python test
//! can drive the `fake-model` binary as well as a Rust test drives [`FakeModel`].
//!
//! ```no_run
//! # async fn demo() {
//! use sandbox_agents_fake_model::{FakeModel, Rule, Script};
//! use serde_json::json;
//! let fake = FakeModel::start(Script::new([
//!     Rule::when().last_message_role("tool").reply_text("Done."),
//!     Rule::when().last_user_contains("files").reply_tool_call("shell", json!({"command": "ls"})),
//! ]));
//! let base = fake.base_url(); // http://127.0.0.1:PORT/v1
//! # }
//! ```

mod matching;
mod script;
mod server;
mod wire;

use std::net::SocketAddr;

pub use script::{
    ModelEntry, Reply, Rule, Script, ScriptedError, ScriptedToolCall, ScriptedUsage, When,
};
pub use server::{router, FakeState, RecordedRequest};

/// A running fake model server on 127.0.0.1 and a free port. Dropping it stops accepting
/// connections (answers already streaming finish on their own).
pub struct FakeModel {
    addr: SocketAddr,
    state: FakeState,
    task: tokio::task::JoinHandle<()>,
}

impl FakeModel {
    /// Binds 127.0.0.1:0 and serves `script` on the current tokio runtime.
    ///
    /// # Panics
    /// Outside a tokio runtime, or when no local port can be bound: this is a test helper.
    pub fn start(script: Script) -> FakeModel {
        let listener = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.set_nonblocking(true).map(|()| l))
            .and_then(tokio::net::TcpListener::from_std)
            .expect("fake-model: could not bind a local port");
        let addr = listener
            .local_addr()
            .expect("fake-model: a bound listener has an address");
        let state = FakeState::new(script);
        let app = router(state.clone());
        let task = tokio::spawn(async move {
            // Serving only ends when the task is aborted; an accept error is not worth a panic.
            let _ = axum::serve(listener, app).await;
        });
        FakeModel { addr, state, task }
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT/v1`: an OpenAI-style base URL.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// `http://127.0.0.1:PORT`: a LiteLLM-proxy-style base URL (the client adds `/v1`).
    pub fn root_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Replaces the script and resets every rule's budget.
    pub fn set_script(&self, script: Script) {
        self.state.set_script(script);
    }

    /// The requests received so far (model routes only), oldest first.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.state.requests()
    }

    /// Only the chat-completions requests, oldest first.
    pub fn chat_requests(&self) -> Vec<RecordedRequest> {
        self.requests()
            .into_iter()
            .filter(|r| r.path.ends_with("/chat/completions"))
            .collect()
    }

    pub fn clear_requests(&self) {
        self.state.clear_requests();
    }
}

impl Drop for FakeModel {
    fn drop(&mut self) {
        self.task.abort();
    }
}
