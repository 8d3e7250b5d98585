//! Delivery: the outbox, signatures, filters, retries and the attempt log, rotation,
//! deactivation, several dispatchers, and the test ping.

use super::*;

#[tokio::test]
async fn every_matching_stored_event_is_delivered_once_signed_with_the_stream_json() {
    let app = TestApp::builder().spawn().await;
    let receiver = Receiver::start(Answer::Ok).await;
    let s = session(&app, "a").await;
    let other = session(&app, "b").await;
    let all = subscribe(
        &app,
        json!({"name": "all", "url": receiver.url, "agent_id": null, "active": true}),
    )
    .await;
    let idle = subscribe(
        &app,
        json!({"name": "idle", "url": format!("{}/idle", receiver.url),
        "event_types": ["session.status_idle"], "agent_id": null, "active": true}),
    )
    .await;
    let only_b = subscribe(
        &app,
        json!({"name": "b", "url": format!("{}/b", receiver.url), "agent_id": "b", "active": true}),
    )
    .await;
    subscribe(&app, json!({"name": "off", "url": format!("{}/off", receiver.url), "agent_id": null, "active": false})).await;

    let stored = events::append_now(
        &app.db,
        s,
        &[
            event(EventType::UserMessage, "hi"),
            event(EventType::AgentMessage, "hello"),
            NewEvent::new(
                EventType::SessionStatusIdle,
                None,
                json!({"stop_reason": "end_turn"}),
            ),
        ],
    )
    .await
    .unwrap();
    events::publish_ephemeral(
        &app.db,
        s,
        None,
        EventType::AgentTextDelta,
        json!({"text": "tok"}).as_object().unwrap().clone(),
    )
    .await
    .unwrap();
    // An event that is rolled back queues nothing.
    let mut tx = app.db.begin().await.unwrap();
    events::append(&mut tx, s, &[event(EventType::AgentMessage, "never")])
        .await
        .unwrap();
    tx.rollback().await.unwrap();

    assert_eq!(
        app.dispatcher.run_once().await.unwrap(),
        4,
        "three for `all`, one for `idle`"
    );
    assert_eq!(
        app.dispatcher.run_once().await.unwrap(),
        0,
        "nothing is sent twice"
    );
    let got = receiver.received();
    assert_eq!(got.len(), 4);
    assert!(got
        .iter()
        .all(|r| r.path != "/hook/b" && r.path != "/hook/off"));

    let log: Vec<Value> = app
        .http
        .get(app.url(&format!("/api/sessions/{s}/events")))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    for r in &got {
        let secret = if r.path == "/hook/idle" {
            &idle["secret"]
        } else {
            &all["secret"]
        };
        assert!(verify(secret.as_str().unwrap(), r), "a valid signature");
        let body = r.json();
        assert_eq!(r.header("x-anecdote-delivery"), body["id"]);
        assert_eq!(r.header("x-anecdote-event"), body["type"]);
        assert_eq!(r.header("content-type"), "application/json");
        assert_eq!(body["session_id"], s.to_string());
        let seq = body["event"]["seq"].as_i64().unwrap();
        let from_log = log
            .iter()
            .find(|e| e["seq"] == seq)
            .expect("a stored event");
        assert_eq!(&body["event"], from_log, "the same JSON as the event log");
    }
    assert!(got
        .iter()
        .filter(|r| r.path == "/hook/idle")
        .all(|r| r.header("x-anecdote-event") == "session.status_idle"));

    let all_id = all["id"].as_str().unwrap();
    let (rows, total) = deliveries(&app, all_id, "limit=2&offset=0").await;
    assert_eq!((rows.len(), total), (2, 3));
    assert_eq!(rows[0]["event_seq"], stored[2].seq, "newest first");
    assert!(rows.iter().all(|d| d["status"] == "delivered"
        && d["attempt"] == 1
        && d["status_code"] == 204
        && d["subscription_id"] == all_id
        && d["delivered_at"].is_string()));
    let (rows, total) = deliveries(&app, all_id, "status=pending&limit=50&offset=0").await;
    assert_eq!((rows.len(), total), (0, 0));
    let (_, total) = deliveries(&app, only_b["id"].as_str().unwrap(), "limit=50&offset=0").await;
    assert_eq!(total, 0);

    // The agent filter lets the other agent's session through to its subscription only.
    events::append_now(&app.db, other, &[event(EventType::AgentMessage, "b")])
        .await
        .unwrap();
    assert_eq!(app.dispatcher.run_once().await.unwrap(), 2);
    assert_eq!(
        receiver
            .received()
            .iter()
            .filter(|r| r.path == "/hook/b")
            .count(),
        1
    );
    app.stop().await;
}

