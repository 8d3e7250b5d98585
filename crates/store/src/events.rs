//! The event log. Appending locks the session row before a seq is drawn and holds the lock
//! until commit, so within a session **seq order equals commit order**: a reader that saw seq
//! N can never later find a committed event of that session below N. Live readers are told
//! through `pg_notify` inside the same transaction; Postgres delivers notifications only after
//! commit, and in commit order.

use crate::error::{Error, Result};
use sandbox_agents_domain::event::{EventType, NewEvent, SessionEvent};
use sandbox_agents_domain::{ProjectId, RunId, SessionId};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sqlx::types::Json;
use sqlx::PgExecutor;
use time::OffsetDateTime;
use uuid::Uuid;

/// The notification channel every server process listens on.
pub const CHANNEL: &str = "sa_events";

/// Postgres refuses notification payloads of 8000 bytes or more; stay clear of the edge.
const MAX_NOTIFY_BYTES: usize = 7_800;

/// Largest page a reader may ask for: the published client's `history()` treats any
/// shorter page as the end of the log, so pages are always full when enough events follow.
pub const MAX_PAGE: i64 = 1000;

/// What a notification on [`CHANNEL`] says. Short keys: the payload limit is 8000 bytes.
#[derive(Debug, Serialize, Deserialize)]
pub struct Notice {
    /// The session.
    pub s: Uuid,
    /// Stored events up to this seq were committed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub q: Option<i64>,
    /// An ephemeral event, carried whole (it is stored nowhere else).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub e: Option<SessionEvent>,
    /// The session was deleted: streams end.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub d: bool,
    /// Webhook deliveries were queued with these events: dispatchers wake up.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub w: bool,
}

struct Row {
    seq: i64,
    session_id: Uuid,
    run_id: Option<Uuid>,
    kind: String,
    payload: Json<Map<String, Value>>,
    created_at: OffsetDateTime,
}

/// A row of [`append_guarded`]'s answer: the event, how many deliveries the batch queued and
/// whether it notified (both only read by the statement itself: a CTE that is not read does
/// not run).
struct Appended {
    seq: i64,
    session_id: Uuid,
    run_id: Option<Uuid>,
    kind: String,
    payload: Json<Map<String, Value>>,
    created_at: OffsetDateTime,
    #[allow(dead_code)]
    queued: i64,
    #[allow(dead_code)]
    notified: i64,
}

impl From<Appended> for Row {
    fn from(a: Appended) -> Self {
        Row {
            seq: a.seq,
            session_id: a.session_id,
            run_id: a.run_id,
            kind: a.kind,
            payload: a.payload,
            created_at: a.created_at,
        }
    }
}

impl From<Row> for SessionEvent {
    fn from(r: Row) -> Self {
        SessionEvent {
            seq: r.seq,
            session_id: SessionId(r.session_id),
            run_id: r.run_id.map(RunId),
            kind: r.kind,
            payload: r.payload.0,
            created_at: r.created_at,
        }
    }
}

/// Appends `events` to a session's log inside the caller's transaction, in order, and queues
/// one notification for the batch. The caller commits; nothing is visible before that.
///
/// The first statement locks the session row (and stamps `last_event_at`); if the caller
/// already changed the row in this transaction, it holds the lock already. Ephemeral types
/// are refused here: they are never stored (use [`publish_ephemeral`]).
#[tracing::instrument(skip_all, fields(session.id = %session, events = events.len()))]
pub async fn append(
    tx: &mut sqlx::PgConnection,
    session: SessionId,
    events: &[NewEvent],
) -> Result<Vec<SessionEvent>> {
    match append_guarded(tx, session, events, None).await? {
        Guarded::Appended(rows) => Ok(rows),
        // Without a guard nothing refuses the batch.
        Guarded::Refused => Err(Error::Conflict("the append was refused".into())),
    }
}

/// Which run a guarded append belongs to, and what refuses it.
#[derive(Clone, Copy, Debug)]
pub struct RunGuard {
    pub run: RunId,
    /// Refuse the batch as well when a cancel of the run was requested (another process's
    /// interrupt): a model step is not written once its run is being cancelled.
    pub unless_cancel_requested: bool,
}

/// What [`append_guarded`] did.
#[derive(Debug)]
pub enum Guarded {
    Appended(Vec<SessionEvent>),
    /// The run was no longer running (or a cancel was requested, when the guard says so):
    /// nothing was written, nothing notified.
    Refused,
}

