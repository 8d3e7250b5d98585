//! The deployment's master key, and sealing of the secrets the server must store but never
//! show again (secret values, webhook signing secrets, deploy keys, sandbox variables); the
//! key files every process reads ([`key_file`]); and, in [`tokens`], minting and hashing of
//! the credentials the server hands out (API keys, session and recovery secrets, passwords).
//!
//! A sealed value is `version (1 byte) || nonce (12 bytes) || AES-256-GCM ciphertext and tag`.
//! The nonce is random for every seal, so sealing the same plaintext twice gives different
//! bytes. The caller passes associated data (for example the owning row's id): a sealed value
//! copied onto another row does not open there.
//!
//! The key comes from `SANDBOX_AGENTS_MASTER_KEY` (32 bytes, as 64 hex digits or as standard
//! base64) or from `<data-dir>/master.key`, 32 random bytes written with mode 0600 on first
//! start. Every process of a deployment needs the same key; losing it makes every sealed
//! value unreadable.
//!
//! Rotation: a key may carry previous keys ([`MasterKey::with_previous`]). Sealing always uses
//! the current key; opening tries the current one, then the previous ones, and
//! [`MasterKey::reseal`] moves a value sealed under a previous key to the current one, so
//! that once every stored value was resealed the previous keys can be dropped.

pub mod tokens;

use aes_gcm::aead::{Aead, KeyInit, Payload};
use aes_gcm::{Aes256Gcm, Nonce};
use base64::Engine;
use std::fmt;
use std::path::Path;

const VERSION: u8 = 1;
const NONCE_LEN: usize = 12;
pub const KEY_LEN: usize = 32;

#[derive(Debug, thiserror::Error)]
pub enum VaultError {
    #[error("the master key must be 32 bytes, as 64 hex digits or standard base64 ({0})")]
    BadKey(String),
    #[error("a sealed value could not be opened: it was sealed under another master key, for another owner, or it is damaged")]
    Open,
    #[error("reading or creating the master key file: {0}")]
    Io(#[from] std::io::Error),
    #[error("the operating system's random source failed: {0}")]
    Random(String),
    #[error("hashing a password failed: {0}")]
    Password(String),
}

/// The master key, with the keys it replaced, and the key [`MasterKey::keyed_hash`] uses
/// (derived from the master key, so that the cipher's key is never used for anything else).
/// Cloning is cheap; `Debug` never shows a key.
#[derive(Clone)]
pub struct MasterKey(
    std::sync::Arc<Aes256Gcm>,
    std::sync::Arc<Vec<Aes256Gcm>>,
    std::sync::Arc<[u8; KEY_LEN]>,
);

impl fmt::Debug for MasterKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("MasterKey(***)")
    }
}

fn hmac_sha256(key: &[u8], message: &[u8]) -> [u8; 32] {
    use hmac::{Hmac, Mac};
    let mut mac =
        <Hmac<sha2::Sha256> as Mac>::new_from_slice(key).expect("HMAC takes a key of any length");
    mac.update(message);
    mac.finalize().into_bytes().into()
}

/// Fills `buf` from the operating system's random source.
pub fn random_bytes(buf: &mut [u8]) -> Result<(), VaultError> {
    getrandom::getrandom(buf).map_err(|e| VaultError::Random(e.to_string()))
}

impl MasterKey {
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, VaultError> {
        if bytes.len() != KEY_LEN {
            return Err(VaultError::BadKey(format!("got {} bytes", bytes.len())));
        }
        let cipher = Aes256Gcm::new_from_slice(bytes)
            .map_err(|_| VaultError::BadKey("rejected by the cipher".into()))?;
        let hash_key = hmac_sha256(bytes, b"sandbox-agents keyed-hash key v1");
        Ok(Self(
            std::sync::Arc::new(cipher),
            Default::default(),
            std::sync::Arc::new(hash_key),
        ))
    }

    /// HMAC-SHA256 of `message` under a key derived from the current master key: the same
    /// for the same message for as long as the master key is not rotated, and not computable
    /// without it (placeholders that stand for secrets). Callers put a purpose at the start
    /// of `message` so that two uses never collide.
    pub fn keyed_hash(&self, message: &[u8]) -> [u8; 32] {
        hmac_sha256(&self.2[..], message)
    }

