//! Runs: what the control plane adds to a turn of the agent loop.
//!
//! The model is the scripted fake model, in process, over a real socket. Each "ours" variant
//! posts `POST .../messages` and reads the session's SSE stream (opened once) until the run's
//! terminal event, or its first `agent.text_delta`; each raw variant does the same model work
//! (and the same Docker exec) directly, so the difference is the control plane: the run row,
//! the event log, the hub, the worker, HTTP and SSE.

use super::{interleaved, log, ours, raw, Args};
use crate::report::{Part, Row};
use anyhow::Context;
use futures::StreamExt;
use sandbox_agents_fake_model::{FakeModel, Rule, Script};
use sandbox_agents_model::{
    ChatRequest, Message, ModelClient, ModelConfig, StreamEvent, ToolSpec, Transport,
};
use sandbox_agents_testkit::sse::SseReader;
use sandbox_agents_testkit::TestApp;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

const ANSWER: &str = "The answer is forty-two, as computed by the benchmark.";
const WAIT: Duration = Duration::from_secs(60);

/// The subagent's instructions: how the script tells its calls apart.
const SUB: &str = "You are the benchmark subagent.";

/// The model steps of the many-step variant. Each step but the last calls a tool the agent
/// does not have (`bench_noop_K`), which the loop answers with an error at once without the
/// sandbox: what is left of a step is the model call and the control plane's own work (the
/// step's events written, its result's, the next request built).
const STEPS: usize = 10;
const MANY: &str = "step ten times";

fn noop(k: usize) -> String {
    format!("bench_noop_{k}")
}

/// What the loop answers a call of a tool the agent does not have.
fn noop_answer(k: usize) -> String {
    format!("error: there is no tool named '{}'", noop(k))
}

/// The script every variant uses: a shell call for "tool" prompts, a subagent call for
/// "subagent" prompts (the subagent answers at once), a chain of `STEPS - 1` no-op calls for
/// the many-step prompt, then the answer.
pub fn script() -> Script {
    let mut rules = vec![Rule::when()
        .system_contains(SUB)
        .reply_text("the subagent's answer")];
    rules.extend((1..STEPS - 1).map(|k| {
        Rule::when()
            .last_message_role("tool")
            .last_tool_result_contains(format!("'{}'", noop(k)))
            .reply_tool_call(noop(k + 1), json!({}))
    }));
    rules.extend([
        Rule::when()
            .last_user_contains(MANY)
            .last_message_role("user")
            .reply_tool_call(noop(1), json!({})),
        Rule::when().last_message_role("tool").reply_text(ANSWER),
        Rule::when()
            .last_user_contains("ask the subagent")
            .reply_tool_call("bench-sub", json!({"input": "answer"})),
        Rule::when()
            .last_user_contains("use the shell")
            .reply_tool_call("shell", json!({"command": "true"})),
        Rule::always().reply_text(ANSWER),
    ]);
    Script::new(rules)
}

/// The raw many-step variant's requests: the prompt, then each step's call and its answer.
fn many_step_request(steps_done: usize) -> ChatRequest {
    let mut req = request(MANY, false);
    for k in 1..=steps_done {
        req.messages.push(Message::Assistant {
            content: None,
            tool_calls: vec![sandbox_agents_model::ToolCall {
                id: format!("call_{k}"),
                name: noop(k),
                arguments: "{}".into(),
            }],
        });
        req.messages
            .push(Message::tool(format!("call_{k}"), noop_answer(k)));
    }
    req
}

/// The model client the raw variants use: the same transport the server's runs use.
fn model(fake: &FakeModel) -> anyhow::Result<ModelClient> {
    let transport = Transport::Proxy {
        base: fake.root_url(),
        api_key: Some("bench".into()),
    };
    Ok(ModelClient::new(ModelConfig::new(transport))?)
}

