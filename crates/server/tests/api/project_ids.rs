//! Which project a request names is answered from each process's cache of project ids
//! (`store::project_ids`): a change to the projects table reaches the next lookups of the
//! process that made it at once, and of every other process once its notification arrives.

use sandbox_agents_testkit::{eventually, TestApp};
use serde_json::json;
use std::time::Duration;

/// How long another process may take to hear of a change (its notification's delivery).
const HEAR: Duration = Duration::from_secs(10);

/// `GET /api/agents` naming `project`, or naming none: its status.
async fn agents(app: &TestApp, project: Option<&str>) -> u16 {
    let mut r = app.http.get(app.url("/api/agents"));
    if let Some(p) = project {
        r = r.header("x-project", p);
    }
    r.send().await.unwrap().status().as_u16()
}

async fn wait_for(app: &TestApp, project: Option<&str>, status: u16, what: &str) {
    eventually(what, HEAR, async || {
        let got = agents(app, project).await;
        if got == status {
            Ok(())
        } else {
            Err(format!("status {got}"))
        }
    })
    .await;
}

#[tokio::test]
async fn a_project_created_or_deleted_in_one_process_is_seen_by_the_other() {
    let a = TestApp::builder().spawn().await;
    let b = TestApp::builder()
        .with_db(a.db.clone(), a.db_options.clone())
        .spawn()
        .await;
    // One project: a request that names none acts in it (and both processes remember that).
    assert_eq!(agents(&a, None).await, 200);
    assert_eq!(agents(&b, None).await, 200);
    assert_eq!(agents(&b, Some("second")).await, 404);

    let r = a
        .http
        .post(a.url("/api/projects"))
        .json(&json!({"name": "second"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let slug = r.json::<serde_json::Value>().await.unwrap()["slug"]
        .as_str()
        .unwrap()
        .to_owned();
    // The process that made the change knows at once: two projects, so naming none is a 400.
    assert_eq!(agents(&a, None).await, 400);
    assert_eq!(agents(&a, Some(&slug)).await, 200);
    // The other process, once it has heard of it.
    wait_for(&b, None, 400, "the other process to see a second project").await;
    assert_eq!(agents(&b, Some(&slug)).await, 200, "remembered by slug now");

    let r = a
        .http
        .delete(a.url(&format!("/api/projects/{slug}")))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 204);
    assert_eq!(agents(&a, Some(&slug)).await, 404);
    assert_eq!(agents(&a, None).await, 200);
    wait_for(
        &b,
        Some(&slug),
        404,
        "the other process to forget the deleted project",
    )
    .await;
    assert_eq!(agents(&b, None).await, 200, "one project again");
}
