//! A booting session's hold on the sandbox it just got.

use crate::error::Result;
use sandbox_agents_domain::SessionId;
use sqlx::PgExecutor;

/// Records `sandbox_id` as the sandbox of `session` while it is still provisioning, as soon
/// as the backend made it (a pool claim does the same in its transaction). From then on the
/// sandbox has an owner: the egress proxy serves it the session's policy (the boot's own
/// clones and fetches go out under it), and a boot that dies leaves a row that names the
/// sandbox, which the next boot removes. `false` when the session is no longer provisioning.
#[tracing::instrument(skip_all, fields(session.id = %session, sandbox.id = %sandbox_id))]
pub async fn hold_sandbox(
    db: impl PgExecutor<'_>,
    session: SessionId,
    sandbox_id: &str,
) -> Result<bool> {
    let held = sqlx::query!(
        "update sessions set sandbox_id = $2, updated_at = now()
         where id = $1 and status = 'provisioning'",
        session.0,
        sandbox_id,
    )
    .execute(db)
    .await?;
    Ok(held.rows_affected() == 1)
}
