//! The warm pool of started sandboxes, on real Docker: sessions boot from it, it refills,
//! concurrent boots never share a sandbox, a restart keeps or trims it without leaking, and
//! the environment reaches every command whether or not a sandbox came from the pool.

use sandbox_agents_fake_model::{FakeModel, Rule, Script};
use sandbox_agents_testkit::{eventually, TestApp};
use serde_json::{json, Value};
use std::collections::HashSet;
use std::time::Duration;

const BOOT: Duration = Duration::from_secs(60);
/// Starting a pooled sandbox on a busy host.
const FILL: Duration = Duration::from_secs(90);

/// The pool's ready containers, oldest first.
async fn pooled(app: &TestApp) -> Vec<String> {
    sqlx::query_scalar(
        "select sandbox_id from sandbox_pool where sandbox_id is not null order by created_at",
    )
    .fetch_all(&app.db)
    .await
    .unwrap()
}

/// Polls until the pool holds exactly `n` ready containers and none is being created.
async fn pool_settles_at(app: &TestApp, n: usize) -> Vec<String> {
    eventually(&format!("the pool to settle at {n}"), FILL, async || {
        let (all,): (i64,) = sqlx::query_as("select count(*) from sandbox_pool")
            .fetch_one(&app.db)
            .await
            .unwrap();
        let ready = pooled(app).await;
        if ready.len() == n && all as usize == n {
            Ok(ready)
        } else {
            Err(format!("{ready:?} ready of {all}"))
        }
    })
    .await
}

/// This deployment's containers: (id, pool label set, session label set).
async fn containers(app: &TestApp) -> Vec<(String, bool, bool)> {
    app.sessions
        .backend()
        .list()
        .await
        .unwrap()
        .into_iter()
        .map(|c| (c.id, c.pool.is_some(), c.session.is_some()))
        .collect()
}

async fn container_of(app: &TestApp, id: &str) -> String {
    app.session(id).await["container_id"]
        .as_str()
        .unwrap()
        .to_owned()
}

fn greeting_agent() -> Value {
    json!({"manifest": {
        "entries": {"brief.md": {"kind": "file", "content": "# pooled\n"}},
        "environment": {"GREETING": "hello from the manifest", "SECOND": "two"}}})
}

#[tokio::test]
async fn a_session_boots_from_the_pool_with_its_manifest_and_environment_and_the_pool_refills() {
    let app = TestApp::builder()
        .with_pool(1)
        .with_pool_worker()
        .spawn()
        .await;
    app.create_agent("pooled", greeting_agent()).await;
    let waiting = pool_settles_at(&app, 1).await;

    let id = app.boot_session(json!({"agent_id": "pooled"})).await;
    assert_eq!(
        container_of(&app, &id).await,
        waiting[0],
        "the session took the pooled sandbox"
    );
    // Named after its session beside the boot, not before it runs.
    let wanted = format!("sa-{id}");
    eventually(
        "the pooled sandbox to be named after its session",
        BOOT,
        async || {
            let listed = app.sessions.backend().list().await.unwrap();
            let named = listed.iter().find(|c| c.id == waiting[0]).unwrap();
            (named.name == wanted)
                .then_some(())
                .ok_or(named.name.clone())
        },
    )
    .await;
    assert_eq!(
        app.exec(&id, "cat brief.md; echo \"$GREETING/$SECOND\"; id -u; pwd")
            .await,
        (
            0,
            "# pooled\nhello from the manifest/two\n1000\n/workspace\n".into(),
            String::new()
        )
    );
    // The same hardening as a dedicated sandbox: no capabilities, no new privileges.
    let (_, status, _) = app
        .exec(&id, "grep -E '^(CapEff|NoNewPrivs)' /proc/self/status")
        .await;
    assert_eq!(status, "CapEff:\t0000000000000000\nNoNewPrivs:\t1\n");

    let refilled = pool_settles_at(&app, 1).await;
    assert_ne!(refilled, waiting, "a new sandbox replaced the one taken");
    app.stop().await;
}

#[tokio::test]
async fn concurrent_boots_in_two_processes_never_share_a_sandbox() {
    let a = TestApp::builder()
        .with_pool(2)
        .with_pool_worker()
        .spawn()
        .await;
    let b = TestApp::builder()
        .with_db(a.db.clone(), a.db_options.clone())
        .with_pool(2)
        .spawn()
        .await;
    b.sessions.start_pool();
    a.create_agent("racer", json!({})).await;
    let waiting: HashSet<String> = pool_settles_at(&a, 2).await.into_iter().collect();

    let creates = (0..6).map(|i| {
        let app = if i % 2 == 0 { &a } else { &b };
        app.create_session(json!({"agent_id": "racer"}))
    });
    let ids: Vec<String> = futures::future::join_all(creates)
        .await
        .into_iter()
        .map(|s| s["id"].as_str().unwrap().to_owned())
        .collect();
    let mut taken = HashSet::new();
    for id in &ids {
        a.wait_for_status(id, "running", BOOT).await;
        let c = container_of(&a, id).await;
        assert!(taken.insert(c), "two sessions got the same sandbox");
    }
    assert!(
        waiting.iter().all(|c| taken.contains(c)),
        "both pooled sandboxes were used: {waiting:?} ⊄ {taken:?}"
    );
    // The hostnames differ too: really six sandboxes, each answering for its own session.
    let mut hosts = HashSet::new();
    for id in &ids {
        assert!(hosts.insert(a.exec(id, "hostname").await.1));
    }
    b.stop().await;
    a.stop().await;
}

