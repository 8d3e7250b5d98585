use sandbox_agents_domain::event::{EventType, NewEvent};
use sandbox_agents_store::events;
use sandbox_agents_store::projects::DEFAULT_PROJECT;
use sandbox_agents_testkit::TestApp;
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// The core invariant: within a session, seq order equals commit order. A reader that follows
/// the log with a cursor (`seq > last seen`) while many writers append concurrently must end
/// up having seen every event: if an event with a lower seq could commit after a higher one,
/// the reader would step over it for good.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_cursor_reader_never_skips_an_event_under_concurrent_appends() {
    let app = TestApp::builder().spawn().await;
    let agent = app.seed_agent("busy").await;
    let session = app.seed_session(agent.id).await;
    // A second session's writers compete for the same sequence without touching this log.
    let other = app.seed_session(agent.id).await;
    let done = Arc::new(AtomicBool::new(false));

    let reader = {
        let db = app.db.clone();
        let done = done.clone();
        tokio::spawn(async move {
            let mut seen = Vec::new();
            let mut cursor = 0;
            loop {
                let finished = done.load(Ordering::SeqCst);
                let page = events::page(&db, DEFAULT_PROJECT, session, cursor, 1000)
                    .await
                    .unwrap();
                for e in &page {
                    seen.push(e.seq);
                    cursor = e.seq;
                }
                if finished && page.is_empty() {
                    return seen;
                }
                tokio::task::yield_now().await;
            }
        })
    };

    let writers: Vec<_> = (0..16)
        .map(|w| {
            let db = app.db.clone();
            let target = if w % 4 == 3 { other } else { session };
            tokio::spawn(async move {
                for i in 0..40 {
                    // Mix single events and batches.
                    let n = 1 + (i % 3);
                    let batch: Vec<NewEvent> = (0..n)
                        .map(|k| {
                            NewEvent::new(
                                EventType::AgentMessage,
                                None,
                                json!({"text": format!("w{w} i{i} k{k}")}),
                            )
                        })
                        .collect();
                    events::append_now(&db, target, &batch).await.unwrap();
                }
            })
        })
        .collect();
    for w in writers {
        w.await.unwrap();
    }
    done.store(true, Ordering::SeqCst);
    let seen = reader.await.unwrap();

    let all: Vec<i64> = events::page(&app.db, DEFAULT_PROJECT, session, 0, 1000)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.seq)
        .collect();
    // 12 writers on this session, each appending 1, 2 or 3 events 40 times: 79 each.
    assert_eq!(
        all.len(),
        12 * 79,
        "every append of this session was stored"
    );
    assert_eq!(
        seen, all,
        "the reader saw exactly the log, in order, with nothing skipped"
    );
    assert!(all.windows(2).all(|w| w[0] < w[1]));
}

#[tokio::test]
async fn pages_are_full_ascending_and_the_cursor_is_exclusive() {
    let app = TestApp::builder().spawn().await;
    let agent = app.seed_agent("pager").await;
    let session = app.seed_session(agent.id).await;
    let seqs = app.append_messages(session, 0, 2500).await;
    let url = |q: &str| app.url(&format!("/api/sessions/{session}/events{q}"));

    let mut all = Vec::new();
    let mut after = 0;
    loop {
        let page: Vec<Value> = app
            .http
            .get(url(&format!("?after={after}&limit=1000")))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let n = page.len();
        all.extend(page.iter().map(|e| e["seq"].as_i64().unwrap()));
        if n < 1000 {
            break;
        }
        assert_eq!(n, 1000, "a page is full whenever enough events follow");
        after = *all.last().unwrap();
    }
    assert_eq!(all, seqs);

    let page: Vec<Value> = app
        .http
        .get(url(&format!("?after={}&limit=2", seqs[10])))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        page.iter()
            .map(|e| e["seq"].as_i64().unwrap())
            .collect::<Vec<_>>(),
        &seqs[11..13]
    );
    let page: Vec<Value> = app
        .http
        .get(url(&format!("?after={}", seqs[2499])))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(page.is_empty());
    let default_page: Vec<Value> = app
        .http
        .get(url(""))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(default_page.len(), 500, "the default limit is 500");
    for bad in ["?limit=0", "?limit=1001", "?limit=ten"] {
        let r = app.http.get(url(bad)).send().await.unwrap();
        assert_eq!(r.status(), 422, "{bad}");
        assert_eq!(
            r.json::<Value>().await.unwrap()["detail"][0]["loc"][0],
            "query"
        );
    }
}

