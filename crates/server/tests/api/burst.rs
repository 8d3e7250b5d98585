//! A burst of sessions (issue 33): a hundred created at once through two `sandbox-agents
//! serve` processes on one database, each with a pool of eight connections and the default
//! warm pool. Every session comes up, takes a turn that runs a command in its sandbox, and
//! leaves no container once deleted.
//!
//! What it guards: lifecycle leases hold no pooled connection across Docker calls (the
//! advisory lock on a pooled connection they replace wedged a burst past the pool's size:
//! every connection held by a lock whose boot waited for another), each process boots a
//! bounded number at once while the rest wait their turn holding nothing, and a session is
//! booted by one process only. The same burst through the published client, on one process
//! with the default pool and with `--db-max-connections 8`, is `tests/contract/test_burst.py`.

use sandbox_agents_fake_model::{FakeModel, Rule, Script};
use sandbox_agents_sandbox::docker::DockerBackend;
use sandbox_agents_sandbox::SandboxBackend;
use sandbox_agents_testkit::process::{Leftovers, ServerProcess};
use sandbox_agents_testkit::{
    database_url, eventually, fresh_named_database, test_image, test_sandboxd,
};
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

/// Sessions created at once.
const SESSIONS: usize = 100;
/// The whole test.
const LIMIT: Duration = Duration::from_secs(480);
/// From the burst to every session running (a 2-core machine boots a few a second).
const UP: Duration = Duration::from_secs(300);

/// A turn: the shell tool, then an answer that quotes its output.
fn script() -> Script {
    Script::new([
        Rule::when()
            .last_message_role("tool")
            .last_tool_result_contains("burst-ok")
            .reply_text("The command ran: burst-ok."),
        Rule::when()
            .last_message_role("user")
            .last_user_contains("burst job")
            .reply_tool_call("shell", json!({"command": "echo burst-ok"})),
    ])
}

/// Sends `req`; its status and JSON body.
async fn send(req: reqwest::RequestBuilder) -> (u16, Value) {
    let r = req.send().await.expect("the server answers");
    let status = r.status().as_u16();
    let body = r.json().await.unwrap_or(Value::Null);
    (status, body)
}