#[tokio::test]
async fn with_keep_warm_pool_a_restart_keeps_the_pool_trims_it_to_the_new_size_and_disabling_it_removes_it(
) {
    let first = TestApp::builder()
        .with_pool(2)
        .with_config(|c| c.keep_warm_pool = true)
        .spawn()
        .await;
    first.sessions.start_pool();
    first.create_agent("survivor", json!({})).await;
    let waiting = pool_settles_at(&first, 2).await;
    let id = first.boot_session(json!({"agent_id": "survivor"})).await;
    let session_container = container_of(&first, &id).await;
    assert!(waiting.contains(&session_container));
    let left = pool_settles_at(&first, 2).await;
    // The process stops: its sandboxes (pooled ones included, as asked) stay.
    first.shutdown.cancel();
    first.sessions.stop_pool().await;
    let (db, options) = (first.db.clone(), first.db_options.clone());

    // Restarted with the same size: everything is adopted, nothing is added or removed.
    let second = TestApp::builder()
        .with_db(db.clone(), options.clone())
        .with_pool(2)
        .spawn()
        .await;
    second.sessions.reconcile_on_start().await.unwrap();
    assert_eq!(second.sessions.fill_pool().await.unwrap(), 0);
    assert_eq!(pooled(&second).await, left, "the pool was kept");
    assert_eq!(second.session(&id).await["status"], "running");
    assert_eq!(containers(&second).await.len(), 3);
    assert_eq!(second.exec(&id, "echo still here").await.1, "still here\n");
    second.shutdown.cancel();

    // Restarted with a smaller pool: the surplus goes, the oldest stays.
    let third = TestApp::builder()
        .with_db(db.clone(), options.clone())
        .with_pool(1)
        .spawn()
        .await;
    third.sessions.reconcile_on_start().await.unwrap();
    assert_eq!(pooled(&third).await, left[..1]);
    assert_eq!(containers(&third).await.len(), 2);
    third.shutdown.cancel();

    // Restarted without a pool: only the session's sandbox is left, and it keeps working.
    let fourth = TestApp::builder().with_db(db, options).spawn().await;
    fourth.sessions.reconcile_on_start().await.unwrap();
    assert!(pooled(&fourth).await.is_empty());
    assert_eq!(
        containers(&fourth).await,
        [(session_container, true, false)],
        "the session's sandbox (pooled, so labelled as such) is all that is left"
    );
    assert_eq!(fourth.exec(&id, "echo still here").await.1, "still here\n");
    fourth.stop().await;
}

#[tokio::test]
async fn the_last_process_to_stop_removes_the_pool_and_one_stopping_beside_another_leaves_it() {
    let a = TestApp::builder()
        .with_pool(1)
        .with_pool_worker()
        .spawn()
        .await;
    let waiting = pool_settles_at(&a, 1).await;
    let b = TestApp::builder()
        .with_db(a.db.clone(), a.db_options.clone())
        .with_pool(1)
        .spawn()
        .await;
    b.sessions.worker_key().await.unwrap();
    b.sessions.start_pool();

    // Another process is alive: the pool is its pool too, and stays. (`a` is dropped last:
    // a test server's drop removes the whole deployment's containers.)
    a.shutdown.cancel();
    tokio::time::timeout(FILL, a.sessions.stop_pool())
        .await
        .expect("the pool stopped in time");
    assert_eq!(
        pooled(&b).await,
        waiting,
        "the pool was left to the live process"
    );
    assert!(
        containers(&b)
            .await
            .iter()
            .any(|(id, pool, _)| *pool && waiting.contains(id)),
        "the pooled sandbox still runs"
    );

    // The deployment's last process stops: nobody would use the pool, so it goes.
    b.shutdown.cancel();
    tokio::time::timeout(FILL, b.sessions.stop_pool())
        .await
        .expect("the pool stopped in time");
    assert!(pooled(&b).await.is_empty(), "no pool rows are left");
    assert!(
        containers(&b).await.iter().all(|(_, pool, _)| !pool),
        "no pooled sandbox is left running: {:?}",
        containers(&b).await
    );
    b.stop().await;
    drop(a);
}

