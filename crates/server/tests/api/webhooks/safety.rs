//! What a hostile or broken receiver cannot do: redirect us, make us read forever, reach
//! internal addresses, or hold up other subscriptions.

use super::*;

#[tokio::test]
async fn redirects_are_not_followed_and_huge_answers_are_not_read_whole() {
    let app = TestApp::builder().spawn().await;
    let receiver = Receiver::start(Answer::Redirect).await;
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
    let (rows, _) = deliveries(&app, id, "limit=50&offset=0").await;
    assert_eq!(rows[0]["status"], "pending");
    assert_eq!(rows[0]["status_code"], 302);
    assert!(rows[0]["error"]
        .as_str()
        .unwrap()
        .contains("redirects are not followed"));
    assert!(
        receiver.received().iter().all(|r| r.path == "/hook"),
        "the redirect was not followed"
    );

    receiver.set_answer(Answer::Huge);
    app.http
        .post(app.url(&format!(
            "/api/webhooks/{id}/deliveries/{}/redeliver",
            rows[0]["id"].as_str().unwrap()
        )))
        .send()
        .await
        .unwrap();
    app.dispatcher.run_once().await.unwrap();
    let (rows, _) = deliveries(&app, id, "limit=50&offset=0").await;
    assert_eq!(rows[0]["status"], "delivered");
    app.stop().await;
}

#[tokio::test]
async fn internal_addresses_are_refused_when_sending_unless_allowed() {
    let app = TestApp::builder()
        .with_webhooks(sandbox_agents_webhooks::WebhookSettings {
            allow_private: false,
            ..test_webhook_settings()
        })
        .spawn()
        .await;
    let receiver = Receiver::start(Answer::Ok).await;
    let s = session(&app, "a").await;
    // Made while internal targets were allowed (or a name that now resolves inside): the
    // check at send time still refuses it, for a literal and for a name.
    for url in [
        receiver.url.clone(),
        format!("http://vm:{}/hook", receiver.addr.port()),
    ] {
        let r = app.http.post(app.url("/api/webhooks"))
            .json(&json!({"name": "public", "url": "https://example.com/h", "agent_id": null, "active": true}))
            .send().await.unwrap();
        let created: Value = r.json().await.unwrap();
        sqlx::query("update webhooks set url = $1 where id = $2::uuid")
            .bind(&url)
            .bind(created["id"].as_str().unwrap())
            .execute(&app.db)
            .await
            .unwrap();
    }
    events::append_now(&app.db, s, &[event(EventType::AgentMessage, "x")])
        .await
        .unwrap();
    assert_eq!(app.dispatcher.run_once().await.unwrap(), 2);
    assert!(
        receiver.received().is_empty(),
        "nothing reached the internal receiver"
    );
    let errors: Vec<(String,)> = sqlx::query_as("select error from webhook_deliveries")
        .fetch_all(&app.db)
        .await
        .unwrap();
    assert!(
        errors.iter().all(|(e,)| e.contains("refused")),
        "{errors:?}"
    );
    app.stop().await;
}

#[tokio::test]
async fn a_hanging_receiver_holds_up_only_its_own_deliveries() {
    let app = TestApp::builder()
        .with_webhooks(sandbox_agents_webhooks::WebhookSettings {
            timeout: Duration::from_secs(5),
            ..test_webhook_settings()
        })
        .spawn()
        .await;
    let slow = Receiver::start(Answer::Hang).await;
    let fast = Receiver::start(Answer::Ok).await;
    let s = session(&app, "a").await;
    subscribe(
        &app,
        json!({"name": "slow", "url": slow.url, "agent_id": null, "active": true}),
    )
    .await;
    let quick = subscribe(
        &app,
        json!({"name": "fast", "url": fast.url, "agent_id": null, "active": true}),
    )
    .await;
    app.start_dispatcher();
    let batch: Vec<NewEvent> = (0..20)
        .map(|i| event(EventType::AgentMessage, &i.to_string()))
        .collect();
    let started = Instant::now();
    events::append_now(&app.db, s, &batch).await.unwrap();
    wait_all(&app, quick["id"].as_str().unwrap(), 20, "delivered").await;
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "the fast receiver waited for the slow one: {:?}",
        started.elapsed()
    );
    assert!(
        slow.received().len() <= 2,
        "at most per_subscription (2) slots go to one subscription"
    );
    slow.stop();
    app.stop().await;
}
