//! `s3_mount` entries in the lifecycle: staged at every boot by the control plane's S3
//! client (`sandbox_agents_workspace::s3`), recorded in `s3_mounts`, written back (writable
//! ones) before a stop's or a snapshot's archive, and left out of those archives: the next
//! boot, or a fork, stages them again from the bucket.

use crate::Sessions;
use sandbox_agents_domain::event::{EventType, NewEvent};
use sandbox_agents_domain::manifest::ManifestSpec;
use sandbox_agents_domain::SessionId;
use sandbox_agents_errors::{Result, ServiceError};
use sandbox_agents_store::events;
use sandbox_agents_store::s3_mounts::{self, S3MountRecord};
use sandbox_agents_workspace::exclude::without_paths;
use sandbox_agents_workspace::s3::{self, Mount, StagedObject};
use sandbox_agents_workspace::ByteStream;
use serde_json::json;

impl Sessions {
    /// Stages the manifest's mounts into `sandbox` (after the rest of the workspace, so
    /// they are laid over it) and records what each staged, replacing what an earlier boot
    /// recorded.
    pub(crate) async fn stage_mounts(
        &self,
        id: SessionId,
        manifest: &ManifestSpec,
        sandbox: &str,
    ) -> Result<()> {
        let st = &self.inner;
        s3_mounts::clear(&st.db, id).await?;
        for m in s3::mounts(manifest) {
            let staged = s3::stage(&st.s3, st.backend.as_ref(), sandbox, &m).await?;
            tracing::info!(mount = %m.path, objects = staged.len(), "s3 mount staged");
            s3_mounts::record(&st.db, id, &record(&m, &staged)?).await?;
        }
        Ok(())
    }

    /// Writes the session's writable mounts back from `sandbox`; a failure says which mount
    /// and leaves the sandbox as it is (the caller does not go on to remove it).
    pub(crate) async fn write_back_mounts(&self, id: SessionId, sandbox: &str) -> Result<()> {
        let st = &self.inner;
        for row in s3_mounts::list(&st.db, id).await? {
            if row.read_only {
                continue;
            }
            let (m, staged) = parse(&row)?;
            let done = s3::write_back(
                &st.s3,
                st.backend.as_ref(),
                sandbox,
                &m,
                &staged,
                &id.to_string(),
            )
            .await
            .map_err(refused)?;
            // The listing and the event that reports its conflicts land together.
            let mut tx = st.db.begin().await?;
            s3_mounts::record(&mut *tx, id, &record(&m, &done.listing)?).await?;
            if !done.conflicts.is_empty() {
                events::append(
                    &mut tx,
                    id,
                    &[NewEvent::new(
                        EventType::SessionS3Conflict,
                        None,
                        json!({
                            "mount": m.path,
                            "bucket": m.bucket,
                            "prefix": m.prefix,
                            "conflicts": done.conflicts,
                        }),
                    )],
                )
                .await?;
            }
            tx.commit().await?;
            // Recorded first: what was uploaded before the failure is not sent again as if
            // someone else had changed it.
            if let Some(e) = done.failed {
                return Err(refused(e));
            }
        }
        Ok(())
    }

    /// `archive` (the workspace, `workspace/...` entries) without the session's mounts.
    pub(crate) async fn without_mounts(
        &self,
        id: SessionId,
        archive: ByteStream,
    ) -> Result<ByteStream> {
        let paths = s3_mounts::list(&self.inner.db, id)
            .await?
            .into_iter()
            .map(|r| r.path)
            .collect();
        Ok(without_paths(archive, paths))
    }
}

/// A write-back's failure as the stop (or snapshot) reports it.
fn refused(e: ServiceError) -> ServiceError {
    match e {
        ServiceError::BadRequest(msg) => ServiceError::Conflict(format!(
            "{msg}; the sandbox keeps running so nothing is lost (try again, or delete the session to discard the changes)"
        )),
        other => other,
    }
}

fn record(m: &Mount, staged: &[StagedObject]) -> Result<S3MountRecord> {
    Ok(S3MountRecord {
        path: m.path.clone(),
        bucket: m.bucket.clone(),
        prefix: m.prefix.clone(),
        read_only: m.read_only,
        objects: serde_json::to_value(staged).map_err(anyhow::Error::from)?,
    })
}

fn parse(row: &S3MountRecord) -> Result<(Mount, Vec<StagedObject>)> {
    let staged: Vec<StagedObject> = serde_json::from_value(row.objects.clone())
        .map_err(|e| anyhow::anyhow!("the staged listing of '{}': {e}", row.path))?;
    Ok((
        Mount {
            path: row.path.clone(),
            bucket: row.bucket.clone(),
            prefix: row.prefix.clone(),
            read_only: row.read_only,
        },
        staged,
    ))
}
