//! Deleting a project removes what its rows pointed at outside the database (workspace
//! archives, snapshot archives and images), through the garbage queue, which survives a crash.

use sandbox_agents_testkit::{eventually, TestApp};
use serde_json::{json, Value};
use std::time::Duration;

const BOOT: Duration = Duration::from_secs(60);

async fn send(app: &TestApp, method: reqwest::Method, path: &str, body: Value) -> (u16, Value) {
    let r = app
        .http
        .request(method, app.url(path))
        .header("x-project", "doomed")
        .json(&body)
        .send()
        .await
        .expect("request");
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

fn image_exists(image: &str) -> bool {
    std::process::Command::new("docker")
        .args(["image", "inspect", image])
        .output()
        .expect("docker image inspect")
        .status
        .success()
}

fn blob_files(app: &TestApp) -> Vec<std::path::PathBuf> {
    fn walk(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, out);
            } else {
                out.push(p);
            }
        }
    }
    let mut out = Vec::new();
    walk(&app.blobs_dir, &mut out);
    out
}

async fn wait_garbage_empty(app: &TestApp) {
    eventually(
        "the garbage queue to empty",
        Duration::from_secs(60),
        async || {
            let (n,): (i64,) = sqlx::query_as("select count(*) from garbage")
                .fetch_one(&app.db)
                .await
                .unwrap();
            if n == 0 {
                Ok(())
            } else {
                Err(format!("{n} garbage rows are still queued"))
            }
        },
    )
    .await
}

#[tokio::test]
async fn a_deleted_project_leaves_no_archives_or_images() {
    let app = TestApp::builder().spawn().await;
    let r = app
        .http
        .post(app.url("/api/projects"))
        .json(&json!({"name": "Doomed"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let (s, _) = send(
        &app,
        reqwest::Method::POST,
        "/api/agents",
        json!({"slug": "a", "name": "a"}),
    )
    .await;
    assert_eq!(s, 201);
    let (s, session) = send(
        &app,
        reqwest::Method::POST,
        "/api/sessions",
        json!({"agent_id": "a"}),
    )
    .await;
    assert_eq!(s, 202, "{session}");
    let id = session["id"].as_str().unwrap().to_owned();
    eventually("the session to boot", BOOT, async || {
        let (_, s) = send(
            &app,
            reqwest::Method::GET,
            &format!("/api/sessions/{id}"),
            Value::Null,
        )
        .await;
        (s["status"] == "running").then_some(())
    })
    .await;
    let (s, snap) = send(
        &app,
        reqwest::Method::POST,
        &format!("/api/sessions/{id}/snapshots"),
        json!({"label": "s"}),
    )
    .await;
    assert_eq!(s, 201, "{snap}");
    let (image,): (String,) = sqlx::query_as("select image from snapshots where id = $1::uuid")
        .bind(snap["id"].as_str().unwrap())
        .fetch_one(&app.db)
        .await
        .unwrap();
    assert!(image_exists(&image));
    let (s, _) = send(
        &app,
        reqwest::Method::POST,
        &format!("/api/sessions/{id}/stop"),
        json!({}),
    )
    .await;
    assert_eq!(s, 200);
    assert!(
        blob_files(&app).len() >= 2,
        "a snapshot archive and a workspace archive"
    );

    let (s, b) = send(
        &app,
        reqwest::Method::DELETE,
        "/api/projects/doomed",
        Value::Null,
    )
    .await;
    assert_eq!(s, 204, "{b}");
    wait_garbage_empty(&app).await;
    assert_eq!(blob_files(&app), Vec::<std::path::PathBuf>::new());
    assert!(!image_exists(&image), "the snapshot image is still there");
}

#[tokio::test]
async fn queued_garbage_outlives_the_process_that_queued_it() {
    let app = TestApp::builder().spawn().await;
    let blob = app.blobs_dir.join("sessions/x/workspace-left.tar");
    std::fs::create_dir_all(blob.parent().unwrap()).unwrap();
    std::fs::write(&blob, b"left behind").unwrap();
    // A delete committed, then the process died before removing anything: the rows are all
    // that is left. Missing things count as removed.
    sqlx::query("insert into garbage (kind, ref) values ('blob', 'sessions/x/workspace-left.tar'), ('blob', 'sessions/y/gone.tar'), ('image', 'sandbox-agents-snapshot:missing')")
        .execute(&app.db)
        .await
        .unwrap();
    // The next sweep, of any process, removes them.
    assert_eq!(app.sessions.collect_garbage().await.unwrap(), 3);
    assert!(!blob.exists());
    wait_garbage_empty(&app).await;
}

#[tokio::test]
async fn garbage_that_cannot_be_removed_backs_off_without_holding_up_the_rest() {
    let app = TestApp::builder().spawn().await;
    // A blob key the store refuses (it would leave the root), failing forever, and one that
    // is fine behind it.
    sqlx::query("insert into garbage (kind, ref, attempts) values ('blob', '../outside', 100), ('blob', 'sessions/z/fine.tar', 0)")
        .execute(&app.db)
        .await
        .unwrap();
    assert_eq!(app.sessions.collect_garbage().await.unwrap(), 1);
    let rows: Vec<(String, i32, bool)> = sqlx::query_as(
        "select ref, attempts, due_at between now() + interval '59 minutes' and now() + interval '61 minutes' from garbage",
    )
    .fetch_all(&app.db)
    .await
    .unwrap();
    assert_eq!(
        rows,
        vec![("../outside".to_owned(), 101, true)],
        "backed off by the hour cap"
    );
    // Not due now: another pass has nothing to do and does not fail.
    assert_eq!(app.sessions.collect_garbage().await.unwrap(), 0);
}

#[tokio::test]
async fn a_replaced_workspace_archive_and_a_refused_snapshot_leave_nothing() {
    let app = TestApp::builder().spawn().await;
    app.create_agent("a", json!({})).await;
    let s = app.create_session(json!({"agent_id": "a"})).await;
    let id = s["id"].as_str().unwrap().to_owned();
    app.wait_for_status(&id, "running", BOOT).await;
    for action in ["stop", "start", "stop"] {
        let r = app
            .http
            .post(app.url(&format!("/api/sessions/{id}/{action}")))
            .send()
            .await
            .unwrap();
        assert!(r.status().is_success(), "{action}");
        if action == "start" {
            app.wait_for_status(&id, "running", BOOT).await;
        }
    }
    // A snapshot of a session that failed to boot is refused, and its queued key goes.
    app.create_agent("broken", json!({"image": "sandbox-agents-no-such-image:1"}))
        .await;
    let b = app.create_session(json!({"agent_id": "broken"})).await;
    let bid = b["id"].as_str().unwrap().to_owned();
    app.wait_for_status(&bid, "error", BOOT).await;
    let r = app
        .http
        .post(app.url(&format!("/api/sessions/{bid}/snapshots")))
        .json(&json!({"label": "x"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 409);
    wait_garbage_empty(&app).await;
    let archives: Vec<_> = blob_files(&app)
        .into_iter()
        .filter(|p| p.to_string_lossy().contains(&format!("sessions/{id}/")))
        .collect();
    assert_eq!(
        archives.len(),
        1,
        "only the latest archive stays: {archives:?}"
    );
}
