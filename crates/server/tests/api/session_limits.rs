//! A session's own limits (additions to the contract): its idle TTL winning over its agent's,
//! a lifetime after which its sandbox stops for good, and resources its container really gets;
//! values out of range and GPUs are refused and change nothing.

use sandbox_agents_testkit::{docker_inspect, eventually, TestApp};
use serde_json::{json, Value};
use std::time::Duration;

async fn create(app: &TestApp, body: Value) -> (u16, Value) {
    app.post_json("/api/sessions", body).await
}

async fn session_count(app: &TestApp) -> i64 {
    sqlx::query_scalar("select count(*) from sessions")
        .fetch_one(&app.db)
        .await
        .unwrap()
}

#[tokio::test]
async fn a_sessions_own_limits_are_kept_shown_and_given_to_its_container() {
    let app = TestApp::builder().spawn().await;
    app.create_agent("limited", json!({})).await;
    let (status, s) = create(
        &app,
        json!({"agent_id": "limited", "idle_ttl_seconds": 120, "max_lifetime_seconds": 3600,
               "resources": {"cpus": 0.5, "memory_mb": 256, "gpus": 0}}),
    )
    .await;
    assert_eq!(status, 202, "{s}");
    assert_eq!(
        (&s["idle_ttl_seconds"], &s["max_lifetime_seconds"]),
        (&json!(120), &json!(3600))
    );
    assert_eq!(
        s["resources"],
        json!({"cpus": 0.5, "memory_mb": 256, "gpus": 0})
    );
    let created = time::OffsetDateTime::parse(
        s["created_at"].as_str().unwrap(),
        &time::format_description::well_known::Rfc3339,
    )
    .unwrap();
    let expires = time::OffsetDateTime::parse(
        s["expires_at"].as_str().unwrap(),
        &time::format_description::well_known::Rfc3339,
    )
    .unwrap();
    assert_eq!((expires - created).whole_seconds(), 3600);
    let id = s["id"].as_str().unwrap().to_owned();
    let running = app
        .wait_for_status(&id, "running", Duration::from_secs(60))
        .await;
    let container = running["container_id"].as_str().unwrap();
    assert_eq!(
        docker_inspect(container, "{{.HostConfig.NanoCpus}}"),
        "500000000"
    );
    assert_eq!(
        docker_inspect(container, "{{.HostConfig.Memory}}"),
        (256 * 1024 * 1024).to_string()
    );
    // Without resources of its own a session has the server's defaults.
    let plain = app.boot_session(json!({"agent_id": "limited"})).await;
    let s = app.session(&plain).await;
    assert_eq!(
        (&s["resources"], &s["expires_at"]),
        (&Value::Null, &Value::Null)
    );
    assert_eq!(
        docker_inspect(
            s["container_id"].as_str().unwrap(),
            "{{.HostConfig.NanoCpus}}"
        ),
        "1000000000"
    );
    app.delete_session(&plain).await;
    app.delete_session(&id).await;
}

#[tokio::test]
async fn limits_out_of_range_and_gpus_are_refused_and_change_nothing() {
    let app = TestApp::builder().spawn().await;
    app.create_agent("limited", json!({})).await;
    let before = session_count(&app).await;
    for (body, loc) in [
        (
            json!({"resources": {"gpus": 1}}),
            json!(["body", "resources", "gpus"]),
        ),
        (
            json!({"resources": {"cpus": 0}}),
            json!(["body", "resources", "cpus"]),
        ),
        (
            json!({"resources": {"cpus": 4096}}),
            json!(["body", "resources", "cpus"]),
        ),
        (
            json!({"resources": {"memory_mb": 8}}),
            json!(["body", "resources", "memory_mb"]),
        ),
        (
            json!({"resources": {"disk_mb": 8}}),
            json!(["body", "resources", "disk_mb"]),
        ),
        // Above the server's --sandbox-disk-mb (10240 by default): a session may only lower it.
        (
            json!({"resources": {"disk_mb": 10241}}),
            json!(["body", "resources", "disk_mb"]),
        ),
        (
            json!({"max_lifetime_seconds": 0}),
            json!(["body", "max_lifetime_seconds"]),
        ),
        (
            json!({"idle_ttl_seconds": -1}),
            json!(["body", "idle_ttl_seconds"]),
        ),
    ] {
        let mut b = body.clone();
        b["agent_id"] = json!("limited");
        let (status, r) = create(&app, b).await;
        assert_eq!(status, 422, "{body}: {r}");
        let locs: Vec<&Value> = r["detail"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| &d["loc"])
            .collect();
        assert!(locs.contains(&&loc), "{body}: {r}");
    }
    let gpu = create(
        &app,
        json!({"agent_id": "limited", "resources": {"gpus": 1}}),
    )
    .await
    .1;
    assert!(gpu.to_string().contains("no GPUs"), "{gpu}");
    // Unknown resource fields are refused too, rather than ignored.
    let (status, _) = create(
        &app,
        json!({"agent_id": "limited", "resources": {"tpus": 1}}),
    )
    .await;
    assert_eq!(status, 422);
    assert_eq!(session_count(&app).await, before);
}

