//! A session's network policies (and the credentials bound for its egress) as the egress
//! proxy reads them, on every connection: the layers are read afresh each time, so a `PATCH`
//! of the session's own policy takes effect on the sandbox's next connection without a
//! restart.

use crate::error::Result;
use sandbox_agents_domain::network::{NetworkLayer, SessionNetwork};
use sandbox_agents_domain::SessionId;
use sqlx::types::Json;
use sqlx::PgExecutor;

/// What the egress proxy needs of the session that holds a sandbox, read in one statement on
/// every connection.
#[derive(Clone, Debug)]
pub struct SandboxEgress {
    pub session: SessionId,
    /// Every policy that applies (agent, environment, its own); a connection must be
    /// permitted by all of them. A session from before policies has none: open.
    pub layers: Vec<NetworkLayer>,
    /// The credentials its boot resolved for the proxy, sealed (see the credentials crate's
    /// `Credentials::open_egress`); None when it has none.
    pub credentials: Option<Vec<u8>>,
}

/// The session whose sandbox is `sandbox_id`, its policies and its sealed egress
/// credentials. `None` when no session holds that sandbox (a warm-pool sandbox, or one whose
/// session stopped): the proxy refuses it.
#[tracing::instrument(skip_all, fields(sandbox.id = %sandbox_id))]
pub async fn network_layers_by_sandbox(
    db: impl PgExecutor<'_>,
    sandbox_id: &str,
) -> Result<Option<SandboxEgress>> {
    // A session holds its sandbox id only while it runs (`mark_running` sets it, every stop
    // clears it), so at most one row matches; `sessions_sandbox_id_idx` finds it.
    let row = sqlx::query!(
        r#"select id as "id: SessionId", network as "network: Json<SessionNetwork>",
                  egress_credentials
           from sessions where sandbox_id = $1 limit 1"#,
        sandbox_id,
    )
    .fetch_optional(db)
    .await?;
    Ok(row.map(|r| SandboxEgress {
        session: r.id,
        layers: r.network.map(|n| n.0).unwrap_or_default().layers(),
        credentials: r.egress_credentials,
    }))
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
