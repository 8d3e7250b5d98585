//! A running shell tool's output, streamed into the session's live feed as it is written
//! (`agent.tool_output_delta`, ephemeral: never stored, sent to streams that ask for it), so
//! someone watching sees a build progress. The model still reads the whole result when the
//! command ends; these are only for people.
//!
//! Pieces are gathered for up to [`GATHER`] (or [`MAX_PIECE`] bytes) into one event, so a
//! command that writes a byte at a time costs a notification per tenth of a second, not per
//! byte. Each stream is masked as the tool's result is ([`StreamMask`]: a secret split between
//! pieces is still hidden whole).

use sandbox_agents_credentials::secrets::StreamMask;
use sandbox_agents_domain::event::EventType;
use sandbox_agents_domain::{RunId, SessionId};
use sandbox_agents_sessions::{OutputPieces, OutputStream};
use sandbox_agents_store::{events, Db};
use serde_json::{Map, Value};
use std::time::Duration;

/// How long pieces are gathered into one event.
const GATHER: Duration = Duration::from_millis(100);
/// The most text one event carries.
const MAX_PIECE: usize = 16 * 1024;

/// Where a tool call's output goes live.
pub(crate) struct Live<'a> {
    pub run: RunId,
    pub call_id: &'a str,
    /// The payload's `subagent` when a subagent's frame made the call (`SubTag::value`).
    pub subagent: Option<Value>,
}

/// Publishes what arrives on `pieces` until the command ends (its sender is dropped).
pub(crate) async fn publish(
    db: &Db,
    session: SessionId,
    live: &Live<'_>,
    tool: &str,
    secrets: &[String],
    mut pieces: OutputPieces,
) {
    let mut masks = [StreamMask::new(secrets), StreamMask::new(secrets)];
    let index = |s: OutputStream| match s {
        OutputStream::Stdout => 0,
        OutputStream::Stderr => 1,
    };
    let send = async |stream: OutputStream, text: String| {
        if text.is_empty() {
            return;
        }
        let mut p = Map::new();
        p.insert("call_id".into(), Value::from(live.call_id));
        p.insert("tool".into(), Value::from(tool));
        p.insert(
            "stream".into(),
            Value::from(match stream {
                OutputStream::Stdout => "stdout",
                OutputStream::Stderr => "stderr",
            }),
        );
        p.insert("text".into(), Value::from(text));
        if let Some(sub) = &live.subagent {
            p.insert("subagent".into(), sub.clone());
        }
        if let Err(e) = events::publish_ephemeral(
            db,
            session,
            Some(live.run),
            EventType::AgentToolOutputDelta,
            p,
        )
        .await
        {
            tracing::debug!(error = %e, "a tool's output could not be published");
        }
    };
    while let Some((first, text)) = pieces.recv().await {
        // Gather what follows for a moment, one buffer per stream, in the order written.
        let mut gathered: Vec<(OutputStream, String)> = vec![(first, text)];
        let deadline = tokio::time::Instant::now() + GATHER;
        let mut size = gathered[0].1.len();
        while size < MAX_PIECE {
            match tokio::time::timeout_at(deadline, pieces.recv()).await {
                Ok(Some((stream, text))) => {
                    size += text.len();
                    match gathered.last_mut() {
                        Some((s, t)) if *s == stream => t.push_str(&text),
                        _ => gathered.push((stream, text)),
                    }
                }
                Ok(None) | Err(_) => break,
            }
        }
        for (stream, text) in gathered {
            let shown = masks[index(stream)].push(&text);
            send(stream, shown).await;
        }
    }
    for stream in [OutputStream::Stdout, OutputStream::Stderr] {
        let rest = masks[index(stream)].finish();
        send(stream, rest).await;
    }
}