#[tokio::test]
async fn a_session_past_its_lifetime_is_stopped_and_cannot_start_again() {
    let app = TestApp::builder().spawn().await;
    app.create_agent("brief", json!({})).await;
    // Long enough for the boot and a command on a loaded machine, short enough for a test.
    let (status, s) = create(
        &app,
        json!({"agent_id": "brief", "max_lifetime_seconds": 10}),
    )
    .await;
    assert_eq!(status, 202, "{s}");
    let id = s["id"].as_str().unwrap().to_owned();
    app.wait_for_status(&id, "running", Duration::from_secs(60))
        .await;
    assert_eq!(app.exec(&id, "echo kept > note.txt").await.0, 0);
    // Stopped on time by the process that created it (no sweep runs in tests).
    eventually("the lifetime to end", Duration::from_secs(40), async || {
        let s = app.session(&id).await;
        (s["status"] == "stopped").then_some(s)
    })
    .await;
    let s = app.session(&id).await;
    assert_eq!(s["stopped_reason"], "lifetime");
    assert!(app
        .events(&id)
        .await
        .iter()
        .any(|e| e["type"] == "session.status_stopped"));
    let (status, r) = app
        .post_json(&format!("/api/sessions/{id}/start"), Value::Null)
        .await;
    assert_eq!(status, 409);
    let detail = r["detail"].to_string();
    assert!(detail.contains("max_lifetime_seconds"), "{detail}");
    assert_eq!(app.session(&id).await["status"], "stopped");
    // A message cannot wake it either, and its files still read from the archive.
    let (status, r) = app
        .post_json(
            &format!("/api/sessions/{id}/messages"),
            json!({"prompt": "hi", "max_turns": null}),
        )
        .await;
    assert_eq!(status, 409);
    let detail = r["detail"].to_string();
    assert!(detail.contains("max_lifetime_seconds"), "{detail}");
    assert_eq!(
        sandbox_agents_testkit::files::content_ok(&app, &id, "note.txt").await,
        b"kept\n"
    );
    app.delete_session(&id).await;
}

#[tokio::test]
async fn an_asleep_session_past_its_lifetime_no_longer_wakes() {
    let app = TestApp::builder().spawn().await;
    app.create_agent("napper", json!({})).await;
    let id = app
        .boot_session(
            json!({"agent_id": "napper", "idle_ttl_seconds": 1, "max_lifetime_seconds": 4}),
        )
        .await;
    eventually("the idle release", Duration::from_secs(20), async || {
        app.sessions.release_idle().await.unwrap();
        (app.session(&id).await["stopped_reason"] == "idle").then_some(())
    })
    .await;
    eventually("the lifetime to end", Duration::from_secs(20), async || {
        (app.session(&id).await["stopped_reason"] == "lifetime").then_some(())
    })
    .await;
    let (status, _) = app
        .post_json(
            &format!("/api/sessions/{id}/messages"),
            json!({"prompt": "wake up", "max_turns": null}),
        )
        .await;
    assert_eq!(status, 409, "an asleep session would have woken");
    assert_eq!(app.session(&id).await["status"], "stopped");
    app.delete_session(&id).await;
}

#[tokio::test]
async fn a_sessions_own_idle_ttl_wins_over_its_agents() {
    let app = TestApp::builder().spawn().await;
    app.create_agent("keeper", json!({"idle_ttl_seconds": 0}))
        .await;
    let kept = app.boot_session(json!({"agent_id": "keeper"})).await;
    let brief = app
        .boot_session(json!({"agent_id": "keeper", "idle_ttl_seconds": 1}))
        .await;
    eventually(
        "the brief session's release",
        Duration::from_secs(30),
        async || {
            app.sessions.release_idle().await.unwrap();
            (app.session(&brief).await["status"] == "stopped").then_some(())
        },
    )
    .await;
    assert_eq!(app.session(&brief).await["stopped_reason"], "idle");
    assert_eq!(
        app.session(&kept).await["status"],
        "running",
        "the agent's 0 keeps it"
    );
    app.delete_session(&kept).await;
    app.delete_session(&brief).await;
}

