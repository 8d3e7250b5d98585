//! Agent memory: the store's API, staging into a session's workspace and system prompt, and
//! the consolidation after a stop, against the scripted fake model and real sandboxes.

use sandbox_agents_agent::CONSOLIDATION_MARKER;
use sandbox_agents_domain::agent::AgentRef;
use sandbox_agents_domain::SessionId;
use sandbox_agents_fake_model::{FakeModel, RecordedRequest, Rule, Script};
use sandbox_agents_store::memory_consolidations::{self, NewConsolidation};
use sandbox_agents_store::projects::DEFAULT_PROJECT;
use sandbox_agents_store::{agent_memories, agents};
use sandbox_agents_testkit::runs::{start_run, wait_for_run};
use sandbox_agents_testkit::BOOT;
use sandbox_agents_testkit::{eventually, TestApp};
use serde_json::{json, Value};
use std::time::Duration;

fn memory_agent() -> Value {
    json!({"instructions": "You are a test agent.", "capabilities": ["shell", "filesystem", "memory"]})
}

async fn get_memory(app: &TestApp, agent: &str) -> reqwest::Response {
    app.http
        .get(app.url(&format!("/api/agents/{agent}/memory")))
        .send()
        .await
        .unwrap()
}

async fn put_memory(app: &TestApp, agent: &str, body: Value) -> reqwest::Response {
    app.http
        .put(app.url(&format!("/api/agents/{agent}/memory")))
        .json(&body)
        .send()
        .await
        .unwrap()
}

async fn memory(app: &TestApp, agent: &str) -> Value {
    let r = get_memory(app, agent).await;
    assert_eq!(r.status(), 200);
    r.json().await.unwrap()
}

async fn stop(app: &TestApp, id: &str) {
    app.stop_session(id).await;
}

/// The consolidation requests the fake model received.
fn consolidations(fake: &FakeModel) -> Vec<RecordedRequest> {
    fake.chat_requests()
        .into_iter()
        .filter(|r| {
            r.body["messages"][0]["content"]
                .as_str()
                .is_some_and(|s| s.starts_with(CONSOLIDATION_MARKER))
        })
        .collect()
}

fn system_of(r: &RecordedRequest) -> String {
    r.body["messages"][0]["content"]
        .as_str()
        .unwrap()
        .to_owned()
}

async fn jobs(app: &TestApp, slug: &str) -> Vec<memory_consolidations::ConsolidationState> {
    let agent = agents::get(&app.db, DEFAULT_PROJECT, &AgentRef::Slug(slug.into()))
        .await
        .unwrap();
    memory_consolidations::list_for_agent(&app.db, agent.id)
        .await
        .unwrap()
}

