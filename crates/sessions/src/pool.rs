//! The warm pool: started sandboxes of the default image waiting for sessions, so that a boot
//! skips creating and starting a container (most of create-to-running).
//!
//! Invariants:
//! - A pooled sandbox is created exactly as a session's would be (same hardening, limits,
//!   user, image, the extra CA certificates in its trust store), without environment, ports or session label: it was made before the
//!   session existed. The environment is passed with every exec instead, for all sessions
//!   (see `exec::sandbox_env`), so pooled and dedicated sandboxes behave the same.
//! - Ownership lives in the database. A pool container is owned by its `sandbox_pool` row
//!   (written before the container is created) until a claim deletes the row and records the
//!   container as the session's `sandbox_id` in one transaction; the orphan sweep removes
//!   pool containers owned by neither. Claims use `for update skip locked`, so concurrent
//!   boots in any number of processes never get the same container.
//! - Only boots that could have got this very container may take one: the default image,
//!   the default limits, and no exposed ports (ports are published at creation), unless
//!   sandboxes are behind the egress proxy: then nothing is published and every port is
//!   reached through the daemon, so a pooled sandbox serves any ports.
//! - Its size follows demand: every such boot is recorded by its claim (hit or miss), and the
//!   pool holds as many as the busiest minute of the last ten booted, between
//!   `--warm-pool-size` and `--warm-pool-max` ([`Sessions::pool_target`]); the refill tops it
//!   up after each boot, the sweep trims what a quieter past no longer wants. A burst that
//!   emptied it is served from the pool the next time.

use crate::Sessions;
use sandbox_agents_domain::SessionId;
use sandbox_agents_errors::Result;
use sandbox_agents_sandbox::{ListedSandbox, Sandbox, SandboxSpec, WORKDIR};
use sandbox_agents_store::{liveness, sandbox_pool, sessions};
use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Duration;
use tokio::sync::{watch, Notify};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// A reservation whose container never became ready in this long was made by a process that
/// died (creating and starting a container takes well under a minute even on a busy host).
const STALE_RESERVATION: Duration = Duration::from_secs(300);
/// The longest a refill waits for this process's boots in progress to end.
const REFILL_DEFER: Duration = Duration::from_secs(10);

/// The pool's part of this process: the refill worker, what wakes it, and the boots in
/// progress it gives way to. The pool's sandboxes themselves are rows (`sandbox_pool`).
pub(crate) struct WarmPool {
    /// Wakes the refill worker; a wake-up asked while it works is kept for its next look.
    wanted: Notify,
    /// Set once the refill worker runs: it is started once per process.
    started: AtomicBool,
    /// Boots in progress in this process.
    booting: watch::Sender<usize>,
    /// The refill worker, for a shutdown that waits for it.
    worker: Mutex<Option<JoinHandle<()>>>,
}

impl WarmPool {
    pub(crate) fn new() -> Self {
        WarmPool {
            wanted: Notify::new(),
            started: AtomicBool::new(false),
            booting: watch::Sender::new(0),
            worker: Mutex::new(None),
        }
    }

    /// Asks the refill worker to top the pool up (a no-op until it runs).
    pub(crate) fn want(&self) {
        self.wanted.notify_one();
    }

    /// Counts a boot in progress for as long as the guard lives.
    pub(crate) fn booting(&self) -> Booting<'_> {
        self.booting.send_modify(|n| *n += 1);
        Booting(&self.booting)
    }

    /// Starts the refill worker `spawn` makes, unless one was started already.
    fn start(&self, spawn: impl FnOnce() -> JoinHandle<()>) {
        if !self.started.swap(true, Ordering::SeqCst) {
            *self.worker.lock().expect("not poisoned") = Some(spawn());
        }
    }

    /// The refill worker, once: for the shutdown that waits for it.
    fn take_worker(&self) -> Option<JoinHandle<()>> {
        self.worker.lock().expect("not poisoned").take()
    }

    /// Waits until a refill is wanted and then for this process's boots in progress to end:
    /// starting sandboxes competes with boots for the host, so during a burst the boots
    /// finish first (at most [`REFILL_DEFER`], so a steady stream of boots still gets a
    /// pool). `false` once `shutdown` is cancelled.
    async fn next_refill(&self, shutdown: &CancellationToken) -> bool {
        tokio::select! {
            _ = self.wanted.notified() => {}
            _ = shutdown.cancelled() => return false,
        }
        let mut booting = self.booting.subscribe();
        tokio::select! {
            _ = tokio::time::timeout(REFILL_DEFER, booting.wait_for(|n| *n == 0)) => true,
            _ = shutdown.cancelled() => false,
        }
    }
}

