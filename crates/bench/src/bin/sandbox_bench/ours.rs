//! Our paths: the HTTP API of an in-process server, as a client drives it.

use anyhow::{bail, Context};
use futures::StreamExt;
use reqwest::StatusCode;
use sandbox_agents_testkit::TestApp;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// Longest a boot may take before the bench gives up on it.
/// A boot's deadline as a client's: `create_and_wait` waits 300 s (a burst of a hundred queues
/// its boots).
const BOOT_DEADLINE: Duration = Duration::from_secs(300);

async fn send(req: reqwest::RequestBuilder, want: StatusCode) -> anyhow::Result<reqwest::Response> {
    let r = req.send().await?;
    if r.status() != want {
        let status = r.status();
        bail!(
            "{status} (wanted {want}): {}",
            r.text().await.unwrap_or_default()
        );
    }
    Ok(r)
}

/// `POST /api/agents`; returns the agent's id.
pub async fn create_agent(app: &TestApp, body: Value) -> anyhow::Result<String> {
    let r = send(
        app.http.post(app.url("/api/agents")).json(&body),
        StatusCode::CREATED,
    )
    .await?;
    let agent: Value = r.json().await?;
    Ok(agent["id"]
        .as_str()
        .context("the agent has no id")?
        .to_owned())
}

/// Create-to-running as a client sees it: `POST /api/sessions`, then, right after the 202,
/// `GET .../events/stream` (which replays the log from the start, so nothing can be missed)
/// read until `session.status_running`. Returns the session id, the time from sending the
/// POST to receiving that frame, and the part of it until the 202.
pub async fn create_until_running(
    app: &TestApp,
    agent: &str,
) -> anyhow::Result<(String, Duration, Duration)> {
    let t0 = Instant::now();
    let r = send(
        app.http
            .post(app.url("/api/sessions"))
            .json(&json!({"agent_id": agent})),
        StatusCode::ACCEPTED,
    )
    .await
    .context("POST /api/sessions")?;
    let session: Value = r.json().await?;
    let accepted = t0.elapsed();
    let id = session["id"]
        .as_str()
        .context("the session has no id")?
        .to_owned();
    let waited = tokio::time::timeout(BOOT_DEADLINE, wait_running(app, &id)).await;
    let elapsed = t0.elapsed();
    match waited {
        Ok(Ok(())) => Ok((id, elapsed, accepted)),
        Ok(Err(e)) => Err(e.context(format!("session {id}"))),
        Err(_) => bail!("session {id} was not running after {BOOT_DEADLINE:?}"),
    }
}

async fn wait_running(app: &TestApp, id: &str) -> anyhow::Result<()> {
    let url = app.url(&format!("/api/sessions/{id}/events/stream"));
    let r = send(app.http.get(url), StatusCode::OK)
        .await
        .context("opening the event stream")?;
    let mut body = r.bytes_stream();
    let mut buf = String::new();
    while let Some(chunk) = body.next().await {
        buf.push_str(&String::from_utf8_lossy(
            &chunk.context("reading the stream")?,
        ));
        while let Some(end) = buf.find("\n\n") {
            let frame: String = buf.drain(..end + 2).collect();
            let event = frame
                .lines()
                .find_map(|l| l.strip_prefix("event:"))
                .map(str::trim);
            match event {
                Some("session.status_running") => return Ok(()),
                Some("session.status_error") => bail!("the boot failed: {frame}"),
                _ => {}
            }
        }
    }
    bail!("the event stream ended before session.status_running")
}

/// `DELETE /api/sessions/{id}` (removes the container too).
pub async fn delete_session(app: &TestApp, id: &str) -> anyhow::Result<()> {
    let url = app.url(&format!("/api/sessions/{id}"));
    send(app.http.delete(url), StatusCode::NO_CONTENT)
        .await
        .with_context(|| format!("deleting session {id}"))?;
    Ok(())
}

/// `POST /api/sessions/{id}/exec {"command": "true"}`; fails unless it exits 0.
pub async fn exec_true(app: &TestApp, id: &str) -> anyhow::Result<()> {
    exec(app, id, "true").await
}

/// `POST /api/sessions/{id}/exec {"command": command}`; fails unless it exits 0.
pub async fn exec(app: &TestApp, id: &str, command: &str) -> anyhow::Result<()> {
    let url = app.url(&format!("/api/sessions/{id}/exec"));
    let r = send(
        app.http.post(url).json(&json!({ "command": command })),
        StatusCode::OK,
    )
    .await?;
    let out: Value = r.json().await?;
    if out["exit_code"] != 0 {
        bail!("exec {command}: {out}");
    }
    Ok(())
}

/// Waits until the warm pool of `app` holds `size` started sandboxes and none is being made.
pub async fn pool_full(app: &TestApp, size: usize) -> anyhow::Result<()> {
    let deadline = Instant::now() + BOOT_DEADLINE;
    loop {
        let (ready, all): (i64, i64) =
            sqlx::query_as("select count(sandbox_id), count(*) from sandbox_pool")
                .fetch_one(&app.db)
                .await?;
        if ready as usize == size && all as usize == size {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("the warm pool did not refill to {size} in {BOOT_DEADLINE:?} ({ready} of {all} ready)");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