/// [`append`], but only while `guard`'s run is still running: the run is read by the insert
/// itself, **after** the session row is locked, so a finisher that appended its terminal
/// event (which takes the same lock) before us is seen, and one that comes after us waits
/// for our commit. Either way nothing of a run follows its terminal event. The batch is two
/// statements: the lock, then the insert with its outbox rows and its notification.
#[tracing::instrument(skip_all, fields(session.id = %session, events = events.len()))]
pub async fn append_guarded(
    tx: &mut sqlx::PgConnection,
    session: SessionId,
    events: &[NewEvent],
    guard: Option<RunGuard>,
) -> Result<Guarded> {
    if events.is_empty() {
        return Ok(Guarded::Appended(Vec::new()));
    }
    if let Some(e) = events.iter().find(|e| e.kind.is_ephemeral()) {
        return Err(Error::Conflict(format!(
            "{} is ephemeral and is never stored",
            e.kind.as_str()
        )));
    }
    let locked = sqlx::query!(
        "update sessions set last_event_at = now() where id = $1 returning project_id, agent_id",
        session.0,
    )
    .fetch_optional(&mut *tx)
    .await?;
    let Some(locked) = locked else {
        return Err(Error::NotFound);
    };
    let (project, agent) = (locked.project_id, locked.agent_id);
    let run_ids: Vec<Option<Uuid>> = events.iter().map(|e| e.run_id.map(|r| r.0)).collect();
    let kinds: Vec<&str> = events.iter().map(|e| e.kind.as_str()).collect();
    let payloads: Vec<Json<&Map<String, Value>>> =
        events.iter().map(|e| Json(&e.payload)).collect();
    // `with ordinality ... order by` makes the identity values follow the batch's order.
    // The same statement is the webhook outbox: one delivery per (event, active matching
    // subscription), committed with the event or not at all (see crate::deliveries), and the
    // batch's notification (a [`Notice`] built here, so the batch costs no further round
    // trip; none when the guard refused it). A read-only CTE runs only if it is read: the
    // final select reads `note`.
    let appended = sqlx::query_as!(
        Appended,
        r#"with ok as (
             select $7::uuid is null
                 or exists (select 1 from runs
                            where id = $7 and status = 'running'
                              and not ($8 and cancel_requested)) as ok
         ), ins as (
             insert into events (session_id, run_id, type, payload)
             select $1, r, t, p from unnest($2::uuid[], $3::text[], $4::jsonb[]) with ordinality as x(r, t, p, n)
             where (select ok from ok)
             order by n
             returning seq, session_id, run_id, type, payload, created_at
         ), outbox as (
             insert into webhook_deliveries (webhook_id, event_seq, session_id, event_type)
             select w.id, ins.seq, ins.session_id, ins.type
             from ins join webhooks w
               on w.project_id = $5 and w.active
              and (w.agent_id is null or w.agent_id = $6)
              and (cardinality(w.event_types) = 0 or ins.type = any(w.event_types))
             returning 1
         ), queued as (
             select count(*) as n from outbox
         ), note as (
             select pg_notify($9, json_build_object('s', $1::uuid, 'q', last, 'w', (select n from queued) > 0)::text)
             from (select max(seq) as last from ins) m
             where last is not null
         )
         select seq as "seq!", session_id as "session_id!", run_id as "run_id?", type as "kind!",
                payload as "payload!: Json<Map<String, Value>>", created_at as "created_at!",
                (select n from queued) as "queued!",
                (select count(*) from note) as "notified!"
         from ins"#,
        session.0,
        &run_ids as _,
        &kinds as _,
        &payloads as _,
        project,
        agent,
        guard.map(|g| g.run.0),
        guard.is_some_and(|g| g.unless_cancel_requested),
        CHANNEL,
    )
    .fetch_all(&mut *tx)
    .await?;
    if appended.is_empty() {
        return Ok(Guarded::Refused);
    }
    // Counted when the statement succeeds: an append whose transaction then rolls back is
    // counted too (rare, and cheaper than a hook on every commit).
    metrics::counter!("sandbox_agents_events_appended_total").increment(appended.len() as u64);
    let mut rows: Vec<Row> = appended.into_iter().map(Row::from).collect();
    rows.sort_by_key(|r| r.seq);
    Ok(Guarded::Appended(
        rows.into_iter().map(Into::into).collect(),
    ))
}

