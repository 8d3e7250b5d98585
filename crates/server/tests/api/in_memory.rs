//! The server on the in-memory backend (`sandbox::memory`): the lifecycle, admission, the
//! warm pool, the reconciler and runs, exercised through the API with no Docker at all. The
//! same wiring as every other test (`TestApp::builder()`), only `BackendSettings::Memory`;
//! each test takes a second or so, where its Docker twin takes many.

use sandbox_agents_fake_model::{FakeModel, Rule, Script};
use sandbox_agents_sandbox::memory::MemoryBackend;
use sandbox_agents_sandbox::SandboxSpec;
use sandbox_agents_testkit::runs::{start_run, test_agent, types, wait_for_run};
use sandbox_agents_testkit::{eventually, TestApp, BOOT};
use serde_json::{json, Value};
use std::collections::BTreeMap;

/// A fresh in-memory compute plane; each test server of a test shares it, as the processes
/// of a deployment share one Docker Engine.
fn plane() -> MemoryBackend {
    MemoryBackend::new("in-memory-tests")
}

fn sandbox_id(session: &Value) -> String {
    session["container_id"]
        .as_str()
        .unwrap_or_else(|| panic!("a sandbox: {session}"))
        .to_owned()
}

#[tokio::test]
async fn a_session_boots_runs_commands_stops_starts_with_its_workspace_and_is_deleted() {
    let plane = plane();
    let app = TestApp::builder().with_memory_backend(&plane).spawn().await;
    let backend = app.sessions.backend().clone();
    let backends = app.get_json("/api/backends").await.1;
    assert_eq!(backends[0]["name"], "memory", "{backends}");

    let id = app.running_session("mem", json!({})).await;
    let first = sandbox_id(&app.session(&id).await);
    assert_eq!(app.session(&id).await["backend"], "memory");
    let (code, out, _) = app.exec(&id, "echo kept > note.txt && cat note.txt").await;
    assert_eq!((code, out.as_str()), (0, "kept\n"));

    app.stop_session(&id).await;
    let stopped = app.wait_for_status(&id, "stopped", BOOT).await;
    assert!(stopped["container_id"].is_null(), "{stopped}");
    assert!(
        backend.list().await.unwrap().is_empty(),
        "the stop removed its sandbox"
    );

    app.start_session(&id).await;
    let running = app.wait_for_status(&id, "running", BOOT).await;
    assert_ne!(sandbox_id(&running), first, "a start boots a new sandbox");
    let (code, out, _) = app.exec(&id, "cat note.txt").await;
    assert_eq!(
        (code, out.as_str()),
        (0, "kept\n"),
        "the workspace came back"
    );

    app.delete_session(&id).await;
    eventually("the sandbox to go", BOOT, async || {
        backend.list().await.unwrap().is_empty().then_some(())
    })
    .await;
}

#[tokio::test]
async fn a_boot_over_the_sandbox_limit_waits_queued_until_a_stop_frees_room() {
    let plane = plane();
    let app = TestApp::builder()
        .with_memory_backend(&plane)
        .with_config(|c| c.max_sandboxes = Some(1))
        .spawn()
        .await;
    let backend = app.sessions.backend().clone();
    let first = app.running_session("limited", json!({})).await;
    let s = app
        .create_session(json!({"agent_id": "limited", "title": "second"}))
        .await;
    let second = s["id"].as_str().unwrap().to_owned();
    let queued = eventually("the second boot to queue", BOOT, async || {
        app.events(&second)
            .await
            .into_iter()
            .find(|e| e["type"] == "session.queued")
    })
    .await;
    assert_eq!(queued["payload"]["limit"], "deployment", "{queued}");
    assert_eq!(app.session(&second).await["status"], "provisioning");
    assert_eq!(
        backend.list().await.unwrap().len(),
        1,
        "a queued boot takes no sandbox"
    );

    app.stop_session(&first).await;
    app.wait_for_status(&second, "running", BOOT).await;
    assert_eq!(backend.list().await.unwrap().len(), 1);
}

