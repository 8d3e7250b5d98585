//! A project's own limits on what it runs and asks (`PATCH /api/projects/{ref}` `limits`,
//! operators only): `max_sandboxes` and `max_runs` take the place of the server's
//! per-project flags for that project, in every server process (the counts and the fair
//! queue are PostgreSQL's), whatever flags a process has; `requests_per_minute` gives every
//! request made in the project one bucket, in place of each credential's.

use sandbox_agents_api::auth::{Auth, RateLimit};
use sandbox_agents_fake_model::{FakeModel, Rule, Script};
use sandbox_agents_sandbox::memory::MemoryBackend;
use sandbox_agents_testkit::projects::{
    act, call, create, events, project, queued, status, wait_running,
};
use sandbox_agents_testkit::{eventually, TestApp, BOOT};
use serde_json::{json, Value};

async fn set_limits(app: &TestApp, project: &str, limits: Value) {
    let (s, b) = call(
        app,
        reqwest::Method::PATCH,
        project,
        &format!("/api/projects/{project}"),
        Some(json!({ "limits": limits })),
    )
    .await;
    assert_eq!(s, 200, "{b}");
    assert_eq!(b["limits"], limits);
}

#[tokio::test]
async fn a_projects_sandbox_limit_queues_its_boots_in_every_process_until_it_is_raised() {
    // Neither process has a sandbox flag: only the project's own limit holds.
    let plane = MemoryBackend::new("project-sandbox-limit");
    let one = TestApp::builder().with_memory_backend(&plane).spawn().await;
    let two = TestApp::builder()
        .with_db(one.db.clone(), one.db_options.clone())
        .with_memory_backend(&plane)
        .spawn()
        .await;
    let p = project(&one, "Capped").await;
    set_limits(&one, &p, json!({"max_sandboxes": 1})).await;
    let first = create(&one, &p, "a").await;
    wait_running(&one, &p, &first).await;

    let second = create(&two, &p, "a").await;
    let said = queued(&two, &p, &second).await;
    assert_eq!(said["limit"], "project", "{said}");
    assert!(
        said["reason"]
            .as_str()
            .unwrap()
            .contains("limits.max_sandboxes"),
        "{said}"
    );
    assert_eq!(status(&two, &p, &second).await["status"], "provisioning");
    // How close the project is, as its page shows it.
    let (s, spend) = call(
        &one,
        reqwest::Method::GET,
        &p,
        &format!("/api/projects/{p}/spend"),
        None,
    )
    .await;
    assert_eq!(s, 200, "{spend}");
    assert_eq!(
        [
            &spend["sandboxes"],
            &spend["sandboxes_queued"],
            &spend["runs"]
        ],
        [1, 1, 0],
        "{spend}"
    );
    assert_eq!(spend["limits"]["max_sandboxes"], 1);
    // Other projects have no such limit.
    let q = project(&two, "Free").await;
    let (a, b) = (create(&two, &q, "a").await, create(&one, &q, "a").await);
    wait_running(&two, &q, &a).await;
    wait_running(&one, &q, &b).await;

    // Raised by an operator in the other process: the queued boot goes on now, not at the
    // next sweep.
    set_limits(&one, &p, json!({"max_sandboxes": 2})).await;
    wait_running(&two, &p, &second).await;
    assert_eq!(status(&one, &p, &first).await["status"], "running");
    two.stop().await;
    one.stop().await;
}

