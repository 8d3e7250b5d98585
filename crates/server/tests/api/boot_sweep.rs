//! What keeps every session booting somewhere, and what a busy pool answers (issue 33):
//!
//! * a session left `provisioning` by a process that died (stamped with its key, holding its
//!   lease, with a half-made sandbox) is booted again by the sweep with a new sandbox, and
//!   the half-made one is removed as nobody's;
//! * one stamped by a live process is left to it, until that process dies;
//! * one this process stamped but no task of it boots (a boot that gave up recording its
//!   outcome) is booted again;
//! * a lifecycle operation waits while another live process holds the session's lease and
//!   takes the lease over once that process is gone; a stop the server chose itself (an idle
//!   release) does not wait;
//! * a pool with no free connection is a 503 saying the server is busy, with `Retry-After`,
//!   counted in `/metrics`.

use sandbox_agents_domain::session::StoppedReason;
use sandbox_agents_domain::SessionId;
use sandbox_agents_sandbox::SandboxSpec;
use sandbox_agents_testkit::metrics::{sample, scrape};
use sandbox_agents_testkit::{fresh_database, test_image, TestApp, BOOT};
use sqlx::Connection;
use std::time::Duration;

/// A liveness key held by a connection of the test's own, outside every pool: a server
/// process as the others see it, alive until [`Process::die`].
struct Process {
    key: i32,
    conn: sqlx::PgConnection,
}

impl Process {
    async fn start(app: &TestApp, key: i32) -> Self {
        let mut conn = sqlx::PgConnection::connect_with(&app.db_options)
            .await
            .unwrap();
        assert!(sandbox_agents_store::liveness::try_hold(&mut conn, key)
            .await
            .unwrap());
        Process { key, conn }
    }

    /// As a crash: the connection goes, and the liveness lock with it.
    async fn die(self) {
        self.conn.close().await.unwrap();
    }
}

/// A `provisioning` session that nothing boots (a row, as a create leaves it), of a new
/// agent `slug`.
async fn unbooted_session(app: &TestApp, slug: &str) -> SessionId {
    let agent = app.seed_agent(slug).await;
    app.seed_session(agent.id).await
}

async fn stamp(app: &TestApp, id: SessionId, worker: i32) {
    sqlx::query("update sessions set boot_worker = $2 where id = $1")
        .bind(id.0)
        .bind(worker)
        .execute(&app.db)
        .await
        .unwrap();
}

async fn hold_lease(app: &TestApp, id: SessionId, worker: i32) {
    sqlx::query(
        "insert into session_leases (session_id, worker, token) values ($1, $2, gen_random_uuid())",
    )
    .bind(id.0)
    .bind(worker)
    .execute(&app.db)
    .await
    .unwrap();
}

#[tokio::test]
async fn a_boot_whose_process_died_is_booted_again_by_the_sweep_and_its_half_made_sandbox_removed()
{
    let app = TestApp::builder().spawn().await;
    let id = unbooted_session(&app, "orphaned-boot").await;
    // A process took the boot on, holds the lease and made a sandbox, then died.
    let dead = Process::start(&app, 0x0b07_0001).await;
    stamp(&app, id, dead.key).await;
    hold_lease(&app, id, dead.key).await;
    let backend = app.sessions.backend().clone();
    let half_made = backend
        .create(&SandboxSpec {
            session: id.to_string(),
            image: test_image(),
            env: Default::default(),
            exposed_ports: Vec::new(),
            limits: app.sessions.settings().limits.clone(),
            runtime_class: None,
        })
        .await
        .unwrap();

    // While the process lives, its boot and its sandbox are its own.
    app.sessions.sweep_orphans().await.unwrap();
    assert!(backend.inspect(&half_made.id).await.unwrap().is_some());
    assert_eq!(app.sessions.redrive_boots().await.unwrap(), 0);

    dead.die().await;
    app.sessions.sweep_orphans().await.unwrap();
    assert!(
        backend.inspect(&half_made.id).await.unwrap().is_none(),
        "the sandbox of a boot nobody drives is removed"
    );
    assert_eq!(app.sessions.redrive_boots().await.unwrap(), 1);
    let s = app.wait_for_status(&id.to_string(), "running", BOOT).await;
    assert_ne!(s["container_id"], half_made.id.as_str());
    assert_eq!(
        app.sessions.redrive_boots().await.unwrap(),
        0,
        "a session that runs is nobody's to boot"
    );
    app.delete_session(&id.to_string()).await;
}