#[tokio::test]
async fn an_agents_memory_is_read_and_replaced_under_its_version() {
    let app = TestApp::builder().spawn().await;
    let agent = app.create_agent("keeper", json!({})).await;

    let m = memory(&app, "keeper").await;
    assert_eq!(
        m,
        json!({"memory": "", "summary": "", "version": 0, "updated_at": null})
    );

    let r = put_memory(
        &app,
        "keeper",
        json!({"memory": "# Notes\n- port 8123", "summary": "Port 8123.", "version": 0}),
    )
    .await;
    assert_eq!(r.status(), 200);
    let written: Value = r.json().await.unwrap();
    assert_eq!(written["version"], 1);
    assert_eq!(written["memory"], "# Notes\n- port 8123");
    assert!(written["updated_at"].is_string());
    // By id too.
    let id = agent["id"].as_str().unwrap();
    assert_eq!(memory(&app, id).await, written);

    // A stale version: 409, nothing written (a second first write included).
    for stale in [0, 5] {
        let r = put_memory(
            &app,
            "keeper",
            json!({"memory": "lost", "summary": "", "version": stale}),
        )
        .await;
        assert_eq!(r.status(), 409, "version {stale}");
        let err: Value = r.json().await.unwrap();
        assert!(err["detail"].as_str().unwrap().contains("read it again"));
    }
    assert_eq!(memory(&app, "keeper").await, written);

    // Too large: 413 with the limit, nothing written.
    let big = "x".repeat(256 * 1024 + 1);
    let r = put_memory(
        &app,
        "keeper",
        json!({"memory": big, "summary": "", "version": 1}),
    )
    .await;
    assert_eq!(r.status(), 413);
    let err: Value = r.json().await.unwrap();
    assert!(err["detail"].as_str().unwrap().contains("256 KiB"));
    let long = "y".repeat(16_001);
    let r = put_memory(
        &app,
        "keeper",
        json!({"memory": "", "summary": long, "version": 1}),
    )
    .await;
    assert_eq!(r.status(), 413);
    assert!(r.json::<Value>().await.unwrap()["detail"]
        .as_str()
        .unwrap()
        .contains("16000"));
    // A body that is not the shape: 422.
    let r = put_memory(&app, "keeper", json!({"memory": "m", "version": 1})).await;
    assert_eq!(r.status(), 422);
    let r = put_memory(
        &app,
        "keeper",
        json!({"memory": "m", "summary": "", "version": 1, "extra": true}),
    )
    .await;
    assert_eq!(r.status(), 422);
    assert_eq!(memory(&app, "keeper").await, written);

    // Unknown agents: 404 with a detail.
    let r = get_memory(&app, "nobody").await;
    assert_eq!(r.status(), 404);
    assert!(r.json::<Value>().await.unwrap()["detail"]
        .as_str()
        .unwrap()
        .contains("nobody"));
    let r = put_memory(
        &app,
        "nobody",
        json!({"memory": "", "summary": "", "version": 0}),
    )
    .await;
    assert_eq!(r.status(), 404);

    let r = put_memory(
        &app,
        "keeper",
        json!({"memory": "# Notes", "summary": "", "version": 1}),
    )
    .await;
    assert_eq!(r.status(), 200);
    assert_eq!(r.json::<Value>().await.unwrap()["version"], 2);
}

