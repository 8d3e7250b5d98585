//! The periodic worker: on a timer, idle sandboxes are released (the idle reaper), orphans
//! swept, runs whose process died recovered, boots nobody drives taken on again and garbage
//! collected.

use crate::Sessions;
use sandbox_agents_domain::session::StoppedReason;
use sandbox_agents_errors::Result;
use sandbox_agents_store::sessions;

impl Sessions {
    /// Stops running sessions unused for longer than their idle TTL.
    pub async fn release_idle(&self) -> Result<usize> {
        let st = &self.inner;
        let ttl = st.settings.idle_ttl.as_secs() as i64;
        let expired = sessions::idle_expired(&st.db, ttl).await?;
        for id in &expired {
            tracing::info!(session.id = %id, "releasing an idle sandbox");
            if let Err(e) = self.stop(None, *id, StoppedReason::Idle).await {
                tracing::warn!(session.id = %id, error = %e, "could not release an idle sandbox");
            }
        }
        Ok(expired.len())
    }

    /// Stops the sandboxes of sessions past their `max_lifetime_seconds` (for good: a start
    /// is refused after it). A boot in progress is stopped too once it holds a sandbox.
    pub async fn end_lifetimes(&self) -> Result<usize> {
        sessions::retire_asleep_past_lifetime(&self.inner.db).await?;
        let expired = sessions::lifetime_expired(&self.inner.db).await?;
        for id in &expired {
            tracing::info!(session.id = %id, "stopping a session at the end of its lifetime");
            if let Err(e) = self.stop(None, *id, StoppedReason::Lifetime).await {
                tracing::warn!(session.id = %id, error = %e, "could not stop a session at the end of its lifetime");
            }
        }
        Ok(expired.len())
    }

    /// Ends the session's lifetime on time rather than at the next sweep: a task of this
    /// process sleeps until `at` (or shutdown), then runs [`Sessions::end_lifetimes`]. The
    /// sweep remains the guarantee (after a restart, or when this process is gone).
    pub fn schedule_lifetime_end(&self, at: time::OffsetDateTime) {
        let rt = self.clone();
        let wait = (at - time::OffsetDateTime::now_utc()).max(time::Duration::ZERO);
        let wait = std::time::Duration::try_from(wait).unwrap_or_default()
            + std::time::Duration::from_millis(50);
        self.inner.tasks.spawn(async move {
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                _ = rt.inner.shutdown.cancelled() => return,
            }
            if let Err(e) = rt.end_lifetimes().await {
                tracing::warn!(error = %e, "ending a lifetime failed; the sweep retries");
            }
        });
    }

    /// The periodic worker until shutdown: idle release, orphan sweep, run recovery and
    /// garbage collection; and the watch on sandboxes that end on their own (`lost.rs`).
    pub fn spawn_workers(&self) {
        self.spawn_disk_worker();
        self.spawn_sandbox_watch();
        self.every(self.inner.settings.sweep_interval, |rt| async move {
            if let Err(e) = rt.release_idle().await {
                tracing::warn!(error = %e, "idle release failed");
            }
            if let Err(e) = rt.end_lifetimes().await {
                tracing::warn!(error = %e, "ending lifetimes failed");
            }
            if let Err(e) = rt.sweep_orphans().await {
                tracing::warn!(error = %e, "orphan sweep failed");
            }
            if let Err(e) = rt.runs().recover().await {
                tracing::warn!(error = %e, "run recovery failed");
            }
            if let Err(e) = rt.redrive_boots().await {
                tracing::warn!(error = %e, "the boot sweep failed");
            }
            if let Err(e) = rt.collect_garbage().await {
                tracing::warn!(error = %e, "garbage collection failed");
            }
            // Room freed by a process that died before it booted the next in line.
            rt.admit_queued();
        });
    }

    /// Runs `work` every `interval` until shutdown, the first time one interval after now; a
    /// round that overruns delays the next rather than bunching them up.
    pub(crate) fn every<F, Fut>(&self, interval: std::time::Duration, work: F)
    where
        F: Fn(Sessions) -> Fut + Send + 'static,
        Fut: std::future::Future<Output = ()> + Send,
    {
        let rt = self.clone();
        tokio::spawn(async move {
            let shutdown = rt.inner.shutdown.clone();
            let mut tick = tokio::time::interval(interval);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            // An interval's first tick is at once.
            tick.tick().await;
            loop {
                tokio::select! { _ = tick.tick() => {}, _ = shutdown.cancelled() => return }
                work(rt.clone()).await;
            }
        });
    }
}