/// One boot in progress, counted while it lives (the pool's refill waits for none).
pub(crate) struct Booting<'a>(&'a watch::Sender<usize>);

impl Drop for Booting<'_> {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n = n.saturating_sub(1));
    }
}

impl Sessions {
    /// What a pooled sandbox is: the default image and limits, nothing session-specific.
    fn pool_spec(&self) -> SandboxSpec {
        let settings = &self.inner.settings;
        SandboxSpec {
            session: String::new(),
            image: settings.default_image.clone(),
            env: BTreeMap::new(),
            exposed_ports: Vec::new(),
            limits: settings.limits.clone(),
            runtime_class: None,
        }
    }

    /// Whether a boot of `spec` may take a pooled sandbox instead.
    fn poolable(&self, spec: &SandboxSpec) -> bool {
        let pooled = self.pool_spec();
        self.inner.settings.warm_pool > 0
            && spec.image == pooled.image
            && spec.limits == pooled.limits
            // A pooled sandbox runs under the default runtime.
            && spec.runtime_class == pooled.runtime_class
            && (spec.exposed_ports.is_empty() || self.inner.settings.egress_proxy)
            && spec.env.is_empty()
    }

    /// Takes a started sandbox from the pool for `session` (which must be provisioning). The
    /// refill is asked for once the boot is over (see `boot_locked`), so that starting the
    /// replacement does not compete with the boot for the host. `None` when the boot is not eligible or the pool is empty: the caller
    /// creates a sandbox itself.
    #[tracing::instrument(skip_all, fields(session.id = %session))]
    pub(crate) async fn claim_pooled(
        &self,
        session: SessionId,
        spec: &SandboxSpec,
    ) -> Result<Option<Sandbox>> {
        if !self.poolable(spec) {
            return Ok(None);
        }
        let st = &self.inner;
        let mut tx = st.db.begin().await?;
        let claimed = sandbox_pool::claim(&mut tx, &spec.image, session).await?;
        // Committed either way: the claim records the boot as demand (see `pool_target`).
        tx.commit().await?;
        let Some(container) = claimed else {
            tracing::debug!("the warm pool is empty; creating a sandbox");
            metrics::counter!("sandbox_agents_warm_pool_claims_total", "outcome" => "miss")
                .increment(1);
            return Ok(None);
        };
        // It was running when pooled; make sure it still is (the backend may have restarted).
        // An open connection to its daemon says so without asking the backend; a pooled
        // sandbox publishes no ports, so there is nothing else to learn.
        let ports = if st.backend.known_running(&container) {
            BTreeMap::new()
        } else {
            match st.backend.inspect(&container).await? {
                Some(status) if status.running => status.ports,
                _ => {
                    tracing::warn!(container.id = %container, "a pooled sandbox had died; creating one");
                    metrics::counter!("sandbox_agents_warm_pool_claims_total", "outcome" => "dead")
                        .increment(1);
                    st.backend.remove(&container).await?;
                    return Ok(None);
                }
            }
        };
        // Named after the session like any session's sandbox (the label cannot change; the
        // row is what says who owns it), beside the boot rather than before it: the name is
        // for people looking for it (`docker ps`, say), and a rename is backend work that a
        // burst of boots would queue behind. One that fails costs the name, not the boot.
        let (backend, named, name) = (st.backend.clone(), container.clone(), session.to_string());
        st.tasks.spawn(async move {
            if let Err(e) = backend.assign(&named, &name).await {
                tracing::warn!(container.id = %named, error = %e, "could not name the pooled sandbox after its session");
            }
        });
        tracing::debug!(container.id = %container, "took a sandbox from the warm pool");
        metrics::counter!("sandbox_agents_warm_pool_claims_total", "outcome" => "hit").increment(1);
        Ok(Some(Sandbox {
            id: container,
            workdir: WORKDIR.to_owned(),
            ports,
        }))
    }

