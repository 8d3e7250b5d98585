//! Snapshots: the workspace archived to the blob store and, on a backend that keeps snapshots
//! as images (`Capabilities::snapshots`; Docker commits the container), the sandbox's
//! filesystem outside it captured as an image so installed packages survive (the image never
//! holds the workspace). Mounted buckets are left out of both (writable ones
//! are written back first); a fork or restore stages them again. Restoring replaces a
//! session's sandbox with one booted from the snapshot; creating a session with
//! `from_snapshot_id` forks it.

use crate::lease::not_found;
use crate::Sessions;
use sandbox_agents_domain::session::SessionStatus;
use sandbox_agents_domain::{ProjectId, SessionId};
use sandbox_agents_errors::{Result, ServiceError};
use sandbox_agents_sandbox::SnapshotKind;
use sandbox_agents_store::garbage;
use sandbox_agents_store::sessions::{self, SessionRecord};
use sandbox_agents_store::snapshots::{self, NewSnapshot, SnapshotRecord};

/// How long what a snapshot in progress wrote stays out of the garbage collector's way.
const PENDING: std::time::Duration = std::time::Duration::from_secs(3600);

fn snapshot_key(id: uuid::Uuid) -> String {
    format!("snapshots/{}.tar", id.simple())
}

impl Sessions {
    /// Takes a snapshot of a running session (workspace and filesystem), or of a stopped one
    /// (its workspace archive, copied).
    #[tracing::instrument(skip_all, fields(session.id = %id))]
    pub async fn create_snapshot(
        &self,
        project: ProjectId,
        id: SessionId,
        label: &str,
    ) -> Result<SnapshotRecord> {
        let st = &self.inner;
        let lease = self.lease(id).await?;
        let result = async {
            let s = sessions::get(&st.db, project, id)
                .await
                .map_err(|e| not_found(e, id))?;
            let snap = uuid::Uuid::now_v7();
            let key = snapshot_key(snap);
            // What this snapshot writes outside the database is queued as garbage for an hour
            // first and unqueued with the snapshot's row, so a failure or a crash half-way
            // leaves nothing behind.
            let mut queued = vec![garbage::queue_unless_done(&st.db, "blob", &key, PENDING).await?];
            let made = self
                .write_snapshot(project, id, &s, snap, &key, label, &mut queued)
                .await;
            if made.is_err() {
                garbage::due_now(&st.db, &queued).await?;
                self.spawn_collect();
            }
            made
        }
        .await;
        lease.release().await;
        result
    }

    /// The snapshot's archive, image and row (see [`Sessions::create_snapshot`]); `queued`
    /// gets the garbage row of anything written.
    #[allow(clippy::too_many_arguments)]
    async fn write_snapshot(
        &self,
        project: ProjectId,
        id: SessionId,
        s: &SessionRecord,
        snap: uuid::Uuid,
        key: &str,
        label: &str,
        queued: &mut Vec<i64>,
    ) -> Result<SnapshotRecord> {
        let st = &self.inner;
        {
            let (size, image) = match (s.status, &s.sandbox_id, &s.workspace_archive) {
                (SessionStatus::Running, Some(sandbox), _) => {
                    self.write_back_mounts(id, sandbox).await?;
                    let stream = st.backend.get_archive(sandbox, sandbox_agents_sandbox::WORKDIR).await?;
                    let size = self.put_stream(id, key, stream).await?;
                    // A backend that keeps snapshots as the workspace archive only (Kubernetes:
                    // a pod cannot be committed) has no image to take.
                    let image = match st.backend.capabilities().snapshots {
                        SnapshotKind::Image => {
                            let image = st.backend.snapshot_image(sandbox, &snap.simple().to_string()).await?;
                            queued.push(garbage::queue_unless_done(&st.db, "image", &image, PENDING).await?);
                            Some(image)
                        }
                        SnapshotKind::ArchiveOnly => None,
                    };
                    (size, image)
                }
                (SessionStatus::Stopped, _, Some(archive)) => {
                    let data = st.blobs.get(archive).await.map_err(|e| anyhow::anyhow!("reading the workspace archive: {e}"))?;
                    let size = st.blobs.put(key, data).await.map_err(|e| anyhow::anyhow!("writing the snapshot: {e}"))?;
                    (size, None)
                }
                _ => {
                    return Err(ServiceError::Conflict(format!(
                        "session is {}; a snapshot needs a running sandbox or a stopped session's workspace",
                        s.status
                    )))
                }
            };
            let mut tx = st.db.begin().await?;
            let row = snapshots::insert(
                &mut *tx,
                &NewSnapshot {
                    id: snap,
                    project,
                    session: id,
                    label,
                    archive: key,
                    size_bytes: size as i64,
                    image: image.as_deref(),
                },
            )
            .await?;
            for g in queued.iter() {
                garbage::done(&mut *tx, *g).await?;
            }
            tx.commit().await?;
            tracing::info!(snapshot.id = %snap, bytes = size, "snapshot taken");
            Ok(row)
        }
    }

