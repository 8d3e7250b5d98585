//! Minting and hashing of every credential the server hands out or checks: API keys, the
//! shared token, browser session and recovery secrets, and people's passwords. Nothing here
//! knows HTTP or the database; callers store only what these functions return as hashes.
//!
//! Invariants:
//! * Secrets are 32 random bytes from the operating system, shown once.
//! * Keys, tokens and secrets are stored and looked up by SHA-256 ([`digest`]): they are
//!   random, so a fast hash is enough and lets a lookup be an index scan.
//! * Passwords are chosen by people, so they get argon2id with a random salt
//!   ([`hash_password`]), slow on purpose: call it off the async threads.

use crate::VaultError;
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use argon2::Argon2;
use sha2::{Digest, Sha256};

/// What every API key starts with, so that it can be recognised (and never forwarded).
pub const KEY_PREFIX: &str = "ak_";
/// Characters of a key shown as its display prefix: `ak_` and 8 hex digits.
const DISPLAY_PREFIX: usize = KEY_PREFIX.len() + 8;

/// The stored form of a key, token or secret.
pub fn digest(secret: &str) -> [u8; 32] {
    Sha256::digest(secret.as_bytes()).into()
}

/// A new random secret: 32 bytes, hex (browser sessions, recovery codes).
pub fn new_secret() -> Result<String, VaultError> {
    let mut bytes = [0u8; 32];
    crate::random_bytes(&mut bytes)?;
    Ok(hex::encode(bytes))
}

/// A new API key (`ak_` and 32 random bytes in hex), with its display prefix.
pub fn new_api_key() -> Result<(String, String), VaultError> {
    let key = format!("{KEY_PREFIX}{}", new_secret()?);
    let prefix = key[..DISPLAY_PREFIX].to_owned();
    Ok((key, prefix))
}

/// An argon2id PHC string for `password`. Blocking: tens of milliseconds on purpose.
pub fn hash_password(password: &str) -> Result<String, VaultError> {
    let mut salt = [0u8; 16];
    crate::random_bytes(&mut salt)?;
    let salt = SaltString::encode_b64(&salt).map_err(|e| VaultError::Password(e.to_string()))?;
    Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .map(|h| h.to_string())
        .map_err(|e| VaultError::Password(e.to_string()))
}

/// Whether `password` matches the PHC string `hash` (false for a malformed hash). Blocking.
pub fn verify_password(password: &str, hash: &str) -> bool {
    PasswordHash::new(hash).is_ok_and(|h| {
        Argon2::default()
            .verify_password(password.as_bytes(), &h)
            .is_ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_have_their_prefix_and_enough_randomness() {
        let (a, pa) = new_api_key().unwrap();
        let (b, _) = new_api_key().unwrap();
        assert!(a.starts_with("ak_") && a.len() == 3 + 64);
        assert_eq!(pa, &a[..11]);
        assert_ne!(a, b);
        assert_eq!(digest(&a), digest(&a.clone()));
        assert_ne!(digest(&a), digest(&b));
    }

    #[test]
    fn passwords_hash_with_argon2id_and_verify() {
        let h = hash_password("correct horse battery").unwrap();
        assert!(h.starts_with("$argon2id$"));
        assert!(verify_password("correct horse battery", &h));
        assert!(!verify_password("wrong", &h));
        assert!(!verify_password("x", "not a hash"));
    }
}
