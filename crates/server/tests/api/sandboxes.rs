//! Sessions on real Docker sandboxes.

use sandbox_agents_sandbox::SandboxSpec;
use sandbox_agents_testkit::{test_image, TestApp};
use serde_json::{json, Value};
use std::time::Duration;

const BOOT: Duration = Duration::from_secs(60);

#[tokio::test]
async fn a_session_boots_with_its_manifest_and_runs_commands_as_the_sandbox_user() {
    let app = TestApp::builder().spawn().await;
    let id = app
        .running_session(
            "booter",
            json!({"manifest": {"entries": {
        "brief.md": {"kind": "file", "content": "# Northwind\n"},
        "docs/deep/note.txt": {"kind": "file", "content": "deep"},
        "output": {"kind": "dir"}}, "environment": {"GREETING": "hello"}}}),
        )
        .await;
    let s = app.session(&id).await;
    assert!(s["container_id"].is_string());
    assert_eq!(s["workdir"], "/workspace");
    assert_eq!(s["backend"], "docker");
    assert_eq!(
        app.event_types(&id).await,
        ["session.created", "session.status_running"]
    );

    assert_eq!(
        app.exec(&id, "cat brief.md").await,
        (0, "# Northwind\n".into(), String::new())
    );
    let (code, out, _) = app
        .exec(
            &id,
            "stat -c '%U %F' output docs/deep/note.txt; id -u; echo $GREETING",
        )
        .await;
    assert_eq!(code, 0);
    assert_eq!(
        out,
        "sandbox directory\nsandbox regular file\n1000\nhello\n"
    );
    let (code, _, err) = app.exec(&id, "echo oops >&2; exit 3").await;
    assert_eq!((code, err.as_str()), (3, "oops\n"));
    app.http
        .delete(app.url(&format!("/api/sessions/{id}")))
        .send()
        .await
        .unwrap();
}

