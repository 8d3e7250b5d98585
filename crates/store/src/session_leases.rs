//! Lifecycle leases on sessions, and who took a boot on.
//!
//! A lease says which server process works on a session's sandbox (boot, stop, start, delete,
//! snapshot, restore): one row per session, naming the process by its liveness key (see
//! [`crate::liveness`]) and the holding by a token. It is taken and given back in short
//! statements and held by no connection in between, so a lifecycle operation never keeps a
//! pooled connection across the backend calls it protects. A lease lasts while its process
//! holds its liveness lock: a lease of a dead process is taken over ([`take_over`]), never
//! waited out.
//!
//! A boot stamp (`sessions.boot_worker`) says which process took a `provisioning` session's
//! boot on, queued or booting; [`unbooted`] lists the provisioning sessions the sweep must
//! look at, with the processes that hold or stamped them.

use crate::error::{constraint, Result};
use sandbox_agents_domain::SessionId;
use sqlx::PgExecutor;
use uuid::Uuid;

/// Who holds a session's lease.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Holder {
    /// The liveness key of the holding process.
    pub worker: i32,
    pub token: Uuid,
}

/// What [`take`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Taken {
    /// The lease is the caller's now.
    Got,
    /// Someone holds it.
    Held(Holder),
    /// There is no such session (deleted).
    Gone,
}

/// Takes the lease of `session` for `worker` with `token` if nobody holds it.
pub async fn take(
    db: impl PgExecutor<'_>,
    session: SessionId,
    worker: i32,
    token: Uuid,
) -> Result<Taken> {
    // The no-op update on a conflict returns the holder's row in the same statement.
    let row = sqlx::query!(
        r#"insert into session_leases (session_id, worker, token)
           select $1, $2, $3 where exists (select 1 from sessions where id = $1)
           on conflict (session_id) do update set worker = session_leases.worker
           returning worker, token"#,
        session.0,
        worker,
        token,
    )
    .fetch_optional(db)
    .await;
    match row {
        Ok(None) => Ok(Taken::Gone),
        Ok(Some(r)) if r.token == token => Ok(Taken::Got),
        Ok(Some(r)) => Ok(Taken::Held(Holder {
            worker: r.worker,
            token: r.token,
        })),
        // Deleted between the check and the insert.
        Err(e) if constraint(&e) == Some("session_leases_session_id_fkey") => Ok(Taken::Gone),
        Err(e) => Err(e.into()),
    }
}

/// Takes over the lease `old` held (its process is gone, or the holding was lost by this
/// process); `false` when it changed hands meanwhile.
pub async fn take_over(
    db: impl PgExecutor<'_>,
    session: SessionId,
    old: Uuid,
    worker: i32,
    token: Uuid,
) -> Result<bool> {
    let n = sqlx::query!(
        "update session_leases set worker = $3, token = $4, taken_at = now()
          where session_id = $1 and token = $2",
        session.0,
        old,
        worker,
        token,
    )
    .execute(db)
    .await?
    .rows_affected();
    Ok(n == 1)
}

/// Gives the lease back, if this holding still has it.
pub async fn release(db: impl PgExecutor<'_>, session: SessionId, token: Uuid) -> Result<()> {
    sqlx::query!(
        "delete from session_leases where session_id = $1 and token = $2",
        session.0,
        token
    )
    .execute(db)
    .await?;
    Ok(())
}

/// The tokens of the leases `worker` holds.
pub async fn tokens_of(db: impl PgExecutor<'_>, worker: i32) -> Result<Vec<Uuid>> {
    Ok(
        sqlx::query_scalar!("select token from session_leases where worker = $1", worker)
            .fetch_all(db)
            .await?,
    )
}

/// Gives back the leases held with `tokens` (ones their process lost track of: a release
/// that failed would otherwise last as long as the process lives). Returns how many went.
pub async fn release_tokens(db: impl PgExecutor<'_>, tokens: &[Uuid]) -> Result<u64> {
    Ok(
        sqlx::query!("delete from session_leases where token = any($1)", tokens)
            .execute(db)
            .await?
            .rows_affected(),
    )
}

/// Stamps `worker` as the process that took the session's boot on; nothing when it is no
/// longer `provisioning`.
pub async fn stamp_boot(db: impl PgExecutor<'_>, session: SessionId, worker: i32) -> Result<()> {
    sqlx::query!(
        "update sessions set boot_worker = $2
          where id = $1 and status = 'provisioning' and boot_worker is distinct from $2",
        session.0,
        worker
    )
    .execute(db)
    .await?;
    Ok(())
}

/// A `provisioning` session the boot sweep looks at.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unbooted {
    pub id: SessionId,
    /// The process that took its boot on, if any.
    pub boot_worker: Option<i32>,
    /// The process holding its lease, if any.
    pub lease_worker: Option<i32>,
}

/// The `provisioning` sessions some boot should be driving: all of them but those queued under
/// the sandbox limits (booted by whoever frees room) and those waiting for their
/// environment's image build (booted by its end). Oldest first.
pub async fn unbooted(db: impl PgExecutor<'_>) -> Result<Vec<Unbooted>> {
    Ok(sqlx::query_as!(
        Unbooted,
        r#"select s.id as "id: SessionId", s.boot_worker, l.worker as "lease_worker?"
             from sessions s left join session_leases l on l.session_id = s.id
            where s.status = 'provisioning' and s.queued_at is null
              and not exists (
                    select 1 from environment_sessions e
                      join environment_builds b on b.digest = e.build_digest
                     where e.session_id = s.id and b.status = 'building')
            order by s.created_at"#
    )
    .fetch_all(db)
    .await?)
}

/// What the orphan sweep needs to know of a session, read at one instant: its status, the
/// sandbox its row names, and the processes stamped on its boot and holding its lease.
#[derive(Clone, Debug)]
pub struct SandboxOwner {
    pub provisioning: bool,
    pub sandbox_id: Option<String>,
    pub boot_worker: Option<i32>,
    pub lease_worker: Option<i32>,
}

/// [`SandboxOwner`] of `session`; `None` when there is no such session.
pub async fn sandbox_owner(
    db: impl PgExecutor<'_>,
    session: SessionId,
) -> Result<Option<SandboxOwner>> {
    Ok(sqlx::query_as!(
        SandboxOwner,
        r#"select (s.status = 'provisioning') as "provisioning!", s.sandbox_id,
                  s.boot_worker, l.worker as "lease_worker?"
             from sessions s left join session_leases l on l.session_id = s.id
            where s.id = $1"#,
        session.0
    )
    .fetch_optional(db)
    .await?)
}
