//! Which process drives which run, and what happens to runs whose process died.
//!
//! Each server process holds a liveness lock (see `sandbox_agents_store::liveness`) on a
//! connection of its own, and stamps its key on the runs it drives. A run that is `running`,
//! not parked, and whose key nobody holds lost its worker (the process was killed or its
//! database connection dropped): the recovery sweep fails it with a clear error, so it never
//! stays `running`, and the session takes messages again. A parked run has no worker and is
//! left alone: its answer may come after any number of restarts.

use crate::finish::Outcome;
use crate::Runs;
use sandbox_agents_errors::Result;
use sandbox_agents_store::{liveness, runs};
use serde_json::Map;
use sqlx::Connection;
use std::collections::HashMap;
use std::time::Duration;

/// How often the process checks that its liveness connection still answers.
const HEARTBEAT: Duration = Duration::from_secs(10);

/// How this process stamps a run it takes to drive.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Driver {
    /// This process's liveness key.
    pub worker: i32,
    /// Whether its runs count among the turns in flight from the start: yes when it has no
    /// limits on turns, so that processes with limits count them (`admission.rs`).
    pub admitted: bool,
}

impl Runs {
    /// How this process stamps the runs it starts or continues.
    pub(crate) async fn driver(&self) -> Result<Driver> {
        Ok(Driver {
            worker: self.worker_key().await?,
            admitted: !self.inner.run_limits.any(),
        })
    }

    /// This process's liveness key, taking its lock on first use.
    pub(crate) async fn worker_key(&self) -> Result<i32> {
        let key = self
            .inner
            .liveness
            .get_or_try_init(|| async {
                let (key, conn) = self.take_liveness(None).await?;
                self.spawn_heartbeat(key, conn);
                Ok::<_, sandbox_agents_errors::ServiceError>(key)
            })
            .await?;
        Ok(*key)
    }

    /// Takes `key` (after a dropped connection) or a fresh random key, on a connection that
    /// leaves the pool for good.
    async fn take_liveness(&self, key: Option<i32>) -> Result<(i32, sqlx::PgConnection)> {
        let mut conn = self.inner.db.acquire().await?.detach();
        for _ in 0..16 {
            let k = key.unwrap_or_else(|| {
                (uuid::Uuid::new_v4().as_u128() as i32)
                    .wrapping_abs()
                    .max(1)
            });
            if liveness::try_hold(&mut conn, k).await? {
                tracing::info!(worker = k, "holding this process's liveness lock");
                return Ok((k, conn));
            }
            if key.is_some() {
                break;
            }
        }
        Err(anyhow::anyhow!("could not take a liveness lock: every key tried was held").into())
    }

    /// Keeps the liveness connection alive and takes the lock again if it dropped.
    fn spawn_heartbeat(&self, key: i32, mut conn: sqlx::PgConnection) {
        let rt = self.clone();
        tokio::spawn(async move {
            let shutdown = rt.inner.shutdown.clone();
            loop {
                tokio::select! {
                    _ = tokio::time::sleep(HEARTBEAT) => {}
                    _ = shutdown.cancelled() => break,
                }
                if conn.ping().await.is_ok() {
                    continue;
                }
                tracing::warn!(
                    worker = key,
                    "the liveness connection dropped; taking the lock again"
                );
                match rt.take_liveness(Some(key)).await {
                    Ok((_, c)) => conn = c,
                    Err(e) => {
                        tracing::error!(worker = key, error = %e, "could not take the liveness lock again; other servers may fail this process's runs")
                    }
                }
            }
            // Runs end before the process does; the lock goes with the connection.
            let _ = conn.close().await;
        });
    }

    /// Fails every run whose worker process is gone, or that this process stamped but no
    /// longer drives (`LocalRuns::abandoned`), and continues parked runs whose calls were all
    /// answered while they could not be continued at once.
    #[tracing::instrument(skip_all)]
    pub(crate) async fn recover_runs(&self) -> Result<()> {
        let mine = self.worker_key().await?;
        let db = &self.inner.db;
        let (own, others): (Vec<_>, Vec<_>) = runs::driven(db)
            .await?
            .into_iter()
            .partition(|r| r.worker == Some(mine));
        let abandoned = self.inner.runs.abandoned(own.iter().map(|r| r.run_id()));
        let mut alive: HashMap<Option<i32>, bool> = HashMap::new();
        let mut conn = db.acquire().await?;
        for run in others {
            let live = match alive.get(&run.worker) {
                Some(l) => *l,
                None => {
                    let l = match run.worker {
                        Some(k) => liveness::is_alive(&mut conn, k).await?,
                        None => false,
                    };
                    alive.insert(run.worker, l);
                    l
                }
            };
            if live {
                continue;
            }
            tracing::warn!(run.id = %run.id, worker = ?run.worker, "failing a run whose server process is gone");
            self.fail_lost(&run, "the server process running this turn stopped (it was restarted or crashed); send the message again").await?;
        }
        for run in own.iter().filter(|r| abandoned.contains(&r.run_id())) {
            tracing::error!(run.id = %run.id, "failing a run this process stamped but no longer drives");
            self.fail_lost(run, "this turn's worker ended without recording its end (see the server's log); send the message again").await?;
        }
        drop(conn);
        for run in runs::parked_and_answered(db).await? {
            self.resume_parked(run.session_id, run.run_id()).await?;
        }
        Ok(())
    }

    /// Fails a run nobody drives any more, with `error` as its reason.
    async fn fail_lost(&self, run: &runs::RunRecord, error: &str) -> Result<()> {
        self.finish_run(
            run.session_id,
            run.run_id(),
            &Outcome::Failed(error.into()),
            run.turns,
            &Map::new(),
            None,
        )
        .await?;
        Ok(())
    }
}