    /// How many sandboxes the pool should hold now: `--warm-pool-size`, or more when recent
    /// demand asks (`sandbox_pool::target`: the busiest minute of the last ten), at most
    /// `--warm-pool-max`.
    pub async fn pool_target(&self) -> Result<usize> {
        let s = &self.inner.settings;
        if s.warm_pool == 0 || s.warm_pool_max <= s.warm_pool {
            return Ok(s.warm_pool);
        }
        Ok(sandbox_pool::target(&self.inner.db, s.warm_pool, s.warm_pool_max).await?)
    }

    /// Starts the refill worker (once) and asks it to fill the pool. The worker tops the pool
    /// up whenever a claim or a sweep asks, until shutdown. A no-op without a pool.
    pub fn start_pool(&self) {
        let st = &self.inner;
        if st.settings.warm_pool == 0 {
            return;
        }
        st.pool.start(|| {
            let rt = self.clone();
            tokio::spawn(async move {
                let shutdown = rt.inner.shutdown.clone();
                while rt.inner.pool.next_refill(&shutdown).await {
                    if let Err(e) = rt.fill_pool().await {
                        tracing::warn!(error = %e, "could not refill the warm pool");
                    }
                }
            })
        });
        st.pool.want();
    }

    /// Waits for the refill worker to finish once shutdown is signalled: a sandbox it is
    /// starting is recorded (or removed) first, so nothing it made goes unaccounted for.
    /// Then, unless `--keep-warm-pool`, the pool's sandboxes are removed if no other server
    /// process of the deployment is alive: nobody would use them, and a deployment whose
    /// servers are all gone (a test's, a developer's on a fresh data directory) would leave
    /// them running for good. Another live process keeps them: they are its pool too.
    pub async fn stop_pool(&self) {
        let Some(worker) = self.inner.pool.take_worker() else {
            return;
        };
        let _ = worker.await;
        if self.inner.settings.keep_warm_pool {
            return;
        }
        match self.empty_pool_if_last().await {
            Ok(0) => {}
            Ok(n) => tracing::info!(
                removed = n,
                "removed the warm pool's sandboxes: no other server process is alive"
            ),
            Err(e) => {
                tracing::warn!(error = %e, "could not remove the warm pool's sandboxes at shutdown; the next start's sweep does")
            }
        }
    }

    /// Removes every pooled sandbox when this is the deployment's last live process; returns
    /// how many it removed. A row a claim takes meanwhile is not removed (see
    /// `sandbox_pool::forget`), nor is a reservation whose container is still being made by
    /// a process that started meanwhile (its refill records or removes it).
    async fn empty_pool_if_last(&self) -> Result<usize> {
        let st = &self.inner;
        let me = self.worker_key().await?;
        if liveness::count_alive_besides(&st.db, me).await? > 0 {
            return Ok(0);
        }
        let ready: Vec<String> = sandbox_pool::list(&st.db)
            .await?
            .into_iter()
            .filter(|r| r.sandbox_id.is_some())
            .map(|r| r.name)
            .collect();
        let mut removed = 0;
        for (_, container) in sandbox_pool::forget(&st.db, &ready).await? {
            if let Some(c) = container {
                st.backend.remove(&c).await?;
                removed += 1;
            }
        }
        Ok(removed)
    }