/// Appends in a transaction of its own: for events that announce no row change.
pub async fn append_now(
    db: &crate::Db,
    session: SessionId,
    events: &[NewEvent],
) -> Result<Vec<SessionEvent>> {
    let mut tx = db.begin().await?;
    let out = append(&mut tx, session, events).await?;
    tx.commit().await?;
    Ok(out)
}

/// Streams an ephemeral event (`seq = 0`) to every live reader in every server process. It is
/// stored nowhere: a reader that is not connected never sees it. A text delta too large for
/// one notification is split into several.
pub async fn publish_ephemeral(
    db: impl PgExecutor<'_> + Copy,
    session: SessionId,
    run_id: Option<RunId>,
    kind: EventType,
    payload: Map<String, Value>,
) -> Result<()> {
    let event = SessionEvent {
        seq: 0,
        session_id: session,
        run_id,
        kind: kind.as_str().to_owned(),
        payload,
        created_at: OffsetDateTime::now_utc(),
    };
    for part in split_for_notify(event) {
        notify(
            db,
            &Notice {
                s: session.0,
                q: None,
                e: Some(part),
                d: false,
                w: false,
            },
        )
        .await?;
    }
    Ok(())
}

/// Tells live readers that the session is gone, so their streams end. Call it in the
/// transaction that deletes the session.
pub async fn notify_deleted(db: impl PgExecutor<'_>, session: SessionId) -> Result<()> {
    notify(
        db,
        &Notice {
            s: session.0,
            q: None,
            e: None,
            d: true,
            w: false,
        },
    )
    .await
}

async fn notify(db: impl PgExecutor<'_>, notice: &Notice) -> Result<()> {
    let body = serde_json::to_string(notice).expect("a notice always serializes");
    // `pg_notify` returns void, which has no Rust type: call it as a row source instead.
    sqlx::query!("select from pg_notify($1, $2)", CHANNEL, body)
        .execute(db)
        .await?;
    Ok(())
}

