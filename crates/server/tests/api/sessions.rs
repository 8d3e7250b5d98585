use sandbox_agents_testkit::TestApp;
use serde_json::{json, Value};

#[tokio::test]
async fn sessions_are_listed_newest_first_with_a_total() {
    let app = TestApp::builder().spawn().await;
    let a = app.seed_agent("lister").await;
    let b = app.seed_agent("other").await;
    let mut ids = Vec::new();
    for _ in 0..3 {
        ids.push(app.seed_session(a.id).await.to_string());
    }
    app.seed_session(b.id).await;
    let r = app
        .http
        .get(app.url("/api/sessions?agent_id=lister&limit=2&offset=0"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.headers()["x-total-count"], "3");
    let page: Vec<Value> = r.json().await.unwrap();
    let got: Vec<&str> = page.iter().map(|s| s["id"].as_str().unwrap()).collect();
    assert_eq!(got, [ids[2].as_str(), ids[1].as_str()]);
    let r = app
        .http
        .get(app.url(&format!("/api/sessions?agent_id={}&limit=2&offset=2", a.id)))
        .send()
        .await
        .unwrap();
    assert_eq!(r.headers()["x-total-count"], "3");
    assert_eq!(r.json::<Vec<Value>>().await.unwrap().len(), 1);
    let r = app
        .http
        .get(app.url("/api/sessions?status=provisioning"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.headers()["x-total-count"], "4");
    let r = app
        .http
        .get(app.url("/api/sessions?status=sleeping"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 422);
    let r = app
        .http
        .get(app.url("/api/sessions?agent_id=nobody"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.headers()["x-total-count"], "0");
}

#[tokio::test]
async fn session_detail_resolves_the_agent_and_never_sends_null_for_non_null_fields() {
    let app = TestApp::builder().spawn().await;
    let a = app.seed_agent("detail").await;
    let s = app.seed_session(a.id).await;
    let d: Value = app
        .http
        .get(app.url(&format!("/api/sessions/{s}")))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(d["agent"]["slug"], "detail");
    assert_eq!(d["agent_id"], a.id.to_string());
    assert_eq!(d["status"], "provisioning");
    assert_eq!(d["runs"], json!([]));
    assert_eq!(d["sandbox_seconds"], 0.0);
    for field in [
        "title",
        "status",
        "activity",
        "backend",
        "workdir",
        "usage",
        "metadata",
        "exposed_ports",
    ] {
        assert!(!d[field].is_null(), "{field}");
    }
}

#[tokio::test]
async fn metadata_is_merged_and_null_removes_a_key() {
    let app = TestApp::builder().spawn().await;
    let a = app.seed_agent("meta").await;
    let s = app.seed_session(a.id).await;
    let url = app.url(&format!("/api/sessions/{s}"));
    let r: Value = app
        .http
        .patch(&url)
        .json(&json!({"metadata": {"a": 1, "b": {"x": true}}}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(r["metadata"], json!({"a": 1, "b": {"x": true}}));
    let r: Value = app
        .http
        .patch(&url)
        .json(&json!({"title": "Renamed", "metadata": {"a": null, "c": "new"}}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(r["metadata"], json!({"b": {"x": true}, "c": "new"}));
    assert_eq!(r["title"], "Renamed");
    let r = app
        .http
        .patch(&url)
        .json(&json!({"title": null}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 422);
    let r = app
        .http
        .patch(app.url(&format!("/api/sessions/{}", uuid::Uuid::now_v7())))
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
}
