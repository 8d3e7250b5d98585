//! Webhooks: subscriptions, the outbox, and delivery to a real HTTP receiver.

use hmac::{Hmac, Mac};
use reqwest::StatusCode;
use sandbox_agents_domain::event::{EventType, NewEvent};
use sandbox_agents_domain::SessionId;
use sandbox_agents_store::events;
use sandbox_agents_testkit::receiver::{Answer, Received, Receiver};
use sandbox_agents_testkit::{spawn_app, spawn_app_with_webhooks, test_webhook_settings, TestApp};
use serde_json::{json, Value};
use sha2::Sha256;
use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

const WAIT: Duration = Duration::from_secs(15);

/// Checks a request's signature the way a consumer does: HMAC-SHA256 over "<t>." + body.
pub fn verify(secret: &str, r: &Received) -> bool {
    let header = r.header("x-anecdote-signature");
    let mut t = None;
    let mut v1 = None;
    for part in header.split(',') {
        match part.split_once('=') {
            Some(("t", v)) => t = Some(v.to_owned()),
            Some(("v1", v)) => v1 = Some(v.to_owned()),
            _ => {}
        }
    }
    let (Some(t), Some(v1)) = (t, v1) else {
        return false;
    };
    let age = time::OffsetDateTime::now_utc().unix_timestamp() - t.parse::<i64>().unwrap_or(0);
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(format!("{t}.").as_bytes());
    mac.update(&r.body);
    age.abs() <= 300 && hex::encode(mac.finalize().into_bytes()) == v1
}

async fn subscribe(app: &TestApp, body: Value) -> Value {
    let r = app
        .http
        .post(app.url("/api/webhooks"))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201, "{}", r.text().await.unwrap());
    r.json().await.unwrap()
}