/// Splits an event whose notification would be too large. Only text deltas can be split
/// (into consecutive deltas); anything else that large is dropped with a warning, which is
/// acceptable for an event that is ephemeral by definition.
fn split_for_notify(event: SessionEvent) -> Vec<SessionEvent> {
    let size = |e: &SessionEvent| {
        serde_json::to_string(e)
            .map(|s| s.len())
            .unwrap_or(usize::MAX)
    };
    if size(&event) + 64 <= MAX_NOTIFY_BYTES {
        return vec![event];
    }
    let Some(Value::String(text)) = event.payload.get("text").cloned() else {
        tracing::warn!(r#type = %event.kind, "an ephemeral event too large to notify was dropped");
        return Vec::new();
    };
    let mut base = event;
    base.payload
        .insert("text".into(), Value::String(String::new()));
    let budget = MAX_NOTIFY_BYTES.saturating_sub(size(&base) + 64);
    let mut parts = Vec::new();
    let mut chunk = String::new();
    let mut chunk_len = 0;
    for c in text.chars() {
        // The length of the character once JSON-escaped.
        let len = match c {
            '"' | '\\' | '\n' | '\r' | '\t' | '\u{8}' | '\u{c}' => 2,
            c if (c as u32) < 0x20 => 6,
            c => c.len_utf8(),
        };
        if chunk_len + len > budget {
            parts.push(std::mem::take(&mut chunk));
            chunk_len = 0;
        }
        chunk.push(c);
        chunk_len += len;
    }
    parts.push(chunk);
    parts
        .into_iter()
        .map(|t| {
            let mut e = base.clone();
            e.payload.insert("text".into(), Value::String(t));
            e
        })
        .collect()
}

/// One page of a session's stored log: `seq > after`, ascending, at most `limit` (clamped to
/// 1..=[`MAX_PAGE`]). The session must belong to `project`.
#[tracing::instrument(skip_all, fields(session.id = %session, after, limit))]
pub async fn page(
    db: impl PgExecutor<'_>,
    project: ProjectId,
    session: SessionId,
    after: i64,
    limit: i64,
) -> Result<Vec<SessionEvent>> {
    let rows = sqlx::query_as!(
        Row,
        r#"select e.seq, e.session_id, e.run_id, e.type as kind,
                  e.payload as "payload: Json<Map<String, Value>>", e.created_at
         from events e join sessions s on s.id = e.session_id
         where e.session_id = $1 and s.project_id = $2 and e.seq > $3
         order by e.seq
         limit $4"#,
        session.0,
        project.0,
        after,
        limit.clamp(1, MAX_PAGE),
    )
    .fetch_all(db)
    .await?;
    Ok(rows.into_iter().map(Into::into).collect())
}

/// The same, for the live hub, which has no project in hand: it only ever reads sessions a
/// caller has already been allowed to subscribe to.
pub(crate) async fn page_unscoped(
    db: impl PgExecutor<'_>,
    session: SessionId,
    after: i64,
) -> Result<Vec<SessionEvent>> {
    let rows = sqlx::query_as!(
        Row,
        r#"select seq, session_id, run_id, type as kind,
                  payload as "payload: Json<Map<String, Value>>", created_at
         from events where session_id = $1 and seq > $2 order by seq limit $3"#,
        session.0,
        after,
        MAX_PAGE,
    )
    .fetch_all(db)
    .await?;
    Ok(rows.into_iter().map(Into::into).collect())
}

/// The highest stored seq of a session (0 when its log is empty). Unscoped: callers read it
/// only for a session the caller was already allowed to see.
pub async fn last_seq(db: impl PgExecutor<'_>, session: SessionId) -> Result<i64> {
    let seq = sqlx::query_scalar!(
        "select max(seq) from events where session_id = $1",
        session.0
    )
    .fetch_one(db)
    .await?;
    Ok(seq.unwrap_or(0))
}

/// The status events that open and close a sandbox's up-time, oldest first: every
/// `session.status_running`, `session.status_stopped`, and session-wide (no run)
/// `session.status_error`.
pub async fn boot_marks(
    db: impl PgExecutor<'_>,
    session: SessionId,
) -> Result<Vec<(String, OffsetDateTime)>> {
    let rows = sqlx::query!(
        "select type as kind, created_at from events
         where session_id = $1
           and (type in ('session.status_running', 'session.status_stopped')
                or (type = 'session.status_error' and run_id is null))
         order by seq",
        session.0,
    )
    .fetch_all(db)
    .await?;
    Ok(rows.into_iter().map(|r| (r.kind, r.created_at)).collect())
}

/// The payload of the session's latest `agent.compaction` of its own conversation (one that
/// says `messages_covered`; a subagent's compacts a conversation that is not stored), if
/// any: the next turn's view starts from its summary. The newest is found by walking the
/// session's log backwards on `events_session_seq_idx`.
pub async fn last_compaction(
    db: impl PgExecutor<'_>,
    session: SessionId,
) -> Result<Option<Map<String, Value>>> {
    let payload = sqlx::query_scalar!(
        r#"select payload as "payload: Json<Map<String, Value>>" from events
         where session_id = $1 and type = 'agent.compaction' and payload ? 'messages_covered'
         order by seq desc
         limit 1"#,
        session.0,
    )
    .fetch_optional(db)
    .await?;
    Ok(payload.map(|p| p.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn delta(text: &str) -> SessionEvent {
        SessionEvent {
            seq: 0,
            session_id: SessionId::new(),
            run_id: None,
            kind: "agent.text_delta".into(),
            payload: serde_json::json!({ "text": text })
                .as_object()
                .unwrap()
                .clone(),
            created_at: OffsetDateTime::now_utc(),
        }
    }

    #[test]
    fn a_large_delta_is_split_into_deltas_that_fit_and_join_back() {
        let text: String = "héllo \"wörld\"\n\u{1}".repeat(2_000);
        let parts = split_for_notify(delta(&text));
        assert!(parts.len() > 1);
        let mut joined = String::new();
        for p in &parts {
            let n = serde_json::to_string(&Notice {
                s: Uuid::nil(),
                q: None,
                e: Some(p.clone()),
                d: false,
                w: false,
            })
            .unwrap();
            assert!(n.len() < 8000, "{}", n.len());
            joined.push_str(p.payload["text"].as_str().unwrap());
        }
        assert_eq!(joined, text);
    }

    #[test]
    fn a_small_delta_is_sent_as_is() {
        assert_eq!(split_for_notify(delta("hi")).len(), 1);
    }
}