#[tokio::test]
async fn a_boot_claims_a_pooled_sandbox() {
    let plane = plane();
    let app = TestApp::builder()
        .with_memory_backend(&plane)
        .with_pool(1)
        .spawn()
        .await;
    let backend = app.sessions.backend().clone();
    app.sessions.fill_pool().await.unwrap();
    let pooled = backend.list().await.unwrap();
    assert_eq!(pooled.len(), 1, "{pooled:?}");
    assert!(pooled[0].pool.is_some() && pooled[0].session.is_none());

    let id = app.running_session("pooled", json!({})).await;
    assert_eq!(sandbox_id(&app.session(&id).await), pooled[0].id);
    let listed = backend.list().await.unwrap();
    let claimed = listed.iter().find(|s| s.id == pooled[0].id).unwrap();
    assert_eq!(claimed.name, format!("sa-{id}"), "named after its session");
}

#[tokio::test]
async fn a_restart_adopts_live_sandboxes_stops_lost_ones_and_removes_orphans() {
    let plane = plane();
    let app = TestApp::builder().with_memory_backend(&plane).spawn().await;
    let backend = app.sessions.backend().clone();
    let kept = app.running_session("restarted", json!({})).await;
    let lost = app
        .boot_session(json!({"agent_id": "restarted", "title": "lost"}))
        .await;
    let (code, _, _) = app.exec(&lost, "echo before > work.txt").await;
    assert_eq!(code, 0);
    let kept_sandbox = sandbox_id(&app.session(&kept).await);
    let lost_sandbox = sandbox_id(&app.session(&lost).await);
    let (db, options) = (app.db.clone(), app.db_options.clone());
    app.stop_keeping_sandboxes().await;

    // While no server runs: one sandbox exits, and one appears that no session owns.
    backend
        .stop(&lost_sandbox, std::time::Duration::ZERO)
        .await
        .unwrap();
    let orphan = backend
        .create(&SandboxSpec {
            session: uuid::Uuid::new_v4().to_string(),
            image: sandbox_agents_sandbox::memory::BASE_IMAGE.into(),
            env: BTreeMap::new(),
            exposed_ports: vec![],
            limits: Default::default(),
            runtime_class: None,
        })
        .await
        .unwrap();

    let app = TestApp::builder()
        .with_db(db, options)
        .with_memory_backend(&plane)
        .spawn()
        .await;
    app.sessions.reconcile_on_start().await.unwrap();
    let s = app.session(&kept).await;
    assert_eq!(
        (s["status"].as_str(), sandbox_id(&s)),
        (Some("running"), kept_sandbox.clone())
    );
    let s = app.session(&lost).await;
    assert_eq!(
        (&s["status"], &s["stopped_reason"]),
        (&json!("stopped"), &json!("restart")),
        "{s}"
    );
    let ids: Vec<String> = backend
        .list()
        .await
        .unwrap()
        .into_iter()
        .map(|s| s.id)
        .collect();
    assert_eq!(
        ids,
        [kept_sandbox],
        "the lost and the orphan sandboxes are gone ({orphan:?})"
    );

    // The exited sandbox's workspace was archived: the next start has it.
    app.start_session(&lost).await;
    app.wait_for_status(&lost, "running", BOOT).await;
    assert_eq!(app.exec(&lost, "cat work.txt").await.1, "before\n");
}

#[tokio::test]
async fn a_turn_runs_its_shell_tool_in_the_in_memory_sandbox() {
    let fake = FakeModel::start(Script::new([
        Rule::when()
            .last_tool_result_contains("exit code: 0")
            .reply_text("Done."),
        Rule::when()
            .last_user_contains("write")
            .reply_tool_call("shell", json!({"command": "echo hi > out.txt"})),
    ]));
    let plane = plane();
    let app = TestApp::builder()
        .with_memory_backend(&plane)
        .with_model_proxy(&fake.root_url())
        .spawn()
        .await;
    let id = app.running_session("runner", test_agent()).await;
    let run = start_run(&app, &id, "write hi to out.txt", Value::Null).await;
    let evs = wait_for_run(&app, &id, &run).await;
    assert_eq!(
        types(&evs),
        [
            "user.message",
            "agent.tool_use",
            "agent.tool_result",
            "agent.message",
            "session.status_idle"
        ]
    );
    assert_eq!(app.exec(&id, "cat out.txt").await.1, "hi\n");
}
