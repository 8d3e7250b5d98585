//! The boots one process takes on, and the sweep that keeps every `provisioning` session
//! booting somewhere.
//!
//! A burst of sessions must queue, never wedge: each process runs at most
//! `max_concurrent_boots` boots at once (a fair semaphore, so the rest go in the order they
//! came) and a boot waiting its turn holds nothing (no lease, no connection), only its place.
//! A process stamps the boots it takes on with its liveness key (`sessions.boot_worker`), and
//! the sweep ([`Sessions::redrive_boots`]) boots again the sessions left `provisioning` that
//! no live process drives: their process died, or a boot could not record its outcome even
//! after its retries.

use crate::Sessions;
use backon::BackoffBuilder;
use sandbox_agents_backoff::DATABASE_WRITE;
use sandbox_agents_domain::SessionId;
use sandbox_agents_errors::Result;
use sandbox_agents_store::session_leases;
use std::collections::HashSet;
use std::sync::Mutex;

/// The boots this process took on.
pub(crate) struct BootQueue {
    /// The most boots running at once (`--max-concurrent-boots`, at least 1).
    max: usize,
    /// One for each boot running.
    permits: tokio::sync::Semaphore,
    /// Sessions a task of this process is booting or waiting to boot.
    taken: Mutex<HashSet<SessionId>>,
}

impl BootQueue {
    pub(crate) fn new(max_concurrent: usize) -> Self {
        let max = max_concurrent.max(1);
        BootQueue {
            max,
            permits: tokio::sync::Semaphore::new(max),
            taken: Mutex::default(),
        }
    }

    fn is_taken(&self, id: SessionId) -> bool {
        self.taken.lock().expect("the boot set").contains(&id)
    }

    /// Takes the session's boot on; `false` when a task of this process already has.
    fn take(&self, id: SessionId) -> bool {
        self.taken.lock().expect("the boot set").insert(id)
    }

    fn give_back(&self, id: SessionId) {
        self.taken.lock().expect("the boot set").remove(&id);
    }

    /// Boots taken on that wait for their turn.
    fn waiting(&self) -> usize {
        let running = self.max - self.permits.available_permits();
        let taken = self.taken.lock().expect("the boot set").len();
        taken.saturating_sub(running)
    }

    /// A boot's turn, in the order they asked (the semaphore is fair).
    async fn turn(&self) -> tokio::sync::SemaphorePermit<'_> {
        self.permits
            .acquire()
            .await
            .expect("the boot semaphore is never closed")
    }
}

/// A session's boot, taken on by this process until dropped.
pub(crate) struct TakenOn {
    sessions: Sessions,
    pub id: SessionId,
}

impl Drop for TakenOn {
    fn drop(&mut self) {
        self.sessions.inner.boots.give_back(self.id);
    }
}

impl Sessions {
    /// Boots this process took on that wait for their turn (`sandbox_agents_session_boots_waiting`).
    pub fn boots_waiting(&self) -> usize {
        self.inner.boots.waiting()
    }

    /// Takes the session's boot on in this process; `None` when a task of it already has.
    pub(crate) fn take_on_boot(&self, id: SessionId) -> Option<TakenOn> {
        self.inner.boots.take(id).then(|| TakenOn {
            sessions: self.clone(),
            id,
        })
    }

    /// Boots in the background; the outcome lands in the row and the log. A boot that met a
    /// busy or unreachable database is tried again ([`DATABASE_WRITE`]'s waits: 0.5 s,
    /// 2 s, 8 s); then the sweep takes it on. A shutdown ends the waits with no further try,
    /// since a boot starts a sandbox. `false` when a task of this process already has the boot.
    pub(crate) fn spawn_boot(&self, id: SessionId) -> bool {
        let Some(taken) = self.take_on_boot(id) else {
            tracing::debug!(session.id = %id, "this process already boots the session");
            return false;
        };
        let rt = self.clone();
        self.inner.tasks.spawn(async move {
            let mut retries = DATABASE_WRITE.build();
            loop {
                let Err(e) = rt.boot(&taken).await else { return };
                if !e.is_transient() {
                    // Not the database's: trying again would fail the same way.
                    tracing::error!(session.id = %id, error = %e, "a boot failed without recording its outcome");
                    return;
                }
                let Some(wait) = retries.next() else {
                    tracing::error!(session.id = %id, error = %e, "a boot could not record its outcome; the sweep boots the session again");
                    return;
                };
                tracing::warn!(session.id = %id, error = %e, retry_in_ms = wait.as_millis() as u64, "a boot could not record its outcome; trying again");
                tokio::select! {
                    _ = tokio::time::sleep(wait) => {}
                    _ = rt.inner.shutdown.cancelled() => return,
                }
            }
        });
        true
    }

    /// Waits for this process's turn to boot: stamps the session with this process's key
    /// first, so the sweep of every process knows that a live one drives it. `None` at
    /// shutdown (the next process to start, or another's sweep, boots it).
    pub(crate) async fn boot_turn(
        &self,
        taken: &TakenOn,
    ) -> Result<Option<tokio::sync::SemaphorePermit<'_>>> {
        let st = &self.inner;
        session_leases::stamp_boot(&st.db, taken.id, self.worker_key().await?).await?;
        tokio::select! {
            permit = st.boots.turn() => Ok(Some(permit)),
            _ = st.shutdown.cancelled() => Ok(None),
        }
    }

    /// Boots again the `provisioning` sessions no live process drives (neither holding their
    /// lease nor stamped on their boot, or stamped by this process with no task of it on
    /// it), and gives back the leases this process lost track of. Returns how many it took
    /// on.
    #[tracing::instrument(skip_all)]
    pub async fn redrive_boots(&self) -> Result<usize> {
        let st = &self.inner;
        self.release_lost_leases().await?;
        let mut alive = self.alive_processes();
        let mut redriven = 0;
        for s in session_leases::unbooted(&st.db).await? {
            if self
                .boot_driven(s.id, s.boot_worker, s.lease_worker, &mut alive)
                .await?
            {
                continue;
            }
            if self.spawn_boot(s.id) {
                let driver = s.lease_worker.or(s.boot_worker);
                tracing::warn!(session.id = %s.id, worker = ?driver, "booting a session left provisioning that no live process boots");
                redriven += 1;
            }
        }
        if redriven > 0 {
            metrics::counter!("sandbox_agents_session_boots_redriven_total")
                .increment(redriven as u64);
        }
        Ok(redriven)
    }

    /// Whether a live process drives the boot of the `provisioning` session `id`: holds its
    /// lease, or is stamped on its boot (this one only while a task of it has the boot). The
    /// orphan sweep keeps the sandboxes of those it does.
    pub(crate) async fn boot_driven(
        &self,
        id: SessionId,
        boot_worker: Option<i32>,
        lease_worker: Option<i32>,
        alive: &mut crate::liveness::AliveProcesses<'_>,
    ) -> Result<bool> {
        let me = self.worker_key().await?;
        // A lease of this process is a task of it working on the session.
        if let Some(w) = lease_worker {
            if w == me || alive.check(Some(w)).await? {
                return Ok(true);
            }
        }
        match boot_worker {
            Some(w) if w == me => Ok(self.inner.boots.is_taken(id)),
            other => alive.check(other).await,
        }
    }
}