#[tokio::test]
async fn events_have_the_documented_shape() {
    let app = TestApp::builder().spawn().await;
    let agent = app.seed_agent("shape").await;
    let session = app.seed_session(agent.id).await;
    let run = sandbox_agents_domain::RunId::new();
    events::append_now(
        &app.db,
        session,
        &[NewEvent::new(
            EventType::UserMessage,
            Some(run),
            json!({"text": "hi"}),
        )],
    )
    .await
    .unwrap();
    let page: Vec<Value> = app
        .http
        .get(app.url(&format!("/api/sessions/{session}/events")))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let e = &page[0];
    assert!(e["seq"].as_i64().unwrap() > 0);
    assert_eq!(e["session_id"], session.to_string());
    assert_eq!(e["run_id"], run.to_string());
    assert_eq!(e["type"], "user.message");
    assert_eq!(e["payload"], json!({"text": "hi"}));
    assert!(time::OffsetDateTime::parse(
        e["created_at"].as_str().unwrap(),
        &time::format_description::well_known::Rfc3339
    )
    .is_ok());
}

#[tokio::test]
async fn ephemeral_types_are_never_stored() {
    let app = TestApp::builder().spawn().await;
    let agent = app.seed_agent("eph").await;
    let session = app.seed_session(agent.id).await;
    let r = events::append_now(
        &app.db,
        session,
        &[NewEvent::new(
            EventType::AgentTextDelta,
            None,
            json!({"text": "x"}),
        )],
    )
    .await;
    assert!(r.is_err());
    let page = events::page(&app.db, DEFAULT_PROJECT, session, 0, 10)
        .await
        .unwrap();
    assert!(page.is_empty());
    let unique: BTreeSet<i64> = page.iter().map(|e| e.seq).collect();
    assert!(unique.is_empty());
}

/// A run's step is appended only while the run runs: once it is finished, and (when the guard
/// says so) once a cancel was asked for, the batch is refused whole and nothing is written.
#[tokio::test]
async fn a_guarded_append_writes_only_while_its_run_runs() {
    use sandbox_agents_store::events::{Guarded, RunGuard};
    use sandbox_agents_store::runs;
    let app = TestApp::builder().spawn().await;
    let agent = app.seed_agent("guarded").await;
    let session = app.seed_session(agent.id).await;
    let run = sandbox_agents_domain::RunId::new();
    runs::insert(
        &app.db,
        &runs::NewRun {
            id: run,
            session,
            prompt: "hello",
            max_turns: 25,
            client_tools: &[],
            worker: 1,
            admitted: true,
        },
    )
    .await
    .unwrap();
    let message =
        |text: &str| NewEvent::new(EventType::AgentMessage, Some(run), json!({"text": text}));
    let append = |events: Vec<NewEvent>, unless_cancel_requested: bool| {
        let db = app.db.clone();
        async move {
            let mut tx = db.begin().await.unwrap();
            let guard = RunGuard {
                run,
                unless_cancel_requested,
            };
            let out = events::append_guarded(&mut tx, session, &events, Some(guard))
                .await
                .unwrap();
            tx.commit().await.unwrap();
            match out {
                Guarded::Appended(rows) => Some(rows.len()),
                Guarded::Refused => None,
            }
        }
    };
    let texts = || async {
        events::page(&app.db, DEFAULT_PROJECT, session, 0, 100)
            .await
            .unwrap()
            .into_iter()
            .map(|e| e.payload["text"].as_str().unwrap().to_owned())
            .collect::<Vec<_>>()
    };

    assert_eq!(
        append(vec![message("one"), message("two")], true).await,
        Some(2)
    );
    runs::request_cancel(&app.db, run).await.unwrap();
    // A model step is refused once a cancel was asked for; a tool's result still goes in.
    assert_eq!(append(vec![message("step")], true).await, None);
    assert_eq!(append(vec![message("result")], false).await, Some(1));
    sqlx::query("update runs set status = 'cancelled', finished_at = now() where id = $1")
        .bind(run.0)
        .execute(&app.db)
        .await
        .unwrap();
    assert_eq!(
        append(vec![message("late"), message("later")], false).await,
        None
    );
    assert_eq!(texts().await, ["one", "two", "result"]);
}

#[tokio::test]
async fn the_log_of_an_unknown_session_is_a_404() {
    let app = TestApp::builder().spawn().await;
    for id in ["not-a-uuid", &uuid::Uuid::now_v7().to_string()] {
        let r = app
            .http
            .get(app.url(&format!("/api/sessions/{id}/events")))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 404);
        let r = app
            .http
            .get(app.url(&format!("/api/sessions/{id}/events/stream")))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 404);
    }
}
