//! Live fan-out across server processes: each process has its own `LISTEN` connection.

use sandbox_agents_domain::event::EventType;
use sandbox_agents_store::events;
use sandbox_agents_testkit::process::ServerProcess;
use sandbox_agents_testkit::sse::SseReader;
use sandbox_agents_testkit::{database_url, fresh_named_database, TestApp};
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
    let writer: TestApp = TestApp::builder()
        .with_db(db.clone(), options)
        .spawn()
        .await;
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
    let app = TestApp::builder()
        .with_db(db.clone(), options)
        .spawn()
        .await;
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
