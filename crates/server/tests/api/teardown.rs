//! `sandbox-agents teardown`: every session of the deployment stopped as a stop does, the warm
//! pool gone, no container left; refused while a server is up; the next server starts from
//! the archived workspaces.

use sandbox_agents_sandbox::docker::DockerBackend;
use sandbox_agents_sandbox::SandboxBackend;
use sandbox_agents_testkit::process::{run_command, ServerProcess};
use sandbox_agents_testkit::{database_url, eventually, fresh_named_database, BOOT};
use serde_json::{json, Value};
use std::time::Duration;

async fn post(base: &str, path: &str, body: Value) -> (u16, Value) {
    let r = reqwest::Client::new()
        .post(format!("{base}{path}"))
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

async fn get(base: &str, path: &str) -> Value {
    reqwest::get(format!("{base}{path}"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn teardown_stops_every_session_removes_the_pool_and_leaves_no_container() {
    let (db, _options, name) = fresh_named_database().await;
    let url = database_url(&name).await;
    // One data directory for every process, as one deployment's processes share their blob
    // store: teardown archives the workspace there, and the next server restores it.
    let data_dir =
        std::env::temp_dir().join(format!("sa-teardown-{}", uuid::Uuid::new_v4().simple()));
    let data = data_dir.to_str().unwrap().to_owned();
    let env = [
        ("SANDBOX_AGENTS_WARM_POOL_SIZE", "1"),
        ("SANDBOX_AGENTS_DATA_DIR", data.as_str()),
    ];
    let server = ServerProcess::start(&url, &env).await;
    let (s, _) = post(
        &server.base,
        "/api/agents",
        json!({"slug": "keep", "name": "keep"}),
    )
    .await;
    assert_eq!(s, 201);
    let (s, session) = post(&server.base, "/api/sessions", json!({"agent_id": "keep"})).await;
    assert_eq!(s, 202, "{session}");
    let id = session["id"].as_str().unwrap().to_owned();
    eventually("the session to run", BOOT, async || {
        (get(&server.base, &format!("/api/sessions/{id}")).await["status"] == "running")
            .then_some(())
    })
    .await;
    let (s, out) = post(
        &server.base,
        &format!("/api/sessions/{id}/exec"),
        json!({"command": "echo kept > /workspace/note.txt", "timeout": 30}),
    )
    .await;
    assert_eq!((s, out["exit_code"].as_i64()), (200, Some(0)), "{out}");
    let deployment = sandbox_agents_store::deployment::id(&db).await.unwrap();
    let docker = DockerBackend::connect(&deployment).await.unwrap();
    // The session's sandbox and a pooled one.
    eventually("the pool to fill", BOOT, async || {
        (docker.list().await.unwrap().len() == 2).then_some(())
    })
    .await;

    // Refused while the server is up, and nothing changes.
    let (ok, log) = run_command(&url, &["teardown"], &env).await;
    assert!(!ok, "{log}");
    assert!(log.contains("stop every server process first"), "{log}");
    assert_eq!(docker.list().await.unwrap().len(), 2);

    // A stopped server leaves its session's sandbox behind, by design (the next start adopts
    // it); as the deployment's last process it removes the pooled one. Teardown removes the
    // rest.
    let session_container = get(&server.base, &format!("/api/sessions/{id}")).await["container_id"]
        .as_str()
        .unwrap()
        .to_owned();
    server.terminate().await;
    let left: Vec<String> = docker
        .list()
        .await
        .unwrap()
        .into_iter()
        .map(|c| c.id)
        .collect();
    assert_eq!(left, [session_container]);
    let (ok, log) = run_command(&url, &["teardown"], &env).await;
    assert!(ok, "{log}");
    assert!(docker.list().await.unwrap().is_empty(), "{log}");
    let (status, reason): (String, Option<String>) =
        sqlx::query_as("select status, stopped_reason from sessions where id = $1::uuid")
            .bind(&id)
            .fetch_one(&db)
            .await
            .unwrap();
    assert_eq!(
        (status.as_str(), reason.as_deref()),
        ("stopped", Some("requested"))
    );
    let (pooled,): (i64,) = sqlx::query_as("select count(*) from sandbox_pool")
        .fetch_one(&db)
        .await
        .unwrap();
    assert_eq!(pooled, 0);
    // Idempotent.
    let (ok, log) = run_command(&url, &["teardown"], &env).await;
    assert!(ok, "{log}");

    // The next server starts the session from its archived workspace.
    let server = ServerProcess::start(
        &url,
        &[
            ("SANDBOX_AGENTS_WARM_POOL_SIZE", "0"),
            ("SANDBOX_AGENTS_DATA_DIR", data.as_str()),
        ],
    )
    .await;
    let (s, _) = post(
        &server.base,
        &format!("/api/sessions/{id}/start"),
        json!({}),
    )
    .await;
    assert!(s == 200 || s == 202, "{s}");
    eventually("the session to run again", BOOT, async || {
        let s = get(&server.base, &format!("/api/sessions/{id}")).await;
        assert_ne!(s["status"], "error", "{s}");
        (s["status"] == "running").then_some(())
    })
    .await;
    let (_, out) = post(
        &server.base,
        &format!("/api/sessions/{id}/exec"),
        json!({"command": "cat /workspace/note.txt", "timeout": 30}),
    )
    .await;
    assert_eq!(out["stdout"], "kept\n", "{out}");
    let _ = reqwest::Client::new()
        .delete(format!("{}/api/sessions/{id}", server.base))
        .send()
        .await;
    server.terminate().await;
    for c in docker.list().await.unwrap() {
        let _ = docker.remove(&c.id).await;
    }
    let _ = std::fs::remove_dir_all(&data_dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn teardown_refused_by_a_running_server_leaves_its_embedded_database_running() {
    // A server on its own embedded cluster, as `scripts/serve` runs it.
    let data_dir = std::env::temp_dir().join(format!("sa-td-pg-{}", uuid::Uuid::new_v4().simple()));
    let data = data_dir.to_str().unwrap().to_owned();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut server = tokio::process::Command::new(env!("CARGO_BIN_EXE_sandbox-agents"))
        .args([
            "serve",
            "--bind",
            &format!("127.0.0.1:{port}"),
            "--preview-bind",
            "127.0.0.1:0",
        ])
        .args(["--data-dir", &data, "--warm-pool-size", "0"])
        .env_remove("DATABASE_URL")
        .env("RUST_LOG", "warn")
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let base = format!("http://127.0.0.1:{port}");
    let healthy = async || {
        let r = reqwest::get(format!("{base}/api/health")).await.ok()?;
        (r.status() == 200).then_some(())
    };
    eventually(
        "the embedded server to be healthy",
        Duration::from_secs(60),
        healthy,
    )
    .await;

    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_sandbox-agents"))
        .args(["teardown", "--data-dir", &data])
        .env_remove("DATABASE_URL")
        .env("RUST_LOG", "info")
        .output()
        .await
        .unwrap();
    let log =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{log}");
    assert!(log.contains("stop every server process first"), "{log}");
    // The server's database is still there.
    let r = reqwest::get(format!("{base}/api/health")).await.unwrap();
    assert_eq!(
        r.status(),
        200,
        "teardown stopped the server's database: {log}"
    );

    let pid = server.id().unwrap().to_string();
    std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap();
    let status = tokio::time::timeout(Duration::from_secs(30), server.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(status.success(), "{status}");
    let _ = std::fs::remove_dir_all(&data_dir);
}
