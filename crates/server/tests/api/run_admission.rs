//! The limits on turns in flight (`--max-runs`, `--max-runs-per-project`): a turn over a
//! limit waits before its first step and says so once (`session.run_queued`), while other
//! projects' turns go on; a turn ending in this process or another, or parking on a client
//! tool, lets the next one in; an interrupt ends the wait like any other.

use sandbox_agents_fake_model::{FakeModel, Rule, Script};
use sandbox_agents_testkit::metrics::{sample, scrape};
use sandbox_agents_testkit::projects::{call, create, events, project, stop, wait_running};
use sandbox_agents_testkit::{eventually, TestApp, BOOT};
use serde_json::{json, Value};

/// `slow` holds its turn for a minute (until interrupted), `park` parks on a deferrable
/// client tool, anything else answers at once.
fn model() -> FakeModel {
    FakeModel::start(Script::new([
        Rule::when()
            .last_user_contains("slow")
            .reply_text("late")
            .delay_ms(60_000),
        Rule::when()
            .last_user_contains("park")
            .reply_tool_call("approve", json!({})),
        Rule::always().reply_text("done"),
    ]))
}

fn limits(
    fake: &FakeModel,
    deployment: Option<u32>,
    project: Option<u32>,
) -> sandbox_agents_testkit::TestAppBuilder<'_> {
    TestApp::builder()
        .with_config(move |c| c.max_runs = deployment)
        .with_config(move |c| c.max_runs_per_project = project)
        .with_model_proxy(&fake.root_url())
}

/// Waits until the model got the `slow` turn's request: that turn holds its slot (started
/// before it, another turn could take the slot first).
async fn holding(fake: &FakeModel) {
    sandbox_agents_testkit::runs::model_got(fake, "slow").await;
}

/// A running session of `project`'s agent `a` (with a deferrable client tool).
async fn session(app: &TestApp, project: &str) -> String {
    let id = create(app, project, "a").await;
    wait_running(app, project, &id).await;
    id
}

/// Starts a turn in `project`'s session; its run id.
async fn turn(app: &TestApp, project: &str, id: &str, prompt: &str) -> String {
    let (s, b) = call(
        app,
        reqwest::Method::POST,
        project,
        &format!("/api/sessions/{id}/messages"),
        Some(json!({"prompt": prompt, "max_turns": null,
                    "client_tools": [{"name": "approve", "deferrable": true}]})),
    )
    .await;
    assert_eq!(s, 202, "{b}");
    b["id"].as_str().unwrap().to_owned()
}

/// The `session.run_queued` events of `run`, once there is one.
async fn queued(app: &TestApp, project: &str, id: &str, run: &str) -> Vec<Value> {
    eventually(&format!("run {run} to be queued"), BOOT, async || {
        let q: Vec<Value> = events(app, project, id)
            .await
            .into_iter()
            .filter(|e| e["type"] == "session.run_queued" && e["run_id"] == run)
            .collect();
        (!q.is_empty()).then_some(q)
    })
    .await
}

/// The run's events in `project`, once it ended.
async fn ended(app: &TestApp, project: &str, id: &str, run: &str) -> Vec<Value> {
    eventually(&format!("run {run} to end"), BOOT, async || {
        let mine: Vec<Value> = events(app, project, id)
            .await
            .into_iter()
            .filter(|e| e["run_id"] == run)
            .collect();
        mine.iter()
            .any(|e| {
                matches!(
                    e["type"].as_str(),
                    Some("session.status_idle" | "session.status_error")
                )
            })
            .then_some(mine)
    })
    .await
}

async fn interrupt(app: &TestApp, project: &str, id: &str) {
    sandbox_agents_testkit::projects::act(app, project, id, "interrupt").await;
}

fn types(evs: &[Value]) -> Vec<&str> {
    evs.iter().map(|e| e["type"].as_str().unwrap()).collect()
}

