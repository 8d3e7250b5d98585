//! The sandbox limits (`--max-sandboxes`, `--max-sandboxes-per-project`) on real Docker: a
//! boot over a limit waits in `provisioning` without a container and says so once
//! (`session.queued`), room freed by a stop in another server process boots it, the queue is
//! fair between projects, and a run that needs a sandbox waits in the queue rather than
//! failing.

use sandbox_agents_fake_model::{FakeModel, Rule, Script};
use sandbox_agents_testkit::projects::{
    call, create, events, project, queued, status, stop, wait_running,
};
use sandbox_agents_testkit::runs::{start_run, test_agent, wait_for_run};
use sandbox_agents_testkit::TestApp;
use serde_json::{json, Value};

fn limits(
    deployment: Option<u32>,
    project: Option<u32>,
) -> sandbox_agents_testkit::TestAppBuilder<'static> {
    TestApp::builder()
        .with_config(move |c| c.max_sandboxes = deployment)
        .with_config(move |c| c.max_sandboxes_per_project = project)
}

#[tokio::test]
async fn a_boot_over_the_project_limit_waits_queued_until_another_process_frees_room() {
    let one = limits(None, Some(1)).spawn().await;
    let two = limits(None, Some(1))
        .with_db(one.db.clone(), one.db_options.clone())
        .spawn()
        .await;
    let p = project(&one, "Limited").await;
    let first = create(&one, &p, "a").await;
    wait_running(&one, &p, &first).await;

    let second = create(&two, &p, "a").await;
    let said = queued(&two, &p, &second).await;
    assert_eq!(said["limit"], "project", "{said}");
    assert_eq!(said["position"], 1, "{said}");
    assert!(said["reason"]
        .as_str()
        .unwrap()
        .contains("--max-sandboxes-per-project"));
    let s = status(&two, &p, &second).await;
    assert_eq!(s["status"], "provisioning");
    // Queued means no container: nothing of the Docker host is taken.
    let containers = std::process::Command::new("docker")
        .args(["ps", "-aq", "--filter", &format!("name=sa-{second}")])
        .output()
        .expect("docker ps");
    assert!(
        containers.status.success() && containers.stdout.is_empty(),
        "a queued session has a container: {containers:?}"
    );

    // Another project is not held by this one's limit.
    let q = project(&one, "Other").await;
    let other = create(&one, &q, "a").await;
    wait_running(&one, &q, &other).await;

    // The first process frees the room; the second session boots.
    stop(&one, &p, &first).await;
    wait_running(&two, &p, &second).await;
    let said: Vec<String> = events(&two, &p, &second)
        .await
        .iter()
        .map(|e| e["type"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        said,
        [
            "session.created",
            "session.queued",
            "session.status_running"
        ],
        "queued once, then running"
    );
    // And the stopped one, started again, waits in its turn.
    let (s, b) = call(
        &one,
        reqwest::Method::POST,
        &p,
        &format!("/api/sessions/{first}/start"),
        Some(json!({})),
    )
    .await;
    assert_eq!(s, 200, "{b}");
    queued(&one, &p, &first).await;
    assert_eq!(status(&one, &p, &first).await["status"], "provisioning");
    two.stop().await;
    one.stop().await;
}

#[tokio::test]
async fn the_queue_is_fair_between_projects() {
    let app = limits(Some(2), None).spawn().await;
    let busy = project(&app, "Busy").await;
    let quiet = project(&app, "Quiet").await;
    let a1 = create(&app, &busy, "a").await;
    let a2 = create(&app, &busy, "a").await;
    wait_running(&app, &busy, &a1).await;
    wait_running(&app, &busy, &a2).await;
    // Busy queues first, Quiet after.
    let a3 = create(&app, &busy, "a").await;
    assert_eq!(queued(&app, &busy, &a3).await["limit"], "deployment");
    let b1 = create(&app, &quiet, "a").await;
    queued(&app, &quiet, &b1).await;

    // A slot frees: Quiet, which holds none, goes before Busy's older request.
    stop(&app, &busy, &a1).await;
    wait_running(&app, &quiet, &b1).await;
    assert_eq!(status(&app, &busy, &a3).await["status"], "provisioning");
    // The next slot goes to Busy.
    stop(&app, &busy, &a2).await;
    wait_running(&app, &busy, &a3).await;
    app.stop().await;
}

#[tokio::test]
async fn a_run_that_needs_a_sandbox_waits_in_the_queue() {
    let fake = FakeModel::start(Script::new([Rule::when()
        .last_user_contains("hello")
        .reply_text("hi")]));
    let app = TestApp::builder()
        .with_config(|c| c.max_sandboxes = Some(1))
        .with_model_proxy(&fake.root_url())
        .spawn()
        .await;
    app.create_agent("talker", test_agent()).await;
    let asleep = app.boot_session(json!({"agent_id": "talker"})).await;
    // Released as idle (a message wakes it; a stopped one would be refused): unused for a
    // day, as far as the reaper can tell.
    sqlx::query("update sessions set last_used_at = now() - interval '1 day' where id = $1::uuid")
        .bind(&asleep)
        .execute(&app.db)
        .await
        .unwrap();
    assert_eq!(app.sessions.release_idle().await.unwrap(), 1);
    assert_eq!(app.session(&asleep).await["stopped_reason"], "idle");
    let holder = app.boot_session(json!({"agent_id": "talker"})).await;

    // The message wakes the stopped session, whose boot queues: the run waits.
    let run = start_run(&app, &asleep, "hello", Value::Null).await;
    let said = queued(&app, "default", &asleep).await;
    assert_eq!(said["limit"], "deployment");
    assert!(
        !app.events(&asleep)
            .await
            .iter()
            .any(|e| e["run_id"] == run.as_str()
                && matches!(
                    e["type"].as_str(),
                    Some("session.status_idle" | "session.status_error")
                )),
        "the run ended instead of waiting"
    );

    app.stop_session(&holder).await;
    let evs = wait_for_run(&app, &asleep, &run).await;
    let end = evs.last().unwrap();
    assert_eq!(end["type"], "session.status_idle", "{end}");
    assert_eq!(end["payload"]["final_output"], "hi");
    app.stop().await;
}
