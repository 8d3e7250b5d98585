//! What memory consolidation costs and what it keeps: its model calls counted in usage (the
//! project's report, by agent and by model, and the session whose stop queued it), and a
//! session whose sandbox was lost still consolidating what its finished runs wrote.

use sandbox_agents_agent::CONSOLIDATION_MARKER;
use sandbox_agents_domain::agent::AgentRef;
use sandbox_agents_fake_model::{FakeModel, Rule, Script};
use sandbox_agents_store::agents;
use sandbox_agents_store::memory_consolidations::{self, ConsolidationState};
use sandbox_agents_store::projects::DEFAULT_PROJECT;
use sandbox_agents_testkit::runs::{start_run, wait_for_run};
use sandbox_agents_testkit::TestApp;
use serde_json::{json, Value};

fn memory_agent() -> Value {
    json!({"instructions": "You are a test agent.", "model": "memo-model",
           "capabilities": ["shell", "filesystem", "memory"]})
}

async fn jobs(app: &TestApp, slug: &str) -> Vec<ConsolidationState> {
    let agent = agents::get(&app.db, DEFAULT_PROJECT, &AgentRef::Slug(slug.into()))
        .await
        .unwrap();
    memory_consolidations::list_for_agent(&app.db, agent.id)
        .await
        .unwrap()
}

async fn usage_by(app: &TestApp, group_by: &str) -> Value {
    let r = app
        .http
        .get(app.url(&format!("/api/usage?group_by={group_by}")))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    r.json().await.unwrap()
}

fn group<'a>(report: &'a Value, key: &str) -> &'a Value {
    report["groups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["key"] == key)
        .unwrap_or_else(|| panic!("no group {key}: {report}"))
}

#[tokio::test]
async fn consolidation_calls_are_counted_in_usage_failed_attempts_included() {
    let fake = FakeModel::start(Script::new([
        // The first attempt answers out of format (it fails, and was paid for), the retry
        // merges.
        Rule::when()
            .system_contains(CONSOLIDATION_MARKER)
            .reply_text("I merged it, trust me.")
            .usage(1000, 10)
            .times(1),
        Rule::when()
            .system_contains(CONSOLIDATION_MARKER)
            .reply_text("<memory>\n- K-7\n</memory>\n<summary>\nK-7\n</summary>")
            .usage(700, 50),
        Rule::always().reply_text("noted").usage(30, 5),
    ]));
    let app = TestApp::builder()
        .with_model_proxy(&fake.root_url())
        .spawn()
        .await;
    let id = app.running_session("memo", memory_agent()).await;
    let run = start_run(&app, &id, "remember K-7", Value::Null).await;
    wait_for_run(&app, &id, &run).await;
    app.stop_session(&id).await;
    let before = app.session(&id).await["usage"].clone();
    assert_eq!(before["total_tokens"], 35, "{before}");

    assert!(app.runs.consolidate_memory_once().await.unwrap());
    assert_eq!(jobs(&app, "memo").await[0].status, "pending", "a retry");
    // The retry comes after its pause: claim it by hand rather than wait.
    sqlx::query("update memory_consolidations set leased_until = null")
        .execute(&app.db)
        .await
        .unwrap();
    assert!(app.runs.consolidate_memory_once().await.unwrap());
    let job = &jobs(&app, "memo").await[0];
    assert_eq!(job.status, "done");
    assert_eq!(job.usage.0["requests"], 2, "{:?}", job.usage);
    assert_eq!(job.usage.0["total_tokens"], 1760);

    // The session whose stop queued it: totals and splits hold it, `memory` says which part.
    let u = app.session(&id).await["usage"].clone();
    assert_eq!(u["total_tokens"], 35 + 1760, "{u}");
    assert_eq!(u["requests"], 3, "{u}");
    assert_eq!(u["memory"]["total_tokens"], 1760, "{u}");
    assert_eq!(u["memory"]["requests"], 2, "{u}");
    assert_eq!(u["by_agent"]["memo"]["total_tokens"], 35 + 1760, "{u}");
    assert_eq!(
        u["by_model"]["memo-model"]["input_tokens"],
        30 + 1700,
        "{u}"
    );
    assert_eq!(
        u["active_seconds"], before["active_seconds"],
        "no turn was working"
    );

    // The project's report: by agent, by model and by day, not as a run.
    for (by, key) in [("agent", "memo"), ("model", "memo-model")] {
        let report = usage_by(&app, by).await;
        let g = group(&report, key);
        assert_eq!(g["total_tokens"], 35 + 1760, "{report}");
        assert_eq!(g["requests"], 3, "{report}");
        assert_eq!(g["runs"], 1, "{report}");
        assert_eq!(g["memory_tokens"], 1760, "{report}");
        assert_eq!(g["memory_requests"], 2, "{report}");
    }
    let report = usage_by(&app, "day").await;
    assert_eq!(report["total"]["total_tokens"], 35 + 1760, "{report}");
    assert_eq!(report["total"]["runs"], 1, "{report}");
    assert_eq!(report["total"]["memory_tokens"], 1760, "{report}");
}

