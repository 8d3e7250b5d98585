//! People's credentials over HTTP: browser session cookies (`sa_session`, HttpOnly,
//! SameSite=Lax; Secure behind https), opening sessions and issuing single-use recovery
//! secrets. Minting and hashing are `sandbox_agents_vault::tokens`'; secrets are random, shown
//! once, and stored as SHA-256 hashes.

use crate::error::ApiError;
use axum::http::{header, HeaderMap, HeaderValue};
use sandbox_agents_store::people;
use sandbox_agents_vault::tokens;
use time::{Duration, OffsetDateTime};

/// The browser session cookie.
pub const SESSION_COOKIE: &str = "sa_session";
/// How long a browser session lasts.
pub const SESSION_TTL: Duration = Duration::days(7);
/// How long a recovery secret works.
pub const RECOVERY_TTL: Duration = Duration::hours(24);

fn vault_error(e: sandbox_agents_vault::VaultError) -> ApiError {
    ApiError::Internal(e.into())
}

/// A random secret (a session token, a recovery code), shown once.
pub fn new_secret() -> Result<String, ApiError> {
    tokens::new_secret().map_err(vault_error)
}

/// An argon2id PHC string for `password` (on a blocking thread: it is slow on purpose).
pub async fn hash_password(password: String) -> Result<String, ApiError> {
    tokio::task::spawn_blocking(move || tokens::hash_password(&password))
        .await
        .map_err(|e| ApiError::Internal(e.into()))?
        .map_err(vault_error)
}

/// Whether `password` matches `hash` (false for a malformed hash), off the async threads.
pub async fn verify_password(password: String, hash: String) -> bool {
    tokio::task::spawn_blocking(move || tokens::verify_password(&password, &hash))
        .await
        .unwrap_or(false)
}

/// The session cookie's value, if the request carries exactly one. Several mean somebody
/// planted one next to ours (a page on another port of the same host can set cookies for
/// it), and then none is trusted.
pub fn session_cookie(headers: &HeaderMap) -> Option<String> {
    let mut found = headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .filter(|(k, _)| *k == SESSION_COOKIE)
        .map(|(_, v)| v.to_owned());
    let first = found.next()?;
    if found.next().is_some() {
        tracing::info!("a request carried several session cookies; none is used");
        return None;
    }
    Some(first).filter(|v| !v.is_empty())
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
        &tokens::digest(&token),
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
        &tokens::digest(&code),
        OffsetDateTime::now_utc() + RECOVERY_TTL,
    )
    .await?;
    Ok(code)
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
        h.append(
            header::COOKIE,
            HeaderValue::from_static("sa_session=planted"),
        );
        assert_eq!(
            session_cookie(&h),
            None,
            "a planted second cookie trusts neither"
        );
        let c = set_cookie(Some("abc"), true);
        let c = c.to_str().unwrap();
        assert!(c.contains("HttpOnly") && c.contains("SameSite=Lax") && c.ends_with("Secure"));
    }
}
