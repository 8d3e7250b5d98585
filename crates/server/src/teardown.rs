//! `sandbox-agents teardown`: leaves nothing of a deployment running. A deployment's
//! sessions' containers outlive its server processes by design (running sessions are adopted,
//! and with `--keep-warm-pool` the pool is kept too), so a user who is done needs a way to
//! stop them all.
//!
//! It refuses while a server process of the deployment is connected (the server's refill
//! worker would start the pool again, and its runs would race the stops), and never stops an
//! embedded PostgreSQL it found running. A server that starts while teardown works would
//! race it: teardown is for a deployment whose servers are all stopped. It then stops every
//! session whose sandbox is up or booting as a stop does (the run in flight is cancelled, the
//! workspace archived to the blob store, the container removed, `session.status_stopped`
//! written), and finally sweeps with the pool disabled, which removes every pooled sandbox
//! and any container no session owns. Workspaces, snapshots and the database stay: `serve`
//! starts from them again.

use crate::app::{services, ServiceSettings, Services};
use crate::config::Config;
use crate::{open_database, Database};
use anyhow::Context;
use sandbox_agents_domain::session::StoppedReason;
use sandbox_agents_store::{sessions, EventHub};
use tokio_util::sync::CancellationToken;

/// What teardown calls itself on its database connections (serving processes are
/// [`crate::APPLICATION_NAME`]).
pub const TEARDOWN_APPLICATION_NAME: &str = "sandbox-agents-teardown";

/// Stops every session of the deployment and removes its pool; see the module's doc.
pub async fn teardown(config: Config) -> anyhow::Result<()> {
    let Database { db, embedded } = open_database(&config, TEARDOWN_APPLICATION_NAME).await?;
    let shutdown = CancellationToken::new();
    let result = async {
        let servers = sandbox_agents_store::servers_connected(&db, crate::APPLICATION_NAME).await?;
        anyhow::ensure!(
            servers == 0,
            "a sandbox-agents server is still using this deployment's database ({servers} \
             connection(s)): stop every server process first, then run teardown again"
        );
        let hub = EventHub::start(db.clone(), shutdown.clone());
        let mut settings = ServiceSettings::resolve(&config)?;
        // No pool: the sweep below then removes every pooled sandbox.
        settings.sessions.warm_pool = 0;
        // The run loop is registered with the lifecycle, so a stop cancels a run in flight.
        let Services { sessions, runs, .. } = services(settings, &db, shutdown.clone()).await?;
        runs.attach_hub(hub);
        let active = sessions::active(&db).await?;
        let (mut stopped, mut failed) = (0usize, 0usize);
        for s in &active {
            match sessions.stop(None, s.id, StoppedReason::Requested).await {
                Ok(_) => stopped += 1,
                Err(e) => {
                    failed += 1;
                    tracing::error!(session.id = %s.id, error = %e, "could not stop a session");
                }
            }
        }
        sessions
            .sweep_orphans()
            .await
            .context("removing the warm pool and containers no session owns")?;
        let left = sessions
            .backend()
            .list()
            .await
            .context("listing the deployment's containers after the sweep")?
            .len();
        tracing::info!(stopped, failed, containers_left = left, "teardown finished");
        anyhow::ensure!(
            failed == 0 && left == 0,
            "teardown left {left} container(s) and {failed} session(s) it could not stop; see the log above"
        );
        Ok(())
    }
    .await;
    shutdown.cancel();
    db.close().await;
    // A cluster that was running already belongs to a server (or is left for the next one):
    // a one-off command never stops it.
    if let Some(pg) = embedded.filter(|pg| !pg.adopted()) {
        pg.stop()
            .await
            .context("stopping the embedded PostgreSQL")?;
    }
    result
}