#[tokio::test]
async fn an_exec_timeout_kills_the_command_not_the_sandbox() {
    let app = TestApp::builder().spawn().await;
    let id = app.running_session("sleeper", json!({})).await;
    let r: Value = app
        .http
        .post(app.url(&format!("/api/sessions/{id}/exec")))
        .json(&json!({"command": "sleep 300 & sleep 301", "timeout": 1}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(r["exit_code"], 124);
    assert!(r["stderr"].as_str().unwrap().contains("timed out"));
    let (code, out, _) = app.exec(&id, "pgrep -f 'sleep 30[01]' || echo none").await;
    assert_eq!(
        (code, out.as_str()),
        (0, "none\n"),
        "the whole tree was killed"
    );
    for bad in [json!(0), json!(601)] {
        let r = app
            .http
            .post(app.url(&format!("/api/sessions/{id}/exec")))
            .json(&json!({"command": "true", "timeout": bad}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 422);
    }
    app.http
        .delete(app.url(&format!("/api/sessions/{id}")))
        .send()
        .await
        .unwrap();
}

#[tokio::test]
async fn stop_archives_the_workspace_and_start_restores_it_byte_for_byte() {
    let app = TestApp::builder().spawn().await;
    let id = app.running_session("sleepy", json!({})).await;
    let (_, sum, _) = app.exec(&id, "head -c 300000 /dev/urandom > data.bin && mkdir -p a/b && echo x > a/b/c && sha256sum data.bin a/b/c").await;
    let r = app
        .http
        .post(app.url(&format!("/api/sessions/{id}/stop")))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let s: Value = r.json().await.unwrap();
    assert_eq!(s["status"], "stopped");
    assert_eq!(s["stopped_reason"], "requested");
    assert!(s["container_id"].is_null());
    let r = app
        .http
        .post(app.url(&format!("/api/sessions/{id}/exec")))
        .json(&json!({"command": "true", "timeout": null}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 409, "exec on a stopped session");

    let r = app
        .http
        .post(app.url(&format!("/api/sessions/{id}/start")))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    app.wait_for_status(&id, "running", BOOT).await;
    assert_eq!(app.exec(&id, "sha256sum data.bin a/b/c").await.1, sum);
    assert_eq!(
        app.event_types(&id).await,
        [
            "session.created",
            "session.status_running",
            "session.status_stopped",
            "session.status_running"
        ]
    );
    // Start on a running session changes nothing.
    let s: Value = app
        .http
        .post(app.url(&format!("/api/sessions/{id}/start")))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(s["status"], "running");
    app.http
        .delete(app.url(&format!("/api/sessions/{id}")))
        .send()
        .await
        .unwrap();
}

#[tokio::test]
async fn a_failed_boot_records_the_error_with_no_run_id() {
    let app = TestApp::builder().spawn().await;
    app.create_agent("broken", json!({"image": "sandbox-agents-no-such-image:0"}))
        .await;
    let s = app.create_session(json!({"agent_id": "broken"})).await;
    let id = s["id"].as_str().unwrap();
    let s = app.wait_for_status(id, "error", BOOT).await;
    assert!(
        s["error"]
            .as_str()
            .unwrap()
            .contains("sandbox-agents-no-such-image"),
        "{s}"
    );
    let page: Vec<Value> = app
        .http
        .get(app.url(&format!("/api/sessions/{id}/events")))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let last = page.last().unwrap();
    assert_eq!(last["type"], "session.status_error");
    assert!(last["run_id"].is_null());
    assert!(last["payload"]["error"]
        .as_str()
        .unwrap()
        .contains("no-such-image"));
}

#[tokio::test]
async fn deleting_a_session_removes_its_container_and_a_second_delete_is_a_404() {
    let app = TestApp::builder().spawn().await;
    let id = app.running_session("doomed", json!({})).await;
    let container = app.session(&id).await["container_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let r = app
        .http
        .delete(app.url(&format!("/api/sessions/{id}")))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 204);
    assert!(
        app.runtime_backend_inspect(&container).await.is_none(),
        "the container is gone"
    );
    assert_eq!(
        app.http
            .get(app.url(&format!("/api/sessions/{id}")))
            .send()
            .await
            .unwrap()
            .status(),
        404
    );
    assert_eq!(
        app.http
            .delete(app.url(&format!("/api/sessions/{id}")))
            .send()
            .await
            .unwrap()
            .status(),
        404
    );
}

#[tokio::test]
async fn an_idle_sandbox_is_released_and_wakes_with_its_workspace() {
    let app = TestApp::builder().spawn().await;
    let id = app
        .running_session("idler", json!({"idle_ttl_seconds": 60}))
        .await;
    app.exec(&id, "echo kept > kept.txt").await;
    assert_eq!(
        app.sessions.release_idle().await.unwrap(),
        0,
        "not idle long enough yet"
    );
    sqlx::query(
        "update sessions set last_used_at = now() - interval '2 minutes' where id = $1::uuid",
    )
    .bind(&id)
    .execute(&app.db)
    .await
    .unwrap();
    assert_eq!(app.sessions.release_idle().await.unwrap(), 1);
    let s = app.session(&id).await;
    assert_eq!(
        (s["status"].as_str(), s["stopped_reason"].as_str()),
        (Some("stopped"), Some("idle"))
    );
    app.start_session(&id).await;
    app.wait_for_status(&id, "running", BOOT).await;
    assert_eq!(app.exec(&id, "cat kept.txt").await.1, "kept\n");
    app.http
        .delete(app.url(&format!("/api/sessions/{id}")))
        .send()
        .await
        .unwrap();
}

#[tokio::test]
async fn an_idle_stop_of_a_session_used_since_the_reaper_chose_it_keeps_it_running() {
    let app = TestApp::builder().spawn().await;
    let id = app
        .running_session("busy", json!({"idle_ttl_seconds": 60}))
        .await;
    // The reaper's query saw it expired, then an exec (here: the boot) moved its clock.
    let sid = sandbox_agents_domain::SessionId::parse(&id).unwrap();
    let s = app
        .sessions
        .stop(
            None,
            sid,
            sandbox_agents_domain::session::StoppedReason::Idle,
        )
        .await
        .unwrap();
    assert_eq!(
        s.status,
        sandbox_agents_domain::session::SessionStatus::Running
    );
    assert_eq!(app.session(&id).await["status"], "running");
    app.http
        .delete(app.url(&format!("/api/sessions/{id}")))
        .send()
        .await
        .unwrap();
}

#[tokio::test]
async fn an_agent_with_ttl_0_is_never_released() {
    let app = TestApp::builder().spawn().await;
    let id = app
        .running_session("forever", json!({"idle_ttl_seconds": 0}))
        .await;
    sqlx::query(
        "update sessions set last_used_at = now() - interval '30 days' where id = $1::uuid",
    )
    .bind(&id)
    .execute(&app.db)
    .await
    .unwrap();
    assert_eq!(app.sessions.release_idle().await.unwrap(), 0);
    app.http
        .delete(app.url(&format!("/api/sessions/{id}")))
        .send()
        .await
        .unwrap();
}

#[tokio::test]
async fn restart_marks_lost_sandboxes_stopped_and_removes_orphans() {
    let app = TestApp::builder().spawn().await;
    let lost = app.running_session("lost", json!({})).await;
    let kept = app.create_session(json!({"agent_id": "lost"})).await["id"]
        .as_str()
        .unwrap()
        .to_owned();
    app.wait_for_status(&kept, "running", BOOT).await;
    let container = app.session(&lost).await["container_id"]
        .as_str()
        .unwrap()
        .to_owned();
    app.runtime_backend_remove(&container).await;
    let orphan = app
        .runtime_backend_create(&uuid::Uuid::now_v7().to_string())
        .await;

    app.sessions.reconcile_on_start().await.unwrap();
    let s = app.session(&lost).await;
    assert_eq!(
        (s["status"].as_str(), s["stopped_reason"].as_str()),
        (Some("stopped"), Some("restart"))
    );
    assert_eq!(
        app.session(&kept).await["status"],
        "running",
        "a surviving sandbox is adopted"
    );
    assert!(
        app.runtime_backend_inspect(&orphan).await.is_none(),
        "the orphan was removed"
    );
    for id in [lost, kept] {
        app.http
            .delete(app.url(&format!("/api/sessions/{id}")))
            .send()
            .await
            .unwrap();
    }
}

#[tokio::test]
async fn bad_session_requests_change_nothing() {
    let app = TestApp::builder().spawn().await;
    app.create_agent("shelved", json!({})).await;
    app.http
        .post(app.url("/api/agents/shelved/archive"))
        .send()
        .await
        .unwrap();
    let cases = [
        (json!({"agent_id": "nobody"}), 404),
        (json!({"agent_id": "shelved"}), 409),
        (json!({"agent_id": "shelved", "metadata": null}), 422),
        (
            json!({"agent_id": "shelved", "from_snapshot_id": "nope"}),
            409,
        ),
    ];
    for (body, status) in cases {
        let r = app
            .http
            .post(app.url("/api/sessions"))
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), status, "{body}");
        assert!(r.json::<Value>().await.unwrap()["detail"].is_string() || status == 422);
    }
    app.create_agent("active", json!({})).await;
    for body in [
        json!({"agent_id": "active", "manifest": {"entries": {"r": {"kind": "git_repo", "repo": "o/r", "ref": "--upload-pack=x"}}}}),
        json!({"agent_id": "active", "manifest": {"entries": {"h": {"kind": "local_dir", "src": "/etc"}}}}),
        json!({"agent_id": "active", "manifest": {"entries": {"../x": {"kind": "file", "content": ""}}}}),
    ] {
        let r = app
            .http
            .post(app.url("/api/sessions"))
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 422, "{body}");
    }
    let r = app
        .http
        .post(app.url("/api/sessions"))
        .json(&json!({"agent_id": "active", "from_snapshot_id": uuid::Uuid::now_v7()}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    let r = app.http.get(app.url("/api/sessions")).send().await.unwrap();
    assert_eq!(r.headers()["x-total-count"], "0", "nothing was created");
}

trait BackendHelpers {
    async fn runtime_backend_inspect(
        &self,
        id: &str,
    ) -> Option<sandbox_agents_sandbox::SandboxStatus>;
    async fn runtime_backend_remove(&self, id: &str);
    async fn runtime_backend_create(&self, session: &str) -> String;
}

impl BackendHelpers for TestApp {
    async fn runtime_backend_inspect(
        &self,
        id: &str,
    ) -> Option<sandbox_agents_sandbox::SandboxStatus> {
        self.sessions.backend().inspect(id).await.unwrap()
    }

    async fn runtime_backend_remove(&self, id: &str) {
        self.sessions.backend().remove(id).await.unwrap()
    }

    async fn runtime_backend_create(&self, session: &str) -> String {
        let spec = SandboxSpec {
            session: session.to_owned(),
            image: test_image(),
            env: Default::default(),
            exposed_ports: vec![],
            limits: Default::default(),
            runtime_class: None,
        };
        self.sessions.backend().create(&spec).await.unwrap().id
    }
}

#[tokio::test]
async fn snapshots_restore_in_place_and_fork_with_installed_files() {
    let app = TestApp::builder().spawn().await;
    let id = app.running_session("snapper", json!({})).await;
    app.exec(
        &id,
        "echo v1 > notes.txt && echo pkg > /home/sandbox/installed",
    )
    .await;
    let r = app
        .http
        .post(app.url(&format!("/api/sessions/{id}/snapshots")))
        .json(&json!({"label": "before"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let snap: Value = r.json().await.unwrap();
    assert_eq!(snap["label"], "before");
    assert_eq!(snap["session_id"], id.as_str());
    assert!(snap["size_bytes"].as_i64().unwrap() > 0);
    let listed: Vec<Value> = app
        .http
        .get(app.url(&format!("/api/sessions/{id}/snapshots")))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(listed.len(), 1);

    app.exec(
        &id,
        "echo v2 > notes.txt && rm /home/sandbox/installed && echo new > extra.txt",
    )
    .await;
    let snap_id = snap["id"].as_str().unwrap();
    let r = app
        .http
        .post(app.url(&format!("/api/sessions/{id}/snapshots/{snap_id}/restore")))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let s: Value = r.json().await.unwrap();
    assert_eq!(s["status"], "running");
    let (_, out, _) = app
        .exec(
            &id,
            "cat notes.txt /home/sandbox/installed; ls extra.txt 2>&1 || true",
        )
        .await;
    assert!(out.starts_with("v1\npkg\n"), "{out}");
    assert!(
        out.contains("No such file"),
        "the restore replaced the workspace: {out}"
    );

    let fork = app
        .create_session(json!({"agent_id": "snapper", "from_snapshot_id": snap_id}))
        .await;
    let fork_id = fork["id"].as_str().unwrap();
    app.wait_for_status(fork_id, "running", BOOT).await;
    assert_eq!(
        app.exec(fork_id, "cat notes.txt /home/sandbox/installed")
            .await
            .1,
        "v1\npkg\n"
    );

    // A stopped session's snapshot comes from its workspace archive.
    app.http
        .post(app.url(&format!("/api/sessions/{fork_id}/stop")))
        .send()
        .await
        .unwrap();
    let r = app
        .http
        .post(app.url(&format!("/api/sessions/{fork_id}/snapshots")))
        .json(&json!({"label": ""}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let r = app
        .http
        .post(app.url(&format!(
            "/api/sessions/{id}/snapshots/{}/restore",
            uuid::Uuid::now_v7()
        )))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    for s in [id.as_str(), fork_id] {
        app.http
            .delete(app.url(&format!("/api/sessions/{s}")))
            .send()
            .await
            .unwrap();
    }
}

#[tokio::test]
async fn sandbox_seconds_count_the_time_the_sandbox_was_up() {
    let app = TestApp::builder().spawn().await;
    let id = app.running_session("timer", json!({})).await;
    // A second of the sandbox's time passes: what the counter is tested to count.
    app.exec(&id, "sleep 1").await;
    let d = app.session(&id).await;
    let secs = d["sandbox_seconds"].as_f64().unwrap();
    assert!(secs >= 1.0, "{secs}");
    app.http
        .post(app.url(&format!("/api/sessions/{id}/stop")))
        .send()
        .await
        .unwrap();
    let stopped = app.session(&id).await["sandbox_seconds"].as_f64().unwrap();
    let later = app.session(&id).await["sandbox_seconds"].as_f64().unwrap();
    assert_eq!(stopped, later, "a stopped sandbox's time does not grow");
    app.http
        .delete(app.url(&format!("/api/sessions/{id}")))
        .send()
        .await
        .unwrap();
}

#[tokio::test]
async fn a_sandbox_that_exited_while_the_server_was_down_keeps_its_workspace() {
    let app = TestApp::builder().spawn().await;
    let id = app.running_session("exited", json!({})).await;
    app.exec(&id, "echo survived > state.txt").await;
    let container = app.session(&id).await["container_id"]
        .as_str()
        .unwrap()
        .to_owned();
    app.sessions
        .backend()
        .stop(&container, Duration::from_secs(1))
        .await
        .unwrap();

    app.sessions.reconcile_on_start().await.unwrap();
    let s = app.session(&id).await;
    assert_eq!(
        (s["status"].as_str(), s["stopped_reason"].as_str()),
        (Some("stopped"), Some("restart"))
    );
    assert!(
        app.runtime_backend_inspect(&container).await.is_none(),
        "the dead container was removed"
    );
    app.start_session(&id).await;
    app.wait_for_status(&id, "running", BOOT).await;
    assert_eq!(app.exec(&id, "cat state.txt").await.1, "survived\n");
    app.http
        .delete(app.url(&format!("/api/sessions/{id}")))
        .send()
        .await
        .unwrap();
}

#[tokio::test]
async fn a_container_someone_starts_from_our_image_is_not_taken_for_an_orphan() {
    let app = TestApp::builder().spawn().await;
    let id = app.running_session("labelled", json!({})).await;
    let ours = app.session(&id).await["container_id"]
        .as_str()
        .unwrap()
        .to_owned();
    // Images we build or commit carry our deployment label, and a container started from one
    // inherits it: here, such a container, with a session label too, named by someone else.
    let deployment = sandbox_agents_testkit::docker_inspect(
        &ours,
        "{{index .Config.Labels \"io.sandbox-agents.deployment\"}}",
    );
    let name = format!("foreign-{}", uuid::Uuid::now_v7().simple());
    let started = std::process::Command::new("docker")
        .args([
            "run",
            "-d",
            "--name",
            &name,
            "--label",
            &format!("io.sandbox-agents.deployment={deployment}"),
            "--label",
            &format!("io.sandbox-agents.session={}", uuid::Uuid::now_v7()),
            &sandbox_agents_testkit::test_image(),
            "sleep",
            "300",
        ])
        .output()
        .unwrap();
    assert!(
        started.status.success(),
        "{}",
        String::from_utf8_lossy(&started.stderr)
    );
    app.sessions.sweep_orphans().await.unwrap();
    app.sessions.reconcile_on_start().await.unwrap();
    let state = sandbox_agents_testkit::docker_inspect(&name, "{{.State.Running}}");
    let _ = std::process::Command::new("docker")
        .args(["rm", "-f", "-v", &name])
        .output();
    assert_eq!(state, "true", "the foreign container was left alone");
    assert_eq!(app.session(&id).await["status"], "running");
    app.delete_session(&id).await;
}