    async fn put_stream(
        &self,
        id: SessionId,
        key: &str,
        stream: futures::stream::BoxStream<'static, sandbox_agents_sandbox::Result<bytes::Bytes>>,
    ) -> Result<u64> {
        use futures::StreamExt;
        let stream = stream
            .map(|r| r.map_err(|e| std::io::Error::other(e.to_string())))
            .boxed();
        let stream = self.without_mounts(id, stream).await?;
        Ok(self
            .inner
            .blobs
            .put(key, stream)
            .await
            .map_err(|e| anyhow::anyhow!("writing {key}: {e}"))?)
    }

    /// A session's snapshots, oldest first.
    pub async fn list_snapshots(
        &self,
        project: ProjectId,
        id: SessionId,
    ) -> Result<Vec<SnapshotRecord>> {
        sessions::get(&self.inner.db, project, id)
            .await
            .map_err(|e| not_found(e, id))?;
        Ok(snapshots::list(&self.inner.db, project, id).await?)
    }

    /// Replaces the session's sandbox with one booted from the snapshot (any snapshot of the
    /// project). Returns once it runs, or with the boot's error recorded.
    #[tracing::instrument(skip_all, fields(session.id = %id, snapshot.id = %snapshot))]
    pub async fn restore_snapshot(
        &self,
        project: ProjectId,
        id: SessionId,
        snapshot: &str,
    ) -> Result<SessionRecord> {
        let st = &self.inner;
        let snap_id = uuid::Uuid::try_parse(snapshot)
            .map_err(|_| ServiceError::NotFound(format!("snapshot '{snapshot}' not found")))?;
        let snap = snapshots::get(&st.db, project, snap_id)
            .await
            .map_err(|e| match e {
                sandbox_agents_store::Error::NotFound => {
                    ServiceError::NotFound(format!("snapshot '{snapshot}' not found"))
                }
                other => other.into(),
            })?;
        let lease = self.lease(id).await?;
        let result = async {
            let s = sessions::get(&st.db, project, id)
                .await
                .map_err(|e| not_found(e, id))?;
            if !matches!(
                s.status,
                SessionStatus::Running | SessionStatus::Stopped | SessionStatus::Error
            ) {
                return Err(ServiceError::Conflict(format!(
                    "session is {}; wait until it is running",
                    s.status
                )));
            }
            if let Some(sandbox) = &s.sandbox_id {
                if s.status == SessionStatus::Running {
                    // The snapshot has no bucket in it: what the mounts hold now is kept by
                    // writing it back, and staged again by the boot below.
                    self.write_back_mounts(id, sandbox).await?;
                }
                st.backend.remove(sandbox).await?;
            }
            let mut tx = st.db.begin().await?;
            garbage::queue_replaced_archive(&mut *tx, id, None).await?;
            sessions::prepare_restore(&mut *tx, id, snap.id, snap.image.as_deref()).await?;
            tx.commit().await?;
            if s.workspace_archive.is_some() {
                self.spawn_collect();
            }
            self.boot_locked(id).await?;
            Ok(sessions::get(&st.db, project, id).await?)
        }
        .await;
        lease.release().await;
        result
    }
}