#[tokio::test]
async fn a_pooled_sandbox_nobody_owns_is_removed_and_a_dead_one_is_replaced() {
    let app = TestApp::builder()
        .with_pool(1)
        .with_pool_worker()
        .spawn()
        .await;
    let waiting = pool_settles_at(&app, 1).await;
    // A crash between creating a pooled sandbox and recording it: the row is gone.
    sqlx::query("delete from sandbox_pool")
        .execute(&app.db)
        .await
        .unwrap();
    app.sessions.sweep_orphans().await.unwrap();
    assert!(
        app.sessions
            .backend()
            .inspect(&waiting[0])
            .await
            .unwrap()
            .is_none(),
        "the unowned pooled sandbox was removed"
    );
    let replaced = pool_settles_at(&app, 1).await;
    // A pooled sandbox that died (the Engine restarted, say) is dropped and replaced.
    app.sessions.backend().remove(&replaced[0]).await.unwrap();
    app.sessions.sweep_orphans().await.unwrap();
    let again = pool_settles_at(&app, 1).await;
    assert_ne!(again, replaced);
    app.stop().await;
}

#[tokio::test]
async fn sessions_that_publish_ports_or_use_another_image_bypass_the_pool() {
    let app = TestApp::builder()
        .with_pool(1)
        .with_pool_worker()
        .spawn()
        .await;
    app.create_agent("ported", json!({"exposed_ports": [8080]}))
        .await;
    let waiting = pool_settles_at(&app, 1).await;
    let id = app.boot_session(json!({"agent_id": "ported"})).await;
    assert!(!waiting.contains(&container_of(&app, &id).await));
    assert_eq!(pooled(&app).await, waiting, "the pool was left alone");
    app.stop().await;
}

#[tokio::test]
async fn without_a_pool_a_session_gets_its_own_labelled_sandbox_and_its_environment() {
    let app = TestApp::builder().spawn().await;
    app.create_agent("plain", greeting_agent()).await;
    let id = app.boot_session(json!({"agent_id": "plain"})).await;
    assert!(pooled(&app).await.is_empty());
    let c = container_of(&app, &id).await;
    assert_eq!(containers(&app).await, [(c, false, true)]);
    assert_eq!(
        app.exec(&id, "echo \"$GREETING/$SECOND\"").await.1,
        "hello from the manifest/two\n"
    );
}

#[tokio::test]
async fn the_runs_shell_tool_sees_the_manifest_environment() {
    let fake = FakeModel::start(Script::new([
        Rule::when()
            .last_tool_result_contains("exit code")
            .reply_text("done"),
        Rule::when()
            .last_user_contains("greet")
            .reply_tool_call("shell", json!({"command": "echo \"$GREETING\""})),
    ]));
    let app = TestApp::builder()
        .with_model_proxy(&fake.root_url())
        .spawn()
        .await;
    app.create_agent("greeter", greeting_agent()).await;
    let id = app.boot_session(json!({"agent_id": "greeter"})).await;
    let r = app
        .http
        .post(app.url(&format!("/api/sessions/{id}/messages")))
        .json(&json!({"prompt": "greet", "max_turns": null}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 202);
    let output = eventually("the tool's result", BOOT, async || {
        let evs = app.events(&id).await;
        match evs.iter().find(|e| e["type"] == "agent.tool_result") {
            Some(e) => Ok(e["payload"]["output"].as_str().unwrap().to_owned()),
            None => Err(format!("no tool result: {evs:?}")),
        }
    })
    .await;
    assert!(
        output.contains("stdout:\nhello from the manifest\n"),
        "{output}"
    );
}

#[tokio::test]
async fn the_pool_grows_to_a_burst_it_has_seen_within_its_maximum_and_shrinks_when_it_is_past() {
    let app = sandbox_agents_testkit::TestApp::builder()
        .with_pool(1)
        .with_config(|c| c.warm_pool_max = 3)
        .spawn()
        .await;
    app.sessions.start_pool();
    app.create_agent("bursty", json!({})).await;
    pool_settles_at(&app, 1).await;
    assert_eq!(app.sessions.pool_target().await.unwrap(), 1);

    // A burst of four: one from the pool, three the slow way; the pool has seen it coming.
    let ids: Vec<String> =
        futures::future::join_all((0..4).map(|_| app.boot_session(json!({"agent_id": "bursty"}))))
            .await;
    assert_eq!(ids.len(), 4);
    assert_eq!(
        app.sessions.pool_target().await.unwrap(),
        3,
        "four boots in a minute, capped at the maximum"
    );
    pool_settles_at(&app, 3).await;
    let hit = app.boot_session(json!({"agent_id": "bursty"})).await;
    let container = container_of(&app, &hit).await;
    let listed = app.sessions.backend().list().await.unwrap();
    assert!(
        listed.iter().any(|c| c.id == container && c.pool.is_some()),
        "the next boot took a pooled sandbox"
    );
    pool_settles_at(&app, 3).await;

    // Ten minutes later the burst is forgotten: the sweep trims the pool to its size.
    sqlx::query("update pool_demand set at = at - interval '11 minutes'")
        .execute(&app.db)
        .await
        .unwrap();
    assert_eq!(app.sessions.pool_target().await.unwrap(), 1);
    app.sessions.sweep_orphans().await.unwrap();
    pool_settles_at(&app, 1).await;
    let (left,): (i64,) = sqlx::query_as("select count(*) from pool_demand")
        .fetch_one(&app.db)
        .await
        .unwrap();
    assert_eq!(left, 0, "old demand is pruned");
    app.stop().await;
}