#[tokio::test]
async fn failures_are_retried_with_backoff_then_failed_and_the_attempt_log_tells_it() {
    let app = TestApp::builder().spawn().await;
    let receiver = Receiver::start(Answer::Status(500)).await;
    let s = session(&app, "a").await;
    let hook = subscribe(
        &app,
        json!({"name": "f", "url": receiver.url, "agent_id": null, "active": true}),
    )
    .await;
    let id = hook["id"].as_str().unwrap();
    app.start_dispatcher();
    events::append_now(&app.db, s, &[event(EventType::AgentMessage, "x")])
        .await
        .unwrap();
    let rows = wait_all(&app, id, 1, "failed").await;
    let d = &rows[0];
    assert_eq!(d["attempt"], 4);
    assert_eq!(d["status_code"], 500);
    assert_eq!(d["next_attempt_at"], Value::Null);
    assert!(d["error"].as_str().unwrap().contains("HTTP 500"), "{d}");
    let log = attempts(&app, id, d["id"].as_str().unwrap()).await;
    assert_eq!(log.len(), 4);
    assert!(log.iter().all(|a| a["status_code"] == 500));
    assert!(log[..3].iter().all(|a| a["next_attempt_at"].is_string()));
    assert_eq!(log[3]["next_attempt_at"], Value::Null);
    let got = receiver.received();
    assert_eq!(got.len(), 4);
    assert!(
        got.iter()
            .all(|r| r.header("x-anecdote-delivery") == d["id"]),
        "the id is stable across retries"
    );
    // The waits grow: about 100 ms, 500 ms, 2.5 s (±20%).
    let gaps: Vec<f64> = got
        .windows(2)
        .map(|w| (w[1].at - w[0].at).as_secs_f64())
        .collect();
    assert!(
        gaps[0] >= 0.08 && gaps[1] >= 0.4 && gaps[2] >= 2.0,
        "{gaps:?}"
    );

    // Redeliver: a fresh budget, the same id.
    receiver.set_answer(Answer::Ok);
    let r = app
        .http
        .post(app.url(&format!(
            "/api/webhooks/{id}/deliveries/{}/redeliver",
            d["id"].as_str().unwrap()
        )))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 202);
    let rows = wait_all(&app, id, 1, "delivered").await;
    assert_eq!(rows[0]["attempt"], 5);
    assert_eq!(rows[0]["error"], Value::Null);
    assert_eq!(
        receiver
            .received()
            .last()
            .unwrap()
            .header("x-anecdote-delivery"),
        d["id"]
    );
    app.stop().await;
}

#[tokio::test]
async fn a_rotated_secret_signs_every_later_attempt_and_the_old_one_stops_verifying() {
    let app = TestApp::builder().spawn().await;
    let receiver = Receiver::start(Answer::Status(503)).await;
    let s = session(&app, "a").await;
    let hook = subscribe(
        &app,
        json!({"name": "r", "url": receiver.url, "agent_id": null, "active": true}),
    )
    .await;
    let id = hook["id"].as_str().unwrap();
    events::append_now(&app.db, s, &[event(EventType::AgentMessage, "x")])
        .await
        .unwrap();
    app.dispatcher.run_once().await.unwrap();
    let rotated: Value = app
        .http
        .post(app.url(&format!("/api/webhooks/{id}/rotate-secret")))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    receiver.set_answer(Answer::Ok);
    let (rows, _) = deliveries(&app, id, "limit=50&offset=0").await;
    app.http
        .post(app.url(&format!(
            "/api/webhooks/{id}/deliveries/{}/redeliver",
            rows[0]["id"].as_str().unwrap()
        )))
        .send()
        .await
        .unwrap();
    app.dispatcher.run_once().await.unwrap();
    let got = receiver.received();
    assert_eq!(got.len(), 2);
    assert!(verify(hook["secret"].as_str().unwrap(), &got[0]));
    assert!(verify(rotated["secret"].as_str().unwrap(), &got[1]));
    assert!(!verify(hook["secret"].as_str().unwrap(), &got[1]));
    app.stop().await;
}

