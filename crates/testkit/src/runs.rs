//! Runs: the agent the runs tests use, posting a message and waiting for the turn it starts.

use crate::{eventually, TestApp};
use serde_json::{json, Value};
use std::time::Duration;

/// What the runs tests' agents are: instructions, nothing else.
pub fn test_agent() -> Value {
    json!({"instructions": "You are a test agent."})
}

pub const TURN: Duration = Duration::from_secs(60);

pub async fn send(app: &TestApp, id: &str, body: Value) -> reqwest::Response {
    app.http
        .post(app.url(&format!("/api/sessions/{id}/messages")))
        .json(&body)
        .send()
        .await
        .expect("POST messages")
}

/// Posts a message, asserting the 202, and returns the run id.
pub async fn start_run(app: &TestApp, id: &str, prompt: &str, max_turns: Value) -> String {
    let r = send(app, id, json!({"prompt": prompt, "max_turns": max_turns})).await;
    assert_eq!(r.status(), 202, "{}", r.text().await.unwrap_or_default());
    let run: Value = r.json().await.unwrap();
    assert_eq!(run["status"], "running");
    assert_eq!(run["prompt"], prompt);
    run["id"].as_str().unwrap().to_owned()
}

pub fn is_terminal(e: &Value) -> bool {
    matches!(
        e["type"].as_str(),
        Some("session.status_idle" | "session.status_error")
    )
}

/// Polls the log until the run's terminal event; returns the run's events, in order.
pub async fn wait_for_run(app: &TestApp, id: &str, run: &str) -> Vec<Value> {
    eventually(&format!("run {run} to end"), TURN, async || {
        let mine: Vec<Value> = app
            .events(id)
            .await
            .into_iter()
            .filter(|e| e["run_id"] == run)
            .collect();
        if mine.iter().any(is_terminal) {
            Ok(mine)
        } else {
            Err(format!("{mine:?}"))
        }
    })
    .await
}

/// A pause: the run waits on calls (`session.status_idle` with `requires_action`).
pub fn is_pause(e: &Value) -> bool {
    e["type"] == "session.status_idle" && e["payload"]["stop_reason"] == "requires_action"
}

/// Polls the log until the run's last event is a terminal event `done` accepts (a pause is
/// one: `done` tells a pause from an end); returns the run's events, in order.
pub async fn wait_for_terminal(
    app: &TestApp,
    id: &str,
    run: &str,
    done: impl Fn(&Value) -> bool,
) -> Vec<Value> {
    eventually(
        &format!("run {run}'s next terminal event"),
        TURN,
        async || {
            let evs: Vec<Value> = app
                .events(id)
                .await
                .into_iter()
                .filter(|e| e["run_id"] == run)
                .collect();
            if evs.last().is_some_and(|e| is_terminal(e) && done(e)) {
                Ok(evs)
            } else {
                Err(format!("{:?}", types(&evs)))
            }
        },
    )
    .await
}

pub fn types(evs: &[Value]) -> Vec<&str> {
    evs.iter().map(|e| e["type"].as_str().unwrap()).collect()
}

/// Waits until the fake model got a request mentioning `text` (a turn that reached the model
/// holds its slot among the turns in flight).
pub async fn model_got(fake: &sandbox_agents_fake_model::FakeModel, text: &str) {
    eventually(
        &format!("a model request with '{text}'"),
        crate::BOOT,
        async || {
            fake.requests()
                .iter()
                .any(|r| r.body.to_string().contains(text))
                .then_some(())
        },
    )
    .await;
}
