//! Runs: turns of the agent loop on real Docker sandboxes, against the scripted fake model.

use sandbox_agents_fake_model::{FakeModel, Rule, Script};
use sandbox_agents_testkit::runs::{
    is_terminal, send, start_run, test_agent, types, wait_for_run, TURN,
};
use sandbox_agents_testkit::sse::SseReader;
use sandbox_agents_testkit::{eventually, TestApp};
use serde_json::{json, Value};

use std::time::{Duration, Instant};

pub(crate) const BOOT: Duration = Duration::from_secs(60);

#[tokio::test]
async fn a_turn_runs_a_shell_tool_streams_deltas_and_a_follow_up_continues_the_conversation() {
    let fake = FakeModel::start(Script::new([
        Rule::when()
            .last_user_contains("what did you do")
            .reply_text("I wrote hi into out.txt."),
        Rule::when()
            .last_tool_result_contains("exit code: 0")
            .reply_text("Done: out.txt now says hi."),
        Rule::when()
            .last_user_contains("write")
            .reply_tool_call("shell", json!({"command": "echo hi > out.txt"})),
    ]));
    let app = TestApp::builder()
        .with_model_proxy(&fake.root_url())
        .spawn()
        .await;
    let id = app.running_session("runner", test_agent()).await;
    let cursor = app.events(&id).await.last().unwrap()["seq"]
        .as_i64()
        .unwrap();
    let stream = app
        .http
        .get(app.url(&format!("/api/sessions/{id}/events/stream?after={cursor}")))
        .send()
        .await
        .unwrap();
    let mut sse = SseReader::new(stream);

    let run = start_run(&app, &id, "write hi to out.txt", Value::Null).await;
    // The stream: deltas (seq 0) live, then the terminal event.
    let mut deltas = String::new();
    loop {
        let f = sse.next_event(TURN).await.expect("the stream goes on");
        let e = f.json();
        if e["type"] == "agent.text_delta" {
            assert_eq!(e["seq"], 0);
            assert_eq!(e["run_id"], run);
            deltas.push_str(e["payload"]["text"].as_str().unwrap());
        }
        if is_terminal(&e) {
            break;
        }
    }
    assert_eq!(deltas, "Done: out.txt now says hi.");

    let evs = wait_for_run(&app, &id, &run).await;
    assert_eq!(
        types(&evs),
        [
            "user.message",
            "agent.tool_use",
            "agent.tool_result",
            "agent.message",
            "session.status_idle"
        ]
    );
    assert_eq!(evs[0]["payload"]["text"], "write hi to out.txt");
    assert_eq!(evs[1]["payload"]["tool"], "shell");
    assert_eq!(evs[1]["payload"]["call_id"], evs[2]["payload"]["call_id"]);
    assert!(evs[2]["payload"]["output"]
        .as_str()
        .unwrap()
        .contains("exit code: 0"));
    let end = &evs[4]["payload"];
    assert_eq!(end["final_output"], "Done: out.txt now says hi.");
    assert_eq!(end["stop_reason"], "end_turn");
    assert_eq!(end["run_status"], "completed");
    assert_eq!(end["turns"], 2);
    assert_eq!(end["usage"]["requests"], 2);
    assert!(end["usage"]["total_tokens"].as_u64().unwrap() > 0);
    assert!(end["usage"]["by_model"].is_object());
    assert_eq!(end["usage"]["by_agent"]["runner"]["requests"], 2);
    assert_eq!(end["session_usage"]["requests"], 2);
    assert!(end["sandbox_seconds"].as_f64().unwrap() > 0.0);
    assert_eq!(app.exec(&id, "cat out.txt").await.1, "hi\n");

    let s = app.session(&id).await;
    assert_eq!(s["activity"], "idle");
    assert_eq!(s["runs"][0]["id"], run);
    assert_eq!(s["runs"][0]["status"], "completed");
    assert_eq!(s["runs"][0]["final_output"], "Done: out.txt now says hi.");
    assert_eq!(s["usage"]["requests"], 2);

    // A follow-up continues the conversation: the model sees the earlier turn.
    fake.clear_requests();
    let run2 = start_run(&app, &id, "what did you do?", json!(5)).await;
    let evs = wait_for_run(&app, &id, &run2).await;
    assert_eq!(
        evs.last().unwrap()["payload"]["final_output"],
        "I wrote hi into out.txt."
    );
    let req = &fake.chat_requests()[0].body;
    let msgs = req["messages"].as_array().unwrap();
    assert_eq!(msgs[0]["role"], "system");
    assert_eq!(msgs[0]["content"], "You are a test agent.");
    let roles: Vec<&str> = msgs.iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(
        roles,
        ["system", "user", "assistant", "tool", "assistant", "user"]
    );
    assert_eq!(msgs[1]["content"], "write hi to out.txt");
    let tools: Vec<&str> = req["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        tools,
        [
            "shell",
            "read_file",
            "write_file",
            "edit_file",
            "list_files"
        ]
    );
    let s = app.session(&id).await;
    assert_eq!(s["usage"]["requests"], 3);
    assert_eq!(s["runs"].as_array().unwrap().len(), 2);
}

