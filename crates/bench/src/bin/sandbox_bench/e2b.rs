//! The E2B-compatible API (issue 40) beside our own, on the same server and warm pool, as the
//! SDKs drive each over HTTP:
//!
//! * create to first command: E2B's `POST /e2b/v2/sandboxes` (answered once the sandbox runs)
//!   then `process.Process/Start` of `/bin/bash -l -c true` read to its end-of-stream
//!   envelope, against our `POST /api/sessions`, the event stream until
//!   `session.status_running`, then `POST /api/sessions/{id}/exec` of `true`;
//! * a command's round trip on a running sandbox: the same Start stream against the same exec.
//!
//! The last row of each part is our native path, so the report's ratios are E2B's ÷ ours.

use super::{interleaved, log, ours, Args};
use crate::report::{Part, Row};
use anyhow::{bail, Context};
use futures::StreamExt;
use sandbox_agents_domain::e2b::envelope;
use sandbox_agents_testkit::TestApp;
use serde_json::{json, Value};
use std::time::Instant;

/// An E2B sandbox as create answered it.
struct Sandbox {
    id: String,
    token: String,
}

async fn create(app: &TestApp) -> anyhow::Result<Sandbox> {
    let r = app
        .http
        .post(app.url("/e2b/v2/sandboxes"))
        .header("x-api-key", "bench")
        .json(&json!({"templateID": "base", "timeout": 600}))
        .send()
        .await?;
    if r.status() != 201 {
        bail!(
            "create: {} {}",
            r.status(),
            r.text().await.unwrap_or_default()
        );
    }
    let made: Value = r.json().await?;
    Ok(Sandbox {
        id: made["sandboxID"].as_str().context("no sandboxID")?.into(),
        token: made["envdAccessToken"]
            .as_str()
            .context("no envdAccessToken")?
            .into(),
    })
}

async fn kill(app: &TestApp, id: &str) -> anyhow::Result<()> {
    let r = app
        .http
        .delete(app.url(&format!("/e2b/sandboxes/{id}")))
        .header("x-api-key", "bench")
        .send()
        .await?;
    if r.status() != 204 {
        bail!("kill: {}", r.status());
    }
    // The session's record stays; its sandbox is gone. Delete it too, as the native rows do.
    ours::delete_session(app, id).await
}

/// `commands.run("true")` as the SDKs send it (a login shell: `/bin/bash -l -c true`), or,
/// with `login` false, `true` itself: a Start stream read to its end; fails unless the process
/// ended with exit code 0.
async fn run_true(app: &TestApp, sb: &Sandbox) -> anyhow::Result<()> {
    start(app, sb, true).await
}

async fn start(app: &TestApp, sb: &Sandbox, login: bool) -> anyhow::Result<()> {
    let process = match login {
        true => json!({"cmd": "/bin/bash", "args": ["-l", "-c", "true"], "envs": {}}),
        false => json!({"cmd": "true", "args": [], "envs": {}}),
    };
    let request = json!({ "process": process });
    let body = envelope::wrap(0, request.to_string().as_bytes());
    let r = app
        .http
        .post(app.url("/e2b-sandbox/process.Process/Start"))
        .header("content-type", "application/connect+json")
        .header("connect-protocol-version", "1")
        .header("e2b-sandbox-id", &sb.id)
        .header("x-access-token", &sb.token)
        .body(body)
        .send()
        .await?;
    if r.status() != 200 {
        bail!("Start: {}", r.status());
    }
    let mut stream = r.bytes_stream();
    let mut buf = Vec::new();
    let mut exit = None;
    while let Some(chunk) = stream.next().await {
        buf.extend_from_slice(&chunk?);
        while buf.len() >= 5 {
            let len = u32::from_be_bytes([buf[1], buf[2], buf[3], buf[4]]) as usize;
            if buf.len() < 5 + len {
                break;
            }
            let flags = buf[0];
            let message: Value = serde_json::from_slice(&buf[5..5 + len])?;
            buf.drain(..5 + len);
            if flags & envelope::END_STREAM != 0 {
                if let Some(e) = message.get("error") {
                    bail!("Start ended with {e}");
                }
                return match exit {
                    Some(0) => Ok(()),
                    other => bail!("the command ended with {other:?}"),
                };
            }
            if let Some(end) = message.pointer("/event/end") {
                exit = Some(end["exitCode"].as_i64().unwrap_or(0));
            }
        }
    }
    bail!("the stream ended without its end-of-stream envelope")
}

pub async fn parts(args: &Args, app: &TestApp, pool_size: usize) -> anyhow::Result<Vec<Part>> {
    // The native agent is what the e2b agent is: the default image, no manifest.
    let agent = ours::create_agent(app, json!({"slug": "bench-native", "name": "bench-native"}))
        .await
        .context("creating the native agent")?;
    log(format!(
        "E2B create to first command: {} + {} iterations × 2 variants",
        args.warmup, args.iterations
    ));
    let mut rows = vec![
        Row::new(
            "E2B: Sandbox.create → commands.run(\"true\")",
            "POST /e2b/v2/sandboxes (answered once running), then process.Process/Start read to its end",
        ),
        Row::new(
            "ours: POST /api/sessions → SSE running → exec true",
            "the same pool and image; the published client's create, wait and exec",
        ),
    ];
    let agent = &agent;
    interleaved(args, &mut rows, |v| async move {
        // Each variant starts with a full pool: the previous claim's refill is untimed.
        ours::pool_full(app, pool_size).await?;
        let t0 = Instant::now();
        match v {
            0 => {
                let sb = create(app).await?;
                run_true(app, &sb).await?;
                let d = t0.elapsed();
                kill(app, &sb.id).await?;
                Ok(d)
            }
            _ => {
                let (id, _, _) = ours::create_until_running(app, agent).await?;
                ours::exec_true(app, &id).await?;
                let d = t0.elapsed();
                ours::delete_session(app, &id).await?;
                Ok(d)
            }
        }
    })
    .await?;
    let first = Part {
        title: "E2B: create to first command",
        notes: String::new(),
        rows,
    };

    log(format!(
        "E2B command round trip: {} + {} iterations × 2 variants",
        args.warmup, args.iterations
    ));
    let sb = create(app).await?;
    let (native, _, _) = ours::create_until_running(app, agent).await?;
    let mut rows = vec![
        Row::new(
            "E2B: commands.run(\"true\")",
            "process.Process/Start of /bin/bash -l -c true (the SDK's login shell), read to its end-of-stream envelope",
        ),
        Row::new(
            "E2B: Start of `true` itself",
            "the same call without the login shell: what the protocol and its checks cost",
        ),
        Row::new(
            "ours: exec of bash -l -c true",
            "the exec endpoint running the SDK's login shell (through sh -c)",
        ),
        Row::new(
            "ours: POST /api/sessions/{id}/exec true",
            "the exec endpoint on a running session of the same image (sh -c true)",
        ),
    ];
    let (sb_ref, native_ref) = (&sb, &native);
    let measured = interleaved(args, &mut rows, |v| async move {
        let t0 = Instant::now();
        match v {
            0 => run_true(app, sb_ref).await?,
            1 => start(app, sb_ref, false).await?,
            2 => ours::exec(app, native_ref, "bash -l -c true").await?,
            _ => ours::exec_true(app, native_ref).await?,
        }
        Ok(t0.elapsed())
    })
    .await;
    kill(app, &sb.id).await?;
    ours::delete_session(app, &native).await?;
    measured?;
    Ok(vec![
        first,
        Part {
            title: "E2B: a command's round trip",
            notes: String::new(),
            rows,
        },
    ])
}
