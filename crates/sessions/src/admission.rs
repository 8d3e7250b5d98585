//! The sandbox limits at boot (`--max-sandboxes`, `--max-sandboxes-per-project`, and a
//! project's own `limits.max_sandboxes` in place of the latter): a boot asks the store to
//! admit its session (one count and one fair queue in PostgreSQL for every process,
//! `store::admission`); a session that must wait stays `provisioning` and says so once with
//! `session.queued`. Whoever frees room, or admits a session (the next in line may fit too),
//! boots the sessions now due ([`Sessions::admit_queued`]); so does an operator's change of a
//! project's limits, and the periodic sweep, for room freed by a process that died.

use crate::Sessions;
use sandbox_agents_domain::event::{EventType, NewEvent};
use sandbox_agents_errors::Result;
use sandbox_agents_store::admission::{self, Admission};
use sandbox_agents_store::sessions::SessionRecord;
use sandbox_agents_store::{events, projects};
use serde_json::json;

/// Queued sessions booted at once when room is freed; each boot checks again, so this only
/// bounds the work of one wake-up.
const DUE_AT_ONCE: i64 = 8;

impl Sessions {
    /// Admits the booting session `s` under the limits, or queues it (with its event the
    /// first time). `true`: it may take a sandbox now.
    pub(crate) async fn admit(&self, s: &SessionRecord) -> Result<bool> {
        let limits = self.inner.settings.admission;
        if !limits.any()
            && projects::limits(&self.inner.db, s.project_id)
                .await?
                .max_sandboxes
                .is_none()
        {
            return Ok(true);
        }
        let mut tx = self.inner.db.begin().await?;
        let decided = admission::try_admit(&mut tx, s.project_id, s.session_id(), limits).await?;
        if let Admission::Queued {
            newly: true,
            limit,
            position,
        } = decided
        {
            let reason = match limit {
                "project" => {
                    "the project runs as many sandboxes as it may (its limits.max_sandboxes, \
                     else --max-sandboxes-per-project)"
                }
                "deployment" => "the deployment runs as many sandboxes as it may (--max-sandboxes)",
                _ => "other sessions wait for a sandbox before this one",
            };
            events::append(
                &mut tx,
                s.session_id(),
                &[NewEvent::new(
                    EventType::SessionQueued,
                    None,
                    json!({"limit": limit, "position": position, "reason": reason}),
                )],
            )
            .await?;
        }
        tx.commit().await?;
        match decided {
            Admission::Admitted => Ok(true),
            Admission::Queued {
                limit, position, ..
            } => {
                tracing::info!(
                    limit,
                    position,
                    "the boot waits for room under the sandbox limits"
                );
                Ok(false)
            }
        }
    }

    /// Boots the queued sessions that may fit now, in the background. Sessions may wait under
    /// a project's own limit whatever this process's flags are, so this always looks (one
    /// query on the queue's partial index, when room is freed).
    pub fn admit_queued(&self) {
        let limits = self.inner.settings.admission;
        let rt = self.clone();
        self.inner.tasks.spawn(async move {
            match admission::due(&rt.inner.db, limits, DUE_AT_ONCE).await {
                Ok(due) => {
                    for id in due {
                        rt.spawn_boot(id);
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %e, "could not look for queued boots; the sweep retries")
                }
            }
        });
    }
}
