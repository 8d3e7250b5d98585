//! A delete and an agent write that race over the same key: whichever locks the key row
//! first wins, and the other sees what it committed. Each test holds one side open in its
//! own transaction, waits (bounded) until PostgreSQL shows the other side waiting on that
//! lock, then commits, so the interleaving is the one named and not left to timing.

use super::create_key;
use super::git_source;
use sandbox_agents_domain::agent::AgentCreate;
use sandbox_agents_domain::ids::GitKeyId;
use sandbox_agents_domain::Slug;
use sandbox_agents_store::projects::DEFAULT_PROJECT;
use sandbox_agents_store::{agents, git_keys, Db};
use sandbox_agents_testkit::{eventually, TestApp};
use serde_json::{json, Value};
use std::time::Duration;

/// Waits until some session of this database waits on a row lock.
async fn wait_until_blocked(db: &Db) {
    eventually(
        "a session to wait on the key's row",
        Duration::from_secs(15),
        async || {
            let (waiting,): (i64,) = sqlx::query_as(
                "select count(*) from pg_stat_activity
                 where datname = current_database() and wait_event_type = 'Lock'",
            )
            .fetch_one(db)
            .await
            .unwrap();
            (waiting > 0).then_some(())
        },
    )
    .await
}

fn key_id(key: &Value) -> GitKeyId {
    GitKeyId::parse(key["id"].as_str().unwrap()).unwrap()
}

#[tokio::test]
async fn a_delete_that_waits_for_an_agent_write_sees_the_agent_and_is_a_409() {
    let app = TestApp::builder().spawn().await;
    let key = create_key(&app, "raced").await;
    let id = key_id(&key);
    // An agent write in progress: the key held for share, the agent not yet inserted.
    let mut writer = app.db.begin().await.unwrap();
    git_keys::hold(&mut writer, DEFAULT_PROJECT, id)
        .await
        .unwrap();

    let deleting = tokio::spawn(
        app.http
            .delete(app.url(&format!("/api/git-keys/{id}")))
            .send(),
    );
    wait_until_blocked(&app.db).await;
    let body: AgentCreate = serde_json::from_value(
        json!({"slug": "writer", "name": "w", "skills_source": git_source(&id.to_string())}),
    )
    .unwrap();
    let (slug, spec): (Slug, _) = body.into_spec().unwrap();
    agents::insert(&mut *writer, DEFAULT_PROJECT, &slug, &spec, None)
        .await
        .unwrap();
    writer.commit().await.unwrap();

    let r = deleting.await.unwrap().unwrap();
    assert_eq!(r.status(), 409, "{}", r.text().await.unwrap());
    app.stop().await;
}

#[tokio::test]
async fn an_agent_write_that_waits_for_a_delete_finds_no_key_and_is_a_422() {
    let app = TestApp::builder().spawn().await;
    let key = create_key(&app, "raced").await;
    let id = key_id(&key);
    // A delete in progress: the row locked and deleted, not yet committed.
    let mut deleter = app.db.begin().await.unwrap();
    git_keys::delete_unreferenced(&mut deleter, DEFAULT_PROJECT, id)
        .await
        .unwrap();

    let writing = tokio::spawn(
        app.http
            .post(app.url("/api/agents"))
            .json(&json!({"slug": "late", "name": "late",
                          "skills_source": git_source(&id.to_string())}))
            .send(),
    );
    wait_until_blocked(&app.db).await;
    deleter.commit().await.unwrap();

    let r = writing.await.unwrap().unwrap();
    assert_eq!(r.status(), 422);
    let body: Value = r.json().await.unwrap();
    assert_eq!(
        body["detail"][0]["loc"],
        json!(["body", "skills_source", "ssh_key_id"])
    );
    let r = app
        .http
        .get(app.url("/api/agents/late"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404, "no agent points at a deleted key");
    app.stop().await;
}