/// Every session of the deployment, as B lists them.
async fn sessions(http: &reqwest::Client, base: &str) -> Vec<Value> {
    let (status, list) = send(http.get(format!("{base}/api/sessions?limit=200"))).await;
    assert_eq!(status, 200, "{list}");
    list.as_array().expect("a list").clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_burst_of_a_hundred_sessions_on_two_processes_with_small_pools_all_come_up() {
    let started = Instant::now();
    tokio::time::timeout(LIMIT, scenario())
        .await
        .unwrap_or_else(|_| panic!("the burst did not finish within {LIMIT:?}"));
    eprintln!("burst: {:.1} s in all", started.elapsed().as_secs_f64());
}

async fn scenario() {
    let (db, _options, name) = fresh_named_database().await;
    let url = database_url(&name).await;
    let deployment = sandbox_agents_store::deployment::id(&db).await.unwrap();
    let blobs = std::env::temp_dir().join(format!("sa-burst-{}", uuid::Uuid::new_v4().simple()));
    let _leftovers = Leftovers {
        deployment: deployment.clone(),
        dir: blobs.clone(),
    };
    let fake = FakeModel::start(script());
    std::fs::create_dir_all(&blobs).unwrap();
    let blob_url = format!("file://{}", blobs.display());
    let (model, sandboxd, image) = (
        fake.root_url(),
        test_sandboxd().display().to_string(),
        test_image(),
    );
    let env = [
        ("SANDBOX_AGENTS_BLOB_URL", blob_url.as_str()),
        ("SANDBOX_AGENTS_IMAGE", image.as_str()),
        ("SANDBOX_AGENTS_SANDBOXD_BIN", sandboxd.as_str()),
        ("LITELLM_PROXY_API_BASE", model.as_str()),
        ("LITELLM_PROXY_API_KEY", "test-key"),
        ("SANDBOX_AGENTS_DB_MAX_CONNECTIONS", "8"),
        // The default warm pool: its claims race across the two processes too.
        ("SANDBOX_AGENTS_WARM_POOL_SIZE", "2"),
    ];
    let (a, b) = tokio::join!(
        ServerProcess::start(&url, &env),
        ServerProcess::start(&url, &env)
    );
    let bases = [a.base.clone(), b.base.clone()];
    let http = reqwest::Client::new();
    let (status, agent) = send(
        http.post(format!("{}/api/agents", bases[0]))
            .json(&json!({"slug": "burst", "name": "Burst", "instructions": "Run the job."})),
    )
    .await;
    assert_eq!(status, 201, "{agent}");

    // A hundred at once, half through each process.
    let burst = Instant::now();
    let created = futures::future::join_all((0..SESSIONS).map(|n| {
        let (http, base) = (http.clone(), bases[n % 2].clone());
        async move {
            let body = json!({"agent_id": "burst", "title": format!("burst-{n}")});
            let (status, s) = send(http.post(format!("{base}/api/sessions")).json(&body)).await;
            assert_eq!(status, 202, "creating session {n}: {s}");
            s["id"].as_str().expect("an id").to_owned()
        }
    }))
    .await;
    let ids: BTreeSet<String> = created.iter().cloned().collect();
    assert_eq!(ids.len(), SESSIONS);

    eventually("every session of the burst to run", UP, async || {
        let all = sessions(&http, &bases[1]).await;
        let failed: Vec<String> = all
            .iter()
            .filter(|s| s["status"] == "error")
            .map(|s| format!("{}: {}", s["title"], s["error"]))
            .collect();
        assert!(failed.is_empty(), "boots failed: {failed:#?}");
        let up = all.iter().filter(|s| s["status"] == "running").count();
        (up == SESSIONS)
            .then_some(())
            .ok_or(format!("{up} of {SESSIONS} running"))
    })
    .await;
    let booted = burst.elapsed();

    // Each takes a turn that runs a command in its sandbox, all at once.
    let runs = futures::future::join_all(created.iter().enumerate().map(|(n, id)| {
        let (http, base) = (http.clone(), bases[(n + 1) % 2].clone());
        async move {
            let (status, run) = send(
                http.post(format!("{base}/api/sessions/{id}/messages"))
                    .json(&json!({"prompt": format!("burst job {n}")})),
            )
            .await;
            assert_eq!(status, 202, "sending to session {n}: {run}");
            run["id"].as_str().expect("a run id").to_owned()
        }
    }))
    .await;
    eventually("every turn to end", UP, async || {
        let idle = sessions(&http, &bases[0])
            .await
            .iter()
            .filter(|s| s["activity"] == "idle")
            .count();
        (idle == SESSIONS)
            .then_some(())
            .ok_or(format!("{idle} of {SESSIONS} idle"))
    })
    .await;
    let mut containers = BTreeSet::new();
    for (id, run) in created.iter().zip(&runs) {
        let (status, s) = send(http.get(format!("{}/api/sessions/{id}", bases[0]))).await;
        assert_eq!(status, 200, "{s}");
        let r = s["runs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["id"] == run.as_str())
            .expect("the run");
        assert_eq!(r["status"], "completed", "{r}");
        assert_eq!(r["final_output"], "The command ran: burst-ok.", "{r}");
        containers.insert(s["container_id"].as_str().unwrap().to_owned());
    }
    assert_eq!(containers.len(), SESSIONS, "a sandbox of its own each");

    // The deployment's containers are the sessions' own and the warm pool's unclaimed ones
    // (a claimed sandbox keeps the pool's label); deleting the sessions removes theirs.
    let docker = DockerBackend::connect(&deployment).await.unwrap();
    let listed = docker.list().await.unwrap();
    let others: Vec<&str> = listed
        .iter()
        .filter(|c| !containers.contains(&c.id) && c.pool.is_none())
        .map(|c| c.name.as_str())
        .collect();
    assert!(
        others.is_empty(),
        "no container but the sessions' own and the pool's: {others:?}"
    );
    assert!(
        containers.iter().all(|c| listed.iter().any(|l| &l.id == c)),
        "every session's container exists"
    );
    let deleted = futures::future::join_all(created.iter().enumerate().map(|(n, id)| {
        let (http, base) = (http.clone(), bases[n % 2].clone());
        async move {
            send(http.delete(format!("{base}/api/sessions/{id}")))
                .await
                .0
        }
    }))
    .await;
    assert!(deleted.iter().all(|s| *s == 204), "{deleted:?}");
    eventually(
        "no container of a session to remain",
        Duration::from_secs(30),
        async || {
            let left: Vec<String> = docker
                .list()
                .await
                .unwrap()
                .into_iter()
                .filter(|c| containers.contains(&c.id) || c.pool.is_none())
                .map(|c| c.name)
                .collect();
            left.is_empty().then_some(()).ok_or(format!("{left:?}"))
        },
    )
    .await;
    eprintln!(
        "burst: {SESSIONS} sessions running {:.1} s after the burst, turns done {:.1} s after",
        booted.as_secs_f64(),
        (burst.elapsed() - booted).as_secs_f64()
    );
    a.terminate().await;
    b.terminate().await;
}