#[tokio::test]
async fn a_lost_sandbox_still_consolidates_what_its_finished_runs_wrote() {
    let fake = FakeModel::start(Script::new([
        Rule::when()
            .system_contains(CONSOLIDATION_MARKER)
            .reply_text("<memory>\n- the key is K-99\n</memory>\n<summary>\nK-99\n</summary>"),
        // The run writes its memory through a tool call, as an agent does.
        Rule::when()
            .last_message_role("tool")
            .reply_text("written down"),
        Rule::always().reply_tool_call(
            "shell",
            json!({"command": "echo '- the key is K-99' >> memories/MEMORY.md"}),
        ),
    ]));
    let app = TestApp::builder()
        .with_model_proxy(&fake.root_url())
        .spawn()
        .await;
    let id = app.running_session("lost", memory_agent()).await;
    let run = start_run(&app, &id, "remember the key K-99", Value::Null).await;
    let evs = wait_for_run(&app, &id, &run).await;
    assert_eq!(
        evs.last().unwrap()["payload"]["final_output"],
        "written down"
    );

    // The sandbox goes away behind the server's back; a restart finds it gone.
    let container = app.session(&id).await["container_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let out = std::process::Command::new("docker")
        .args(["rm", "-f", "-v", &container])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    app.sessions.reconcile_on_start().await.unwrap();
    let s = app.session(&id).await;
    assert_eq!(s["stopped_reason"], "restart", "{s}");

    let queued = jobs(&app, "lost").await;
    assert_eq!(queued.len(), 1, "a consolidation is queued");
    assert_eq!(
        queued[0].ended.as_deref(),
        Some("- the key is K-99\n"),
        "from the copy read back when the run ended"
    );
    assert_eq!(app.runs.consolidate_memories().await.unwrap(), 1);
    let asked: Vec<String> = fake
        .chat_requests()
        .into_iter()
        .filter(|r| {
            r.body["messages"][0]["content"]
                .as_str()
                .is_some_and(|s| s.starts_with(CONSOLIDATION_MARKER))
        })
        .map(|r| {
            r.body["messages"][1]["content"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(asked.len(), 1);
    assert!(asked[0].contains("- the key is K-99"), "{}", asked[0]);
    assert!(asked[0].contains("remember the key K-99"), "{}", asked[0]);

    // The next session starts with it.
    let next = app.boot_session(json!({"agent_id": "lost"})).await;
    assert_eq!(
        app.exec(&next, "cat memories/MEMORY.md").await.1,
        "- the key is K-99"
    );
}

#[tokio::test]
async fn a_stop_that_cannot_read_the_memory_back_consolidates_the_last_copy_read() {
    let fake = FakeModel::start(Script::new([
        Rule::when()
            .last_message_role("tool")
            .reply_text("written down"),
        Rule::always().reply_tool_call(
            "shell",
            json!({"command": "echo '- the port is 8123' >> memories/MEMORY.md"}),
        ),
    ]));
    let app = TestApp::builder()
        .with_model_proxy(&fake.root_url())
        .spawn()
        .await;
    let id = app.running_session("gone", memory_agent()).await;
    let run = start_run(&app, &id, "remember the port", Value::Null).await;
    wait_for_run(&app, &id, &run).await;
    let container = app.session(&id).await["container_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let out = std::process::Command::new("docker")
        .args(["rm", "-f", "-v", &container])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");

    app.stop_session(&id).await;
    let queued = jobs(&app, "gone").await;
    assert_eq!(queued.len(), 1, "a consolidation is queued");
    assert_eq!(queued[0].ended.as_deref(), Some("- the port is 8123\n"));
}
