use sandbox_agents_domain::event::EventType;
use sandbox_agents_store::events;
use sandbox_agents_store::projects::DEFAULT_PROJECT;
use sandbox_agents_testkit::sse::SseReader;
use sandbox_agents_testkit::TestApp;
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(10);

async fn open(app: &TestApp, path: &str) -> SseReader {
    let r = app
        .http
        .get(app.url(path))
        .header("accept", "text/event-stream")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert!(r.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/event-stream"));
    assert_eq!(r.headers()["cache-control"], "no-cache");
    assert_eq!(r.headers()["x-accel-buffering"], "no");
    SseReader::new(r)
}

/// Reads `n` event frames and returns their seqs.
async fn seqs(reader: &mut SseReader, n: usize) -> Vec<i64> {
    let mut out = Vec::new();
    while out.len() < n {
        out.push(
            reader
                .next_event(WAIT)
                .await
                .expect("the stream is open")
                .seq(),
        );
    }
    out
}

#[tokio::test]
async fn the_backlog_after_the_cursor_then_live_events_in_order_without_repeats() {
    let app = TestApp::builder().spawn().await;
    let agent = app.seed_agent("streamer").await;
    let s = app.seed_session(agent.id).await;
    let first = app.append_messages(s, 0, 5).await;

    let mut reader = open(
        &app,
        &format!("/api/sessions/{s}/events/stream?after={}", first[1]),
    )
    .await;
    let frame = reader.next_event(WAIT).await.unwrap();
    assert_eq!(
        frame.id.as_deref(),
        Some(first[2].to_string().as_str()),
        "stored events carry id: <seq>"
    );
    assert_eq!(frame.event.as_deref(), Some("agent.message"));
    assert_eq!(frame.json()["payload"]["text"], "message 2");
    assert_eq!(seqs(&mut reader, 2).await, &first[3..]);

    let live = app.append_messages(s, 5, 3).await;
    assert_eq!(seqs(&mut reader, 3).await, live);
    let more = app.append_messages(s, 8, 1).await;
    assert_eq!(
        seqs(&mut reader, 1).await,
        more,
        "nothing was repeated in between"
    );
}

#[tokio::test]
async fn no_cursor_replays_from_the_start_and_last_event_id_resumes() {
    let app = TestApp::builder().spawn().await;
    let agent = app.seed_agent("resume").await;
    let s = app.seed_session(agent.id).await;
    let all = app.append_messages(s, 0, 4).await;

    let mut reader = open(&app, &format!("/api/sessions/{s}/events/stream")).await;
    assert_eq!(seqs(&mut reader, 4).await, all);

    let r = app
        .http
        .get(app.url(&format!("/api/sessions/{s}/events/stream")))
        .header("last-event-id", all[2].to_string())
        .send()
        .await
        .unwrap();
    let mut reader = SseReader::new(r);
    assert_eq!(seqs(&mut reader, 1).await, &all[3..]);

    // `after` wins over Last-Event-ID.
    let r = app
        .http
        .get(app.url(&format!("/api/sessions/{s}/events/stream?after={}", all[0])))
        .header("last-event-id", all[2].to_string())
        .send()
        .await
        .unwrap();
    let mut reader = SseReader::new(r);
    assert_eq!(seqs(&mut reader, 3).await, &all[1..]);
}

#[tokio::test]
async fn ephemeral_events_are_streamed_with_seq_0_and_no_id_and_never_stored() {
    let app = TestApp::builder().spawn().await;
    let agent = app.seed_agent("deltas").await;
    let s = app.seed_session(agent.id).await;
    let mut reader = open(&app, &format!("/api/sessions/{s}/events/stream")).await;
    // Once this stored event arrives the stream is live: the backlog is behind it.
    let marker = app.append_messages(s, 0, 1).await;
    assert_eq!(seqs(&mut reader, 1).await, marker);
    let run = sandbox_agents_domain::RunId::new();
    let payload = serde_json::json!({"text": "He"})
        .as_object()
        .unwrap()
        .clone();
    events::publish_ephemeral(&app.db, s, Some(run), EventType::AgentTextDelta, payload)
        .await
        .unwrap();
    let stored = app.append_messages(s, 1, 1).await;

    let delta = reader.next_event(WAIT).await.unwrap();
    assert_eq!(delta.id, None, "never id: 0");
    assert_eq!(delta.event.as_deref(), Some("agent.text_delta"));
    let j = delta.json();
    assert_eq!(j["seq"], 0);
    assert_eq!(j["run_id"], run.to_string());
    assert_eq!(j["session_id"], s.to_string());
    assert_eq!(j["payload"]["text"], "He");
    assert_eq!(seqs(&mut reader, 1).await, stored);
    assert_eq!(
        events::page(&app.db, DEFAULT_PROJECT, s, 0, 100)
            .await
            .unwrap()
            .len(),
        2
    );
}

#[tokio::test]
async fn silence_is_broken_by_ping_comments() {
    let app = TestApp::builder().spawn().await;
    let agent = app.seed_agent("quiet").await;
    let s = app.seed_session(agent.id).await;
    let mut reader = open(&app, &format!("/api/sessions/{s}/events/stream")).await;
    for _ in 0..2 {
        let f = reader
            .next(Duration::from_secs(5))
            .await
            .expect("the stream stays open");
        assert_eq!(f.comment.as_deref(), Some("ping"));
        assert_eq!(f.data, None);
    }
}

#[tokio::test]
async fn a_slow_reader_is_caught_up_from_the_database_not_dropped() {
    let app = TestApp::builder().spawn().await;
    let agent = app.seed_agent("slow").await;
    let s = app.seed_session(agent.id).await;
    let mut reader = open(&app, &format!("/api/sessions/{s}/events/stream")).await;
    // Far more than the live buffer holds, written while the reader reads nothing.
    let mut expected = Vec::new();
    for chunk in 0..12 {
        expected.extend(app.append_messages(s, chunk * 1000, 1000).await);
    }
    let got = seqs(&mut reader, expected.len()).await;
    assert_eq!(got, expected);
}

#[tokio::test]
async fn deleting_the_session_ends_its_streams() {
    let app = TestApp::builder().spawn().await;
    let agent = app.seed_agent("gone").await;
    let s = app.seed_session(agent.id).await;
    let seq = app.append_messages(s, 0, 1).await;
    let mut reader = open(&app, &format!("/api/sessions/{s}/events/stream")).await;
    assert_eq!(seqs(&mut reader, 1).await, seq);
    let mut tx = app.db.begin().await.unwrap();
    sandbox_agents_store::sessions::delete(&mut tx, DEFAULT_PROJECT, s)
        .await
        .unwrap();
    tx.commit().await.unwrap();
    assert!(reader.next_event(WAIT).await.is_none(), "the stream ended");
    let r = app
        .http
        .get(app.url(&format!("/api/sessions/{s}/events/stream")))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404, "a reconnect is told the session is gone");
}

#[tokio::test]
async fn shutdown_ends_open_streams_instead_of_waiting_for_them() {
    let app = TestApp::builder().spawn().await;
    let agent = app.seed_agent("bye").await;
    let s = app.seed_session(agent.id).await;
    let mut reader = open(&app, &format!("/api/sessions/{s}/events/stream")).await;
    app.stop().await;
    // The stream ends (or the connection drops) rather than hanging.
    let ended = tokio::time::timeout(WAIT, async {
        loop {
            match reader.next(WAIT).await {
                None => break,
                Some(f) if f.comment.is_some() => continue,
                Some(f) => panic!("unexpected frame {f:?}"),
            }
        }
    })
    .await;
    assert!(ended.is_ok());
}