async fn deliveries(app: &TestApp, webhook: &str, query: &str) -> (Vec<Value>, i64) {
    let r = app
        .http
        .get(app.url(&format!("/api/webhooks/{webhook}/deliveries?{query}")))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let total = r.headers()["x-total-count"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    (r.json().await.unwrap(), total)
}

async fn attempts(app: &TestApp, webhook: &str, delivery: &str) -> Vec<Value> {
    let r = app
        .http
        .get(app.url(&format!(
            "/api/webhooks/{webhook}/deliveries/{delivery}/attempts"
        )))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    r.json().await.unwrap()
}

/// Polls a webhook's deliveries until every one of them has `status`.
async fn wait_all(app: &TestApp, webhook: &str, n: usize, status: &str) -> Vec<Value> {
    let deadline = Instant::now() + WAIT;
    loop {
        let (rows, _) = deliveries(app, webhook, "limit=1000&offset=0").await;
        if rows.len() == n && rows.iter().all(|d| d["status"] == status) {
            return rows;
        }
        assert!(
            Instant::now() < deadline,
            "deliveries did not all become {status}: {rows:#?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn session(app: &TestApp, slug: &str) -> SessionId {
    let agent = app.seed_agent(slug).await;
    app.seed_session(agent.id).await
}

fn event(kind: EventType, text: &str) -> NewEvent {
    NewEvent::new(kind, None, json!({ "text": text }))
}

#[tokio::test]
async fn the_catalogue_lists_the_fourteen_stored_types_without_a_project() {
    let app = spawn_app().await;
    let r = app
        .http
        .get(app.url("/api/webhooks/event-types"))
        .header("x-project", "no-such-project")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let types: Vec<Value> = r.json().await.unwrap();
    assert_eq!(types.len(), 14);
    assert!(types
        .iter()
        .all(|t| t["type"] != "agent.text_delta" && t["type"] != "stream_gap"));
    assert!(types
        .iter()
        .any(|t| t["type"] == "session.status_idle" && t["group"] == "session"));
    app.stop().await;
}

#[tokio::test]
async fn a_subscription_shows_its_secret_once_and_keeps_it_sealed() {
    let app = spawn_app().await;
    let agent = app.create_agent("hooked", json!({})).await;
    let created = subscribe(
        &app,
        json!({"name": "ops", "url": "https://example.com/hook", "event_types": ["session.status_idle"],
               "agent_id": "hooked", "active": true}),
    )
    .await;
    let id = created["id"].as_str().unwrap().to_owned();
    let secret = created["secret"].as_str().unwrap().to_owned();
    assert!(secret.starts_with("whsec_"), "{secret}");
    assert_eq!(
        created["agent_id"], agent["id"],
        "the agent is stored by id"
    );
    assert_eq!(created["event_types"], json!(["session.status_idle"]));

    let got: Value = app
        .http
        .get(app.url(&format!("/api/webhooks/{id}")))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let listed: Vec<Value> = app
        .http
        .get(app.url("/api/webhooks"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(got.get("secret").is_none() && listed[0].get("secret").is_none());
    let (sealed,): (Vec<u8>,) = sqlx::query_as("select secret_sealed from webhooks")
        .fetch_one(&app.db)
        .await
        .unwrap();
    assert!(!sealed.windows(secret.len()).any(|w| w == secret.as_bytes()));

    // Absent leaves alone; null clears (event_types null = every type).
    let r = app
        .http
        .patch(app.url(&format!("/api/webhooks/{id}")))
        .json(&json!({"name": "ops 2"}))
        .send()
        .await
        .unwrap();
    let patched: Value = r.json().await.unwrap();
    assert_eq!(patched["name"], "ops 2");
    assert_eq!(patched["event_types"], json!(["session.status_idle"]));
    assert_eq!(patched["agent_id"], agent["id"]);
    let patched: Value = app
        .http
        .patch(app.url(&format!("/api/webhooks/{id}")))
        .json(&json!({"event_types": null, "agent_id": null, "active": false}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(patched["event_types"], json!([]));
    assert_eq!(patched["agent_id"], Value::Null);
    assert_eq!(patched["active"], false);

    let rotated: Value = app
        .http
        .post(app.url(&format!("/api/webhooks/{id}/rotate-secret")))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_ne!(rotated["secret"], created["secret"]);
    assert!(rotated["secret"].as_str().unwrap().starts_with("whsec_"));

    let r = app
        .http
        .delete(app.url(&format!("/api/webhooks/{id}")))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 204);
    let r = app
        .http
        .get(app.url(&format!("/api/webhooks/{id}")))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    app.stop().await;
}

#[tokio::test]
async fn bad_subscriptions_are_refused_and_change_nothing() {
    let app = spawn_app_with_webhooks(sandbox_agents_webhooks::WebhookSettings {
        allow_private: false,
        ..test_webhook_settings()
    })
    .await;
    for (body, loc) in [
        (
            json!({"name": "x", "url": "https://e.com", "event_types": ["nope"], "agent_id": null, "active": true}),
            json!(["body", "event_types", "0"]),
        ),
        (
            json!({"name": "x", "url": "https://e.com", "event_types": ["agent.text_delta"], "agent_id": null, "active": true}),
            json!(["body", "event_types", "0"]),
        ),
        (
            json!({"name": "x", "url": "ftp://e.com", "agent_id": null, "active": true}),
            json!(["body", "url"]),
        ),
        (
            json!({"name": "x", "url": "http://127.0.0.1:9/hook", "agent_id": null, "active": true}),
            json!(["body", "url"]),
        ),
        (
            json!({"name": "x", "url": "http://[::1]/hook", "agent_id": null, "active": true}),
            json!(["body", "url"]),
        ),
        (
            json!({"name": "x", "url": "https://e.com", "agent_id": "ghost", "active": true}),
            json!(["body", "agent_id"]),
        ),
        (
            json!({"name": " ", "url": "https://e.com", "agent_id": null, "active": true}),
            json!(["body", "name"]),
        ),
        (
            json!({"name": "x", "url": "https://e.com", "event_types": null, "agent_id": null, "active": true}),
            json!(["body", "event_types"]),
        ),
        (json!({"url": "https://e.com"}), json!(["body", "name"])),
    ] {
        let r = app
            .http
            .post(app.url("/api/webhooks"))
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 422, "{body}");
        let detail: Value = r.json().await.unwrap();
        assert_eq!(detail["detail"][0]["loc"], loc, "{body}: {detail}");
    }
    let listed: Vec<Value> = app
        .http
        .get(app.url("/api/webhooks"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(listed.is_empty());

    let created = subscribe(
        &app,
        json!({"name": "ok", "url": "https://e.com/h", "agent_id": null, "active": true}),
    )
    .await;
    let id = created["id"].as_str().unwrap();
    for body in [
        json!({"name": null}),
        json!({"url": null}),
        json!({"active": null}),
        json!({"url": "http://10.0.0.1/"}),
        json!({"event_types": ["nope"], "name": "changed"}),
    ] {
        let r = app
            .http
            .patch(app.url(&format!("/api/webhooks/{id}")))
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 422, "{body}");
    }
    let got: Value = app
        .http
        .get(app.url(&format!("/api/webhooks/{id}")))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(got["name"], "ok");
    assert_eq!(got["url"], "https://e.com/h");
    for path in [
        format!("/api/webhooks/{id}/deliveries?status=sent"),
        format!("/api/webhooks/{id}/deliveries?limit=0"),
    ] {
        let r = app.http.get(app.url(&path)).send().await.unwrap();
        assert_eq!(r.status(), 422, "{path}");
    }
    let missing = uuid::Uuid::now_v7();
    for r in [
        app.http
            .get(app.url(&format!("/api/webhooks/{missing}")))
            .send()
            .await
            .unwrap(),
        app.http
            .get(app.url("/api/webhooks/not-an-id/deliveries"))
            .send()
            .await
            .unwrap(),
        app.http
            .post(app.url(&format!(
                "/api/webhooks/{id}/deliveries/{missing}/redeliver"
            )))
            .send()
            .await
            .unwrap(),
        app.http
            .post(app.url(&format!("/api/webhooks/{missing}/rotate-secret")))
            .send()
            .await
            .unwrap(),
    ] {
        assert_eq!(r.status(), StatusCode::NOT_FOUND);
        let body: Value = r.json().await.unwrap();
        assert!(body["detail"].is_string());
    }
    app.stop().await;
}

#[tokio::test]
async fn every_matching_stored_event_is_delivered_once_signed_with_the_stream_json() {
    let app = spawn_app().await;
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
    let app = spawn_app().await;
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
async fn redirects_are_not_followed_and_huge_answers_are_not_read_whole() {
    let app = spawn_app().await;
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
    let app = spawn_app_with_webhooks(sandbox_agents_webhooks::WebhookSettings {
        allow_private: false,
        ..test_webhook_settings()
    })
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
async fn a_rotated_secret_signs_every_later_attempt_and_the_old_one_stops_verifying() {
    let app = spawn_app().await;
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
    let app = spawn_app_with_webhooks(sandbox_agents_webhooks::WebhookSettings {
        deactivate_after: 3,
        ..test_webhook_settings()
    })
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
async fn a_hanging_receiver_holds_up_only_its_own_deliveries() {
    let app = spawn_app_with_webhooks(sandbox_agents_webhooks::WebhookSettings {
        timeout: Duration::from_secs(5),
        ..test_webhook_settings()
    })
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

#[tokio::test]
async fn two_dispatchers_share_the_outbox_without_sending_anything_twice() {
    let app = spawn_app().await;
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
    let app = spawn_app().await;
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

/// The chaos test: the receiver refuses connections, then times out, then comes back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn through_refusals_timeouts_and_recovery_every_event_arrives_at_least_once() {
    let app = spawn_app_with_webhooks(sandbox_agents_webhooks::WebhookSettings {
        timeout: Duration::from_millis(400),
        retry: sandbox_agents_webhooks::RetryPolicy {
            max_attempts: 50,
            base: Duration::from_millis(100),
            max: Duration::from_millis(400),
        },
        ..test_webhook_settings()
    })
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
    let deadline = Instant::now() + WAIT;
    while sqlx::query_as::<_, (i64,)>("select count(*) from webhook_deliveries where attempt >= 1")
        .fetch_one(&app.db)
        .await
        .unwrap()
        .0
        < 10
    {
        assert!(
            Instant::now() < deadline,
            "the refused attempts were not recorded"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
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
    assert!(
        log.iter()
            .any(|a| a["error"].as_str().is_some_and(|e| e.contains("timed out"))),
        "{log:#?}"
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
