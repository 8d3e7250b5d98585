//! The chaos test: the receiver refuses connections, then times out, then comes back.

use super::*;

/// The chaos test: the receiver refuses connections, then times out, then comes back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn through_refusals_timeouts_and_recovery_every_event_arrives_at_least_once() {
    let app = TestApp::builder()
        .with_webhooks(sandbox_agents_webhooks::WebhookSettings {
            timeout: Duration::from_millis(400),
            retry: sandbox_agents_webhooks::RetryPolicy {
                max_attempts: 50,
                base: Duration::from_millis(100),
                max: Duration::from_millis(400),
            },
            ..test_webhook_settings()
        })
        .spawn()
        .await;
    // A port with nothing listening: connections are refused.
    let addr = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let s = session(&app, "a").await;
    let hook = subscribe(&app, json!({"name": "c", "url": format!("http://{addr}/hook"), "agent_id": null, "active": true})).await;
    let id = hook["id"].as_str().unwrap();
    let secret = hook["secret"].as_str().unwrap();
    app.start_dispatcher();
    let mut seqs = Vec::new();
    let append = |from: usize| {
        let batch: Vec<NewEvent> = (from..from + 10)
            .map(|i| event(EventType::AgentMessage, &i.to_string()))
            .collect();
        let db = app.db.clone();
        async move {
            events::append_now(&db, s, &batch)
                .await
                .unwrap()
                .into_iter()
                .map(|e| e.seq)
                .collect::<Vec<_>>()
        }
    };
    seqs.extend(append(0).await);
    // Refused: wait until every delivery has failed at least once.
    eventually("the refused attempts to be recorded", WAIT, async || {
        let (n,) = sqlx::query_as::<_, (i64,)>(
            "select count(*) from webhook_deliveries where attempt >= 1",
        )
        .fetch_one(&app.db)
        .await
        .unwrap();
        (n >= 10).then_some(())
    })
    .await;
    // Timing out.
    let receiver = Receiver::start_on(addr, Answer::Hang).await;
    seqs.extend(append(10).await);
    receiver
        .wait_for(WAIT, "timed-out attempts", |r| r.len() >= 5)
        .await;
    // Back.
    receiver.set_answer(Answer::Ok);
    seqs.extend(append(20).await);
    let rows = wait_all(&app, id, 30, "delivered").await;

    let got = receiver.received();
    let ok: Vec<&Received> = got.iter().filter(|r| r.answer == Answer::Ok).collect();
    let delivered: HashSet<i64> = ok
        .iter()
        .map(|r| r.json()["event"]["seq"].as_i64().unwrap())
        .collect();
    assert_eq!(
        delivered,
        seqs.iter().copied().collect(),
        "every event arrived at least once"
    );
    assert!(
        got.iter().all(|r| verify(secret, r)),
        "every request verifies"
    );
    // A delivery id stands for one event, and an event has one delivery id: ids repeat only
    // across retries of the same delivery.
    let mut id_to_seq: HashMap<String, i64> = HashMap::new();
    let mut seq_to_id: HashMap<i64, String> = HashMap::new();
    for r in &got {
        let body = r.json();
        let (did, seq) = (
            body["id"].as_str().unwrap().to_owned(),
            body["event"]["seq"].as_i64().unwrap(),
        );
        assert_eq!(*id_to_seq.entry(did.clone()).or_insert(seq), seq);
        assert_eq!(*seq_to_id.entry(seq).or_insert(did.clone()), did);
    }
    // The attempt log tells the story: refusals, then timeouts, then success.
    let first = rows.iter().find(|d| d["event_seq"] == seqs[0]).unwrap();
    let log = attempts(&app, id, first["id"].as_str().unwrap()).await;
    assert!(
        log[0]["error"]
            .as_str()
            .unwrap()
            .contains("could not connect"),
        "{log:#?}"
    );
    assert_eq!(log[0]["status_code"], Value::Null);
    // Which deliveries were tried while the receiver hung depends on timing; some were.
    let mut timed_out = 0;
    for d in &rows {
        let log = attempts(&app, id, d["id"].as_str().unwrap()).await;
        assert_eq!(d["attempt"].as_u64().unwrap() as usize, log.len());
        assert_eq!(log.last().unwrap()["status_code"], 204);
        timed_out += log
            .iter()
            .filter(|a| a["error"].as_str().is_some_and(|e| e.contains("timed out")))
            .count();
    }
    assert!(
        timed_out >= 5,
        "the hanging receiver shows as timeouts in the attempt log"
    );
    let last = log.last().unwrap();
    assert_eq!(
        (
            last["status_code"].clone(),
            last["error"].clone(),
            last["next_attempt_at"].clone()
        ),
        (json!(204), Value::Null, Value::Null)
    );
    assert_eq!(first["attempt"].as_u64().unwrap() as usize, log.len());
    receiver.stop();
    app.stop().await;
}
