//! `GET /metrics` (Prometheus' text format) after real work: a boot, an exec, a turn with a
//! shell tool call through the fake model, an SSE stream; the families are there with the
//! counts this test caused, the deployment's gauges read from the database, labels carry no
//! ids, and the
//! route is for operators only. (nextest runs each test in a process of its own, so the
//! process's counters are this test's.)

use reqwest::{Method, StatusCode};
use sandbox_agents_fake_model::{FakeModel, Rule, Script};
use sandbox_agents_testkit::auth::{call, make_key};
use sandbox_agents_testkit::metrics::{sample, scrape};
use sandbox_agents_testkit::runs::{start_run, test_agent, wait_for_run};
use sandbox_agents_testkit::sse::SseReader;
use sandbox_agents_testkit::{eventually, TestApp};
use serde_json::json;
use std::time::Duration;

/// The sum of every sample of `name` whose labels contain all of `with`.
fn total(text: &str, name: &str, with: &[&str]) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (s, v) = l.rsplit_once(' ')?;
            let (n, labels) = s.split_once('{').unwrap_or((s, ""));
            (n == name && with.iter().all(|w| labels.contains(w))).then(|| v.parse::<f64>().ok())?
        })
        .sum()
}

#[tokio::test]
async fn metrics_count_what_the_deployment_did_with_bounded_labels() {
    let fake = FakeModel::start(Script::new([
        Rule::when()
            .last_tool_result_contains("exit code: 0")
            .reply_text("done"),
        Rule::when()
            .last_user_contains("list")
            .reply_tool_call("shell", json!({"command": "ls"})),
    ]));
    let app = TestApp::builder()
        .with_model_proxy(&fake.root_url())
        .spawn()
        .await;
    app.create_agent("measured", test_agent()).await;
    let id = app.boot_session(json!({"agent_id": "measured"})).await;
    let (code, _, _) = app.exec(&id, "true").await;
    assert_eq!(code, 0);
    let stream = app
        .http
        .get(app.url(&format!("/api/sessions/{id}/events/stream")))
        .send()
        .await
        .unwrap();
    let mut stream = SseReader::new(stream);
    stream
        .next_event(Duration::from_secs(30))
        .await
        .expect("the backlog");
    let run = start_run(&app, &id, "list the files", serde_json::Value::Null).await;
    wait_for_run(&app, &id, &run).await;

    let text = scrape(&app).await;
    if std::env::var_os("SHOW_METRICS").is_some() {
        eprintln!("{text}");
    }
    assert_eq!(
        total(
            &text,
            "sandbox_agents_session_boot_duration_seconds_count",
            &["path=\"cold\""]
        ),
        1.0,
        "{text}"
    );
    assert_eq!(
        sample(&text, "sandbox_agents_sessions{status=\"running\"}"),
        Some(1.0)
    );
    assert_eq!(
        sample(&text, "sandbox_agents_sessions{status=\"error\"}"),
        Some(0.0)
    );
    assert_eq!(
        sample(&text, "sandbox_agents_runs_started_total"),
        Some(1.0)
    );
    assert_eq!(
        total(
            &text,
            "sandbox_agents_runs_finished_total",
            &["status=\"completed\""]
        ),
        1.0
    );
    assert_eq!(
        total(&text, "sandbox_agents_run_duration_seconds_count", &[]),
        1.0
    );
    assert_eq!(sample(&text, "sandbox_agents_runs_in_flight"), Some(0.0));
    // Two model steps: the tool call, then the answer; the fake model reports usage.
    assert_eq!(
        total(
            &text,
            "sandbox_agents_model_request_duration_seconds_count",
            &["outcome=\"ok\""]
        ),
        2.0
    );
    assert!(
        total(
            &text,
            "sandbox_agents_model_tokens_total",
            &["type=\"input\""]
        ) > 0.0
    );
    assert_eq!(
        total(
            &text,
            "sandbox_agents_tool_call_duration_seconds_count",
            &["tool=\"shell\"", "outcome=\"answered\""]
        ),
        1.0
    );
    // The exec endpoint's command and the tool's.
    assert_eq!(
        total(
            &text,
            "sandbox_agents_exec_duration_seconds_count",
            &["outcome=\"exited\""]
        ),
        2.0
    );
    assert!(sample(&text, "sandbox_agents_events_appended_total").unwrap() >= 6.0);
    assert_eq!(sample(&text, "sandbox_agents_sse_streams_open"), Some(1.0));
    assert!(sample(&text, "sandbox_agents_sse_events_sent_total").unwrap() >= 1.0);
    assert!(sample(&text, "sandbox_agents_db_pool_max_connections").unwrap() >= 1.0);
    assert_eq!(
        sample(&text, "sandbox_agents_webhook_queue_depth"),
        Some(0.0)
    );
    assert_eq!(
        sample(&text, "sandbox_agents_warm_pool_sandboxes{state=\"ready\"}"),
        Some(0.0)
    );
    assert!(
        total(
            &text,
            "sandbox_agents_http_request_duration_seconds_count",
            &[
                "route=\"/api/sessions/{session_id}/exec\"",
                "status=\"200\""
            ]
        ) >= 1.0,
        "requests are labelled by route template"
    );
    assert!(text.contains("# HELP sandbox_agents_session_boot_duration_seconds"));
    // Histograms, not summaries: buckets an aggregation across processes can add up.
    assert!(text.contains("sandbox_agents_exec_duration_seconds_bucket{"));
    // No label holds an id: neither the session's nor the run's.
    assert!(
        !text.contains(&id) && !text.contains(&run),
        "an id in a label"
    );

    // The stream closes: the gauge follows.
    drop(stream);
    eventually(
        "the stream to be counted closed",
        Duration::from_secs(10),
        async || {
            let text = scrape(&app).await;
            (sample(&text, "sandbox_agents_sse_streams_open") == Some(0.0)).then_some(())
        },
    )
    .await;
    app.stop().await;
}

#[tokio::test]
async fn metrics_are_for_operators() {
    const TOKEN: &str = "operator-token-for-metrics-0123456789";
    let app = TestApp::builder().with_token(TOKEN).spawn().await;
    let (s, _) = call(&app, Method::GET, "/metrics", None, None, None).await;
    assert_eq!(s, StatusCode::UNAUTHORIZED);
    let key = make_key(&app, TOKEN, Some("default"), "project key").await;
    let (s, body) = call(
        &app,
        Method::GET,
        "/metrics",
        key["key"].as_str(),
        None,
        None,
    )
    .await;
    assert_eq!(s, StatusCode::FORBIDDEN, "{body}");
    let r = app
        .http
        .get(app.url("/metrics"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert!(r
        .text()
        .await
        .unwrap()
        .contains("sandbox_agents_sessions{status=\"running\"} 0"));
    app.stop().await;
}
