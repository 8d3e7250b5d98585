//! A session's egress log (`GET /api/sessions/{id}/egress`, issue 36): what its sandbox
//! reached through the proxy, and what it was refused, summed per host and port. Uses the
//! egress tests' own network and server (`super::egress`).

use super::egress::{app, status, TestNetwork, PORT};
use sandbox_agents_sandbox::memory::MemoryBackend;
use sandbox_agents_testkit::{eventually, projects, TestApp};
use serde_json::{json, Value};
use std::time::Duration;

/// The log is written every 5 s; a few intervals of slack.
const FLUSHED: Duration = Duration::from_secs(30);

async fn egress(app: &TestApp, id: &str) -> (u16, Value) {
    let r = app
        .http
        .get(app.url(&format!("/api/sessions/{id}/egress")))
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
}

fn row<'a>(log: &'a Value, host: &str) -> Option<&'a Value> {
    log["data"]
        .as_array()?
        .iter()
        .find(|r| r["host"] == host && r["port"] == PORT)
}

#[tokio::test]
async fn the_egress_log_sums_what_a_sandbox_reached_and_what_it_was_refused() {
    let net = TestNetwork::start("egress-log").await;
    let app = app(&net).await;
    let policy = json!({"egress": "allowlist", "allow": [format!("allowed.test:{PORT}")]});
    let id = app
        .running_session("egress-log", json!({"network": policy}))
        .await;
    // Nothing yet, and the server says it runs the proxy.
    let (s, log) = egress(&app, &id).await;
    assert_eq!(s, 200, "{log}");
    assert_eq!(log, json!({"data": [], "enabled": true}));

    for _ in 0..2 {
        assert_eq!(
            status(&app, &id, &format!("http://allowed.test:{PORT}/")).await,
            "200"
        );
    }
    assert_eq!(
        status(&app, &id, &format!("http://other.test:{PORT}/")).await,
        "403"
    );

    // A connection is summed when the proxy sees it close, which may come after curl exits.
    let log = eventually("both hosts in the egress log", FLUSHED, async || {
        let (_, log) = egress(&app, &id).await;
        let both = row(&log, "allowed.test").is_some_and(|r| r["connections"] == 2)
            && row(&log, "other.test").is_some_and(|r| r["denied"] == 1);
        both.then_some(log.clone()).ok_or(log.to_string())
    })
    .await;
    let allowed = row(&log, "allowed.test").unwrap();
    assert_eq!(allowed["connections"], 2, "{allowed}");
    assert_eq!(allowed["denied"], 0, "{allowed}");
    assert!(allowed["bytes_sent"].as_i64().unwrap() > 0, "{allowed}");
    // The directory listing python's server answers with.
    assert!(
        allowed["bytes_received"].as_i64().unwrap() > 100,
        "{allowed}"
    );
    assert!(allowed["first_at"].as_str().unwrap() <= allowed["last_at"].as_str().unwrap());
    let other = row(&log, "other.test").unwrap();
    assert_eq!(other["denied"], 1, "{other}");
    assert_eq!(other["connections"], 0, "{other}");
    assert_eq!(other["bytes_sent"], 0, "{other}");

    // Another project sees no such session.
    let elsewhere = projects::project(&app, "Elsewhere").await;
    let (s, body) = projects::call(
        &app,
        reqwest::Method::GET,
        &elsewhere,
        &format!("/api/sessions/{id}/egress"),
        None,
    )
    .await;
    assert_eq!(s, 404, "{body}");
    app.stop().await;
}

#[tokio::test]
async fn without_the_egress_proxy_the_log_says_egress_control_is_off() {
    let plane = MemoryBackend::new("egress-log-off");
    let app = TestApp::builder().with_memory_backend(&plane).spawn().await;
    let id = app.running_session("no-proxy", json!({})).await;
    let (s, log) = egress(&app, &id).await;
    assert_eq!(s, 200, "{log}");
    assert_eq!(log, json!({"data": [], "enabled": false}));
    let (s, _) = egress(&app, "00000000-0000-7000-8000-00000000dead").await;
    assert_eq!(s, 404);
    app.stop().await;
}