fn request(prompt: &str, tool_result: bool) -> ChatRequest {
    let mut messages = vec![
        Message::system("You are a benchmark agent."),
        Message::user(prompt),
    ];
    if tool_result {
        let (name, arguments, output) = if prompt.contains("subagent") {
            (
                "bench-sub",
                r#"{"input":"answer"}"#,
                "the subagent's answer",
            )
        } else {
            ("shell", r#"{"command":"true"}"#, "exit code: 0\n")
        };
        messages.push(Message::Assistant {
            content: None,
            tool_calls: vec![sandbox_agents_model::ToolCall {
                id: "call_1".into(),
                name: name.into(),
                arguments: arguments.into(),
            }],
        });
        messages.push(Message::tool("call_1", output));
    }
    ChatRequest::new("fake-model", messages).tools(vec![ToolSpec {
        name: "shell".into(),
        description: "Run a command.".into(),
        parameters: json!({"type": "object", "properties": {"command": {"type": "string"}}}),
    }])
}

/// One streamed model call, to its end; or to its first text delta.
async fn model_call(
    client: &ModelClient,
    req: ChatRequest,
    first_delta: bool,
) -> anyhow::Result<()> {
    let stream = client.stream(req);
    futures::pin_mut!(stream);
    while let Some(ev) = stream.next().await {
        match ev? {
            StreamEvent::TextDelta(_) if first_delta => return Ok(()),
            StreamEvent::Done(_) => return Ok(()),
            _ => {}
        }
    }
    anyhow::bail!("the model stream ended without an answer")
}

/// Posts a message and reads the stream until the run's terminal event (or first delta).
async fn turn(
    app: &TestApp,
    sse: &mut SseReader,
    id: &str,
    prompt: &str,
    first_delta: bool,
) -> anyhow::Result<()> {
    let r = app
        .http
        .post(app.url(&format!("/api/sessions/{id}/messages")))
        .json(&json!({"prompt": prompt, "max_turns": null}))
        .send()
        .await?;
    anyhow::ensure!(r.status() == 202, "POST messages: {}", r.status());
    let run: Value = r.json().await?;
    let run = run["id"].as_str().context("a run id")?.to_owned();
    loop {
        let f = sse.next_event(WAIT).await.context("the stream ended")?;
        let e = f.json();
        if e["run_id"] != run.as_str() {
            continue;
        }
        match e["type"].as_str() {
            // Timed here; the caller drains the rest of the turn, untimed.
            Some("agent.text_delta") if first_delta => return Ok(()),
            Some("session.status_idle") => {
                anyhow::ensure!(
                    e["payload"]["final_output"] == ANSWER,
                    "unexpected end: {e}"
                );
                return Ok(());
            }
            Some("session.status_error") => anyhow::bail!("the run failed: {e}"),
            _ => {}
        }
    }
}

/// Reads the stream past the terminal event of the turn in flight (after a first-delta
/// measurement), so the next iteration starts on an idle session.
async fn drain(sse: &mut SseReader) -> anyhow::Result<()> {
    loop {
        let e = sse
            .next_event(WAIT)
            .await
            .context("the stream ended")?
            .json();
        if e["type"] == "session.status_idle" {
            return Ok(());
        }
    }
}

pub async fn parts(
    args: &Args,
    app: &TestApp,
    fake: &FakeModel,
    docker: &bollard::Docker,
    tar: &bytes::Bytes,
) -> anyhow::Result<Vec<Part>> {
    ours::create_agent(
        app,
        json!({"slug": "bench-sub", "name": "bench-sub", "instructions": SUB}),
    )
    .await?;
    let agent = ours::create_agent(
        app,
        json!({"slug": "bench-runs", "name": "bench-runs", "instructions": "You are a benchmark agent.",
               "subagents": [{"agent": "bench-sub"}]}),
    )
    .await?;
    let (id, _, _) = ours::create_until_running(app, &agent).await?;
    let settings = app.sessions.settings();
    let raw_id = raw::create_start_upload(docker, &settings.default_image, &settings.limits, tar)
        .await
        .context("starting the raw container")?;
    let client = model(fake)?;
    let stream = app
        .http
        .get(app.url(&format!("/api/sessions/{id}/events/stream")))
        .send()
        .await?;
    let mut sse = SseReader::new(stream);
    // Skip the replay of the boot's events.
    loop {
        let e = sse
            .next_event(WAIT)
            .await
            .context("the stream ended")?
            .json();
        if e["type"] == "session.status_running" {
            break;
        }
    }

    log(format!(
        "runs: {} + {} iterations × 10 variants",
        args.warmup, args.iterations
    ));
    let mut text_rows = vec![
        Row::new(
            "ours: a one-step turn",
            "POST messages → `session.status_idle` on the SSE stream",
        ),
        Row::new(
            "raw: one streamed model call",
            "the same chat completion, straight to the model",
        ),
    ];
    let mut tool_rows = vec![
        Row::new(
            "ours: a turn with one shell call",
            "POST → tool_use → exec `true` → tool_result → answer → idle, over SSE",
        ),
        Row::new(
            "raw: model call + exec + model call",
            "two streamed completions and a raw bollard exec of `true`",
        ),
    ];
    let mut delta_rows = vec![
        Row::new(
            "ours: time to first delta",
            "POST messages → first `agent.text_delta` on the SSE stream",
        ),
        Row::new(
            "raw: time to first delta",
            "a streamed completion → its first text chunk",
        ),
    ];
    let mut sub_rows = vec![
        Row::new(
            "ours: a turn with one subagent call",
            "POST → tool_use → the subagent's step (its own model call) → tool_result → answer → idle, over SSE",
        ),
        Row::new(
            "raw: three model calls",
            "the parent's call, the subagent's, the parent's answer: three streamed completions",
        ),
    ];
    let mut many_rows = vec![
        Row::new(
            "ours: a turn of ten model steps",
            "POST → nine steps each calling a tool the agent lacks (answered at once) → answer → idle, over SSE",
        ),
        Row::new(
            "raw: ten model calls",
            "the same ten streamed completions, each with the calls and answers before it",
        ),
    ];
    let sse = tokio::sync::Mutex::new(sse);
    let mut all: Vec<Row> = Vec::new();
    all.append(&mut text_rows);
    all.append(&mut tool_rows);
    all.append(&mut delta_rows);
    all.append(&mut sub_rows);
    all.append(&mut many_rows);
    let result = interleaved(args, &mut all, |v| {
        let (id, raw_id, client, sse) = (&id, &raw_id, &client, &sse);
        async move {
            let mut sse = sse.lock().await;
            let t0 = Instant::now();
            let d = match v {
                0 => {
                    turn(app, &mut sse, id, "answer briefly", false).await?;
                    t0.elapsed()
                }
                1 => {
                    model_call(client, request("answer briefly", false), false).await?;
                    t0.elapsed()
                }
                2 => {
                    turn(app, &mut sse, id, "use the shell, then answer", false).await?;
                    t0.elapsed()
                }
                3 => {
                    model_call(client, request("use the shell, then answer", false), false).await?;
                    raw::exec(docker, raw_id, &["true"]).await?;
                    model_call(client, request("use the shell, then answer", true), false).await?;
                    t0.elapsed()
                }
                4 => {
                    turn(app, &mut sse, id, "answer briefly", true).await?;
                    let d = t0.elapsed();
                    drain(&mut sse).await?;
                    d
                }
                5 => {
                    model_call(client, request("answer briefly", false), true).await?;
                    t0.elapsed()
                }
                6 => {
                    turn(app, &mut sse, id, "ask the subagent, then answer", false).await?;
                    t0.elapsed()
                }
                8 => {
                    turn(app, &mut sse, id, MANY, false).await?;
                    t0.elapsed()
                }
                9 => {
                    for k in 0..STEPS {
                        model_call(client, many_step_request(k), false).await?;
                    }
                    t0.elapsed()
                }
                _ => {
                    let ask = "ask the subagent, then answer";
                    model_call(client, request(ask, false), false).await?;
                    let sub = ChatRequest::new(
                        "fake-model",
                        vec![Message::system(SUB), Message::user("answer")],
                    );
                    model_call(client, sub, false).await?;
                    model_call(client, request(ask, true), false).await?;
                    t0.elapsed()
                }
            };
            Ok(d)
        }
    })
    .await;
    let deleted = ours::delete_session(app, &id).await;
    raw::remove(docker, &raw_id).await?;
    result?;
    deleted?;
    let mut rows = all.into_iter();
    let mut take = |n: usize| rows.by_ref().take(n).collect::<Vec<_>>();
    let (text, tool, delta, sub, many) = (take(2), take(2), take(2), take(2), take(2));
    let overhead = |rows: &[Row]| {
        let p50 = |r: &Row| crate::report::stats(&r.samples).p50;
        p50(&rows[0]) - p50(&rows[1])
    };
    let turn_cost = overhead(&text);
    let step_and_tool = overhead(&tool) - turn_cost;
    let subagent_call = overhead(&sub) - turn_cost;
    // The turn's own start and end are in both; what is left is STEPS - 1 steps.
    let per_step = (overhead(&many) - turn_cost) / (STEPS - 1) as f64;
    Ok(vec![
        Part {
            title: "A one-step turn (a text answer)",
            notes: format!(
                "Control-plane time of a one-step turn (p50 difference): **{turn_cost:.1} ms**: the run's start and end, one model step, HTTP and SSE.\n"
            ),
            rows: text,
        },
        Part {
            title: "A turn with one shell tool call",
            notes: format!(
                "One more model step with a sandbox tool call adds **{step_and_tool:.1} ms** of control-plane time (p50 difference beyond the one-step turn's).\n"
            ),
            rows: tool,
        },
        Part {
            title: "Time to first delta",
            notes: format!(
                "What a streaming client waits beyond the model for its first token: **{:.1} ms**.\n",
                overhead(&delta)
            ),
            rows: delta,
        },
        Part {
            title: "A turn with one subagent call",
            notes: format!(
                "A subagent call (the parent's tool step, the subagent seated and its one model step, its events, the result) adds **{subagent_call:.1} ms** of control-plane time (p50 difference beyond the one-step turn's).\n"
            ),
            rows: sub,
        },
        Part {
            title: "A turn of ten model steps",
            notes: format!(
                "Control-plane time per model step (p50, the ten-step turn's difference to raw less the one-step turn's, over the nine further steps): **{per_step:.2} ms**: the step's events and its tool result written, the next request built and sent.\n"
            ),
            rows: many,
        },
    ])
}