    /// This key, still able to open what `previous` keys sealed (a rotation in progress).
    pub fn with_previous(self, previous: Vec<MasterKey>) -> Self {
        let old = previous.into_iter().map(|k| (*k.0).clone()).collect();
        Self(self.0, std::sync::Arc::new(old), self.2)
    }

    /// Whether previous keys are configured (so stored values may need [`MasterKey::reseal`]).
    pub fn has_previous(&self) -> bool {
        !self.1.is_empty()
    }

    /// Parses the `SANDBOX_AGENTS_MASTER_KEY` form: 64 hex digits, or standard base64 of 32
    /// bytes (surrounding whitespace ignored).
    pub fn parse(text: &str) -> Result<Self, VaultError> {
        let text = text.trim();
        let bytes = if text.len() == 2 * KEY_LEN && text.bytes().all(|b| b.is_ascii_hexdigit()) {
            hex::decode(text).map_err(|e| VaultError::BadKey(e.to_string()))?
        } else {
            base64::engine::general_purpose::STANDARD
                .decode(text)
                .map_err(|_| VaultError::BadKey("neither hex nor base64".into()))?
        };
        Self::from_bytes(&bytes)
    }

    /// A fresh random key (tests, and the key file's first start).
    pub fn random() -> Self {
        let mut key = [0u8; KEY_LEN];
        random_bytes(&mut key).expect("the operating system's random source works");
        Self::from_bytes(&key).expect("32 bytes is a valid key")
    }

    /// Reads the key file at `path` (32 raw bytes), or creates it (see [`key_file`]).
    pub fn load_or_create(path: &Path) -> Result<Self, VaultError> {
        Self::from_bytes(&key_file(path)?)
    }

    /// Seals `plaintext` for the owner named by `aad`.
    pub fn seal(&self, plaintext: &[u8], aad: &[u8]) -> Result<Vec<u8>, VaultError> {
        let mut nonce = [0u8; NONCE_LEN];
        random_bytes(&mut nonce)?;
        let sealed = self
            .0
            .encrypt(
                Nonce::from_slice(&nonce),
                Payload {
                    msg: plaintext,
                    aad,
                },
            )
            .map_err(|_| VaultError::Random("encryption failed".into()))?;
        let mut out = Vec::with_capacity(1 + NONCE_LEN + sealed.len());
        out.push(VERSION);
        out.extend_from_slice(&nonce);
        out.extend_from_slice(&sealed);
        Ok(out)
    }

    /// Opens what [`MasterKey::seal`] sealed for the same `aad`, under this key or a
    /// previous one.
    pub fn open(&self, sealed: &[u8], aad: &[u8]) -> Result<Vec<u8>, VaultError> {
        self.open_with(sealed, aad).map(|(plain, _)| plain)
    }

    /// The plaintext, and whether the current key sealed it.
    fn open_with(&self, sealed: &[u8], aad: &[u8]) -> Result<(Vec<u8>, bool), VaultError> {
        if sealed.len() < 1 + NONCE_LEN || sealed[0] != VERSION {
            return Err(VaultError::Open);
        }
        let (nonce, body) = sealed[1..].split_at(NONCE_LEN);
        let attempt = |cipher: &Aes256Gcm| {
            cipher
                .decrypt(Nonce::from_slice(nonce), Payload { msg: body, aad })
                .ok()
        };
        if let Some(plain) = attempt(&self.0) {
            return Ok((plain, true));
        }
        self.1
            .iter()
            .find_map(attempt)
            .map(|plain| (plain, false))
            .ok_or(VaultError::Open)
    }

    /// A value sealed under a previous key, sealed again under the current one; `None` when
    /// the current key sealed it already.
    pub fn reseal(&self, sealed: &[u8], aad: &[u8]) -> Result<Option<Vec<u8>>, VaultError> {
        match self.open_with(sealed, aad)? {
            (_, true) => Ok(None),
            (plain, false) => self.seal(&plain, aad).map(Some),
        }
    }
}

