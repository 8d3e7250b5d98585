//! The `people`, `recovery_codes` and `person_sessions` tables: local accounts, their
//! single-use recovery codes and their browser sessions. Codes and session tokens are looked
//! up by their SHA-256; the callers hash.

use crate::error::{constraint, Error, Result};
use sqlx::PgExecutor;
use time::OffsetDateTime;
use uuid::Uuid;

/// A person row (without the password hash).
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct PersonRecord {
    pub id: Uuid,
    pub email: String,
    pub name: String,
    pub verified: bool,
    pub state: String,
    pub operator: bool,
    pub created_at: OffsetDateTime,
    pub updated_at: OffsetDateTime,
}

const COLUMNS: &str = "id, email, name, verified, state, operator, created_at, updated_at";

/// Whether anyone has an account: a deployment with people is not open.
pub async fn any(db: impl PgExecutor<'_>) -> Result<bool> {
    let (any,): (bool,) = sqlx::query_as("select exists (select 1 from people)")
        .fetch_one(db)
        .await?;
    Ok(any)
}

pub async fn insert(
    db: impl PgExecutor<'_>,
    id: Uuid,
    email: &str,
    name: &str,
    password_hash: Option<&str>,
    operator: bool,
) -> Result<PersonRecord> {
    sqlx::query_as(&format!(
        "insert into people (id, email, name, password_hash, operator) values ($1, $2, $3, $4, $5) returning {COLUMNS}"
    ))
    .bind(id)
    .bind(email)
    .bind(name)
    .bind(password_hash)
    .bind(operator)
    .fetch_one(db)
    .await
    .map_err(|e| match constraint(&e) {
        Some("people_email_idx") => Error::Conflict(format!("a person with the email '{email}' exists already")),
        _ => e.into(),
    })
}

pub async fn get(db: impl PgExecutor<'_>, id: Uuid) -> Result<PersonRecord> {
    sqlx::query_as(&format!("select {COLUMNS} from people where id = $1"))
        .bind(id)
        .fetch_optional(db)
        .await?
        .ok_or(Error::NotFound)
}

pub async fn by_email(db: impl PgExecutor<'_>, email: &str) -> Result<Option<PersonRecord>> {
    Ok(sqlx::query_as(&format!(
        "select {COLUMNS} from people where lower(email) = lower($1)"
    ))
    .bind(email)
    .fetch_optional(db)
    .await?)
}

/// The person and their password hash, for a sign-in.
pub async fn credentials(
    db: impl PgExecutor<'_>,
    email: &str,
) -> Result<Option<(PersonRecord, Option<String>)>> {
    #[derive(sqlx::FromRow)]
    struct Row {
        #[sqlx(flatten)]
        person: PersonRecord,
        password_hash: Option<String>,
    }
    let row: Option<Row> = sqlx::query_as(&format!(
        "select {COLUMNS}, password_hash from people where lower(email) = lower($1)"
    ))
    .bind(email)
    .fetch_optional(db)
    .await?;
    Ok(row.map(|r| (r.person, r.password_hash)))
}

/// Everyone, oldest first.
pub async fn list(db: impl PgExecutor<'_>) -> Result<Vec<PersonRecord>> {
    Ok(sqlx::query_as(&format!(
        "select {COLUMNS} from people order by created_at, id"
    ))
    .fetch_all(db)
    .await?)
}

pub async fn set_name(db: impl PgExecutor<'_>, id: Uuid, name: &str) -> Result<PersonRecord> {
    sqlx::query_as(&format!(
        "update people set name = $2, updated_at = now() where id = $1 returning {COLUMNS}"
    ))
    .bind(id)
    .bind(name)
    .fetch_optional(db)
    .await?
    .ok_or(Error::NotFound)
}

pub async fn set_operator(
    db: impl PgExecutor<'_>,
    id: Uuid,
    operator: bool,
) -> Result<PersonRecord> {
    sqlx::query_as(&format!(
        "update people set operator = $2, updated_at = now() where id = $1 returning {COLUMNS}"
    ))
    .bind(id)
    .bind(operator)
    .fetch_optional(db)
    .await?
    .ok_or(Error::NotFound)
}

