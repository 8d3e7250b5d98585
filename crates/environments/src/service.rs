//! The environment service: the rules of saving, archiving and deleting environments. Every
//! refusal is decided before anything is written.

use crate::image::{build_digest, image_for};
use futures::StreamExt;
use sandbox_agents_domain::environment::{
    Environment, EnvironmentConfig, EnvironmentCreate, EnvironmentPatch,
};
use sandbox_agents_domain::validation::Violations;
use sandbox_agents_domain::ProjectId;
use sandbox_agents_errors::{Result, ServiceError};
use sandbox_agents_sessions::Sessions;
use sandbox_agents_store::environments::{
    self, EnvironmentRef, EnvironmentUpdate, NewBuild, NewEnvironment,
};
use sandbox_agents_store::{Db, Error as StoreError};
use sandbox_agents_workspace::BlobStore;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// How environments run on this server.
#[derive(Clone, Debug)]
pub struct EnvironmentSettings {
    /// How many image builds one process runs at once; more wait their turn.
    pub max_concurrent_builds: usize,
    /// How often the sweep takes over builds whose builder died and collects unused images.
    pub sweep_interval: Duration,
}

/// The environment service; cheap to clone.
#[derive(Clone)]
pub struct Environments {
    pub(crate) inner: Arc<Inner>,
}

pub(crate) struct Inner {
    pub db: Db,
    /// The lifecycle: its backend builds images, its settings name the default image and the
    /// extra CA, and it boots the sessions a build kept waiting.
    pub sessions: Sessions,
    pub blobs: Arc<dyn BlobStore>,
    /// The deployment's id: part of every build's digest, so images are its own.
    pub deployment: String,
    /// What `config.backend` may name (`GET /api/backends`).
    pub backends: Vec<String>,
    pub settings: EnvironmentSettings,
    pub permits: Arc<Semaphore>,
    /// Digests this process has a build task for (queued or running), so a sweep does not
    /// queue the same build twice.
    pub inflight: std::sync::Mutex<std::collections::HashSet<String>>,
    pub tasks: TaskTracker,
    pub shutdown: CancellationToken,
}

/// The 404 of an environment path.
pub(crate) fn no_environment(raw: &str) -> impl Fn(StoreError) -> ServiceError + '_ {
    move |e| match e {
        StoreError::NotFound => {
            ServiceError::NotFound(format!("environment '{raw}' not found in this project"))
        }
        e => e.into(),
    }
}

impl Environments {
    /// The lifecycle these environments use.
    pub fn sessions(&self) -> &Sessions {
        &self.inner.sessions
    }

    /// The 422s, then the 400s, of a configuration.
    fn check_config(&self, config: &EnvironmentConfig, mut v: Violations) -> Result<()> {
        // A malformed name is already a violation; an offered one is judged only when well-formed.
        let well_formed = config
            .runtime_class
            .as_ref()
            .filter(|c| sandbox_agents_domain::runtime_class::is_valid(c));
        if let Some(class) = well_formed {
            let offered = &self.inner.sessions.settings().runtime_classes;
            if let Some(why) = sandbox_agents_domain::runtime_class::not_offered(class, offered) {
                v.push(
                    "value_error",
                    &["config", "runtime_class"],
                    why,
                    serde_json::Value::from(class.as_str()),
                );
            }
        }
        v.into_result().map_err(ServiceError::Validation)?;
        if let Some(reason) = config.refusal(&self.inner.backends) {
            return Err(ServiceError::BadRequest(reason));
        }
        Ok(())
    }

    /// Whether the image of the configuration's build, recorded as ready, is gone (removed by
    /// hand): asked of the backend before any transaction opens, so a slow backend never
    /// holds the rows [`Self::ensure_build`] locks, nor a pooled connection.
    async fn ready_image_gone(&self, config: &EnvironmentConfig) -> Result<bool> {
        if config.packages.is_empty() {
            return Ok(false);
        }
        let digest = build_digest(
            &self.inner.deployment,
            &self.base_image(config),
            &config.packages,
        );
        let build = match environments::get_build(&self.inner.db, &digest).await {
            Ok(b) => b,
            Err(sandbox_agents_store::Error::NotFound) => return Ok(false),
            Err(e) => return Err(e.into()),
        };
        Ok(
            build.status == sandbox_agents_domain::state::BuildStatus::Ready
                && !self
                    .inner
                    .sessions
                    .backend()
                    .image_exists(&build.image)
                    .await
                    .unwrap_or(true),
        )
    }