#[tokio::test]
async fn a_sandbox_over_the_disk_limit_is_stopped_its_workspace_kept_and_others_left_alone() {
    let app = sandbox_agents_testkit::TestApp::builder()
        .with_config(|c| c.sandbox_disk_mb = 20)
        .spawn()
        .await;
    app.create_agent("writer", json!({})).await;
    let heavy = app.boot_session(json!({"agent_id": "writer"})).await;
    let light = app.boot_session(json!({"agent_id": "writer"})).await;
    assert_eq!(app.exec(&heavy, "echo kept > note.txt").await.0, 0);
    assert_eq!(
        app.exec(&light, "head -c 5000000 /dev/zero > five-mb.bin")
            .await
            .0,
        0
    );
    // 30 MiB outside the workspace: over the 20 MiB limit.
    let (code, _, err) = app
        .exec(&heavy, "head -c 31457280 /dev/zero > /tmp/thirty-mb.bin")
        .await;
    assert_eq!(code, 0, "{err}");
    // What the server's timer runs (test servers run none): one look at every sandbox.
    assert_eq!(app.sessions.enforce_disk_limit().await.unwrap(), 1);
    let s = app.session(&heavy).await;
    assert_eq!(s["stopped_reason"], "disk");
    let stopped: Vec<Value> = app
        .events(&heavy)
        .await
        .into_iter()
        .filter(|e| e["type"] == "session.status_stopped")
        .collect();
    assert_eq!(stopped.len(), 1);
    assert_eq!(stopped[0]["payload"]["reason"], "disk");
    // The look that stopped it saw the other one too, under the limit: still running, and a
    // second look stops nothing.
    assert_eq!(app.session(&light).await["status"], "running");
    assert_eq!(app.sessions.enforce_disk_limit().await.unwrap(), 0);
    // The workspace was archived; a start brings it back, without what was written elsewhere.
    let (status, r) = app
        .post_json(&format!("/api/sessions/{heavy}/start"), Value::Null)
        .await;
    assert_eq!(status, 200, "{r}");
    app.wait_for_status(&heavy, "running", Duration::from_secs(60))
        .await;
    let (code, out, _) = app
        .exec(
            &heavy,
            "cat note.txt; test -e /tmp/thirty-mb.bin && echo still there || true",
        )
        .await;
    assert_eq!((code, out.as_str()), (0, "kept\n"));
    app.delete_session(&heavy).await;
    app.delete_session(&light).await;
}

/// The workspace is a volume beside the container's layer: what is written there counts
/// toward the disk limit too, whatever permissions the sandbox puts on it.
#[tokio::test]
async fn what_a_sandbox_writes_to_its_workspace_counts_toward_the_disk_limit() {
    let app = sandbox_agents_testkit::TestApp::builder()
        .with_config(|c| c.sandbox_disk_mb = 20)
        .spawn()
        .await;
    app.create_agent("writer", json!({})).await;
    let id = app.boot_session(json!({"agent_id": "writer"})).await;
    // 15 MiB: under the limit.
    let (code, _, err) = app
        .exec(
            &id,
            "mkdir hidden && head -c 15728640 /dev/urandom > hidden/a.bin",
        )
        .await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(app.sessions.enforce_disk_limit().await.unwrap(), 0);
    assert_eq!(app.session(&id).await["status"], "running");
    // 30 MiB in all, in a directory nobody else may read: over it.
    let (code, _, err) = app
        .exec(
            &id,
            "head -c 15728640 /dev/urandom > hidden/b.bin && chmod 000 hidden",
        )
        .await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(app.sessions.enforce_disk_limit().await.unwrap(), 1);
    assert_eq!(app.session(&id).await["stopped_reason"], "disk");
    app.delete_session(&id).await;
}

/// A session's own disk limit holds with the server's turned off, and only for it.
#[tokio::test]
async fn a_sessions_own_disk_limit_holds_with_the_servers_off_and_for_it_alone() {
    let app = sandbox_agents_testkit::TestApp::builder()
        .with_config(|c| c.sandbox_disk_mb = 0)
        .with_pool(1)
        .spawn()
        .await;
    app.create_agent("own-disk", json!({})).await;
    // The limit is measured, not set on the container: such a session takes a pooled sandbox.
    assert_eq!(app.sessions.fill_pool().await.unwrap(), 1);
    let capped = app
        .boot_session(json!({"agent_id": "own-disk", "resources": {"disk_mb": 20}}))
        .await;
    let (pooled,): (i64,) = sqlx::query_as("select count(*) from sandbox_pool")
        .fetch_one(&app.db)
        .await
        .unwrap();
    assert_eq!(pooled, 0, "the session took the pooled sandbox");
    assert_eq!(app.session(&capped).await["resources"]["disk_mb"], 20);
    let free = app.boot_session(json!({"agent_id": "own-disk"})).await;
    // 30 MiB each, outside the workspace.
    for id in [&free, &capped] {
        let (code, _, err) = app
            .exec(id, "head -c 31457280 /dev/zero > /tmp/thirty-mb.bin")
            .await;
        assert_eq!(code, 0, "{err}");
    }
    assert_eq!(app.sessions.enforce_disk_limit().await.unwrap(), 1);
    assert_eq!(app.session(&capped).await["stopped_reason"], "disk");
    assert_eq!(app.session(&free).await["status"], "running");
    // With the server's limit off, the least is still 16 MiB.
    let (status, r) = app
        .post_json(
            "/api/sessions",
            json!({"agent_id": "own-disk", "resources": {"disk_mb": 15}}),
        )
        .await;
    assert_eq!(status, 422, "{r}");
    assert!(r.to_string().contains("disk_mb is 16 to "), "{r}");
    app.delete_session(&free).await;
    app.delete_session(&capped).await;
}
