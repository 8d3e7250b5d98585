//! The `memberships` table: which people reach which projects, as `admin` or `member`.

use crate::error::{constraint, Error, Result};
use sandbox_agents_domain::ProjectId;
use sqlx::PgExecutor;
use time::OffsetDateTime;
use uuid::Uuid;

/// A membership with the person's email (its label).
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct MemberRecord {
    pub id: Uuid,
    pub project_id: Uuid,
    pub person_id: Uuid,
    pub email: String,
    pub role: String,
    pub created_at: OffsetDateTime,
}

/// A person's role in a project, if any.
pub async fn role(
    db: impl PgExecutor<'_>,
    project: ProjectId,
    person: Uuid,
) -> Result<Option<String>> {
    Ok(sqlx::query_scalar!(
        "select role from memberships where project_id = $1 and person_id = $2",
        project.0,
        person
    )
    .fetch_optional(db)
    .await?)
}

/// A person's projects with their role, oldest membership first.
pub async fn of_person(db: impl PgExecutor<'_>, person: Uuid) -> Result<Vec<(ProjectId, String)>> {
    let rows = sqlx::query!(
        "select project_id, role from memberships where person_id = $1 order by created_at, id",
        person
    )
    .fetch_all(db)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| (ProjectId(r.project_id), r.role))
        .collect())
}

pub async fn list(db: impl PgExecutor<'_>, project: ProjectId) -> Result<Vec<MemberRecord>> {
    Ok(sqlx::query_as!(
        MemberRecord,
        "select m.id, m.project_id, m.person_id, p.email, m.role, m.created_at
         from memberships m join people p on p.id = m.person_id
         where m.project_id = $1 order by m.created_at, m.id",
        project.0
    )
    .fetch_all(db)
    .await?)
}

pub async fn add(
    db: impl PgExecutor<'_>,
    project: ProjectId,
    person: Uuid,
    role: &str,
) -> Result<Uuid> {
    let id = Uuid::now_v7();
    sqlx::query!(
        "insert into memberships (id, project_id, person_id, role) values ($1, $2, $3, $4)",
        id,
        project.0,
        person,
        role,
    )
    .execute(db)
    .await
    .map_err(|e| match constraint(&e) {
        Some("memberships_project_id_person_id_key") => {
            Error::Conflict("that person is a member of this project already".into())
        }
        _ => e.into(),
    })?;
    Ok(id)
}

/// Removes a membership, refusing (409) to remove the project's last admin.
pub async fn remove(tx: &mut sqlx::PgConnection, project: ProjectId, id: Uuid) -> Result<()> {
    let admins: Vec<Uuid> = sqlx::query_scalar!(
        "select id from memberships where project_id = $1 and role = 'admin' for update",
        project.0
    )
    .fetch_all(&mut *tx)
    .await?;
    if admins.len() == 1 && admins[0] == id {
        return Err(Error::Conflict(
            "that is the project's last admin; make someone else admin first".into(),
        ));
    }
    let r = sqlx::query!(
        "delete from memberships where id = $1 and project_id = $2",
        id,
        project.0
    )
    .execute(&mut *tx)
    .await?;
    if r.rows_affected() == 0 {
        return Err(Error::NotFound);
    }
    Ok(())
}
