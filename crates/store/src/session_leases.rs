//! Lifecycle leases on sessions, and who took a boot on.
//!
//! A lease says which server process works on a session's sandbox (boot, stop, start, delete,
//! snapshot, restore): one row per session, naming the process by its liveness key (see
//! [`crate::liveness`]) and the holding by a token. It is taken and given back in short
//! statements and held by no connection in between, so a lifecycle operation never keeps a
//! pooled connection across the Docker calls it protects. A lease lasts while its process
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

/// Gives back every lease of `worker` but the holdings `keep` (what that process holds now):
/// leases a process lost track of (a release that failed) would otherwise last as long as it
/// lives. Returns how many went.
pub async fn release_lost(db: impl PgExecutor<'_>, worker: i32, keep: &[Uuid]) -> Result<u64> {
    Ok(sqlx::query!(
        "delete from session_leases where worker = $1 and not (token = any($2))",
        worker,
        keep
    )
    .execute(db)
    .await?
    .rows_affected())
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

/// The processes that may drive the boot of `session` while it is `provisioning`: the one
/// stamped on it and the one holding its lease. `None` when it is not provisioning.
pub async fn boot_drivers(
    db: impl PgExecutor<'_>,
    session: SessionId,
) -> Result<Option<(Option<i32>, Option<i32>)>> {
    Ok(sqlx::query!(
        r#"select s.boot_worker, l.worker as "lease_worker?"
             from sessions s left join session_leases l on l.session_id = s.id
            where s.id = $1 and s.status = 'provisioning'"#,
        session.0
    )
    .fetch_optional(db)
    .await?
    .map(|r| (r.boot_worker, r.lease_worker)))
}
