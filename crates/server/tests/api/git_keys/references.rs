//! References from agents: `skills_source.ssh_key_id` must name a key of the agent's project,
//! is stored in canonical form, and holds the key against deletion (409) until the agent lets
//! go. (The races between the two are in `races.rs`.)

use super::{create_key, delete_key, git_source};
use sandbox_agents_domain::agent::AgentCreate;
use sandbox_agents_store::agents;
use sandbox_agents_store::projects::DEFAULT_PROJECT;
use sandbox_agents_testkit::TestApp;
use serde_json::{json, Value};

#[tokio::test]
async fn a_key_an_agent_uses_cannot_be_deleted_until_the_agent_lets_go() {
    let app = TestApp::builder().spawn().await;
    let key = create_key(&app, "skills").await;
    let id = key["id"].as_str().unwrap();
    // Any spelling of the id is stored in its canonical form, the one deletes look for.
    let agent = app
        .create_agent(
            "uses-key",
            json!({"skills_source": git_source(&id.to_uppercase())}),
        )
        .await;
    assert_eq!(agent["skills_source"]["ssh_key_id"], id);

    let (status, body) = delete_key(&app, id).await;
    assert_eq!(status, 409, "{body}");
    assert!(
        body["detail"].as_str().unwrap().contains("uses-key"),
        "the detail names the agent: {body}"
    );
    // Archived agents still hold it.
    let r = app
        .http
        .post(app.url("/api/agents/uses-key/archive"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(delete_key(&app, id).await.0, 409);

    let r = app
        .http
        .patch(app.url("/api/agents/uses-key"))
        .json(&json!({"version": agent["version"], "skills_source": null}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());
    assert_eq!(delete_key(&app, id).await.0, 204);
    app.stop().await;
}

#[tokio::test]
async fn agents_cannot_name_a_key_their_project_does_not_have() {
    let app = TestApp::builder().spawn().await;
    let r = app
        .http
        .post(app.url("/api/projects"))
        .json(&json!({"name": "Other", "slug": "other", "description": ""}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    // Two projects now: every request names one.
    let other_key: Value = app
        .http
        .post(app.url("/api/git-keys"))
        .header("x-project", "other")
        .json(&json!({"name": "theirs"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let ours: Value = app
        .http
        .post(app.url("/api/git-keys"))
        .header("x-project", "default")
        .json(&json!({"name": "ours"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let write = |method: reqwest::Method, path: &str, body: Value| {
        app.http
            .request(method, app.url(path))
            .header("x-project", "default")
            .json(&body)
            .send()
    };
    for bad in [
        other_key["id"].as_str().unwrap().to_owned(),
        uuid::Uuid::now_v7().to_string(),
        "not-an-id".to_owned(),
    ] {
        let r = write(
            reqwest::Method::POST,
            "/api/agents",
            json!({"slug": "a", "name": "a", "skills_source": git_source(&bad)}),
        )
        .await
        .unwrap();
        assert_eq!(r.status(), 422, "{bad}");
        let body: Value = r.json().await.unwrap();
        assert_eq!(
            body["detail"][0]["loc"],
            json!(["body", "skills_source", "ssh_key_id"]),
            "{body}"
        );
    }
    let r = write(
        reqwest::Method::POST,
        "/api/agents",
        json!({"slug": "a", "name": "a"}),
    )
    .await
    .unwrap();
    assert_eq!(r.status(), 201);
    let bad = other_key["id"].as_str().unwrap();
    let r = write(
        reqwest::Method::PATCH,
        "/api/agents/a",
        json!({"version": 1, "skills_source": git_source(bad)}),
    )
    .await
    .unwrap();
    assert_eq!(r.status(), 422);
    let r = write(
        reqwest::Method::PATCH,
        "/api/agents/a",
        json!({"version": 1, "skills_source": git_source(ours["id"].as_str().unwrap())}),
    )
    .await
    .unwrap();
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());
    app.stop().await;
}

#[tokio::test]
async fn an_edit_that_leaves_skills_source_alone_does_not_judge_an_old_reference() {
    let app = TestApp::builder().spawn().await;
    // Stored before keys existed (the store takes any string): no key has this id.
    let body: AgentCreate = serde_json::from_value(json!({"slug": "old", "name": "old",
        "skills_source": git_source("00000000-0000-7000-8000-00000000dead")}))
    .unwrap();
    let (slug, spec) = body.into_spec().unwrap();
    agents::insert(&app.db, DEFAULT_PROJECT, &slug, &spec, None)
        .await
        .unwrap();
    let r = app
        .http
        .patch(app.url("/api/agents/old"))
        .json(&json!({"version": 1, "name": "renamed"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());
    app.stop().await;
}