#[tokio::test]
async fn a_turn_over_its_projects_limit_waits_while_other_projects_go_on() {
    let fake = model();
    let app = limits(&fake, None, Some(1)).spawn().await;
    let busy = project(&app, "Busy").await;
    let other = project(&app, "Other").await;
    let (s1, s2, s3) = (
        session(&app, &busy).await,
        session(&app, &busy).await,
        session(&app, &other).await,
    );

    let holder = turn(&app, &busy, &s1, "slow").await;
    holding(&fake).await;
    let waiter = turn(&app, &busy, &s2, "quick").await;
    let said = queued(&app, &busy, &s2, &waiter).await;
    assert_eq!(said.len(), 1, "{said:?}");
    assert_eq!(said[0]["payload"]["limit"], "project");
    assert_eq!(said[0]["payload"]["position"], 1);
    assert!(
        said[0]["payload"]["reason"]
            .as_str()
            .unwrap()
            .contains("--max-runs-per-project"),
        "{said:?}"
    );
    let scraped = scrape(&app).await;
    assert_eq!(sample(&scraped, "sandbox_agents_runs_queued"), Some(1.0));
    assert_eq!(
        sample(&scraped, "sandbox_agents_runs_queued_total"),
        Some(1.0)
    );
    // Another project's turn is not held back by this one's limit.
    let free = turn(&app, &other, &s3, "quick").await;
    let evs = ended(&app, &other, &s3, &free).await;
    assert_eq!(evs.last().unwrap()["payload"]["final_output"], "done");
    assert!(!types(&evs).contains(&"session.run_queued"), "{evs:?}");
    // The waiting turn asked the model nothing and is busy: the session refuses another
    // message.
    let (s, _) = call(
        &app,
        reqwest::Method::POST,
        &busy,
        &format!("/api/sessions/{s2}/messages"),
        Some(json!({"prompt": "again", "max_turns": null})),
    )
    .await;
    assert_eq!(s, 409);
    assert_eq!(
        types(
            &events(&app, &busy, &s2)
                .await
                .into_iter()
                .filter(|e| e["run_id"] == waiter.as_str())
                .collect::<Vec<_>>()
        ),
        ["user.message", "session.run_queued"]
    );

    // The turn in flight ends: the waiting one goes on at once, and answers.
    interrupt(&app, &busy, &s1).await;
    let evs = ended(&app, &busy, &s1, &holder).await;
    assert_eq!(evs.last().unwrap()["payload"]["stop_reason"], "cancelled");
    let evs = ended(&app, &busy, &s2, &waiter).await;
    assert_eq!(
        types(&evs),
        [
            "user.message",
            "session.run_queued",
            "agent.message",
            "session.status_idle"
        ]
    );
    assert_eq!(evs.last().unwrap()["payload"]["final_output"], "done");
    assert_eq!(
        sample(&scrape(&app).await, "sandbox_agents_runs_queued"),
        Some(0.0)
    );
    app.stop().await;
}