    /// The build a configuration needs (none without packages), made sure of in `tx`;
    /// `image_gone` from [`Self::ready_image_gone`]. Returns its digest and whether a build
    /// must be started.
    async fn ensure_build(
        &self,
        tx: &mut sqlx::PgConnection,
        config: &EnvironmentConfig,
        image_gone: bool,
    ) -> Result<Option<(String, bool)>> {
        if config.packages.is_empty() {
            return Ok(None);
        }
        let base = self.base_image(config);
        let digest = build_digest(&self.inner.deployment, &base, &config.packages);
        let image = image_for(&digest);
        let row = environments::ensure_build(
            tx,
            &NewBuild {
                digest: &digest,
                image: &image,
                base_image: &base,
                packages: &config.packages,
            },
        )
        .await?;
        let mut start = row.status == sandbox_agents_domain::state::BuildStatus::Building;
        if row.status == sandbox_agents_domain::state::BuildStatus::Ready && image_gone {
            tracing::info!(image = %row.image, "a ready build's image is gone; building it again");
            environments::rebuild(&mut *tx, &digest).await?;
            start = true;
        }
        Ok(Some((digest, start)))
    }

    /// The image a configuration starts from.
    pub(crate) fn base_image(&self, config: &EnvironmentConfig) -> String {
        config
            .image
            .clone()
            .unwrap_or_else(|| self.inner.sessions.settings().default_image.clone())
    }

    /// Creates an environment; with packages its image starts building at once.
    pub async fn create(&self, project: ProjectId, body: EnvironmentCreate) -> Result<Environment> {
        let mut v = Violations::new();
        body.validate(&mut v);
        self.check_config(&body.config, v)?;
        let image_gone = self.ready_image_gone(&body.config).await?;
        let mut tx = self.inner.db.begin().await?;
        let build = self.ensure_build(&mut tx, &body.config, image_gone).await?;
        let row = environments::insert(
            &mut tx,
            &NewEnvironment {
                id: uuid::Uuid::now_v7(),
                project,
                name: &body.name,
                description: &body.description,
                config: &body.config,
                metadata: &body.metadata,
                build_digest: build.as_ref().map(|(d, _)| d.as_str()),
            },
        )
        .await?;
        tx.commit().await?;
        tracing::info!(environment.id = %row.id, environment.name = %row.name, build = ?row.build_digest, "environment created");
        if let Some((digest, true)) = build {
            self.spawn_build(digest);
        }
        Ok(row.to_wire())
    }

    pub async fn list(
        &self,
        project: ProjectId,
        include_archived: bool,
    ) -> Result<Vec<Environment>> {
        Ok(
            environments::list(&self.inner.db, project, include_archived)
                .await?
                .iter()
                .map(|e| e.to_wire())
                .collect(),
        )
    }

    pub async fn get(&self, project: ProjectId, raw: &str) -> Result<Environment> {
        Ok(
            environments::get(&self.inner.db, project, &EnvironmentRef::parse(raw))
                .await
                .map_err(no_environment(raw))?
                .to_wire(),
        )
    }