#[tokio::test]
async fn memory_is_staged_consolidated_after_a_stop_and_seen_by_the_next_session() {
    let fake = FakeModel::start(Script::new([
        Rule::when()
            .system_contains(CONSOLIDATION_MARKER)
            .last_user_contains("K-42")
            .reply_text(
                "<memory>\n# Memory\n- port 8123\n- the deploy key is K-42\n</memory>\n\
                 <summary>\nPort 8123; deploy key K-42.\n</summary>",
            ),
        Rule::always().reply_text("noted"),
    ]));
    let app = TestApp::builder()
        .with_model_proxy(&fake.root_url())
        .spawn()
        .await;
    app.create_agent("memo", memory_agent()).await;
    let r = put_memory(
        &app,
        "memo",
        json!({"memory": "# Memory\n- port 8123\n", "summary": "Uses port 8123.", "version": 0}),
    )
    .await;
    assert_eq!(r.status(), 200);

    // The first session starts with the store in its workspace and its summary in the
    // system prompt.
    let first = app.boot_session(json!({"agent_id": "memo"})).await;
    assert_eq!(
        app.exec(&first, "cat memories/MEMORY.md").await.1,
        "# Memory\n- port 8123\n"
    );
    assert_eq!(
        app.exec(&first, "cat memories/memory_summary.md").await.1,
        "Uses port 8123."
    );
    let run = start_run(&app, &first, "which port do we use?", Value::Null).await;
    wait_for_run(&app, &first, &run).await;
    let system = system_of(fake.chat_requests().last().unwrap());
    assert!(system.starts_with("You are a test agent."), "{system}");
    assert!(system.contains("memories/MEMORY.md"), "{system}");
    assert!(system.contains("verify"), "{system}");
    assert!(system.ends_with("Uses port 8123."), "{system}");

    // It learns something and writes it down; the stop queues the consolidation.
    let (code, _, _) = app
        .exec(
            &first,
            "echo '- the deploy key is K-42' >> memories/MEMORY.md",
        )
        .await;
    assert_eq!(code, 0);
    stop(&app, &first).await;
    let queued = jobs(&app, "memo").await;
    assert_eq!(queued.len(), 1);
    assert_eq!(queued[0].status, "pending");
    assert_eq!(queued[0].session_id.to_string(), first);
    assert!(consolidations(&fake).is_empty(), "not in the stop's path");

    assert_eq!(app.runs.consolidate_memories().await.unwrap(), 1);
    let calls = consolidations(&fake);
    assert_eq!(calls.len(), 1);
    let asked = calls[0].body["messages"][1]["content"].as_str().unwrap();
    assert!(asked.contains("- the deploy key is K-42"), "{asked}");
    assert!(asked.contains("which port do we use?"), "{asked}");
    assert!(
        asked.contains("<memory>"),
        "the format is asked for: {asked}"
    );
    let m = memory(&app, "memo").await;
    assert_eq!(m["version"], 2);
    assert_eq!(
        m["memory"],
        "# Memory\n- port 8123\n- the deploy key is K-42"
    );
    assert_eq!(m["summary"], "Port 8123; deploy key K-42.");
    assert_eq!(jobs(&app, "memo").await[0].status, "done");

    // The next session sees it: in its workspace, and in its system prompt.
    let second = app.boot_session(json!({"agent_id": "memo"})).await;
    assert_eq!(
        app.exec(&second, "cat memories/MEMORY.md").await.1,
        "# Memory\n- port 8123\n- the deploy key is K-42"
    );
    let run = start_run(&app, &second, "deploy", Value::Null).await;
    wait_for_run(&app, &second, &run).await;
    let system = system_of(fake.chat_requests().last().unwrap());
    assert!(system.ends_with("Port 8123; deploy key K-42."), "{system}");

    // The first session, started again, gets the merged store too (its restored workspace
    // held the copy it ended with).
    let r = app
        .http
        .post(app.url(&format!("/api/sessions/{first}/start")))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "{}", r.text().await.unwrap());
    app.wait_for_status(&first, "running", BOOT).await;
    assert_eq!(
        app.exec(&first, "cat memories/memory_summary.md").await.1,
        "Port 8123; deploy key K-42."
    );
}

#[tokio::test]
async fn a_session_that_learnt_nothing_queues_no_consolidation() {
    let fake = FakeModel::start(Script::new([Rule::always().reply_text("ok")]));
    let app = TestApp::builder()
        .with_model_proxy(&fake.root_url())
        .spawn()
        .await;
    let id = app.running_session("quiet", memory_agent()).await;
    assert_eq!(app.exec(&id, "cat memories/MEMORY.md").await.1, "");
    stop(&app, &id).await;
    assert!(jobs(&app, "quiet").await.is_empty());
    assert_eq!(app.runs.consolidate_memories().await.unwrap(), 0);
    assert!(fake.chat_requests().is_empty());
    assert_eq!(memory(&app, "quiet").await["version"], 0);

    // Without the capability, nothing is staged.
    let plain = app.running_session("plain", json!({})).await;
    let (code, _, _) = app.exec(&plain, "test -e memories").await;
    assert_eq!(code, 1);
}

