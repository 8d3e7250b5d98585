//! The built-in `analysis` environment: what agents with the `python` capability and no
//! environment of their own boot in. It is an ordinary environment of the project, named
//! `analysis`, made by the server the first time one of them starts a session (its image
//! builds like any other while the session waits in `provisioning`); people may edit it, and
//! a project that already has an environment of that name keeps its own.

use crate::service::Inner;
use crate::Environments;
use async_trait::async_trait;
use sandbox_agents_domain::environment::{EnvironmentConfig, EnvironmentCreate, Packages};
use sandbox_agents_domain::ProjectId;
use sandbox_agents_errors::{Result, ServiceError};
use sandbox_agents_sessions::EnvironmentHooks;
use sandbox_agents_store::environments::{self, EnvironmentRecord, EnvironmentRef};
use std::collections::BTreeMap;
use std::sync::{Arc, Weak};

/// Its name in every project.
pub const ANALYSIS: &str = "analysis";

/// What the kernel needs and what analysis usually does, pinned so every project's build is
/// the same image (and the backend's build cache, Docker's layers, serves the second). `python-is-python3` gives the
/// `python` that tools such as sqlsaber-sandbox look for; `packaging` is what they check
/// versions with.
pub fn analysis_packages() -> Packages {
    Packages {
        apt: vec!["python-is-python3".into()],
        pip: [
            "ipykernel==6.29.5",
            "jupyter-client==8.6.3",
            "matplotlib==3.9.4",
            "numpy==2.2.6",
            "pandas==2.2.3",
            "packaging==24.2",
        ]
        .map(String::from)
        .to_vec(),
        ..Default::default()
    }
}

impl Environments {
    async fn analysis_environment(&self, project: ProjectId) -> Result<EnvironmentRecord> {
        let by_name = EnvironmentRef::parse(ANALYSIS);
        let db = &self.inner.db;
        match environments::get(db, project, &by_name).await {
            Ok(env) => return Ok(env),
            Err(sandbox_agents_store::Error::NotFound) => {}
            Err(e) => return Err(e.into()),
        }
        let body = EnvironmentCreate {
            name: ANALYSIS.into(),
            description: "Made by the server for agents with the python capability and no environment of their own: the IPython kernel's packages, with numpy, pandas and matplotlib. Edit it to add packages.".into(),
            config: EnvironmentConfig {
                packages: analysis_packages(),
                ..Default::default()
            },
            metadata: BTreeMap::from([("created_by".into(), "sandbox-agents".into())]),
        };
        match self.create(project, body).await {
            Ok(_) => {
                tracing::info!(project.id = %project, "created the built-in analysis environment")
            }
            // Two sessions at once: the other made it.
            Err(ServiceError::Conflict(_)) => {}
            Err(e) => return Err(e),
        }
        Ok(environments::get(db, project, &by_name).await?)
    }
}

/// What the lifecycle is to call for environments, given to it by [`Environments::new`]. It
/// holds the environments weakly, so that the lifecycle does not keep them alive (they hold
/// the lifecycle): a strong reference each way kept both, and the database pool with them, for
/// as long as the process lived. It upgrades from the moment `Environments::new` returns until
/// the environments are dropped at teardown.
pub(crate) fn for_lifecycle(environments: Weak<Inner>) -> Arc<dyn EnvironmentHooks> {
    Arc::new(Hooks(environments))
}

struct Hooks(Weak<Inner>);

#[async_trait]
impl EnvironmentHooks for Hooks {
    async fn analysis_environment(&self, project: ProjectId) -> Result<EnvironmentRecord> {
        let inner = self.0.upgrade().ok_or_else(|| {
            ServiceError::Internal(anyhow::anyhow!("the server is shutting down"))
        })?;
        Environments { inner }.analysis_environment(project).await
    }
}