#[tokio::test]
async fn a_subscription_failing_continuously_is_deactivated_and_says_so() {
    let app = TestApp::builder()
        .with_webhooks(sandbox_agents_webhooks::WebhookSettings {
            deactivate_after: 3,
            ..test_webhook_settings()
        })
        .spawn()
        .await;
    let receiver = Receiver::start(Answer::Status(500)).await;
    let s = session(&app, "a").await;
    let hook = subscribe(
        &app,
        json!({"name": "d", "url": receiver.url, "agent_id": null, "active": true}),
    )
    .await;
    let id = hook["id"].as_str().unwrap();
    events::append_now(
        &app.db,
        s,
        &[
            event(EventType::AgentMessage, "1"),
            event(EventType::AgentMessage, "2"),
            event(EventType::AgentMessage, "3"),
            event(EventType::AgentMessage, "4"),
        ],
    )
    .await
    .unwrap();
    app.dispatcher.run_once().await.unwrap();
    let got: Value = app
        .http
        .get(app.url(&format!("/api/webhooks/{id}")))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(got["active"], false, "{got}");
    assert!(
        got["deactivated_reason"]
            .as_str()
            .unwrap()
            .contains("3 failed delivery attempts"),
        "{got}"
    );
    // Deactivated: nothing more is sent, even when due.
    sqlx::query("update webhook_deliveries set next_attempt_at = now()")
        .execute(&app.db)
        .await
        .unwrap();
    let before = receiver.received().len();
    assert_eq!(app.dispatcher.run_once().await.unwrap(), 0);
    assert_eq!(receiver.received().len(), before);
    // Activated again: the count and reason are reset and the pending deliveries go.
    receiver.set_answer(Answer::Ok);
    let got: Value = app
        .http
        .patch(app.url(&format!("/api/webhooks/{id}")))
        .json(&json!({"active": true}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        (
            got["active"].clone(),
            got["consecutive_failures"].clone(),
            got["deactivated_reason"].clone()
        ),
        (json!(true), json!(0), Value::Null)
    );
    app.dispatcher.run_once().await.unwrap();
    wait_all(&app, id, 4, "delivered").await;
    app.stop().await;
}

#[tokio::test]
async fn two_dispatchers_share_the_outbox_without_sending_anything_twice() {
    let app = TestApp::builder().spawn().await;
    let second =
        sandbox_agents_webhooks::Dispatcher::new(app.db.clone(), app.dispatcher.webhooks().clone());
    let receiver = Receiver::start(Answer::Ok).await;
    let s = session(&app, "a").await;
    let hook = subscribe(
        &app,
        json!({"name": "x", "url": receiver.url, "agent_id": null, "active": true}),
    )
    .await;
    for i in 0..10 {
        let batch: Vec<NewEvent> = (0..5)
            .map(|j| event(EventType::AgentMessage, &format!("{i}.{j}")))
            .collect();
        events::append_now(&app.db, s, &batch).await.unwrap();
    }
    let (a, b) = tokio::join!(app.dispatcher.run_once(), second.run_once());
    assert_eq!(a.unwrap() + b.unwrap(), 50);
    let (rows, _) = deliveries(&app, hook["id"].as_str().unwrap(), "limit=1000&offset=0").await;
    assert!(
        rows.iter().all(|d| d["attempt"] == 1),
        "every delivery was attempted exactly once"
    );
    let ids: HashSet<String> = receiver
        .received()
        .iter()
        .map(|r| r.header("x-anecdote-delivery").to_owned())
        .collect();
    assert_eq!(
        ids.len(),
        receiver.received().len(),
        "no delivery was sent twice"
    );
    app.stop().await;
}

#[tokio::test]
async fn ping_sends_a_signed_test_request_and_reports_the_answer() {
    let app = TestApp::builder().spawn().await;
    let receiver = Receiver::start(Answer::Ok).await;
    let hook = subscribe(
        &app,
        json!({"name": "p", "url": receiver.url, "agent_id": null, "active": false}),
    )
    .await;
    let id = hook["id"].as_str().unwrap();
    let r = app
        .http
        .post(app.url(&format!("/api/webhooks/{id}/ping")))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let result: Value = r.json().await.unwrap();
    assert_eq!(
        (result["delivered"].clone(), result["status_code"].clone()),
        (json!(true), json!(204))
    );
    let got = receiver.received();
    assert_eq!(got.len(), 1);
    assert!(verify(hook["secret"].as_str().unwrap(), &got[0]));
    assert_eq!(got[0].header("x-anecdote-event"), "ping");
    assert_eq!(got[0].json()["event"], Value::Null);
    receiver.set_answer(Answer::Status(418));
    let result: Value = app
        .http
        .post(app.url(&format!("/api/webhooks/{id}/ping")))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        (result["delivered"].clone(), result["status_code"].clone()),
        (json!(false), json!(418))
    );
    app.stop().await;
}