    /// Tops the pool up to its size; returns how many sandboxes it started. Safe to run from
    /// several tasks and processes at once: the missing ones are reserved under a lock.
    #[tracing::instrument(skip_all)]
    pub async fn fill_pool(&self) -> Result<usize> {
        let st = &self.inner;
        if st.settings.warm_pool == 0 {
            return Ok(0);
        }
        let spec = self.pool_spec();
        let target = self.pool_target().await?;
        let names = sandbox_pool::reserve(&st.db, &spec.image, target, || {
            st.backend
                .pooled_name(&uuid::Uuid::new_v4().simple().to_string())
        })
        .await?;
        let mut started = 0;
        for (i, name) in names.iter().enumerate() {
            if st.shutdown.is_cancelled() {
                sandbox_pool::forget(&st.db, &names[i..]).await?;
                break;
            }
            let created = match st.backend.create_pooled(name, &spec).await {
                // Trusted like a sandbox created for a session (see `provision.rs`).
                Ok(sandbox) => match self.install_extra_ca(&sandbox.id).await {
                    Ok(()) => Ok(sandbox),
                    Err(e) => {
                        let _ = st.backend.remove(&sandbox.id).await;
                        Err(e)
                    }
                },
                Err(e) => Err(e.into()),
            };
            match created {
                Ok(sandbox) => {
                    if sandbox_pool::mark_ready(&st.db, name, &sandbox.id).await? {
                        started += 1;
                    } else {
                        // The sweep dropped the reservation meanwhile.
                        st.backend.remove(&sandbox.id).await?;
                    }
                }
                Err(e) => {
                    sandbox_pool::forget(&st.db, &names[i..]).await?;
                    return Err(e);
                }
            }
        }
        if started > 0 {
            tracing::info!(started, image = %spec.image, "warm pool refilled");
        }
        Ok(started)
    }

    /// The pool's part of the orphan sweep, given the rows read before `listed` was taken.
    /// Drops rows whose container died and ready containers the settings no longer want (the
    /// pool disabled, the image changed, more than the target); then removes every pool
    /// container that neither a row nor a session owns. Returns the ids it removed.
    pub(crate) async fn sweep_pool(
        &self,
        before: &[sandbox_pool::PoolRow],
        listed: &[ListedSandbox],
    ) -> Result<HashSet<String>> {
        let st = &self.inner;
        let mut removed = HashSet::new();
        let running: HashSet<&str> = listed
            .iter()
            .filter(|c| c.running)
            .map(|c| c.id.as_str())
            .collect();
        // Rows read before the listing whose container was not running in it are dead (a
        // container is ready only once it runs, so it would have been listed).
        let mut drop: Vec<String> = before
            .iter()
            .filter(|r| {
                r.sandbox_id
                    .as_deref()
                    .is_some_and(|c| !running.contains(c))
            })
            .map(|r| r.name.clone())
            .collect();
        let after = sandbox_pool::list(&st.db).await?;
        let wanted = self.pool_spec().image;
        let target = self.pool_target().await?;
        sandbox_pool::prune_demand(&st.db).await?;
        let mut kept = 0;
        let stale = time::OffsetDateTime::now_utc() - STALE_RESERVATION;
        for r in &after {
            let ready = r.sandbox_id.is_some();
            // Another image's, surplus, or a reservation whose creator died.
            let unwanted =
                r.image != wanted || (ready && kept >= target) || (!ready && r.created_at < stale);
            if unwanted {
                drop.push(r.name.clone());
            } else if ready {
                kept += 1;
            }
        }
        // Only rows this delete took are ours to remove: a row claimed meanwhile belongs to
        // its session now.
        let dropped = sandbox_pool::forget(&st.db, &drop).await?;
        for (name, container) in &dropped {
            let container = container.clone().or_else(|| {
                listed
                    .iter()
                    .find(|c| &c.name == name)
                    .map(|c| c.id.clone())
            });
            if let Some(c) = container {
                tracing::info!(container.id = %c, %name, "removing a pooled sandbox that is dead or not wanted");
                st.backend.remove(&c).await?;
                removed.insert(c);
            }
        }
        // Ownership as it is now (after the listing): a row, or a session's container.
        let rows: HashSet<String> = sandbox_pool::list(&st.db)
            .await?
            .into_iter()
            .map(|r| r.name)
            .collect();
        let pooled: Vec<String> = listed
            .iter()
            .filter(|c| c.pool.is_some() && !removed.contains(&c.id))
            .map(|c| c.id.clone())
            .collect();
        let in_use: HashSet<String> = sessions::owning_sandboxes(&st.db, &pooled)
            .await?
            .into_iter()
            .collect();
        for c in listed.iter().filter(|c| c.pool.is_some()) {
            if removed.contains(&c.id) || rows.contains(&c.name) || in_use.contains(&c.id) {
                continue;
            }
            tracing::warn!(container.id = %c.id, name = %c.name, "removing a pooled sandbox nobody owns");
            st.backend.remove(&c.id).await?;
            removed.insert(c.id.clone());
        }
        Ok(removed)
    }
}
