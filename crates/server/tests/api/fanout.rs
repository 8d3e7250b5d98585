//! Live fan-out across server processes: each process has its own `LISTEN` connection.

use crate::process::ServerProcess;
use sandbox_agents_domain::event::EventType;
use sandbox_agents_store::events;
use sandbox_agents_testkit::sse::SseReader;
use sandbox_agents_testkit::{database_url, fresh_named_database, spawn_app_on, TestApp};
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(10);

async fn stream(base: &str, session: &str) -> SseReader {
    let r = reqwest::get(format!("{base}/api/sessions/{session}/events/stream"))
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    SseReader::new(r)
}

async fn read_seqs(reader: &mut SseReader, n: usize) -> Vec<i64> {
    let mut out = Vec::new();
    while out.len() < n {
        out.push(reader.next_event(WAIT).await.expect("stream open").seq());
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_server_processes_each_stream_every_event_appended_anywhere() {
    let (db, options, name) = fresh_named_database().await;
    let url = database_url(&name).await;
    let a = ServerProcess::start(&url, &[]).await;
    let b = ServerProcess::start(&url, &[]).await;
    // The test process plays the third writer (e.g. a run worker on another machine).
    let writer: TestApp = spawn_app_on(db.clone(), options).await;
    let agent = writer.seed_agent("fanout").await;
    let s = writer.seed_session(agent.id).await.to_string();

    let mut on_a = stream(&a.base, &s).await;
    let mut on_b = stream(&b.base, &s).await;
    let mut expected = Vec::new();
    for i in 0..20 {
        expected.extend(
            writer
                .append_messages(
                    s.parse().map(sandbox_agents_domain::SessionId).unwrap(),
                    i * 3,
                    3,
                )
                .await,
        );
    }
    assert_eq!(read_seqs(&mut on_a, expected.len()).await, expected);
    assert_eq!(read_seqs(&mut on_b, expected.len()).await, expected);

    let payload = serde_json::json!({"text": "tok"})
        .as_object()
        .unwrap()
        .clone();
    let sid = sandbox_agents_domain::SessionId(s.parse().unwrap());
    events::publish_ephemeral(&db, sid, None, EventType::AgentTextDelta, payload)
        .await
        .unwrap();
    for reader in [&mut on_a, &mut on_b] {
        let f = reader.next_event(WAIT).await.unwrap();
        assert_eq!(f.json()["type"], "agent.text_delta");
        assert_eq!(f.json()["seq"], 0);
    }
    a.terminate().await;
    b.terminate().await;
    writer.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_listener_connection_delays_events_but_never_loses_them() {
    let (db, options, _) = fresh_named_database().await;
    let app = spawn_app_on(db.clone(), options).await;
    let agent = app.seed_agent("deaf").await;
    let s = app.seed_session(agent.id).await;
    let mut reader = stream(&app.base, &s.to_string()).await;
    let before = app.append_messages(s, 0, 2).await;
    assert_eq!(read_seqs(&mut reader, 2).await, before);

    // Kill every LISTEN connection of this database, as a failover or a network blip would.
    let killed: Vec<(bool,)> = sqlx::query_as(
        "select pg_terminate_backend(pid) from pg_stat_activity
         where datname = current_database() and pid <> pg_backend_pid() and query ilike 'listen%'",
    )
    .fetch_all(&db)
    .await
    .unwrap();
    assert!(!killed.is_empty(), "the hub's listener was found");
    let during = app.append_messages(s, 2, 3).await;
    assert_eq!(read_seqs(&mut reader, 3).await, during);
    let after = app.append_messages(s, 5, 1).await;
    assert_eq!(read_seqs(&mut reader, 1).await, after);
    app.stop().await;
}

/// A notification carries its events: a feed whose cursor they follow streams them as they
/// came, without reading them back; one they do not follow reads the log instead, so a notice
/// can neither open a gap nor repeat an event. (The notices here are forged, so that what is
/// streamed shows where it came from.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_notifications_own_events_are_streamed_only_when_they_follow_the_cursor() {
    let (db, options, _) = fresh_named_database().await;
    let app = spawn_app_on(db.clone(), options).await;
    let agent = app.seed_agent("inline").await;
    let s = app.seed_session(agent.id).await;
    let other = app.seed_session(agent.id).await;
    let mut reader = stream(&app.base, &s.to_string()).await;
    let first = app.append_messages(s, 0, 1).await[0];
    assert_eq!(read_seqs(&mut reader, 1).await, [first]);

    let notify = async |after: i64, seq: i64, text: &str| {
        let notice = serde_json::json!({
            "s": s.0, "q": seq, "p": after,
            "v": [{
                "seq": seq, "session_id": s.0, "run_id": null, "type": "agent.message",
                "payload": { "text": text }, "created_at": "2026-12-04T00:00:00Z",
            }],
        });
        sqlx::query("select pg_notify($1, $2)")
            .bind(events::CHANNEL)
            .bind(notice.to_string())
            .execute(&db)
            .await
            .unwrap();
    };
    // Seqs drawn from the sequence by another session, so that no event of `s` takes them.
    let spare = app.append_messages(other, 0, 2).await;

    // Follows the cursor: streamed as it came, though the log does not hold it.
    notify(first, spare[0], "from the notice").await;
    let f = reader.next_event(WAIT).await.expect("stream open");
    assert_eq!(f.seq(), spare[0]);
    assert_eq!(f.json()["payload"]["text"], "from the notice");
    // Does not follow the cursor (now spare[0]): the log is read instead, and has no such event.
    notify(first, spare[1], "not in the log").await;
    // Already behind the cursor: not repeated.
    notify(0, first, "a repeat").await;
    // A real append's notice says it follows `first` (the log's last), not the cursor: read back.
    let next = app.append_messages(s, 1, 1).await;
    assert_eq!(read_seqs(&mut reader, 1).await, next);

    // Follows the cursor: carried in its notice, and sent as a replay of the log sends it.
    let last = app.append_messages(s, 2, 1).await[0];
    let live = reader.next_event(WAIT).await.expect("stream open");
    assert_eq!(live.seq(), last);
    let mut replay = stream(&app.base, &s.to_string()).await;
    let replayed = loop {
        let f = replay.next_event(WAIT).await.expect("stream open");
        if f.seq() == last {
            break f;
        }
    };
    assert_eq!(live, replayed);
    app.stop().await;
}
