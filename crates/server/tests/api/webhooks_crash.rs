//! The outbox survives a crash: deliveries pending when the server is killed with SIGKILL
//! (some of them in flight, some queued while it is down) all arrive after a restart.

use sandbox_agents_testkit::process::ServerProcess;
use sandbox_agents_testkit::receiver::{Answer, Receiver};
use sandbox_agents_testkit::webhooks::verify;
use sandbox_agents_testkit::{database_url, eventually, fresh_named_database, TestApp};
use serde_json::{json, Value};
use std::collections::HashSet;
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(40);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deliveries_pending_at_a_kill_9_all_arrive_after_the_restart() {
    let (db, options, name) = fresh_named_database().await;
    let url = database_url(&name).await;
    // Both lives of the server share the data directory, and with it the master key file.
    let data_dir = std::env::temp_dir().join(format!("sa-crash-{}", uuid::Uuid::new_v4().simple()));
    let data = data_dir.to_str().unwrap().to_owned();
    let env = [
        ("SANDBOX_AGENTS_DATA_DIR", data.as_str()),
        ("SANDBOX_AGENTS_WEBHOOK_ALLOW_PRIVATE", "true"),
        ("SANDBOX_AGENTS_WEBHOOK_RETRY_BASE_SECONDS", "0.2"),
        ("SANDBOX_AGENTS_WEBHOOK_RETRY_MAX_SECONDS", "0.5"),
        ("SANDBOX_AGENTS_WEBHOOK_MAX_ATTEMPTS", "100"),
        ("SANDBOX_AGENTS_WEBHOOK_TIMEOUT_SECONDS", "1"),
    ];
    let receiver = Receiver::start(Answer::Status(503)).await;
    let first = ServerProcess::start(&url, &env).await;
    let r = reqwest::Client::new()
        .post(format!("{}/api/webhooks", first.base))
        .json(&json!({"name": "crash", "url": receiver.url, "agent_id": null, "active": true}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let hook: Value = r.json().await.unwrap();
    let secret = hook["secret"].as_str().unwrap().to_owned();

    // The test process writes events, as a run worker would.
    let writer = TestApp::builder()
        .with_db(db.clone(), options)
        .spawn()
        .await;
    let agent = writer.seed_agent("crash").await;
    let s = writer.seed_session(agent.id).await;
    // Stopped, so that neither server's start-up reconciler boots a sandbox for it.
    sqlx::query(
        "update sessions set status = 'stopped', stopped_reason = 'requested' where id = $1",
    )
    .bind(s.0)
    .execute(&db)
    .await
    .unwrap();
    let mut seqs = writer.append_messages(s, 0, 10).await;
    seqs.extend(writer.append_messages(s, 10, 10).await);
    // The first server is failing and retrying; then the receiver hangs, so that some
    // deliveries are in flight (leased) when the server dies.
    receiver
        .wait_for(WAIT, "refused attempts", |r| r.len() >= 5)
        .await;
    receiver.set_answer(Answer::Hang);
    let before = receiver.received().len();
    receiver
        .wait_for(WAIT, "a request in flight", |r| r.len() > before)
        .await;
    first.kill9().await;
    seqs.extend(writer.append_messages(s, 20, 10).await);

    receiver.set_answer(Answer::Ok);
    let second = ServerProcess::start(&url, &env).await;
    let stored: Vec<(i64,)> = sqlx::query_as("select seq from events where session_id = $1")
        .bind(s.0)
        .fetch_all(&db)
        .await
        .unwrap();
    assert!(stored.len() >= seqs.len());
    eventually(
        "every delivery to be made after the restart",
        WAIT,
        async || {
            let (pending,): (i64,) = sqlx::query_as(
                "select count(*) from webhook_deliveries where status <> 'delivered'",
            )
            .fetch_one(&db)
            .await
            .unwrap();
            let (all,): (i64,) = sqlx::query_as("select count(*) from webhook_deliveries")
                .fetch_one(&db)
                .await
                .unwrap();
            // Every stored event of the session (its session.created too) has a delivery.
            if pending == 0 && all as usize == stored.len() {
                return Ok(());
            }
            let rows: Vec<(i64, String, String)> = sqlx::query_as(
                "select event_seq, event_type, status from webhook_deliveries order by event_seq",
            )
            .fetch_all(&db)
            .await
            .unwrap();
            Err(format!(
                "{pending} of {all} deliveries ({} events) not delivered: {rows:?}",
                stored.len()
            ))
        },
    )
    .await;
    let got = receiver.received();
    let delivered: HashSet<i64> = got
        .iter()
        .filter(|r| r.answer == Answer::Ok)
        .map(|r| r.json()["event"]["seq"].as_i64().unwrap())
        .collect();
    assert_eq!(
        delivered,
        seqs.iter().copied().collect(),
        "nothing was lost"
    );
    assert!(
        got.iter().all(|r| verify(&secret, r)),
        "the restarted server signs with the same secret"
    );
    receiver.stop();
    second.terminate().await;
    writer.stop().await;
    let _ = std::fs::remove_dir_all(data_dir);
}