#[tokio::test]
async fn a_busy_session_refuses_a_message_and_interrupt_writes_the_cancelled_end_first() {
    let fake = FakeModel::start(Script::new([Rule::always()
        .reply_text("too slow")
        .delay_ms(20_000)]));
    let app = TestApp::builder()
        .with_model_proxy(&fake.root_url())
        .spawn()
        .await;
    let id = app.running_session("slow", test_agent()).await;
    let run = start_run(&app, &id, "take your time", Value::Null).await;
    assert_eq!(app.session(&id).await["activity"], "busy");

    let r = send(&app, &id, json!({"prompt": "again", "max_turns": null})).await;
    assert_eq!(r.status(), 409);
    let r = send(
        &app,
        &id,
        json!({"prompt": "x", "max_turns": null, "client_tools": [{"name": "t"}]}),
    )
    .await;
    assert_eq!(r.status(), 409);
    let r = send(&app, &id, json!({"prompt": "x", "max_turns": 0})).await;
    assert_eq!(r.status(), 422);

    let started = Instant::now();
    let r = app
        .http
        .post(app.url(&format!("/api/sessions/{id}/interrupt")))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert!(started.elapsed() < Duration::from_secs(10));
    // Already in the log when the answer came back.
    let evs: Vec<Value> = app
        .events(&id)
        .await
        .into_iter()
        .filter(|e| e["run_id"] == run)
        .collect();
    assert_eq!(types(&evs), ["user.message", "session.status_idle"]);
    assert_eq!(evs[1]["payload"]["stop_reason"], "cancelled");
    assert_eq!(evs[1]["payload"]["run_status"], "cancelled");
    let s = app.session(&id).await;
    assert_eq!(s["activity"], "idle");
    assert_eq!(s["runs"][0]["status"], "cancelled");

    // The session takes the next message at once.
    fake.set_script(Script::new([Rule::always().reply_text("quick")]));
    let run2 = start_run(&app, &id, "now quickly", Value::Null).await;
    let evs = wait_for_run(&app, &id, &run2).await;
    assert_eq!(evs.last().unwrap()["payload"]["final_output"], "quick");
}

#[tokio::test]
async fn max_turns_and_model_errors_fail_the_run_with_its_id() {
    let fake = FakeModel::start(Script::new([
        Rule::always().reply_tool_call("shell", json!({"command": "true"}))
    ]));
    let app = TestApp::builder()
        .with_model_proxy(&fake.root_url())
        .spawn()
        .await;
    let id = app.running_session("looper", test_agent()).await;

    let run = start_run(&app, &id, "loop", json!(2)).await;
    let evs = wait_for_run(&app, &id, &run).await;
    let end = evs.last().unwrap();
    assert_eq!(end["type"], "session.status_error");
    assert_eq!(end["run_id"], run);
    assert_eq!(end["payload"]["stop_reason"], "max_turns");
    assert_eq!(end["payload"]["run_status"], "failed");
    assert_eq!(end["payload"]["turns"], 2);
    assert!(end["payload"]["error"].as_str().unwrap().contains('2'));

    fake.set_script(Script::new([
        Rule::always().reply_error(400, "the model is confused")
    ]));
    let run = start_run(&app, &id, "fail", Value::Null).await;
    let evs = wait_for_run(&app, &id, &run).await;
    assert_eq!(types(&evs), ["user.message", "session.status_error"]);
    let end = &evs[1]["payload"];
    assert_eq!(end["run_status"], "failed");
    assert_eq!(end["stop_reason"], "error");
    assert!(
        end["error"]
            .as_str()
            .unwrap()
            .contains("the model is confused"),
        "{end}"
    );
    let s = app.session(&id).await;
    assert_eq!(s["activity"], "idle");
    assert_eq!(s["status"], "running");
    assert_eq!(s["runs"][1]["status"], "failed");
}