#[tokio::test]
async fn across_processes_a_parked_turn_frees_its_slot_and_an_interrupt_ends_a_wait() {
    let fake = model();
    let one = limits(&fake, Some(1), None).spawn().await;
    let two = limits(&fake, Some(1), None)
        .with_db(one.db.clone(), one.db_options.clone())
        .spawn()
        .await;
    let p = project(&one, "Shared").await;
    let (a, b, c) = (
        session(&one, &p).await,
        session(&two, &p).await,
        session(&two, &p).await,
    );

    let holder = turn(&one, &p, &a, "slow").await;
    holding(&fake).await;
    // A wait an interrupt ends, sent to the other process (which asks the waiting turn's to
    // cancel it, seen at its next check): cancelled without a step.
    let cancelled = turn(&two, &p, &b, "quick").await;
    assert_eq!(
        queued(&two, &p, &b, &cancelled).await[0]["payload"]["limit"],
        "deployment"
    );
    interrupt(&one, &p, &b).await;
    let evs = ended(&two, &p, &b, &cancelled).await;
    assert_eq!(
        types(&evs),
        ["user.message", "session.run_queued", "session.status_idle"]
    );
    assert_eq!(evs.last().unwrap()["payload"]["stop_reason"], "cancelled");
    // Written by the waiting turn's own process (with the turn's usage), not by the
    // interrupt's fallback for a worker that does not answer (which knows no usage).
    assert!(
        evs.last().unwrap()["payload"]["usage"]["active_seconds"].is_number(),
        "{evs:?}"
    );

    // Room freed by the other process lets the next waiting turn in.
    let parker = turn(&two, &p, &c, "park").await;
    queued(&two, &p, &c, &parker).await;
    interrupt(&one, &p, &a).await;
    ended(&one, &p, &a, &holder).await;
    // It runs to its deferrable call and parks, which gives its slot back: a new turn goes
    // through while it waits for its answer.
    let evs = ended(&two, &p, &c, &parker).await;
    assert_eq!(
        evs.last().unwrap()["payload"]["stop_reason"],
        "requires_action",
        "{evs:?}"
    );
    let quick = turn(&one, &p, &a, "quick").await;
    let evs = ended(&one, &p, &a, &quick).await;
    assert!(!types(&evs).contains(&"session.run_queued"), "{evs:?}");
    assert_eq!(evs.last().unwrap()["payload"]["final_output"], "done");
    one.stop().await;
    two.stop().await;
}

/// With both limits on a project, a turn that wakes its session waits for the sandbox without
/// a slot: the running session's turn goes on, and once that session stops, the other boots
/// and answers (a slot taken before the wake would hold the two up forever).
#[tokio::test]
async fn a_turn_waiting_for_a_sandbox_holds_no_slot() {
    let fake = model();
    let app = limits(&fake, None, Some(1))
        .with_config(|c| c.max_sandboxes_per_project = Some(1))
        .spawn()
        .await;
    let p = project(&app, "Both").await;
    let asleep = session(&app, &p).await;
    sqlx::query("update sessions set last_used_at = now() - interval '1 day' where id = $1::uuid")
        .bind(&asleep)
        .execute(&app.db)
        .await
        .unwrap();
    assert_eq!(app.sessions.release_idle().await.unwrap(), 1);
    let awake = session(&app, &p).await;

    let waking = turn(&app, &p, &asleep, "quick").await;
    sandbox_agents_testkit::projects::queued(&app, &p, &asleep).await;
    let now = turn(&app, &p, &awake, "quick").await;
    let evs = ended(&app, &p, &awake, &now).await;
    assert_eq!(evs.last().unwrap()["payload"]["final_output"], "done");

    stop(&app, &p, &awake).await;
    let evs = ended(&app, &p, &asleep, &waking).await;
    assert_eq!(evs.last().unwrap()["payload"]["final_output"], "done");
    assert!(!types(&evs).contains(&"session.run_queued"), "{evs:?}");
    app.stop().await;
}

/// A process started without run limits does not wait, but its turns count for the processes
/// with limits: a turn it holds keeps the limited process's turn waiting.
#[tokio::test]
async fn turns_of_a_process_without_limits_count_for_the_processes_with_them() {
    let fake = model();
    let free = limits(&fake, None, None).spawn().await;
    let limited = limits(&fake, Some(1), None)
        .with_db(free.db.clone(), free.db_options.clone())
        .spawn()
        .await;
    let p = project(&free, "Mixed").await;
    let (a, b) = (session(&free, &p).await, session(&limited, &p).await);

    let holder = turn(&free, &p, &a, "slow").await;
    holding(&fake).await;
    let waiting = turn(&limited, &p, &b, "quick").await;
    assert_eq!(
        queued(&limited, &p, &b, &waiting).await[0]["payload"]["limit"],
        "deployment"
    );
    interrupt(&free, &p, &a).await;
    ended(&free, &p, &a, &holder).await;
    let evs = ended(&limited, &p, &b, &waiting).await;
    assert_eq!(evs.last().unwrap()["payload"]["final_output"], "done");
    free.stop().await;
    limited.stop().await;
}
