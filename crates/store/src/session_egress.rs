//! `session_egress`: a session's egress log, one row per host and port its sandbox reached (or
//! was refused) through the egress proxy. The proxy's observer sums in memory and calls
//! [`add`] every few seconds, so the rows trail the traffic by at most that interval.

use crate::error::Result;
use sandbox_agents_domain::{ProjectId, SessionId};
use sqlx::PgExecutor;
use time::OffsetDateTime;

/// Rows a session's log shows at most (its newest).
pub const LIST_LIMIT: i64 = 500;

/// What happened on one (session, host, port) since the last flush, or what it totals.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EgressRecord {
    pub session_id: SessionId,
    pub host: String,
    pub port: i32,
    pub connections: i64,
    pub bytes_sent: i64,
    pub bytes_received: i64,
    pub denied: i64,
    pub first_at: OffsetDateTime,
    pub last_at: OffsetDateTime,
}

/// Adds each delta to its row (creating it), in one statement whatever the batch's size.
/// Deltas of sessions deleted since are skipped (the join), so one deleted session does not
/// fail the others' batch. The batch must not name a (session, host, port) twice (the
/// caller's map keys it so): one statement cannot update a row twice.
#[tracing::instrument(skip_all, fields(rows = deltas.len()))]
pub async fn add(db: impl PgExecutor<'_>, deltas: &[EgressRecord]) -> Result<()> {
    if deltas.is_empty() {
        return Ok(());
    }
    let sessions: Vec<uuid::Uuid> = deltas.iter().map(|d| d.session_id.0).collect();
    let hosts: Vec<String> = deltas.iter().map(|d| d.host.clone()).collect();
    let ports: Vec<i32> = deltas.iter().map(|d| d.port).collect();
    let connections: Vec<i64> = deltas.iter().map(|d| d.connections).collect();
    let sent: Vec<i64> = deltas.iter().map(|d| d.bytes_sent).collect();
    let received: Vec<i64> = deltas.iter().map(|d| d.bytes_received).collect();
    let denied: Vec<i64> = deltas.iter().map(|d| d.denied).collect();
    let first: Vec<OffsetDateTime> = deltas.iter().map(|d| d.first_at).collect();
    let last: Vec<OffsetDateTime> = deltas.iter().map(|d| d.last_at).collect();
    sqlx::query!(
        "insert into session_egress
             (session_id, host, port, connections, bytes_sent, bytes_received, denied, first_at, last_at)
         select d.session_id, d.host, d.port, d.connections, d.bytes_sent, d.bytes_received,
                d.denied, d.first_at, d.last_at
           from unnest($1::uuid[], $2::text[], $3::int[], $4::bigint[], $5::bigint[],
                       $6::bigint[], $7::bigint[], $8::timestamptz[], $9::timestamptz[])
                  as d (session_id, host, port, connections, bytes_sent, bytes_received,
                        denied, first_at, last_at)
           join sessions s on s.id = d.session_id
         on conflict (session_id, host, port) do update
            set connections = session_egress.connections + excluded.connections,
                bytes_sent = session_egress.bytes_sent + excluded.bytes_sent,
                bytes_received = session_egress.bytes_received + excluded.bytes_received,
                denied = session_egress.denied + excluded.denied,
                first_at = least(session_egress.first_at, excluded.first_at),
                last_at = greatest(session_egress.last_at, excluded.last_at)",
        &sessions,
        &hosts,
        &ports,
        &connections,
        &sent,
        &received,
        &denied,
        &first,
        &last,
    )
    .execute(db)
    .await?;
    Ok(())
}

/// The session's rows if it is one of `project`'s (none otherwise), the newest `last_at`
/// first, at most [`LIST_LIMIT`].
#[tracing::instrument(skip_all, fields(session.id = %session))]
pub async fn list(
    db: impl PgExecutor<'_>,
    project: ProjectId,
    session: SessionId,
) -> Result<Vec<EgressRecord>> {
    Ok(sqlx::query_as!(
        EgressRecord,
        r#"select e.session_id as "session_id: SessionId", e.host, e.port, e.connections,
                  e.bytes_sent, e.bytes_received, e.denied, e.first_at, e.last_at
             from session_egress e join sessions s on s.id = e.session_id
            where s.project_id = $1 and e.session_id = $2
            order by e.last_at desc, e.host, e.port
            limit $3"#,
        project.0,
        session.0,
        LIST_LIMIT,
    )
    .fetch_all(db)
    .await?)
}
