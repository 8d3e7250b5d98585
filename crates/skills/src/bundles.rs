//! The skill bundle service: registering bundles, pushing versions (stream to the blob
//! store, check the whole archive, then number it), retiring them, deleting bundles.

use bytes::Bytes;
use futures::StreamExt;
use sandbox_agents_domain::bundle::{
    SkillBundle, SkillBundleCreate, SkillBundleVersion, MAX_ARCHIVE_BYTES,
};
use sandbox_agents_domain::validation::Violations;
use sandbox_agents_domain::ProjectId;
use sandbox_agents_errors::{Result, ServiceError};
use sandbox_agents_store::bundles::{self, BundleRef, NewVersion};
use sandbox_agents_store::{garbage, Error as StoreError};
use sandbox_agents_workspace::bundle::{inspect, Inspection};
use sandbox_agents_workspace::{BlobStore, ByteStream};
use sha2::{Digest, Sha256};
use sqlx::PgPool;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How long an uploaded archive may sit unreferenced before the garbage sweep removes it: a
/// process that dies between the upload and the commit leaves it behind.
const UPLOAD_GRACE: Duration = Duration::from_secs(3600);

#[derive(Clone)]
pub struct Bundles {
    db: PgPool,
    blobs: Arc<dyn BlobStore>,
}

/// The 404 of a bundle path.
fn no_bundle(raw: &str) -> impl Fn(StoreError) -> ServiceError + '_ {
    move |e| match e {
        StoreError::NotFound => ServiceError::NotFound(format!("skill bundle '{raw}' not found")),
        e => e.into(),
    }
}

impl Bundles {
    pub fn new(db: PgPool, blobs: Arc<dyn BlobStore>) -> Self {
        Self { db, blobs }
    }

    pub async fn create(
        &self,
        project: ProjectId,
        body: &SkillBundleCreate,
    ) -> Result<SkillBundle> {
        let mut v = Violations::new();
        body.validate(&mut v);
        v.into_result().map_err(ServiceError::Validation)?;
        let row = bundles::create(
            &self.db,
            project,
            uuid::Uuid::now_v7(),
            &body.slug,
            &body.description,
        )
        .await?;
        tracing::info!(bundle.id = %row.id, bundle.slug = %row.slug, "skill bundle created");
        Ok(row.to_wire())
    }

    pub async fn list(&self, project: ProjectId) -> Result<Vec<SkillBundle>> {
        Ok(bundles::list(&self.db, project)
            .await?
            .iter()
            .map(|b| b.to_wire())
            .collect())
    }

    pub async fn get(&self, project: ProjectId, raw: &str) -> Result<SkillBundle> {
        Ok(bundles::get(&self.db, project, &BundleRef::parse(raw))
            .await
            .map_err(no_bundle(raw))?
            .to_wire())
    }

    /// 409 while an agent's `skills_source` names the bundle.
    pub async fn delete(&self, project: ProjectId, raw: &str) -> Result<()> {
        let mut tx = self.db.begin().await?;
        bundles::delete_unreferenced(&mut tx, project, &BundleRef::parse(raw))
            .await
            .map_err(no_bundle(raw))?;
        tx.commit().await?;
        tracing::info!(bundle.slug = %raw, "skill bundle deleted");
        Ok(())
    }

    /// The versions not retired, newest first.
    pub async fn versions(&self, project: ProjectId, raw: &str) -> Result<Vec<SkillBundleVersion>> {
        let bundle = bundles::get(&self.db, project, &BundleRef::parse(raw))
            .await
            .map_err(no_bundle(raw))?;
        Ok(bundles::versions(&self.db, bundle.id)
            .await?
            .iter()
            .map(|v| v.to_wire())
            .collect())
    }

    /// Retires a version; its number is never issued again.
    pub async fn retire(&self, project: ProjectId, raw: &str, version: i32) -> Result<()> {
        let r = BundleRef::parse(raw);
        let mut tx = self.db.begin().await?;
        bundles::get(&mut *tx, project, &r)
            .await
            .map_err(no_bundle(raw))?;
        bundles::retire_version(&mut tx, project, &r, version)
            .await
            .map_err(|e| match e {
                StoreError::NotFound => ServiceError::NotFound(format!(
                    "skill bundle '{raw}' has no version {version} (or it is already retired)"
                )),
                e => e.into(),
            })?;
        tx.commit().await?;
        tracing::info!(bundle.slug = %raw, version, "skill bundle version retired");
        Ok(())
    }

