//! Projects and who reaches them: a project is created with its creator as its admin, in one
//! transaction; members are existing people, as `admin` or `member`; a project always keeps
//! an admin. Who may ask for each change is the caller's to check.

use crate::Credentials;
use sandbox_agents_domain::identity::{slug_from_name, ProjectCreate, ProjectPatch};
use sandbox_agents_domain::{ProjectId, Violations};
use sandbox_agents_errors::{Result, ServiceError};
use sandbox_agents_store::memberships::{self, MemberRecord};
use sandbox_agents_store::people;
use sandbox_agents_store::projects::{self, ProjectRecord};
use uuid::Uuid;

/// The roles a membership can have.
const ROLES: [&str; 2] = ["admin", "member"];

impl Credentials {
    /// Creates a project from `body` (validated here). An empty slug is derived from the name,
    /// with a numeric suffix when taken; a slug given and taken is a conflict. A person who
    /// creates it (`admin`) becomes its admin in the same transaction.
    #[tracing::instrument(skip_all)]
    pub async fn create_project(
        &self,
        body: &ProjectCreate,
        admin: Option<Uuid>,
    ) -> Result<ProjectRecord> {
        let mut v = Violations::new();
        body.validate(&mut v);
        v.into_result().map_err(ServiceError::Validation)?;
        let slug = if body.slug.is_empty() {
            projects::free_slug(&self.db, &slug_from_name(&body.name)).await?
        } else {
            body.slug.clone()
        };
        let mut tx = self.db.begin().await?;
        let created = projects::insert(
            &mut *tx,
            ProjectId::new(),
            &slug,
            body.name.trim(),
            &body.description,
        )
        .await?;
        if let Some(person) = admin {
            memberships::add(&mut *tx, created.project_id(), person, "admin").await?;
        }
        tx.commit().await?;
        tracing::info!(project.id = %created.id, slug = %created.slug, "project created");
        Ok(created)
    }

    /// Changes a project's name (not blank, trimmed) and/or description; the slug never
    /// changes.
    pub async fn update_project(
        &self,
        project: ProjectId,
        patch: &ProjectPatch,
    ) -> Result<ProjectRecord> {
        if patch.name.as_deref().is_some_and(|n| n.trim().is_empty()) {
            let mut v = Violations::new();
            v.push(
                "string_too_short",
                &["name"],
                "name must not be empty",
                serde_json::Value::from(""),
            );
            return Err(ServiceError::Validation(
                v.into_result().expect_err("one violation"),
            ));
        }
        if let Some(limits) = &patch.limits {
            let mut v = Violations::new();
            limits.validate(&mut v, &["limits"]);
            v.into_result().map_err(ServiceError::Validation)?;
        }
        Ok(projects::update(
            &self.db,
            project,
            patch.name.as_deref().map(str::trim),
            patch.description.as_deref(),
            patch.limits.as_ref(),
        )
        .await?)
    }

    /// Adds the person whose email is `email` to `project` as `role` (`admin` or `member`).
    /// An unknown email is a `NotFound` that says to create the user first; a person who is a
    /// member already is a conflict.
    pub async fn add_member(
        &self,
        project: ProjectId,
        email: &str,
        role: &str,
    ) -> Result<MemberRecord> {
        if !ROLES.contains(&role) {
            let mut v = Violations::new();
            v.literal(&["role"], &ROLES, role);
            return Err(ServiceError::Validation(
                v.into_result().expect_err("one violation"),
            ));
        }
        let email = email.trim();
        let person = people::by_email(&self.db, email).await?.ok_or_else(|| {
            ServiceError::NotFound(format!(
                "no user has the email '{email}'; create the user first"
            ))
        })?;
        // The store knows the person by id only: the conflict names them as the caller did.
        let id = memberships::add(&self.db, project, person.id, role)
            .await
            .map_err(|e| match e {
                sandbox_agents_store::Error::Conflict(_) => {
                    ServiceError::Conflict(format!("'{email}' is a member of this project already"))
                }
                e => e.into(),
            })?;
        memberships::list(&self.db, project)
            .await?
            .into_iter()
            .find(|m| m.id == id)
            .ok_or_else(|| anyhow::anyhow!("a membership vanished as it was added").into())
    }

    /// Removes membership `id` of `project` (a store `NotFound` when there is none); the
    /// project's last admin stays (a conflict).
    pub async fn remove_member(&self, project: ProjectId, id: Uuid) -> Result<()> {
        let mut tx = self.db.begin().await?;
        memberships::remove(&mut tx, project, id).await?;
        tx.commit().await?;
        Ok(())
    }
}
