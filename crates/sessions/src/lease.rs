//! The lease that serialises lifecycle operations on one session (boot, stop, start, delete,
//! snapshot, restore) across every server process: a row in `session_leases` naming this
//! process by its liveness key (see `sandbox_agents_store::session_leases`).
//!
//! Taking and giving it back are short statements; nothing holds a connection in between, so
//! however many operations wait or work, the pool stays free for the work itself (the advisory
//! lock on a pooled connection this replaces starved the pool under a burst of boots). A
//! lease lasts while its process lives: a crash frees it as a dropped connection freed the
//! advisory lock, because a lease whose process is gone is taken over at once.

use crate::Sessions;
use backon::{BackoffBuilder, ExponentialBuilder};
use sandbox_agents_domain::SessionId;
use sandbox_agents_errors::{Result, ServiceError};
use sandbox_agents_store::session_leases::{self, Taken};
use std::collections::HashSet;
use std::sync::Mutex;
use std::time::Duration;
use uuid::Uuid;

/// A wait for a lease held by another process looks again after 10 ms, then twice as long
/// each time up to 250 ms, for as long as it takes (a release in this process wakes its
/// waiters at once).
const POLL: ExponentialBuilder = ExponentialBuilder::new()
    .with_min_delay(Duration::from_millis(10))
    .with_max_delay(Duration::from_millis(250))
    .without_max_times();

/// The leases this process holds, and the wake-up of its waiters.
#[derive(Default)]
pub(crate) struct Leases {
    /// The tokens of the holdings in this process (registered before they are taken: the
    /// sweep gives back only rows it read before it looked here, see
    /// [`Sessions::release_lost_leases`]).
    held: Mutex<HashSet<Uuid>>,
    released: tokio::sync::Notify,
}

impl Leases {
    fn holds(&self, token: Uuid) -> bool {
        self.held.lock().expect("the lease set").contains(&token)
    }

    fn forget(&self, token: Uuid) {
        self.held.lock().expect("the lease set").remove(&token);
        self.released.notify_waiters();
    }
}

/// A session's lease, held until [`SessionLease::release`] (or dropped: then given back in
/// the background).
pub(crate) struct SessionLease {
    sessions: Sessions,
    id: SessionId,
    token: Uuid,
    released: bool,
}

impl Sessions {
    /// Takes the session's lease unless someone else holds it; `None` too when the session
    /// is gone.
    pub(crate) async fn try_lease(&self, id: SessionId) -> Result<Option<SessionLease>> {
        Ok(match self.take_lease(id).await? {
            (Taken::Got, lease) => lease,
            _ => None,
        })
    }

    /// Waits for the session's lease. A session that is gone is a `NotFound`.
    pub(crate) async fn lease(&self, id: SessionId) -> Result<SessionLease> {
        let mut waits = POLL.build();
        loop {
            let released = self.inner.leases.released.notified();
            tokio::pin!(released);
            released.as_mut().enable();
            match self.take_lease(id).await? {
                (Taken::Got, Some(lease)) => return Ok(lease),
                (Taken::Gone, _) => {
                    return Err(ServiceError::NotFound(format!("session '{id}' not found")))
                }
                _ => {}
            }
            tokio::select! {
                _ = released => {}
                _ = tokio::time::sleep(waits.next().expect("the lease's waits never run out")) => {}
            }
        }
    }

    /// One attempt: takes the lease if it is free, or held by a process that is gone, or by
    /// a holding of this process that no longer exists (its release failed).
    async fn take_lease(&self, id: SessionId) -> Result<(Taken, Option<SessionLease>)> {
        let st = &self.inner;
        let me = self.worker_key().await?;
        let token = Uuid::new_v4();
        st.leases.held.lock().expect("the lease set").insert(token);
        let lease = SessionLease {
            sessions: self.clone(),
            id,
            token,
            released: false,
        };
        // Dropping `lease` below forgets the token (nothing was taken with it).
        let taken = match session_leases::take(&st.db, id, me, token).await? {
            Taken::Held(h) => {
                let lost = if h.worker == me {
                    !st.leases.holds(h.token)
                } else {
                    !self.is_alive(h.worker).await?
                };
                if lost && session_leases::take_over(&st.db, id, h.token, me, token).await? {
                    tracing::info!(session.id = %id, worker = h.worker, "took over the lease of a holder that is gone");
                    Taken::Got
                } else {
                    Taken::Held(h)
                }
            }
            other => other,
        };
        if taken == Taken::Got {
            Ok((taken, Some(lease)))
        } else {
            lease.forget();
            Ok((taken, None))
        }
    }
}

impl Sessions {
    /// Gives back the leases of this process that no holding of it has any more (a release
    /// that failed). The rows are read before the holdings are: a holding registered after
    /// the read is not among the rows, so a lease being taken is never given back.
    pub(crate) async fn release_lost_leases(&self) -> Result<u64> {
        let st = &self.inner;
        let me = self.worker_key().await?;
        let rows = session_leases::tokens_of(&st.db, me).await?;
        let held = st.leases.held.lock().expect("the lease set").clone();
        let lost: Vec<Uuid> = rows.into_iter().filter(|t| !held.contains(t)).collect();
        if lost.is_empty() {
            return Ok(0);
        }
        Ok(session_leases::release_tokens(&st.db, &lost).await?)
    }
}

impl SessionLease {
    /// Gives the lease back. A release that fails leaves a row the sweep removes
    /// ([`Sessions::release_lost_leases`]) and the next taker of this process takes over.
    /// Cancelled half-way (a caller that went away), it is given back by `Drop` instead.
    pub(crate) async fn release(mut self) {
        let st = &self.sessions.inner;
        if let Err(e) = session_leases::release(&st.db, self.id, self.token).await {
            tracing::warn!(session.id = %self.id, error = %e, "could not give a session's lease back; it is taken over at its next use");
        }
        st.leases.forget(self.token);
        self.released = true;
    }

    /// Drops a lease that was never taken.
    fn forget(mut self) {
        self.released = true;
        self.sessions.inner.leases.forget(self.token);
    }
}

impl Drop for SessionLease {
    fn drop(&mut self) {
        if self.released {
            return;
        }
        // Dropped without `release` (an early return or a panic): given back in the
        // background, or by the sweep when there is no runtime left to do it.
        let (sessions, id, token) = (self.sessions.clone(), self.id, self.token);
        self.released = true;
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => {
                rt.spawn(async move {
                    let _ = session_leases::release(&sessions.inner.db, id, token).await;
                    sessions.inner.leases.forget(token);
                });
            }
            Err(_) => sessions.inner.leases.forget(token),
        }
    }
}

/// A store `NotFound` as the API's 404 for this session.
pub fn not_found(e: sandbox_agents_store::Error, id: SessionId) -> ServiceError {
    match e {
        sandbox_agents_store::Error::NotFound => {
            ServiceError::NotFound(format!("session '{id}' not found"))
        }
        other => other.into(),
    }
}