#[tokio::test]
async fn a_run_whose_server_died_is_failed_and_one_a_live_server_drives_is_not() {
    let app = sandbox_agents_testkit::TestApp::builder().spawn().await;
    let agent = app.seed_agent("orphan").await;
    // Another live server: it holds its liveness lock on a connection of its own.
    let mut other = app.db.acquire().await.unwrap().detach();
    assert!(
        sandbox_agents_store::liveness::try_hold(&mut other, 777_001)
            .await
            .unwrap()
    );
    let mut runs = Vec::new();
    for worker in [777_002, 777_001] {
        let id = app.seed_session(agent.id).await;
        sqlx::query("update sessions set status = 'stopped', stopped_reason = 'restart', activity = 'busy' where id = $1")
            .bind(id.0)
            .execute(&app.db)
            .await
            .unwrap();
        let run = sandbox_agents_domain::RunId::new();
        sandbox_agents_store::runs::insert(
            &app.db,
            &sandbox_agents_store::runs::NewRun {
                id: run,
                session: id,
                prompt: "hello",
                max_turns: 25,
                client_tools: &[],
                worker,
                admitted: true,
            },
        )
        .await
        .unwrap();
        runs.push((id, run));
    }
    app.sessions.reconcile_on_start().await.unwrap();

    // 777_002 is nobody's: its run failed, and the session takes messages again.
    let (dead_session, dead_run) = runs[0];
    let evs = app.events(&dead_session.to_string()).await;
    let end = evs.last().unwrap();
    assert_eq!(end["type"], "session.status_error");
    assert_eq!(end["run_id"], dead_run.to_string());
    assert_eq!(end["payload"]["run_status"], "failed");
    assert!(
        end["payload"]["error"]
            .as_str()
            .unwrap()
            .contains("the server process running this turn stopped"),
        "{end}"
    );
    let s = app.session(&dead_session.to_string()).await;
    assert_eq!(s["activity"], "idle");
    assert_eq!(s["runs"][0]["status"], "failed");

    // 777_001 is alive: its run is left to it.
    let (live_session, _) = runs[1];
    let s = app.session(&live_session.to_string()).await;
    assert_eq!(s["activity"], "busy");
    assert_eq!(s["runs"][0]["status"], "running");

    // Once that server is gone too, the next sweep fails its run.
    drop(other);
    eventually("the dead server's run to be failed", TURN, async || {
        app.sessions.reconcile_on_start().await.unwrap();
        let s = app.session(&live_session.to_string()).await;
        if s["runs"][0]["status"] == "failed" {
            Ok(())
        } else {
            Err(s.to_string())
        }
    })
    .await;
}

