//! A session's network policies as the egress proxy reads them, on every connection: the
//! layers are read afresh each time, so a `PATCH` of the session's own policy takes effect on
//! the sandbox's next connection without a restart.

use crate::error::Result;
use sandbox_agents_domain::network::{NetworkLayer, SessionNetwork};
use sandbox_agents_domain::SessionId;
use sqlx::types::Json;
use sqlx::PgExecutor;

/// The session whose sandbox is `sandbox_id`, and every policy that applies to it (agent,
/// environment, its own; a connection must be permitted by all of them). `None` when no
/// session holds that sandbox (a warm-pool sandbox, or one whose session stopped): the proxy
/// refuses it. A session from before policies has none: open.
#[tracing::instrument(skip_all, fields(sandbox.id = %sandbox_id))]
pub async fn network_layers_by_sandbox(
    db: impl PgExecutor<'_>,
    sandbox_id: &str,
) -> Result<Option<(SessionId, Vec<NetworkLayer>)>> {
    // A session holds its sandbox id only while it runs (`mark_running` sets it, every stop
    // clears it), so at most one row matches; `sessions_sandbox_id_idx` finds it.
    let row = sqlx::query!(
        r#"select id as "id: SessionId", network as "network: Json<SessionNetwork>"
           from sessions where sandbox_id = $1 limit 1"#,
        sandbox_id,
    )
    .fetch_optional(db)
    .await?;
    Ok(row.map(|r| (r.id, r.network.map(|n| n.0).unwrap_or_default().layers())))
}

/// Every layer of the session's network policy, with where each comes from (agent,
/// environment, session, in that order); `None` when there is no such session.
#[tracing::instrument(skip_all, fields(session.id = %session))]
pub async fn network_layers(
    db: impl PgExecutor<'_>,
    session: SessionId,
) -> Result<Option<Vec<NetworkLayer>>> {
    let row = sqlx::query!(
        r#"select network as "network: Json<SessionNetwork>" from sessions where id = $1"#,
        session.0,
    )
    .fetch_optional(db)
    .await?;
    Ok(row.map(|r| r.network.map(|n| n.0).unwrap_or_default().layers()))
}