    /// Pushes an archive as the bundle's next version. The bytes go to the blob store as they
    /// arrive (never whole in memory), the whole archive is checked there, and only then is a
    /// number allocated, in the transaction that records the version: a refused push stores
    /// nothing and uses no number. The caller bounds the body; more than
    /// [`MAX_ARCHIVE_BYTES`] is refused here too.
    #[tracing::instrument(skip_all, fields(bundle.slug = %raw))]
    pub async fn push(
        &self,
        project: ProjectId,
        raw: &str,
        data: ByteStream,
    ) -> Result<SkillBundleVersion> {
        let r = BundleRef::parse(raw);
        let bundle = bundles::get(&self.db, project, &r)
            .await
            .map_err(no_bundle(raw))?;
        let key = format!(
            "bundles/{}/{}.tar",
            bundle.id,
            uuid::Uuid::now_v7().simple()
        );
        let pending = garbage::queue_unless_done(&self.db, "blob", &key, UPLOAD_GRACE).await?;
        let result = self.store_checked(project, &r, &key, data).await;
        match &result {
            Ok(_) => {}
            Err(_) => {
                // Nothing refers to the upload: remove it now rather than at the grace's end.
                if let Err(e) = self.blobs.delete(&key).await {
                    tracing::warn!(error = %e, blob.key = %key, "removing a refused upload failed; the garbage sweep retries");
                    garbage::due_now(&self.db, &[pending]).await?;
                } else {
                    garbage::done(&self.db, pending).await?;
                }
            }
        }
        let (version, bundle) = result?;
        garbage::done(&self.db, pending).await?;
        tracing::info!(bundle.id = %bundle, version = version.version, size = version.size_bytes, files = version.file_count, "skill bundle version pushed");
        Ok(version)
    }

    async fn store_checked(
        &self,
        project: ProjectId,
        r: &BundleRef,
        key: &str,
        data: ByteStream,
    ) -> Result<(SkillBundleVersion, uuid::Uuid)> {
        let hasher = Arc::new(Mutex::new(Sha256::new()));
        let over = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (h, o) = (hasher.clone(), over.clone());
        let mut seen = 0u64;
        let tapped = data
            .map(move |chunk: std::io::Result<Bytes>| {
                let chunk = chunk?;
                seen += chunk.len() as u64;
                if seen > MAX_ARCHIVE_BYTES {
                    o.store(true, std::sync::atomic::Ordering::Relaxed);
                    return Err(std::io::Error::other("the archive is too large"));
                }
                h.lock().expect("hasher").update(&chunk);
                Ok(chunk)
            })
            .boxed();
        let size = match self.blobs.put(key, tapped).await {
            Ok(size) => size,
            Err(_) if over.load(std::sync::atomic::Ordering::Relaxed) => {
                return Err(too_large());
            }
            Err(e) => return Err(anyhow::anyhow!("storing the archive: {e}").into()),
        };
        let digest = hex::encode(hasher.lock().expect("hasher").clone().finalize());
        let found = self.check(key).await?;
        let file_count = i32::try_from(found.file_count)
            .map_err(|_| ServiceError::BadRequest("the archive holds too many files".into()))?;
        let mut tx = self.db.begin().await?;
        let (bundle, version) = bundles::add_version(
            &mut tx,
            project,
            r,
            &NewVersion {
                blob_key: key,
                size_bytes: size as i64,
                file_count,
                digest: &digest,
                skills: &found.skills,
            },
        )
        .await
        .map_err(|e| match e {
            StoreError::NotFound => {
                ServiceError::NotFound("the skill bundle was deleted during the push".into())
            }
            e => e.into(),
        })?;
        tx.commit().await?;
        Ok((version.to_wire(), bundle.id))
    }

    /// Reads the stored archive back and checks all of it (on a blocking thread: the tar
    /// reader is synchronous).
    async fn check(&self, key: &str) -> Result<Inspection> {
        let stream = self
            .blobs
            .get(key)
            .await
            .map_err(|e| anyhow::anyhow!("reading the stored archive: {e}"))?;
        let reader = tokio_util::io::SyncIoBridge::new(tokio_util::io::StreamReader::new(stream));
        tokio::task::spawn_blocking(move || inspect(reader))
            .await
            .map_err(|e| anyhow::anyhow!("the archive check stopped: {e}"))?
            .map_err(|refusal| ServiceError::BadRequest(refusal.0))
    }
}

/// The 413 of a push over the limit; the API maps the message to its status.
pub fn too_large() -> ServiceError {
    ServiceError::BadRequest(format!(
        "the archive is too large: skill bundles of at most {} MiB are accepted",
        MAX_ARCHIVE_BYTES / (1024 * 1024)
    ))
}