/// The 32 random bytes in the key file at `path`, created on first use with mode 0600. Two
/// processes starting at once agree: the file is written under a temporary name and
/// hard-linked into place, and whoever links second reads the winner's bytes. Every key file
/// of the server (the master key, the preview key) goes through here.
pub fn key_file(path: &Path) -> std::io::Result<Vec<u8>> {
    use std::io::{ErrorKind, Write};
    use std::os::unix::fs::OpenOptionsExt;
    match std::fs::read(path) {
        Ok(bytes) => return Ok(bytes),
        Err(e) if e.kind() == ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let tmp = path.with_extension(format!("tmp-{}", uuid::Uuid::new_v4().simple()));
    let mut key = [0u8; KEY_LEN];
    random_bytes(&mut key).map_err(|e| std::io::Error::other(e.to_string()))?;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)?;
    f.write_all(&key)?;
    f.sync_all()?;
    let linked = std::fs::hard_link(&tmp, path);
    let _ = std::fs::remove_file(&tmp);
    match linked {
        Err(e) if e.kind() != ErrorKind::AlreadyExists => Err(e),
        _ => std::fs::read(path),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sealed_value_opens_only_with_its_key_and_owner() {
        let key = MasterKey::random();
        let sealed = key.seal(b"whsec_abc", b"owner-1").unwrap();
        assert!(!sealed.windows(9).any(|w| w == b"whsec_abc"));
        assert_eq!(key.open(&sealed, b"owner-1").unwrap(), b"whsec_abc");
        assert!(key.open(&sealed, b"owner-2").is_err());
        assert!(MasterKey::random().open(&sealed, b"owner-1").is_err());
        let mut damaged = sealed.clone();
        *damaged.last_mut().unwrap() ^= 1;
        assert!(key.open(&damaged, b"owner-1").is_err());
        assert_ne!(key.seal(b"whsec_abc", b"owner-1").unwrap(), sealed);
    }

    #[test]
    fn a_rotated_key_opens_and_reseals_what_the_previous_one_sealed() {
        let old = MasterKey::random();
        let sealed = old.seal(b"value", b"owner").unwrap();
        let new = MasterKey::random().with_previous(vec![old.clone()]);
        assert!(new.has_previous() && !old.has_previous());
        assert_eq!(new.open(&sealed, b"owner").unwrap(), b"value");
        let resealed = new
            .reseal(&sealed, b"owner")
            .unwrap()
            .expect("moved to the new key");
        assert!(
            old.open(&resealed, b"owner").is_err(),
            "the old key no longer opens it"
        );
        assert_eq!(new.reseal(&resealed, b"owner").unwrap(), None);
        assert!(new.reseal(&sealed, b"someone else").is_err());
        let alone = MasterKey(new.0.clone(), Default::default(), new.2.clone());
        assert_eq!(alone.open(&resealed, b"owner").unwrap(), b"value");
    }

    #[test]
    fn a_keyed_hash_depends_on_the_key_and_the_message_only() {
        let bytes = [7u8; 32];
        let a = MasterKey::from_bytes(&bytes).unwrap();
        let same = MasterKey::from_bytes(&bytes)
            .unwrap()
            .with_previous(vec![MasterKey::random()]);
        assert_eq!(a.keyed_hash(b"m"), same.keyed_hash(b"m"));
        assert_ne!(a.keyed_hash(b"m"), a.keyed_hash(b"n"));
        assert_ne!(a.keyed_hash(b"m"), MasterKey::random().keyed_hash(b"m"));
    }

    #[test]
    fn keys_parse_from_hex_or_base64_and_nothing_else() {
        let hex_key = "00".repeat(32);
        let b64 = base64::engine::general_purpose::STANDARD.encode([7u8; 32]);
        assert!(MasterKey::parse(&hex_key).is_ok());
        assert!(MasterKey::parse(&format!(" {b64}\n")).is_ok());
        assert!(MasterKey::parse("short").is_err());
        assert!(MasterKey::parse(&"00".repeat(31)).is_err());
        assert_eq!(format!("{:?}", MasterKey::random()), "MasterKey(***)");
    }

    #[test]
    fn the_key_file_is_created_once_with_mode_0600_and_read_back() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("vault-{}", uuid::Uuid::new_v4().simple()));
        let path = dir.join("master.key");
        let first = MasterKey::load_or_create(&path).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let second = MasterKey::load_or_create(&path).unwrap();
        let sealed = first.seal(b"x", b"").unwrap();
        assert_eq!(second.open(&sealed, b"").unwrap(), b"x");
        std::fs::remove_dir_all(dir).unwrap();
    }
}
