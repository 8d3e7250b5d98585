//! Deleting a project: its rows go in one transaction (refused while a session has a
//! sandbox), and what they pointed at outside the database (workspace archives, snapshot
//! archives and images) is queued as garbage in that same transaction.

use crate::Sessions;
use sandbox_agents_domain::ProjectId;
use sandbox_agents_errors::Result;
use sandbox_agents_store::projects;

impl Sessions {
    #[tracing::instrument(skip_all, fields(project.id = %project))]
    pub async fn delete_project(&self, project: ProjectId) -> Result<()> {
        let mut tx = self.inner.db.begin().await?;
        // The check inside `delete` locks the sessions first, so nothing boots in between.
        let queued = projects::delete(&mut tx, project).await?;
        tx.commit().await?;
        tracing::info!(garbage = queued, "project deleted");
        self.spawn_collect();
        Ok(())
    }
}