#[tokio::test]
async fn two_sessions_consolidating_at_once_both_land() {
    // The first calls of both consolidations wait, so both are in flight on version 0; the
    // one that loses the write asks again with the store the other wrote.
    let merged = |a: &str, b: &str| {
        format!("<memory>\n- remembered: {a}\n- remembered: {b}\n</memory>\n<summary>\n{a} and {b}\n</summary>")
    };
    let fake = FakeModel::start(Script::new([
        Rule::when()
            .system_contains(CONSOLIDATION_MARKER)
            .any_message_contains("remembered: alpha")
            .last_user_contains("FACT-B")
            .reply_text(merged("alpha", "beta")),
        Rule::when()
            .system_contains(CONSOLIDATION_MARKER)
            .any_message_contains("remembered: beta")
            .last_user_contains("FACT-A")
            .reply_text(merged("beta", "alpha")),
        Rule::when()
            .system_contains(CONSOLIDATION_MARKER)
            .last_user_contains("FACT-A")
            .reply_text("<memory>\n- remembered: alpha\n</memory>\n<summary>\nalpha\n</summary>")
            .delay_ms(1500),
        Rule::when()
            .system_contains(CONSOLIDATION_MARKER)
            .last_user_contains("FACT-B")
            .reply_text("<memory>\n- remembered: beta\n</memory>\n<summary>\nbeta\n</summary>")
            .delay_ms(1500),
        Rule::always().reply_text("noted"),
    ]));
    let app = TestApp::builder()
        .with_model_proxy(&fake.root_url())
        .spawn()
        .await;
    let a = app.running_session("pair", memory_agent()).await;
    let b = app.boot_session(json!({"agent_id": "pair"})).await;
    for (id, fact) in [(&a, "FACT-A"), (&b, "FACT-B")] {
        let run = start_run(&app, id, &format!("remember {fact}"), Value::Null).await;
        wait_for_run(&app, id, &run).await;
        stop(&app, id).await;
    }
    assert_eq!(jobs(&app, "pair").await.len(), 2);

    let (x, y) = tokio::join!(
        app.runs.consolidate_memory_once(),
        app.runs.consolidate_memory_once()
    );
    assert!(x.unwrap() && y.unwrap(), "each call took a job");
    let m = memory(&app, "pair").await;
    let text = m["memory"].as_str().unwrap();
    assert!(
        text.contains("remembered: alpha") && text.contains("remembered: beta"),
        "{m}"
    );
    assert_eq!(m["version"], 2);
    assert_eq!(
        consolidations(&fake).len(),
        3,
        "one call again for the loser"
    );
    assert!(jobs(&app, "pair").await.iter().all(|j| j.status == "done"));
}

#[tokio::test]
async fn an_answer_out_of_format_fails_the_attempt_and_is_retried() {
    let fake = FakeModel::start(Script::new([
        Rule::when()
            .system_contains(CONSOLIDATION_MARKER)
            .reply_text("I merged it, trust me.")
            .times(1),
        Rule::when()
            .system_contains(CONSOLIDATION_MARKER)
            .reply_text("<memory>\n- learnt\n</memory>\n<summary>\nlearnt\n</summary>"),
    ]));
    let app = TestApp::builder()
        .with_model_proxy(&fake.root_url())
        .spawn()
        .await;
    let agent = app.create_agent("retry", memory_agent()).await;
    let agent_id = agents::get(&app.db, DEFAULT_PROJECT, &AgentRef::Slug("retry".into()))
        .await
        .unwrap()
        .id;
    assert_eq!(agent["id"], agent_id.to_string());
    // A job as a stop queues it (its session need not exist any more).
    memory_consolidations::enqueue(
        &app.db,
        &NewConsolidation {
            agent_id,
            project_id: DEFAULT_PROJECT,
            session_id: SessionId::new(),
            baseline: String::new(),
            ended: Some("- learnt".into()),
            transcript: "user: learn".into(),
        },
    )
    .await
    .unwrap();

    assert!(app.runs.consolidate_memory_once().await.unwrap());
    let job = &jobs(&app, "retry").await[0];
    assert_eq!(job.status, "pending");
    assert_eq!(job.attempts, 1);
    assert!(
        job.last_error.as_deref().unwrap().contains("format"),
        "{:?}",
        job.last_error
    );
    assert_eq!(
        agent_memories::get(&app.db, DEFAULT_PROJECT, agent_id)
            .await
            .unwrap()
            .version,
        0,
        "nothing written"
    );
    // Not claimed again before its pause.
    assert!(!app.runs.consolidate_memory_once().await.unwrap());

    eventually("the retry", Duration::from_secs(15), async || {
        app.runs
            .consolidate_memory_once()
            .await
            .unwrap()
            .then_some(())
    })
    .await;
    let job = &jobs(&app, "retry").await[0];
    assert_eq!(job.status, "done");
    assert_eq!(job.attempts, 2);
    assert_eq!(memory(&app, "retry").await["memory"], "- learnt");
}