    /// Applies a patch: `config` and `metadata` replace the stored ones whole. A changed
    /// configuration with packages builds (unless its image exists already), and so does one
    /// saved again after its build failed; the sessions
    /// created before keep the build they were created with. Archived environments are
    /// read-only (409).
    pub async fn update(
        &self,
        project: ProjectId,
        raw: &str,
        patch: EnvironmentPatch,
    ) -> Result<Environment> {
        let mut v = Violations::new();
        patch.validate(&mut v);
        match &patch.config {
            Some(c) => self.check_config(c, v)?,
            None => v.into_result().map_err(ServiceError::Validation)?,
        }
        let r = EnvironmentRef::parse(raw);
        let image_gone = match &patch.config {
            Some(c) => self.ready_image_gone(c).await?,
            None => false,
        };
        let mut tx = self.inner.db.begin().await?;
        let id = environments::lock(&mut tx, project, &r)
            .await
            .map_err(no_environment(raw))?;
        let current =
            environments::get(&mut *tx, project, &EnvironmentRef::parse(&id.to_string())).await?;
        if current.archived_at.is_some() {
            return Err(ServiceError::Conflict(format!(
                "environment '{}' is archived and read-only; create a new one instead",
                current.name
            )));
        }
        // Saving the configuration again after its build failed tries the build again; an
        // unchanged configuration whose image is ready or building builds nothing.
        let retry = patch.config.is_some()
            && current.build_status == Some(sandbox_agents_domain::state::BuildStatus::Failed);
        let config = patch.config.unwrap_or_else(|| current.config.0.clone());
        let changed = config != current.config.0;
        let build = if changed || retry {
            self.ensure_build(&mut tx, &config, image_gone).await?
        } else {
            current.build_digest.clone().map(|d| (d, false))
        };
        let name = patch.name.unwrap_or_else(|| current.name.clone());
        let description = patch
            .description
            .unwrap_or_else(|| current.description.clone());
        let metadata = patch.metadata.unwrap_or_else(|| current.metadata.0.clone());
        let row = environments::update(
            &mut tx,
            project,
            id,
            &EnvironmentUpdate {
                name: &name,
                description: &description,
                config: &config,
                metadata: &metadata,
                build_digest: build.as_ref().map(|(d, _)| d.as_str()),
            },
        )
        .await?;
        tx.commit().await?;
        tracing::info!(environment.id = %row.id, config_changed = changed, "environment updated");
        if let Some((digest, true)) = build {
            self.spawn_build(digest);
        }
        if changed {
            self.spawn_collect();
        }
        Ok(row.to_wire())
    }

    /// Archives (one-way): new sessions in it are refused, running ones go on.
    pub async fn archive(&self, project: ProjectId, raw: &str) -> Result<Environment> {
        let mut tx = self.inner.db.begin().await?;
        let row = environments::archive(&mut tx, project, &EnvironmentRef::parse(raw))
            .await
            .map_err(no_environment(raw))?;
        tx.commit().await?;
        tracing::info!(environment.id = %row.id, "environment archived");
        Ok(row.to_wire())
    }

    /// 409 while an agent defaults to it or any session ran in it.
    pub async fn delete(&self, project: ProjectId, raw: &str) -> Result<()> {
        let mut tx = self.inner.db.begin().await?;
        environments::delete_unused(&mut tx, project, &EnvironmentRef::parse(raw))
            .await
            .map_err(no_environment(raw))?;
        tx.commit().await?;
        tracing::info!(environment = %raw, "environment deleted");
        self.spawn_collect();
        Ok(())
    }

    /// The log of the environment's current build (the last attempt's), as text. 404 when
    /// nothing was built or no attempt has finished yet.
    pub async fn build_log(&self, project: ProjectId, raw: &str) -> Result<String> {
        let env = environments::get(&self.inner.db, project, &EnvironmentRef::parse(raw))
            .await
            .map_err(no_environment(raw))?;
        let none = || {
            ServiceError::NotFound(format!(
                "environment '{}' has no build log yet: it has nothing to build, or its first build is still running",
                env.name
            ))
        };
        let digest = env.build_digest.clone().ok_or_else(none)?;
        let build = environments::get_build(&self.inner.db, &digest).await?;
        let key = build.log_key.ok_or_else(none)?;
        let mut stream = self
            .inner
            .blobs
            .get(&key)
            .await
            .map_err(|e| anyhow::anyhow!("reading the build log {key}: {e}"))?;
        let mut bytes = Vec::new();
        while let Some(chunk) = stream.next().await {
            bytes.extend_from_slice(
                &chunk.map_err(|e| anyhow::anyhow!("reading the build log: {e}"))?,
            );
        }
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }
}
