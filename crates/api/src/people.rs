//! People's credentials: argon2id password hashes, single-use recovery secrets and browser
//! session cookies (`sa_session`, HttpOnly, SameSite=Lax; Secure behind https). Secrets are
//! random, shown once, and stored as SHA-256 hashes.

use crate::auth::Principal;
use crate::error::ApiError;
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use argon2::Argon2;
use axum::http::{header, HeaderMap, HeaderValue};
use sandbox_agents_store::{memberships, people};
use sha2::{Digest, Sha256};
use time::{Duration, OffsetDateTime};

/// The browser session cookie.
pub const SESSION_COOKIE: &str = "sa_session";
/// How long a browser session lasts.
pub const SESSION_TTL: Duration = Duration::days(7);
/// How long a recovery secret works.
pub const RECOVERY_TTL: Duration = Duration::hours(24);

/// A random secret: 32 bytes, hex.
pub fn new_secret() -> Result<String, ApiError> {
    let mut bytes = [0u8; 32];
    getrandom::getrandom(&mut bytes)
        .map_err(|e| ApiError::Internal(anyhow::anyhow!("no randomness: {e}")))?;
    Ok(hex::encode(bytes))
}

pub fn secret_hash(secret: &str) -> [u8; 32] {
    Sha256::digest(secret.as_bytes()).into()
}

/// An argon2id PHC string for `password` (on a blocking thread: it is slow on purpose).
pub async fn hash_password(password: String) -> Result<String, ApiError> {
    tokio::task::spawn_blocking(move || {
        let mut salt = [0u8; 16];
        getrandom::getrandom(&mut salt).map_err(|e| anyhow::anyhow!("no randomness: {e}"))?;
        let salt = SaltString::encode_b64(&salt).map_err(|e| anyhow::anyhow!("{e}"))?;
        Argon2::default()
            .hash_password(password.as_bytes(), &salt)
            .map(|h| h.to_string())
            .map_err(|e| anyhow::anyhow!("hashing a password: {e}"))
    })
    .await
    .map_err(|e| ApiError::Internal(e.into()))?
    .map_err(ApiError::Internal)
}

/// Whether `password` matches `hash` (false for a malformed hash).
pub async fn verify_password(password: String, hash: String) -> bool {
    tokio::task::spawn_blocking(move || {
        PasswordHash::new(&hash)
            .map(|h| {
                Argon2::default()
                    .verify_password(password.as_bytes(), &h)
                    .is_ok()
            })
            .unwrap_or(false)
    })
    .await
    .unwrap_or(false)
}

/// The session cookie's value, if the request carries one.
pub fn session_cookie(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .find(|(k, _)| *k == SESSION_COOKIE)
        .map(|(_, v)| v.to_owned())
        .filter(|v| !v.is_empty())
}

/// `Set-Cookie` for a session (`token` None: clears it).
pub fn set_cookie(token: Option<&str>, secure: bool) -> HeaderValue {
    let value = match token {
        Some(t) => format!(
            "{SESSION_COOKIE}={t}; Path=/; HttpOnly; SameSite=Lax; Max-Age={}",
            SESSION_TTL.whole_seconds()
        ),
        None => format!("{SESSION_COOKIE}=; Path=/; HttpOnly; SameSite=Lax; Max-Age=0"),
    };
    let value = if secure { value + "; Secure" } else { value };
    HeaderValue::from_str(&value).expect("a cookie of hex and ASCII is a valid header")
}

/// Opens a browser session for `person`; returns the cookie's token.
pub async fn open_session(
    db: &sandbox_agents_store::Db,
    person: uuid::Uuid,
) -> Result<String, ApiError> {
    let token = new_secret()?;
    people::add_session(
        db,
        person,
        &secret_hash(&token),
        OffsetDateTime::now_utc() + SESSION_TTL,
    )
    .await?;
    Ok(token)
}

/// A fresh recovery secret for `person`; returns it (its hash is stored).
pub async fn issue_recovery(
    db: &sandbox_agents_store::Db,
    person: uuid::Uuid,
) -> Result<String, ApiError> {
    let code = new_secret()?;
    people::add_recovery_code(
        db,
        person,
        &secret_hash(&code),
        OffsetDateTime::now_utc() + RECOVERY_TTL,
    )
    .await?;
    Ok(code)
}

/// The person behind a session cookie, with their memberships.
pub async fn person_of_session(
    db: &sandbox_agents_store::Db,
    token: &str,
) -> Result<Option<Principal>, ApiError> {
    let Some(p) = people::by_session(db, &secret_hash(token)).await? else {
        return Ok(None);
    };
    let projects = memberships::of_person(db, p.id).await?;
    Ok(Some(Principal::Person {
        id: p.id,
        email: p.email,
        operator: p.operator,
        projects,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn passwords_hash_with_argon2id_and_verify() {
        let h = hash_password("correct horse battery".into()).await.unwrap();
        assert!(h.starts_with("$argon2id$"));
        assert!(verify_password("correct horse battery".into(), h.clone()).await);
        assert!(!verify_password("wrong".into(), h).await);
        assert!(!verify_password("x".into(), "not a hash".into()).await);
    }

    #[test]
    fn the_session_cookie_is_found_among_others() {
        let mut h = HeaderMap::new();
        h.insert(
            header::COOKIE,
            HeaderValue::from_static("a=1; sa_session=abc; b=2"),
        );
        assert_eq!(session_cookie(&h).as_deref(), Some("abc"));
        let c = set_cookie(Some("abc"), true);
        let c = c.to_str().unwrap();
        assert!(c.contains("HttpOnly") && c.contains("SameSite=Lax") && c.ends_with("Secure"));
    }
}