/// Successes are recorded in batches: one statement writes every delivery whose lease is
/// still the claimer's (status, attempt log, the subscription's failure count reset) and
/// leaves alone one whose lease was lost meanwhile, which its new holder reports on.
#[tokio::test]
async fn a_batch_of_successes_records_those_still_leased_and_resets_the_failure_count() {
    use sandbox_agents_store::deliveries::{self, Delivered};
    let app = TestApp::builder().spawn().await;
    let receiver = Receiver::start(Answer::Ok).await;
    let s = session(&app, "a").await;
    let hook = subscribe(
        &app,
        json!({"name": "batch", "url": receiver.url, "agent_id": null, "active": true}),
    )
    .await;
    let id = hook["id"].as_str().unwrap().to_owned();
    sqlx::query("update webhooks set consecutive_failures = 3 where id = $1::uuid")
        .bind(&id)
        .execute(&app.db)
        .await
        .unwrap();
    events::append_now(
        &app.db,
        s,
        &[
            event(EventType::UserMessage, "1"),
            event(EventType::UserMessage, "2"),
            event(EventType::UserMessage, "3"),
        ],
    )
    .await
    .unwrap();
    let claimed = deliveries::claim(&app.db, 10, Duration::from_secs(60), &[], None)
        .await
        .unwrap();
    assert_eq!(claimed.len(), 3);
    let batch: Vec<Delivered> = claimed
        .iter()
        .enumerate()
        .map(|(i, c)| Delivered {
            id: c.id,
            // The last one's lease was lost (re-claimed under another token).
            lease_token: if i == 2 {
                uuid::Uuid::new_v4()
            } else {
                c.lease_token
            },
            started_at: time::OffsetDateTime::now_utc(),
            duration_ms: 7,
            status_code: 204,
        })
        .collect();
    let written = deliveries::record_delivered(&app.db, &batch).await.unwrap();
    assert_eq!(written.len(), 2);
    assert!(written.contains(&claimed[0].id) && written.contains(&claimed[1].id));

    let (list, _) = deliveries(&app, &id, "").await;
    let status = |d: &sandbox_agents_domain::DeliveryId| {
        list.iter()
            .find(|x| x["id"] == d.0.to_string())
            .map(|x| x["status"].as_str().unwrap().to_owned())
            .unwrap()
    };
    assert_eq!(status(&claimed[0].id), "delivered");
    assert_eq!(status(&claimed[1].id), "delivered");
    assert_eq!(
        status(&claimed[2].id),
        "pending",
        "a lost lease is not recorded"
    );
    let log = attempts(&app, &id, &claimed[0].id.0.to_string()).await;
    assert_eq!(log.len(), 1, "{log:?}");
    assert_eq!(log[0]["status_code"], 204);
    assert_eq!(log[0]["duration_ms"], 7);
    assert!(attempts(&app, &id, &claimed[2].id.0.to_string())
        .await
        .is_empty());
    let failures: i32 =
        sqlx::query_scalar("select consecutive_failures from webhooks where id = $1::uuid")
            .bind(&id)
            .fetch_one(&app.db)
            .await
            .unwrap();
    assert_eq!(failures, 0);
}