#[tokio::test]
async fn a_boot_this_process_took_on_but_no_task_drives_is_booted_again() {
    let app = TestApp::builder().spawn().await;
    let id = unbooted_session(&app, "abandoned-boot").await;
    // Stamped with this process's key, as a boot that gave up after its retries leaves it.
    stamp(&app, id, app.sessions.worker_key().await.unwrap()).await;
    assert_eq!(app.sessions.redrive_boots().await.unwrap(), 1);
    app.wait_for_status(&id.to_string(), "running", BOOT).await;
    app.delete_session(&id.to_string()).await;
}

#[tokio::test]
async fn a_lifecycle_operation_waits_for_a_live_holder_and_takes_over_from_a_dead_one() {
    let app = TestApp::builder().spawn().await;
    let id = app.running_session("leased", serde_json::json!({})).await;
    let sid = SessionId(id.parse().unwrap());
    let other = Process::start(&app, 0x0b07_0002).await;
    hold_lease(&app, sid, other.key).await;

    // A stop the server chooses itself does not wait: its sweep comes again.
    let idle = tokio::time::timeout(
        Duration::from_secs(5),
        app.sessions.stop(None, sid, StoppedReason::Idle),
    )
    .await
    .expect("an idle release does not wait for the lease");
    let refused = idle.expect_err("a conflict, not a stop").to_string();
    assert!(refused.contains("the next sweep tries again"), "{refused}");

    let mut delete = {
        let (http, url) = (app.http.clone(), app.url(&format!("/api/sessions/{id}")));
        tokio::spawn(async move { http.delete(url).send().await.unwrap().status() })
    };
    // Half a second of its polls (every 10 to 250 ms) find the live holder: it waits.
    let waited = tokio::time::timeout(Duration::from_millis(500), &mut delete).await;
    assert!(
        waited.is_err(),
        "the delete waits while a live process holds the lease"
    );
    assert_eq!(app.session(&id).await["status"], "running");

    other.die().await;
    let status = tokio::time::timeout(Duration::from_secs(30), delete)
        .await
        .expect("the delete goes on once the holder is gone")
        .unwrap();
    assert_eq!(status, 204);
    let (status, _) = app.get_json(&format!("/api/sessions/{id}")).await;
    assert_eq!(status, 404);
}

#[tokio::test]
async fn a_pool_with_no_free_connection_is_a_503_saying_the_server_is_busy() {
    let (_, options) = fresh_database().await;
    let db = sandbox_agents_store::connect(options.clone(), 2)
        .await
        .unwrap();
    let app = TestApp::builder()
        .with_db(db.clone(), options)
        .spawn()
        .await;
    let before =
        sample(&scrape(&app).await, "sandbox_agents_db_pool_timeouts_total").unwrap_or(0.0);
    // Every connection of the pool, held by someone else.
    let held = (db.acquire().await.unwrap(), db.acquire().await.unwrap());

    let r = app.http.get(app.url("/api/agents")).send().await.unwrap();
    assert_eq!(r.status(), 503);
    assert_eq!(r.headers()["retry-after"], "2");
    let body: serde_json::Value = r.json().await.unwrap();
    let detail = body["detail"].as_str().unwrap();
    assert!(detail.contains("the server is busy"), "{detail}");
    assert!(!detail.contains("unreachable"), "{detail}");

    drop(held);
    let after = sample(&scrape(&app).await, "sandbox_agents_db_pool_timeouts_total").unwrap();
    assert!(after >= before + 1.0, "{before} → {after}");
}