/// A run stamped with this live process's key that no task of it drives any more (its driver
/// panicked, or could not write the run's end) is failed by the recovery sweep: by the second
/// sweep that finds it so, as a run is stamped a moment before its driver starts. A run the
/// process does drive is left alone.
#[tokio::test]
async fn a_run_its_live_process_no_longer_drives_is_failed_by_the_second_sweep() {
    let fake = FakeModel::start(Script::new([Rule::when()
        .last_user_contains("slow")
        .reply_text("late")
        .delay_ms(60_000)]));
    let app = TestApp::builder()
        .with_model_proxy(&fake.root_url())
        .spawn()
        .await;
    let driven = app.running_session("driven", test_agent()).await;
    let slow = start_run(&app, &driven, "slow", Value::Null).await;
    let worker: i32 = sqlx::query_scalar("select worker from runs where id = $1::uuid")
        .bind(&slow)
        .fetch_one(&app.db)
        .await
        .unwrap();

    let agent = app.seed_agent("abandoned").await;
    let lost = app.seed_session(agent.id).await;
    sqlx::query("update sessions set status = 'stopped', stopped_reason = 'restart', activity = 'busy' where id = $1")
        .bind(lost.0)
        .execute(&app.db)
        .await
        .unwrap();
    let run = sandbox_agents_domain::RunId::new();
    sandbox_agents_store::runs::insert(
        &app.db,
        &sandbox_agents_store::runs::NewRun {
            id: run,
            session: lost,
            prompt: "hello",
            max_turns: 25,
            client_tools: &[],
            worker,
            admitted: true,
        },
    )
    .await
    .unwrap();
    let lost = lost.to_string();

    app.sessions.reconcile_on_start().await.unwrap();
    let s = app.session(&lost).await;
    assert_eq!(
        s["runs"][0]["status"], "running",
        "one sweep only suspects it"
    );
    app.sessions.reconcile_on_start().await.unwrap();
    let s = app.session(&lost).await;
    assert_eq!(s["activity"], "idle");
    assert_eq!(s["runs"][0]["status"], "failed");
    let end = app.events(&lost).await.pop().unwrap();
    assert_eq!(end["type"], "session.status_error");
    assert_eq!(end["run_id"], run.to_string());
    assert!(
        end["payload"]["error"]
            .as_str()
            .unwrap()
            .contains("ended without recording its end"),
        "{end}"
    );

    // The turn this process drives went on through both sweeps.
    let s = app.session(&driven).await;
    assert_eq!(s["runs"][0]["status"], "running");
    assert_eq!(s["activity"], "busy");
    app.interrupt(&driven).await;
    let evs = wait_for_run(&app, &driven, &slow).await;
    assert_eq!(evs.last().unwrap()["payload"]["stop_reason"], "cancelled");
}

#[tokio::test]
async fn a_session_created_with_a_prompt_runs_it_right_after_the_boot() {
    let fake = FakeModel::start(Script::new([Rule::when()
        .last_user_contains("hello")
        .reply_text("Hi there.")]));
    let app = TestApp::builder()
        .with_model_proxy(&fake.root_url())
        .spawn()
        .await;
    app.create_agent("greeter", json!({})).await;
    let s = app
        .create_session(json!({"agent_id": "greeter", "prompt": "hello"}))
        .await;
    let id = s["id"].as_str().unwrap().to_owned();
    // No run id comes back: the first terminal event in the log is the first run's.
    let evs = eventually("the first prompt to end", BOOT + TURN, async || {
        let evs = app.events(&id).await;
        if evs.iter().any(is_terminal) {
            Ok(evs)
        } else {
            Err(format!("{evs:?}"))
        }
    })
    .await;
    assert_eq!(
        types(&evs),
        [
            "session.created",
            "session.status_running",
            "user.message",
            "agent.message",
            "session.status_idle"
        ]
    );
    let run = evs[2]["run_id"].as_str().unwrap();
    assert_eq!(evs[4]["run_id"], run);
    assert_eq!(evs[4]["payload"]["final_output"], "Hi there.");
    let s = app.session(&id).await;
    assert_eq!(s["runs"][0]["id"], run);
    assert_eq!(s["runs"][0]["prompt"], "hello");
    assert_eq!(s["activity"], "idle");
}

#[tokio::test]
async fn an_interrupt_kills_the_tool_process_the_run_started() {
    let fake = FakeModel::start(Script::new([Rule::when()
        .last_user_contains("wait")
        .reply_tool_call(
            "shell",
            json!({"command": "setsid sleep 600 & sleep 600", "timeout": 600}),
        )]));
    let app = TestApp::builder()
        .with_model_proxy(&fake.root_url())
        .spawn()
        .await;
    let id = app.running_session("sleeper", test_agent()).await;
    let run = start_run(&app, &id, "wait a long time", Value::Null).await;
    // The tool is running once both sleeps are up.
    eventually("the tool to start", TURN, async || {
        let got = app.exec(&id, "pgrep -c -f '^sleep 600$'").await;
        if got.1.starts_with("2\n") {
            Ok(())
        } else {
            Err(format!("{got:?}"))
        }
    })
    .await;
    app.interrupt(&id).await;
    let evs = wait_for_run(&app, &id, &run).await;
    assert_eq!(evs.last().unwrap()["payload"]["stop_reason"], "cancelled");
    // Both sleeps die, the one that left the process group too.
    eventually("the tool's processes to die", TURN, async || {
        let (code, out, _) = app.exec(&id, "pgrep -c -f '^sleep 600$'").await;
        if code == 1 {
            Ok(())
        } else {
            Err(format!("they live on: {out}"))
        }
    })
    .await;
}