#[tokio::test]
async fn a_projects_run_limit_holds_its_turns_while_other_projects_go_on() {
    let fake = FakeModel::start(Script::new([
        Rule::when()
            .last_user_contains("slow")
            .reply_text("late")
            .delay_ms(60_000),
        Rule::always().reply_text("done"),
    ]));
    let plane = MemoryBackend::new("project-run-limit");
    // No run flags in this process.
    let app = TestApp::builder()
        .with_model_proxy(&fake.root_url())
        .with_memory_backend(&plane)
        .spawn()
        .await;
    let busy = project(&app, "Busy").await;
    let other = project(&app, "Other").await;
    set_limits(&app, &busy, json!({"max_runs": 1})).await;
    let mut sessions = Vec::new();
    for p in [&busy, &busy, &other] {
        let id = create(&app, p, "a").await;
        wait_running(&app, p, &id).await;
        sessions.push(id);
    }
    let turn = async |p: &str, id: &str, prompt: &str| -> String {
        let (s, b) = call(
            &app,
            reqwest::Method::POST,
            p,
            &format!("/api/sessions/{id}/messages"),
            Some(json!({"prompt": prompt})),
        )
        .await;
        assert_eq!(s, 202, "{b}");
        b["id"].as_str().unwrap().to_owned()
    };
    let ended = async |p: &str, id: &str, run: &str| -> Vec<Value> {
        eventually(&format!("run {run} to end"), BOOT, async || {
            let mine: Vec<Value> = events(&app, p, id)
                .await
                .into_iter()
                .filter(|e| e["run_id"] == run)
                .collect();
            mine.iter()
                .any(|e| e["type"] == "session.status_idle")
                .then_some(mine)
        })
        .await
    };

    let holder = turn(&busy, &sessions[0], "slow").await;
    // It holds the project's one slot once it reached the model.
    sandbox_agents_testkit::runs::model_got(&fake, "slow").await;
    let waiter = turn(&busy, &sessions[1], "quick").await;
    let said = eventually("the second turn to be queued", BOOT, async || {
        events(&app, &busy, &sessions[1])
            .await
            .into_iter()
            .find(|e| e["type"] == "session.run_queued" && e["run_id"] == waiter.as_str())
    })
    .await;
    assert_eq!(said["payload"]["limit"], "project", "{said}");
    assert!(
        said["payload"]["reason"]
            .as_str()
            .unwrap()
            .contains("limits.max_runs"),
        "{said}"
    );
    // Another project's turn is not held.
    let free = turn(&other, &sessions[2], "quick").await;
    let evs = ended(&other, &sessions[2], &free).await;
    assert_eq!(evs.last().unwrap()["payload"]["final_output"], "done");

    // Raised: the waiting turn goes on while the slow one still holds its slot.
    set_limits(&app, &busy, json!({"max_runs": 2})).await;
    let evs = ended(&busy, &sessions[1], &waiter).await;
    assert_eq!(evs.last().unwrap()["payload"]["final_output"], "done");
    act(&app, &busy, &sessions[0], "interrupt").await;
    let evs = ended(&busy, &sessions[0], &holder).await;
    assert_eq!(evs.last().unwrap()["payload"]["stop_reason"], "cancelled");
    app.stop().await;
}

#[tokio::test]
async fn a_projects_request_rate_is_one_bucket_for_all_its_callers_named_in_the_429() {
    use reqwest::Method;
    use sandbox_agents_testkit::auth::{call as with, make_key};
    const TOKEN: &str = "operator-token";
    // The deployment limits each credential generously; the project's own rate is tighter.
    let app = TestApp::builder()
        .with_auth(Auth::new(Some(TOKEN)).with_rate_limit(Some(RateLimit {
            per_minute: 6000,
            burst: 500,
        })))
        .spawn()
        .await;
    let (s, other) = with(
        &app,
        Method::POST,
        "/api/projects",
        Some(TOKEN),
        None,
        Some(json!({"name": "Other"})),
    )
    .await;
    assert_eq!(s, 201, "{other}");
    let mut keys = Vec::new();
    for (p, name) in [("default", "a"), ("default", "b"), ("other", "c")] {
        let k = make_key(&app, TOKEN, Some(p), name).await;
        keys.push(k["key"].as_str().unwrap().to_owned());
    }
    let limit = async |limits: Value| {
        let (s, b) = with(
            &app,
            Method::PATCH,
            "/api/projects/default",
            Some(TOKEN),
            None,
            Some(json!({ "limits": limits })),
        )
        .await;
        assert_eq!(s, 200, "{b}");
    };
    let get = async |key: &str| {
        app.http
            .get(app.url("/api/agents"))
            .bearer_auth(key)
            .send()
            .await
            .unwrap()
    };
    limit(json!({"requests_per_minute": 5})).await;
    // Two keys of the project take turns: together, a burst of the project's rate, then 429
    // (a bucket refills one request in 12 s, so at most one more gets through meanwhile).
    let mut passed = 0;
    let refused = loop {
        let r = get(&keys[passed % 2]).await;
        if r.status() == 429 {
            break r;
        }
        assert_eq!(r.status(), 200);
        passed += 1;
        assert!(passed <= 6, "the project's rate does not hold");
    };
    assert!(passed >= 5, "the burst is the project's rate: {passed}");
    let retry: u64 = refused.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=12).contains(&retry), "{retry}");
    let detail = refused.json::<Value>().await.unwrap()["detail"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        detail.contains("limits.requests_per_minute") && detail.contains("5 requests"),
        "{detail}"
    );
    assert_eq!(
        get(&keys[1 - passed % 2]).await.status(),
        429,
        "the other key too"
    );
    // Another project's key draws on its own bucket; an operator acting in the project is not
    // counted (it must be able to lift the limit), and lifts it.
    for _ in 0..10 {
        assert_eq!(get(&keys[2]).await.status(), 200);
        let (s, _) = with(
            &app,
            Method::GET,
            "/api/agents",
            Some(TOKEN),
            Some("default"),
            None,
        )
        .await;
        assert_eq!(s, 200);
    }
    limit(json!({})).await;
    for _ in 0..10 {
        assert_eq!(get(&keys[0]).await.status(), 200);
    }
    app.stop().await;
}
