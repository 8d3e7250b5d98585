//! `stream_gap`: the contract (API.md §5.5) names it, and the published client knows it as
//! one of its two ephemeral types, so it stays in the catalogue and the document. This server
//! never sends it: the event log is never pruned (every stored event stays readable for the
//! session's life) and a stream catches a reader up from PostgreSQL, page after page, however
//! far behind its cursor is, so no cursor is ever older than what the log holds and nothing is
//! ever skipped. The contract asks for `stream_gap` only before skipping. The document says
//! so, and a resume from far behind gets every event and no `stream_gap`.

use sandbox_agents_testkit::sse::SseReader;
use sandbox_agents_testkit::TestApp;
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(10);

#[test]
fn the_document_says_stream_gap_is_never_sent() {
    let json = serde_json::to_value(sandbox_agents_api::openapi()).unwrap();
    let text = json.to_string();
    assert!(
        text.contains("never sent by this server"),
        "the catalogue's description of stream_gap says it is never sent"
    );
}

/// A reader resuming from the log's first event, over two pages (1000 each) behind, gets
/// every stored event in order and no `stream_gap`.
#[tokio::test]
async fn a_resume_from_far_behind_gets_every_event_and_no_stream_gap() {
    let app = TestApp::builder().spawn().await;
    let agent = app.seed_agent("behind").await;
    let s = app.seed_session(agent.id).await;
    let mut stored = Vec::new();
    for chunk in 0..3 {
        stored.extend(app.append_messages(s, chunk * 1000, 1000).await);
    }
    let first = stored[0];
    let r = app
        .http
        .get(app.url(&format!("/api/sessions/{s}/events/stream")))
        .header("accept", "text/event-stream")
        .header("last-event-id", first.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let mut reader = SseReader::new(r);
    let expected: Vec<i64> = stored.iter().copied().filter(|q| *q > first).collect();
    let mut got = Vec::new();
    while got.len() < expected.len() {
        let frame = reader.next_event(WAIT).await.expect("the stream is open");
        assert_ne!(
            frame.json()["type"],
            "stream_gap",
            "a stream_gap after {} events",
            got.len()
        );
        got.push(frame.seq());
    }
    assert_eq!(got, expected);
}
