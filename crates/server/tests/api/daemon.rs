//! What only a sandbox's daemon does, through the API on real Docker sandboxes: background
//! processes that outlive their request and die with the sandbox, files by absolute path
//! byte for byte, the daemon killed inside a sandbox coming back, a restarted control plane
//! reconnecting to running sandboxes, and sandboxes without a daemon served by Docker exec.

use sandbox_agents_testkit::{eventually, TestApp};
use serde_json::{json, Value};
use std::time::Duration;

async fn start(app: &TestApp, id: &str, body: Value) -> reqwest::Response {
    app.http
        .post(app.url(&format!("/api/sessions/{id}/processes")))
        .json(&body)
        .send()
        .await
        .unwrap()
}

#[tokio::test]
async fn a_background_process_outlives_its_request_and_dies_with_the_sandbox() {
    let app = TestApp::builder().spawn().await;
    let id = app.running_session("bg", json!({})).await;
    let r = start(
        &app,
        &id,
        json!({"command": "echo ready; echo \"$WHO\" >&2; exec sleep 3600", "env": {"WHO": "me"}}),
    )
    .await;
    assert_eq!(r.status(), 201);
    let p: Value = r.json().await.unwrap();
    let pid = p["id"].as_str().unwrap().to_owned();
    assert_eq!(p["status"], "running");
    assert_eq!(p["cwd"], "/workspace");

    let detail = eventually("its output", Duration::from_secs(10), async || {
        let (_, d) = app
            .get_json(&format!("/api/sessions/{id}/processes/{pid}"))
            .await;
        (d["stdout"] == "ready\n" && d["stderr"] == "me\n").then_some(d)
    })
    .await;
    assert_eq!(detail["status"], "running");
    let (_, listed) = app.get_json(&format!("/api/sessions/{id}/processes")).await;
    assert_eq!(listed.as_array().unwrap().len(), 1);
    let (code, out, _) = app.exec(&id, "pgrep -f 'sleep 3600$' | wc -l").await;
    assert_eq!((code, out.trim()), (0, "1"), "it runs in the sandbox");

    // A stop takes it down with the sandbox; the next boot has none.
    app.stop_session(&id).await;
    app.wait_for_status(&id, "stopped", Duration::from_secs(60))
        .await;
    let (status, _) = app.get_json(&format!("/api/sessions/{id}/processes")).await;
    assert_eq!(status, 409, "no processes without a running sandbox");
    app.start_session(&id).await;
    app.wait_for_status(&id, "running", Duration::from_secs(60))
        .await;
    let (_, listed) = app.get_json(&format!("/api/sessions/{id}/processes")).await;
    assert_eq!(listed, json!([]));
    let (_, out, _) = app.exec(&id, "pgrep -f 'sleep 3600$' | wc -l").await;
    assert_eq!(out.trim(), "0");
    app.delete_session(&id).await;
}

#[tokio::test]
async fn a_killed_process_takes_its_children_and_bad_starts_change_nothing() {
    let app = TestApp::builder().spawn().await;
    let id = app.running_session("killer", json!({})).await;
    let p: Value = start(
        &app,
        &id,
        json!({"command": "sleep 3601 & sleep 3602 & wait"}),
    )
    .await
    .json()
    .await
    .unwrap();
    let pid = p["id"].as_str().unwrap();
    eventually("both children", Duration::from_secs(10), async || {
        let (_, out, _) = app.exec(&id, "pgrep -fx 'sleep 360[12]' | wc -l").await;
        (out.trim() == "2").then_some(()).ok_or(out)
    })
    .await;
    let process_url = app.url(&format!("/api/sessions/{id}/processes/{pid}"));
    let delete = async || app.http.delete(&process_url).send().await.unwrap();
    let r = delete().await;
    assert_eq!(r.status(), 200);
    let killed: Value = r.json().await.unwrap();
    assert_eq!(killed["status"], "exited");
    assert!(
        killed["stdout"].is_string(),
        "the last of its output: {killed}"
    );
    let (_, out, _) = app.exec(&id, "pgrep -fx 'sleep 360[12]' | wc -l").await;
    assert_eq!(out.trim(), "0", "its children went with it");
    // Deleted means gone: a read and a second delete are 404.
    let (status, _) = app
        .get_json(&format!("/api/sessions/{id}/processes/{pid}"))
        .await;
    assert_eq!(status, 404);
    assert_eq!(delete().await.status(), 404);

    for (body, status) in [
        (json!({"command": "  "}), 400),
        (json!({"command": "true", "cwd": "no/such/dir"}), 404),
        (json!({"command": "true", "shell": "bash"}), 422),
    ] {
        let r = start(&app, &id, body.clone()).await;
        assert_eq!(r.status().as_u16(), status, "{body}");
        let err: Value = r.json().await.unwrap();
        assert!(
            err["detail"].is_string() || err["detail"].is_array(),
            "{err}"
        );
    }
    let (_, listed) = app.get_json(&format!("/api/sessions/{id}/processes")).await;
    assert_eq!(
        listed,
        json!([]),
        "the killed one is gone, no bad start added one"
    );
    let (status, _) = app
        .get_json(&format!("/api/sessions/{id}/processes/proc_nope"))
        .await;
    assert_eq!(status, 404);
    app.delete_session(&id).await;
}

