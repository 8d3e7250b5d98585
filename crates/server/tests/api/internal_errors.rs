//! A failure whose cause is ours (the database here) ends a run with a reference, never with
//! the cause: the run's `error` and every event of the session (which webhooks deliver as
//! they are) carry `internal error (reference <id>)`; the server log has the cause.

use sandbox_agents_fake_model::{FakeModel, Rule, Script};
use sandbox_agents_testkit::runs::{start_run, wait_for_run};
use sandbox_agents_testkit::TestApp;
use serde_json::{json, Value};

/// What the database says when the run records the tool call: a host and a detail no user
/// should ever read.
const CAUSE: &str = "boom-cause at db-host-zq81.internal.example with detail s3cr3t-internal-xq7";

#[tokio::test]
async fn a_database_error_inside_a_run_reaches_the_user_as_a_reference_only() {
    let fake = FakeModel::start(Script::new([Rule::when()
        .last_user_contains("look")
        .reply_tool_call("lookup", json!({"id": "1"}))]));
    let app = TestApp::builder()
        .with_model_proxy(&fake.root_url())
        .spawn()
        .await;
    app.create_agent(
        "desk",
        json!({"client_tools": [{"name": "lookup", "description": "Look up.",
               "parameters": {"type": "object", "properties": {"id": {"type": "string"}}}}]}),
    )
    .await;
    let s = app.create_session(json!({"agent_id": "desk"})).await;
    let id = s["id"].as_str().unwrap().to_owned();
    app.wait_for_status(&id, "running", sandbox_agents_testkit::BOOT)
        .await;
    // Recording a client tool call now fails inside the database.
    for sql in [
        format!(
            "create function fail_tool_calls() returns trigger language plpgsql as \
             $$ begin raise exception '{CAUSE}'; end $$"
        ),
        "create trigger fail_tool_calls before insert on tool_calls for each row \
         execute function fail_tool_calls()"
            .to_owned(),
    ] {
        sqlx::query(&sql).execute(&app.db).await.unwrap();
    }

    let run = start_run(&app, &id, "look it up", Value::Null).await;
    let evs = wait_for_run(&app, &id, &run).await;
    let end = evs.last().unwrap();
    assert_eq!(end["type"], "session.status_error", "{end}");
    let said = end["payload"]["error"].as_str().unwrap().to_owned();
    let reference = said
        .strip_prefix("internal error (reference ")
        .and_then(|r| r.strip_suffix(')'))
        .unwrap_or_else(|| panic!("not a reference: {said}"));
    assert!(
        reference.len() >= 8 && reference.bytes().all(|b| b.is_ascii_hexdigit()),
        "{said}"
    );
    let (error,): (Option<String>,) = sqlx::query_as("select error from runs where id = $1::uuid")
        .bind(&run)
        .fetch_one(&app.db)
        .await
        .unwrap();
    assert_eq!(error.as_deref(), Some(said.as_str()));
    let log = serde_json::to_string(&app.events(&id).await).unwrap();
    for secret in ["boom-cause", "db-host-zq81", "s3cr3t-internal-xq7"] {
        assert!(
            !log.contains(secret),
            "the event log shows the cause ({secret}): {log}"
        );
    }
}
