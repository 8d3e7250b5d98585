//! Removes what the `garbage` queue names (see the store's `garbage`): blobs and snapshot
//! images no row refers to any more. Runs after the deletes that queue things, and with every
//! periodic sweep, so whatever a crash left queued is removed by the next process to look.

use crate::Sessions;
use sandbox_agents_errors::Result;
use sandbox_agents_store::garbage;

/// Rows one pass claims.
const BATCH: i64 = 50;

impl Sessions {
    /// Removes everything that is due; returns how many things are gone. Failures are
    /// recorded on their rows and tried again later.
    pub async fn collect_garbage(&self) -> Result<usize> {
        let st = &self.inner;
        let mut removed = 0;
        loop {
            // Claimed for a while, not locked in a transaction: nothing is held while the
            // things are removed.
            let batch = garbage::claim(&st.db, BATCH).await?;
            if batch.is_empty() {
                return Ok(removed);
            }
            let mut failures = 0;
            for g in &batch {
                let outcome = match g.kind.as_str() {
                    "blob" => st.blobs.delete(&g.r#ref).await.map_err(|e| e.to_string()),
                    "image" => st
                        .backend
                        .remove_image(&g.r#ref)
                        .await
                        .map_err(|e| e.to_string()),
                    other => Err(format!("unknown kind {other}")),
                };
                match outcome {
                    Ok(()) => {
                        garbage::done(&st.db, g.id).await?;
                        removed += 1;
                    }
                    Err(e) => {
                        tracing::warn!(kind = %g.kind, r#ref = %g.r#ref, error = %e, "could not remove garbage; will retry");
                        // Recording the failure pushes the row's due time back, so one thing
                        // that cannot be removed never holds up the rest of the queue.
                        garbage::failed(&st.db, g.id, &e).await?;
                        failures += 1;
                    }
                }
            }
            if failures == batch.len() {
                // Nothing moved: leave the rest to a later pass rather than spin.
                return Ok(removed);
            }
        }
    }

    /// Collects in the background (after a delete that queued something).
    pub(crate) fn spawn_collect(&self) {
        let rt = self.clone();
        self.inner.tasks.spawn(async move {
            if let Err(e) = rt.collect_garbage().await {
                tracing::warn!(error = %e, "garbage collection failed; the periodic sweep retries");
            }
        });
    }
}