#[tokio::test]
async fn sandbox_files_travel_byte_for_byte_anywhere_the_user_may_write() {
    let app = TestApp::builder().spawn().await;
    let id = app.running_session("files", json!({})).await;
    let data: Vec<u8> = (0..10 * 1024 * 1024u32)
        .map(|i| (i * 31 % 253) as u8)
        .collect();
    let url = |path: &str| app.url(&format!("/api/sessions/{id}/sandbox-files?path={path}"));
    let r = app
        .http
        .put(url("/tmp/deep/data.bin") + "&mode=600")
        .body(data.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let written: Value = r.json().await.unwrap();
    assert_eq!(
        (written["size"].as_u64(), written["mode"].as_u64()),
        (Some(data.len() as u64), Some(0o600))
    );
    let (_, sum, _) = app
        .exec(
            &id,
            "sha256sum < /tmp/deep/data.bin; stat -c %a /tmp/deep/data.bin",
        )
        .await;
    let expected = {
        use sha2::Digest;
        format!("{:x}", sha2::Sha256::digest(&data))
    };
    assert!(
        sum.starts_with(&expected) && sum.ends_with("600\n"),
        "{sum}"
    );
    let back = app
        .http
        .get(url("/tmp/deep/data.bin"))
        .send()
        .await
        .unwrap();
    assert_eq!(back.status(), 200);
    assert!(back.bytes().await.unwrap() == data, "the bytes differ");

    // No event for it: it is not the workspace's.
    assert!(!app.event_types(&id).await.iter().any(|t| t == "user.file"));
    app.exec(&id, "echo x > /tmp/unreadable && chmod 000 /tmp/unreadable")
        .await;
    for (path, status) in [
        ("relative.txt", 400),
        ("/tmp/unreadable", 403),
        ("/no/such/file", 404),
        ("/tmp", 409),
    ] {
        let r = app.http.get(url(path)).send().await.unwrap();
        assert_eq!(r.status().as_u16(), status, "{path}");
    }
    let r = app
        .http
        .put(url("/etc/not-mine"))
        .body("x")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    let r = app
        .http
        .put(url("/tmp/x") + "&mode=999")
        .body("x")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    app.delete_session(&id).await;
}

#[tokio::test]
async fn the_daemon_killed_inside_a_sandbox_comes_back() {
    let app = TestApp::builder().spawn().await;
    let id = app.running_session("phoenix", json!({})).await;
    let p: Value = start(&app, &id, json!({"command": "sleep 3603"}))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(p["status"], "running");
    // The sandbox's own code may kill the daemon (it runs as the same user).
    let r = start(
        &app,
        &id,
        json!({"command": "pkill -KILL -f 'sandboxd serve'"}),
    )
    .await;
    assert_eq!(r.status(), 201);
    // The next calls reconnect and start it again.
    // A new daemon answers, knowing none of the old one's processes.
    eventually("a new daemon", Duration::from_secs(20), async || {
        let (status, v) = app.get_json(&format!("/api/sessions/{id}/processes")).await;
        (status == 200 && v == json!([]))
            .then_some(())
            .ok_or(format!("{status} {v}"))
    })
    .await;
    assert_eq!(
        app.exec(&id, "echo back").await,
        (0, "back\n".into(), String::new())
    );
    // A command that kills the daemon under itself gets a clear 409, not a 500; the next
    // command brings it back.
    let r = app
        .http
        .post(app.url(&format!("/api/sessions/{id}/exec")))
        .json(&json!({"command": "pkill -KILL -f 'sandboxd serve'; sleep 30"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 409);
    let body: Value = r.json().await.unwrap();
    assert!(
        body["detail"]
            .as_str()
            .unwrap()
            .contains("daemon went away"),
        "{body}"
    );
    assert_eq!(
        app.exec(&id, "echo again").await,
        (0, "again\n".into(), String::new())
    );
    app.delete_session(&id).await;
}

#[tokio::test]
async fn a_restarted_control_plane_finds_the_daemons_processes_and_its_lost_command_is_killed() {
    let first = TestApp::builder().spawn().await;
    let id = first.running_session("restart", json!({})).await;
    let p: Value = start(&first, &id, json!({"command": "exec sleep 3605"}))
        .await
        .json()
        .await
        .unwrap();
    let pid = p["id"].as_str().unwrap().to_owned();
    // A command in flight when the server goes away.
    let r = sandbox_agents_testkit::exec_stream::streamed(
        &first,
        &id,
        json!({"command": "echo running; exec sleep 3606", "timeout": 600}),
    )
    .await;
    let mut sse = sandbox_agents_testkit::sse::SseReader::new(r);
    let f = sse.next_event(Duration::from_secs(30)).await.unwrap();
    assert_eq!(f.json()["text"], "running\n");
    drop(sse);
    let second = first.restart().await;
    // The background process lives on in the sandbox, and the new server's daemon
    // connection sees it.
    let (status, d) = second
        .get_json(&format!("/api/sessions/{id}/processes/{pid}"))
        .await;
    assert_eq!(
        (status, d["status"].as_str()),
        (200, Some("running")),
        "{d}"
    );
    // The command whose caller and server went away did not stay behind.
    eventually(
        "the lost command killed",
        Duration::from_secs(20),
        async || {
            let (_, out, _) = second.exec(&id, "pgrep -fx 'sleep 3606' | wc -l").await;
            (out.trim() == "0").then_some(())
        },
    )
    .await;
    second.delete_session(&id).await;
}

#[tokio::test]
async fn a_sandbox_without_the_daemon_is_served_by_docker_exec_and_says_what_it_lacks() {
    let first = sandbox_agents_testkit::TestApp::builder()
        .with_config(|c| c.sandboxd_bin = Some("off".into()))
        .spawn()
        .await;
    let id = first.running_session("no-daemon", json!({})).await;
    // Everything a Docker exec can do still works, streamed exec included (whole, at the end).
    assert_eq!(
        first.exec(&id, "echo plain; exit 4").await,
        (4, "plain\n".into(), String::new())
    );
    let r = sandbox_agents_testkit::exec_stream::streamed(
        &first,
        &id,
        json!({"command": "echo streamed"}),
    )
    .await;
    let mut sse = sandbox_agents_testkit::sse::SseReader::new(r);
    let out = sse.next_event(Duration::from_secs(30)).await.unwrap();
    assert_eq!(
        (out.event.as_deref(), out.json()["text"].as_str()),
        (Some("stdout"), Some("streamed\n"))
    );
    let exit = sse.next_event(Duration::from_secs(30)).await.unwrap();
    assert_eq!(exit.event.as_deref(), Some("exit"));
    // What only the daemon does is refused, saying why.
    let (status, body) = first
        .get_json(&format!("/api/sessions/{id}/processes"))
        .await;
    assert_eq!(status, 409);
    assert!(
        body["detail"].as_str().unwrap().contains("has no daemon"),
        "{body}"
    );
    // A server with a daemon adopts the sandbox, which has no daemon volume mounted (it
    // started before): commands fall back to Docker exec.
    let second = first.restart().await;
    assert_eq!(
        second
            .exec(&id, "test -e /opt/sandbox-agents/sandboxd || echo absent")
            .await,
        (0, "absent\n".into(), String::new())
    );
    let (status, _) = second
        .get_json(&format!("/api/sessions/{id}/processes"))
        .await;
    assert_eq!(status, 409);
    second.delete_session(&id).await;
}
