//! Webhooks: subscriptions, the outbox, and delivery to a real HTTP receiver. The helpers
//! here are shared by the submodules and by the crash test.

mod chaos;
mod delivery;
mod safety;
mod subscriptions;

use reqwest::StatusCode;
use sandbox_agents_domain::event::{EventType, NewEvent};
use sandbox_agents_domain::SessionId;
use sandbox_agents_store::events;
use sandbox_agents_testkit::receiver::{Answer, Received, Receiver};
pub use sandbox_agents_testkit::webhooks::{subscribe, verify};
use sandbox_agents_testkit::{eventually, test_webhook_settings, TestApp};
use serde_json::{json, Value};
use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

pub const WAIT: Duration = Duration::from_secs(15);

pub async fn deliveries(app: &TestApp, webhook: &str, query: &str) -> (Vec<Value>, i64) {
    let r = app
        .http
        .get(app.url(&format!("/api/webhooks/{webhook}/deliveries?{query}")))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let total = r.headers()["x-total-count"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    (r.json().await.unwrap(), total)
}

pub async fn attempts(app: &TestApp, webhook: &str, delivery: &str) -> Vec<Value> {
    let r = app
        .http
        .get(app.url(&format!(
            "/api/webhooks/{webhook}/deliveries/{delivery}/attempts"
        )))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    r.json().await.unwrap()
}

/// Polls a webhook's deliveries until every one of them has `status`.
pub async fn wait_all(app: &TestApp, webhook: &str, n: usize, status: &str) -> Vec<Value> {
    eventually(&format!("{n} deliveries, all {status}"), WAIT, async || {
        let (rows, _) = deliveries(app, webhook, "limit=1000&offset=0").await;
        if rows.len() == n && rows.iter().all(|d| d["status"] == status) {
            Ok(rows)
        } else {
            Err(format!("{rows:#?}"))
        }
    })
    .await
}

pub async fn session(app: &TestApp, slug: &str) -> SessionId {
    let agent = app.seed_agent(slug).await;
    app.seed_session(agent.id).await
}

pub fn event(kind: EventType, text: &str) -> NewEvent {
    NewEvent::new(kind, None, json!({ "text": text }))
}
