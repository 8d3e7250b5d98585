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

/// `query_as!` into a record with [`PersonRecord`]'s columns spliced in at compile time
/// between `$head` and `$tail` (never `format!`): `$head + columns + $tail`.
macro_rules! person_query {
    ($record:ty, $head:literal, $tail:literal $(, $arg:expr)* $(,)?) => {
        sqlx::query_as!(
            $record,
            $head + "id, email, name, verified, state, operator, created_at, updated_at" + $tail
            $(, $arg)*
        )
    };
}

/// Whether anyone has an account: a deployment with people is not open.
pub async fn any(db: impl PgExecutor<'_>) -> Result<bool> {
    Ok(
        sqlx::query_scalar!(r#"select exists (select 1 from people) as "any!""#)
            .fetch_one(db)
            .await?,
    )
}

pub async fn insert(
    db: impl PgExecutor<'_>,
    id: Uuid,
    email: &str,
    name: &str,
    password_hash: Option<&str>,
    operator: bool,
) -> Result<PersonRecord> {
    person_query!(
        PersonRecord,
        "insert into people (id, email, name, password_hash, operator) values ($1, $2, $3, $4, $5) returning ",
        "",
        id,
        email,
        name,
        password_hash,
        operator,
    )
    .fetch_one(db)
    .await
    .map_err(|e| match constraint(&e) {
        Some("people_email_idx") => Error::Conflict(format!("a person with the email '{email}' exists already")),
        _ => e.into(),
    })
}

pub async fn get(db: impl PgExecutor<'_>, id: Uuid) -> Result<PersonRecord> {
    person_query!(PersonRecord, "select ", " from people where id = $1", id)
        .fetch_optional(db)
        .await?
        .ok_or(Error::NotFound)
}

pub async fn by_email(db: impl PgExecutor<'_>, email: &str) -> Result<Option<PersonRecord>> {
    Ok(person_query!(
        PersonRecord,
        "select ",
        " from people where lower(email) = lower($1)",
        email
    )
    .fetch_optional(db)
    .await?)
}

/// The person and their password hash, for a sign-in.
pub async fn credentials(
    db: impl PgExecutor<'_>,
    email: &str,
) -> Result<Option<(PersonRecord, Option<String>)>> {
    struct Row {
        id: Uuid,
        email: String,
        name: String,
        verified: bool,
        state: String,
        operator: bool,
        created_at: OffsetDateTime,
        updated_at: OffsetDateTime,
        password_hash: Option<String>,
    }
    let row = person_query!(
        Row,
        "select ",
        ", password_hash from people where lower(email) = lower($1)",
        email
    )
    .fetch_optional(db)
    .await?;
    Ok(row.map(|r| {
        let person = PersonRecord {
            id: r.id,
            email: r.email,
            name: r.name,
            verified: r.verified,
            state: r.state,
            operator: r.operator,
            created_at: r.created_at,
            updated_at: r.updated_at,
        };
        (person, r.password_hash)
    }))
}

/// Everyone, oldest first.
pub async fn list(db: impl PgExecutor<'_>) -> Result<Vec<PersonRecord>> {
    Ok(person_query!(
        PersonRecord,
        "select ",
        " from people order by created_at, id"
    )
    .fetch_all(db)
    .await?)
}

pub async fn set_name(db: impl PgExecutor<'_>, id: Uuid, name: &str) -> Result<PersonRecord> {
    person_query!(
        PersonRecord,
        "update people set name = $2, updated_at = now() where id = $1 returning ",
        "",
        id,
        name
    )
    .fetch_optional(db)
    .await?
    .ok_or(Error::NotFound)
}

pub async fn set_operator(
    db: impl PgExecutor<'_>,
    id: Uuid,
    operator: bool,
) -> Result<PersonRecord> {
    person_query!(
        PersonRecord,
        "update people set operator = $2, updated_at = now() where id = $1 returning ",
        "",
        id,
        operator
    )
    .fetch_optional(db)
    .await?
    .ok_or(Error::NotFound)
}

/// 409 when `id` is the only operator person. Locks every operator row until the transaction
/// ends, so two people demoting each other at once cannot both succeed.
pub async fn ensure_another_operator(tx: &mut sqlx::PgConnection, id: Uuid) -> Result<()> {
    let operators: Vec<Uuid> =
        sqlx::query_scalar!("select id from people where operator order by id for update")
            .fetch_all(&mut *tx)
            .await?;
    if operators.iter().all(|o| *o == id) && operators.contains(&id) {
        return Err(Error::Conflict(
            "this is the only operator and no shared token is configured: make someone else an \
             operator first"
                .into(),
        ));
    }
    Ok(())
}

pub async fn delete(db: impl PgExecutor<'_>, id: Uuid) -> Result<()> {
    let r = sqlx::query!("delete from people where id = $1", id)
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
    sqlx::query!(
        "insert into recovery_codes (id, person_id, code_hash, expires_at) values ($1, $2, $3, $4)",
        Uuid::now_v7(),
        person,
        code_hash,
        expires_at,
    )
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
    let used = sqlx::query_scalar!(
        "update recovery_codes set used_at = now()
         where code_hash = $1 and used_at is null and expires_at > now()
         returning person_id",
        code_hash,
    )
    .fetch_optional(&mut *tx)
    .await?;
    let Some(person) = used else {
        return Ok(None);
    };
    Ok(person_query!(
        PersonRecord,
        "update people set password_hash = $2, verified = true, updated_at = now()
         where id = $1 returning ",
        "",
        person,
        password_hash,
    )
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
    sqlx::query!(
        "insert into person_sessions (id, person_id, token_hash, expires_at) values ($1, $2, $3, $4)",
        Uuid::now_v7(),
        person,
        token_hash,
        expires_at,
    )
    .execute(db)
    .await?;
    Ok(())
}

/// The person behind a live browser session.
pub async fn by_session(
    db: impl PgExecutor<'_>,
    token_hash: &[u8],
) -> Result<Option<PersonRecord>> {
    // The columns are qualified here (sessions have an `id` and a `created_at` too), so they
    // are written out rather than spliced; `query_as!` still checks them against the record.
    Ok(sqlx::query_as!(
        PersonRecord,
        "select p.id, p.email, p.name, p.verified, p.state, p.operator, p.created_at, p.updated_at
         from person_sessions s join people p on p.id = s.person_id
         where s.token_hash = $1 and s.expires_at > now() and p.state = 'active'",
        token_hash,
    )
    .fetch_optional(db)
    .await?)
}

/// Ends a browser session.
pub async fn end_session(db: impl PgExecutor<'_>, token_hash: &[u8]) -> Result<()> {
    sqlx::query!(
        "delete from person_sessions where token_hash = $1",
        token_hash
    )
    .execute(db)
    .await?;
    Ok(())
}
