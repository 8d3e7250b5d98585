//! `POST /api/sessions/{id}/exec` with `Accept: text/event-stream` on real sandboxes: output
//! arrives while the command still runs, the exit (or the timeout) comes last, refusals are
//! plain JSON before any stream, and a caller that goes away takes the command with it.

use sandbox_agents_testkit::exec_stream::streamed;
use sandbox_agents_testkit::sse::{Frame, SseReader};
use sandbox_agents_testkit::{eventually, TestApp};
use serde_json::json;
use std::time::Duration;

/// Events until one named `until`, with the text of each output stream seen so far.
async fn read_until(sse: &mut SseReader, until: &str, out: &mut String, err: &mut String) -> Frame {
    loop {
        let f = sse
            .next_event(Duration::from_secs(30))
            .await
            .unwrap_or_else(|| {
                panic!("the stream ended before {until}; stdout {out:?}, stderr {err:?}")
            });
        let name = f.event.clone().unwrap_or_default();
        match name.as_str() {
            "stdout" => out.push_str(f.json()["text"].as_str().unwrap()),
            "stderr" => err.push_str(f.json()["text"].as_str().unwrap()),
            _ => {}
        }
        if name == until {
            return f;
        }
        if name == "exit" || name == "error" {
            panic!("{name} before {until}: {:?}", f.data);
        }
    }
}

#[tokio::test]
async fn output_streams_while_the_command_runs_and_the_exit_comes_last() {
    let app = TestApp::builder().spawn().await;
    let id = app.running_session("exec-stream", json!({})).await;
    let r = streamed(
        &app,
        &id,
        json!({"command": "echo first-é; while [ ! -e /tmp/go ]; do sleep 0.05; done; echo second >&2; exit 3"}),
    )
    .await;
    assert_eq!(r.status(), 200);
    assert!(r.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/event-stream"));
    let mut sse = SseReader::new(r);
    let (mut out, mut err) = (String::new(), String::new());
    read_until(&mut sse, "stdout", &mut out, &mut err).await;
    assert_eq!(
        out, "first-é\n",
        "the first line came before the command could end"
    );
    // Only now may the command go on.
    let (code, _, _) = app.exec(&id, "touch /tmp/go").await;
    assert_eq!(code, 0);
    let exit = read_until(&mut sse, "exit", &mut out, &mut err)
        .await
        .json();
    assert_eq!(err, "second\n");
    assert_eq!(
        exit,
        json!({"exit_code": 3, "timed_out": false, "stdout_truncated": false, "stderr_truncated": false})
    );
    assert!(
        sse.next_event(Duration::from_secs(5)).await.is_none(),
        "exit is the last event"
    );

    // A timeout: what was written, the note, then 124.
    let r = streamed(
        &app,
        &id,
        json!({"command": "echo start; exec sleep 30", "timeout": 1}),
    )
    .await;
    let mut sse = SseReader::new(r);
    let (mut out, mut err) = (String::new(), String::new());
    let exit = read_until(&mut sse, "exit", &mut out, &mut err)
        .await
        .json();
    assert_eq!(out, "start\n");
    assert!(err.contains("[timed out after 1 s"), "{err}");
    assert_eq!(
        (exit["exit_code"].as_i64(), exit["timed_out"].as_bool()),
        (Some(124), Some(true))
    );
    app.delete_session(&id).await;
}

#[tokio::test]
async fn refusals_come_before_the_stream_and_a_caller_gone_kills_the_command() {
    let app = TestApp::builder().spawn().await;
    let id = app.running_session("exec-stream-refuse", json!({})).await;
    for (session, body, status) in [
        ("sess_nope", json!({"command": "true"}), 404),
        (id.as_str(), json!({"command": "true", "timeout": 601}), 422),
        (id.as_str(), json!({"timeout": 5}), 422),
    ] {
        let r = streamed(&app, session, body.clone()).await;
        assert_eq!(r.status(), status, "{body}");
        assert!(r.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("application/json"));
    }

    let r = streamed(&app, &id, json!({"command": "echo go; exec sleep 3604"})).await;
    let mut sse = SseReader::new(r);
    let (mut out, mut err) = (String::new(), String::new());
    read_until(&mut sse, "stdout", &mut out, &mut err).await;
    assert_eq!(out, "go\n");
    let (_, running, _) = app.exec(&id, "pgrep -fx 'sleep 3604' | wc -l").await;
    assert_eq!(running.trim(), "1");
    drop(sse);
    eventually(
        "the command killed with its caller gone",
        Duration::from_secs(20),
        async || {
            let (_, out, _) = app.exec(&id, "pgrep -fx 'sleep 3604' | wc -l").await;
            (out.trim() == "0").then_some(())
        },
    )
    .await;
    app.delete_session(&id).await;
}
