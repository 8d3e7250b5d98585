//! Subscriptions: the catalogue, the secret shown once, absent-vs-null, and bad input.

use super::*;

#[tokio::test]
async fn the_catalogue_lists_the_stored_types_without_a_project() {
    let app = TestApp::builder().spawn().await;
    let r = app
        .http
        .get(app.url("/api/webhooks/event-types"))
        .header("x-project", "no-such-project")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let types: Vec<Value> = r.json().await.unwrap();
    assert_eq!(types.len(), 23);
    assert!(types
        .iter()
        .all(|t| t["type"] != "agent.text_delta" && t["type"] != "stream_gap"));
    assert!(types
        .iter()
        .any(|t| t["type"] == "session.status_idle" && t["group"] == "session"));
    assert!(types
        .iter()
        .any(|t| t["type"] == "agent.compaction" && t["group"] == "agent"));
    assert!(types
        .iter()
        .any(|t| t["type"] == "session.queued" && t["group"] == "session"));
    assert!(types
        .iter()
        .any(|t| t["type"] == "session.s3_conflict" && t["group"] == "session"));
    assert!(types
        .iter()
        .any(|t| t["type"] == "sandbox.egress_denied" && t["group"] == "session"));
    assert!(types
        .iter()
        .any(|t| t["type"] == "session.budget_reached" && t["group"] == "session"));
    assert!(types
        .iter()
        .any(|t| t["type"] == "session.spend_warning" && t["group"] == "session"));
    app.stop().await;
}

#[tokio::test]
async fn a_subscription_shows_its_secret_once_and_keeps_it_sealed() {
    let app = TestApp::builder().spawn().await;
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
    let app = TestApp::builder()
        .with_webhooks(sandbox_agents_webhooks::WebhookSettings {
            allow_private: false,
            ..test_webhook_settings()
        })
        .spawn()
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
