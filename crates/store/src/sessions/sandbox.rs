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

/// Gives a booting session's sandbox its egress credentials (sealed) before the boot's own
/// fetches run, so that a `git_repo` entry cloned at boot carries a credential bound for its
/// host as every later request does (`mark_running` writes them again with the rest); `None`
/// clears what an earlier attempt of the boot wrote. Only while the session is provisioning
/// on that very sandbox: `false` otherwise.
#[tracing::instrument(skip_all, fields(session.id = %session, sandbox.id = %sandbox_id))]
pub async fn arm_boot_egress(
    db: impl PgExecutor<'_>,
    session: SessionId,
    sandbox_id: &str,
    sealed: Option<&[u8]>,
) -> Result<bool> {
    let armed = sqlx::query!(
        "update sessions set egress_credentials = $3
         where id = $1 and sandbox_id = $2 and status = 'provisioning'",
        session.0,
        sandbox_id,
        sealed,
    )
    .execute(db)
    .await?;
    Ok(armed.rows_affected() == 1)
}
