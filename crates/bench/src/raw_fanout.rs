//! The raw fan-out beside ours: `pg_notify` → one `PgListener` → one frame built per event →
//! a tokio broadcast → every connection's task writes it to its socket with `write_all`.
//!
//! No HTTP library, no event log, no read-back of the event, no cursor: what fanning one event
//! out to N sockets costs on this machine by itself. Its frames are the bytes our server sends
//! (a `SessionEvent` as `event:`/`data:`/`id:`, in one HTTP/1.1 chunk), so the same clients
//! read both, and the difference between the two rows is what our server adds.

use anyhow::Context;
use bytes::Bytes;
use sandbox_agents_domain::event::SessionEvent;
use sandbox_agents_domain::SessionId;
use sandbox_agents_store::Db;
use serde_json::{Map, Value};
use sqlx::postgres::PgListener;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::broadcast;
use tokio::task::JoinSet;

/// The baseline's channel, apart from the server's.
pub const CHANNEL: &str = "sa_bench_fanout";
/// Frames a slow connection may fall behind by before it is closed (ours keeps 1024 too).
const BACKLOG: usize = 1024;
/// The payload of the frame every connection gets first, as ours gets its backlog.
pub const READY: &str = r#"{"bench":"ready"}"#;

/// A running baseline server; stops when dropped.
pub struct RawFanout {
    pub url: String,
    tasks: JoinSet<()>,
}

impl Drop for RawFanout {
    fn drop(&mut self) {
        self.tasks.abort_all();
    }
}

/// One SSE frame of `seq` in one HTTP/1.1 chunk.
fn chunk(session: SessionId, seq: i64, payload: Map<String, Value>) -> Bytes {
    let event = SessionEvent {
        seq,
        session_id: session,
        run_id: None,
        kind: "agent.message".into(),
        payload,
        created_at: time::OffsetDateTime::now_utc(),
    };
    let data = serde_json::to_string(&event).expect("an event serializes");
    let frame = format!("event: agent.message\ndata: {data}\nid: {seq}\n\n");
    Bytes::from(format!("{:x}\r\n{frame}\r\n", frame.len()))
}

/// Starts the listener and the server; every notification on [`CHANNEL`] (a JSON object) is
/// one frame to every connection, the end marker included.
pub async fn start(db: &Db, session: SessionId) -> anyhow::Result<RawFanout> {
    let mut listener = PgListener::connect_with(db).await?;
    // LISTEN has completed when this returns: every later notification reaches it.
    listener.listen(CHANNEL).await?;
    let socket = TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}/stream", socket.local_addr()?);
    let (tx, _) = broadcast::channel::<Bytes>(BACKLOG);
    let mut tasks = JoinSet::new();
    let feed = tx.clone();
    tasks.spawn(async move {
        let mut seq = 1;
        while let Ok(note) = listener.recv().await {
            let Ok(Value::Object(payload)) = serde_json::from_str(note.payload()) else {
                continue;
            };
            seq += 1;
            let _ = feed.send(chunk(session, seq, payload));
        }
    });
    let ready = match serde_json::from_str(READY) {
        Ok(Value::Object(m)) => chunk(session, 1, m),
        _ => unreachable!("READY is an object"),
    };
    tasks.spawn(async move {
        let mut connections = JoinSet::new();
        while let Ok((conn, _)) = socket.accept().await {
            // Subscribed before the ready frame is written, as ours subscribes before its
            // backlog: a client that has the ready frame gets every later event.
            connections.spawn(serve(conn, tx.subscribe(), ready.clone()));
        }
    });
    Ok(RawFanout { url, tasks })
}

async fn serve(mut conn: TcpStream, mut rx: broadcast::Receiver<Bytes>, ready: Bytes) {
    let _ = conn.set_nodelay(true);
    let mut head = Vec::with_capacity(1024);
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        match conn.read_buf(&mut head).await {
            Ok(0) | Err(_) => return,
            Ok(_) if head.len() > 16 * 1024 => return,
            Ok(_) => {}
        }
    }
    let response = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\ntransfer-encoding: chunked\r\n\r\n";
    if conn.write_all(response).await.is_err() || conn.write_all(&ready).await.is_err() {
        return;
    }
    loop {
        match rx.recv().await {
            Ok(frame) => {
                if conn.write_all(&frame).await.is_err() {
                    return;
                }
            }
            // A lagging reader is closed, as ours would close it after its gap frame; the
            // benchmark's receivers report what they missed.
            Err(_) => {
                let _ = conn.write_all(b"0\r\n\r\n").await;
                return;
            }
        }
    }
}

/// Sends one notification to the baseline's feed.
pub async fn notify(db: &Db, payload: &Value) -> anyhow::Result<()> {
    sqlx::query("select pg_notify($1, $2)")
        .bind(CHANNEL)
        .bind(payload.to_string())
        .execute(db)
        .await
        .context("pg_notify to the raw fan-out")?;
    Ok(())
}