/// 409 when `id` is the only operator person. Locks every operator row until the transaction
/// ends, so two people demoting each other at once cannot both succeed.
pub async fn ensure_another_operator(tx: &mut sqlx::PgConnection, id: Uuid) -> Result<()> {
    let operators: Vec<(Uuid,)> =
        sqlx::query_as("select id from people where operator order by id for update")
            .fetch_all(&mut *tx)
            .await?;
    if operators.iter().all(|(o,)| *o == id) && operators.iter().any(|(o,)| *o == id) {
        return Err(Error::Conflict(
            "this is the only operator and no shared token is configured: make someone else an \
             operator first"
                .into(),
        ));
    }
    Ok(())
}

pub async fn delete(db: impl PgExecutor<'_>, id: Uuid) -> Result<()> {
    let r = sqlx::query("delete from people where id = $1")
        .bind(id)
        .execute(db)
        .await?;
    if r.rows_affected() == 0 {
        return Err(Error::NotFound);
    }
    Ok(())
}

/// Stores a recovery code's hash, valid until `expires_at`.
pub async fn add_recovery_code(
    db: impl PgExecutor<'_>,
    person: Uuid,
    code_hash: &[u8],
    expires_at: OffsetDateTime,
) -> Result<()> {
    sqlx::query(
        "insert into recovery_codes (id, person_id, code_hash, expires_at) values ($1, $2, $3, $4)",
    )
    .bind(Uuid::now_v7())
    .bind(person)
    .bind(code_hash)
    .bind(expires_at)
    .execute(db)
    .await?;
    Ok(())
}

/// Uses a recovery code: sets the person's password and marks the code used, once. Returns
/// the person, or `None` when the code is unknown, used or expired.
pub async fn recover(
    tx: &mut sqlx::PgConnection,
    code_hash: &[u8],
    password_hash: &str,
) -> Result<Option<PersonRecord>> {
    let used: Option<(Uuid,)> = sqlx::query_as(
        "update recovery_codes set used_at = now()
         where code_hash = $1 and used_at is null and expires_at > now()
         returning person_id",
    )
    .bind(code_hash)
    .fetch_optional(&mut *tx)
    .await?;
    let Some((person,)) = used else {
        return Ok(None);
    };
    Ok(sqlx::query_as(&format!(
        "update people set password_hash = $2, verified = true, updated_at = now()
         where id = $1 returning {COLUMNS}"
    ))
    .bind(person)
    .bind(password_hash)
    .fetch_optional(&mut *tx)
    .await?)
}

/// Opens a browser session.
pub async fn add_session(
    db: impl PgExecutor<'_>,
    person: Uuid,
    token_hash: &[u8],
    expires_at: OffsetDateTime,
) -> Result<()> {
    sqlx::query(
        "insert into person_sessions (id, person_id, token_hash, expires_at) values ($1, $2, $3, $4)",
    )
    .bind(Uuid::now_v7())
    .bind(person)
    .bind(token_hash)
    .bind(expires_at)
    .execute(db)
    .await?;
    Ok(())
}

/// The person behind a live browser session.
pub async fn by_session(
    db: impl PgExecutor<'_>,
    token_hash: &[u8],
) -> Result<Option<PersonRecord>> {
    Ok(sqlx::query_as(&format!(
        "select {} from person_sessions s join people p on p.id = s.person_id
         where s.token_hash = $1 and s.expires_at > now() and p.state = 'active'",
        COLUMNS
            .split(", ")
            .map(|c| format!("p.{c}"))
            .collect::<Vec<_>>()
            .join(", ")
    ))
    .bind(token_hash)
    .fetch_optional(db)
    .await?)
}

/// Ends a browser session.
pub async fn end_session(db: impl PgExecutor<'_>, token_hash: &[u8]) -> Result<()> {
    sqlx::query("delete from person_sessions where token_hash = $1")
        .bind(token_hash)
        .execute(db)
        .await?;
    Ok(())
}
