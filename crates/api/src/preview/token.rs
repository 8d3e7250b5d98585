//! The key that signs preview URLs, and the two spellings of a signed (session, port): the
//! path token `<session>-<port>-<mac>` of `/preview/{token}/` and the host label
//! `<port>-<session>-<mac>` of `https://<label>.<preview domain>/`.
//!
//! Invariants: nobody without the key can mint either, changing the session or the port
//! breaks the MAC, MACs are checked in constant time, and only the canonical spelling is
//! accepted, so each (session, port) has exactly one token and one label.

use hmac::{Hmac, Mac};
use sandbox_agents_domain::SessionId;
use sha2::Sha256;
use std::path::Path;
use std::sync::Arc;
use uuid::Uuid;

/// Hex characters of the MAC kept in a path token (128 bits).
const PATH_MAC_HEX: usize = 32;
/// Hex characters of the MAC kept in a host label (96 bits): a DNS label holds 63 characters,
/// and `<port>-<session>-` takes up to 39 of them.
const LABEL_MAC_HEX: usize = 24;

/// The key that signs preview tokens. Every process of a deployment must hold the same one;
/// Debug never shows it.
#[derive(Clone)]
pub struct PreviewKey(Arc<[u8]>);

impl std::fmt::Debug for PreviewKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PreviewKey(***)")
    }
}

impl PreviewKey {
    /// A key from secret bytes (e.g. `SANDBOX_AGENTS_PREVIEW_KEY`); at least 32 of them.
    pub fn new(bytes: impl Into<Vec<u8>>) -> Result<Self, String> {
        let bytes = bytes.into();
        if bytes.len() < 32 {
            return Err(format!(
                "the preview key is {} bytes long; use at least 32 random bytes (e.g. `openssl rand -hex 32`)",
                bytes.len()
            ));
        }
        Ok(PreviewKey(bytes.into()))
    }

    /// A fresh random key, for tests and single-process tools.
    pub fn random() -> Self {
        let mut key = [0u8; 32];
        sandbox_agents_vault::random_bytes(&mut key).expect("the OS random source works");
        PreviewKey(key.to_vec().into())
    }

    /// The key in `path`, created on first use (32 random bytes, mode 0600), as every key file
    /// is ([`sandbox_agents_vault::key_file`]).
    pub fn load_or_create(path: &Path) -> std::io::Result<Self> {
        let bytes = sandbox_agents_vault::key_file(path)?;
        PreviewKey::new(bytes).map_err(|e| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("{}: {e}", path.display()),
            )
        })
    }

    /// The MAC of one spelling (`kind`: path or label) of (session, port): the two spellings
    /// never share a MAC, so neither can be derived from the other.
    fn mac(&self, kind: Spelling, session: Uuid, port: u16) -> Hmac<Sha256> {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.0).expect("HMAC takes any key length");
        mac.update(format!("{}:{session}:{port}", kind.as_str()).as_bytes());
        mac
    }

    fn tag(&self, kind: Spelling, session: Uuid, port: u16) -> String {
        let tag = hex::encode(self.mac(kind, session, port).finalize().into_bytes());
        tag[..kind.mac_hex()].to_owned()
    }

    fn check(&self, kind: Spelling, session: Uuid, port: u16, tag: &str) -> bool {
        if tag.len() != kind.mac_hex() || tag.bytes().any(|b| b.is_ascii_uppercase()) {
            return false;
        }
        hex::decode(tag).ok().is_some_and(|t| {
            self.mac(kind, session, port)
                .verify_truncated_left(&t)
                .is_ok()
        })
    }

    /// The URL-safe token for `port` of `session`, for `/preview/{token}/`.
    pub fn token(&self, session: SessionId, port: u16) -> String {
        format!(
            "{}-{port}-{}",
            session.0.simple(),
            self.tag(Spelling::Path, session.0, port)
        )
    }

    /// The session and port a path token names, when this key signed it.
    pub fn verify(&self, token: &str) -> Option<(SessionId, u16)> {
        let mut parts = token.splitn(3, '-');
        let (id, port, tag) = (parts.next()?, parts.next()?, parts.next()?);
        let (session, port) = (canonical_session(id)?, canonical_port(port)?);
        self.check(Spelling::Path, session, port, tag)
            .then_some((SessionId(session), port))
    }

    /// The DNS label for `port` of `session` under a preview domain: one origin per session
    /// and port.
    pub fn host_label(&self, session: SessionId, port: u16) -> String {
        format!(
            "{port}-{}-{}",
            session.0.simple(),
            self.tag(Spelling::Label, session.0, port)
        )
    }

    /// The session and port a host label names, when this key signed it.
    pub fn verify_label(&self, label: &str) -> Option<(SessionId, u16)> {
        let mut parts = label.splitn(3, '-');
        let (port, id, tag) = (parts.next()?, parts.next()?, parts.next()?);
        let (session, port) = (canonical_session(id)?, canonical_port(port)?);
        self.check(Spelling::Label, session, port, tag)
            .then_some((SessionId(session), port))
    }
}

/// The two ways a preview is addressed.
#[derive(Clone, Copy)]
enum Spelling {
    Path,
    Label,
}

impl Spelling {
    fn as_str(self) -> &'static str {
        match self {
            Spelling::Path => "path",
            Spelling::Label => "label",
        }
    }

    fn mac_hex(self) -> usize {
        match self {
            Spelling::Path => PATH_MAC_HEX,
            Spelling::Label => LABEL_MAC_HEX,
        }
    }
}

fn canonical_session(id: &str) -> Option<Uuid> {
    Uuid::try_parse(id)
        .ok()
        .filter(|u| u.simple().to_string() == id)
}

fn canonical_port(port: &str) -> Option<u16> {
    port.parse::<u16>().ok().filter(|p| p.to_string() == port)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_fit_dns_and_bind_their_session_and_port() {
        let key = PreviewKey::random();
        let s = SessionId(Uuid::new_v4());
        let label = key.host_label(s, 65535);
        assert!(label.len() <= 63, "{label}");
        assert_eq!(
            key.verify_label(&label).map(|(a, p)| (a.0, p)),
            Some((s.0, 65535))
        );
        let other = key.host_label(SessionId(Uuid::new_v4()), 65535);
        let (_, tag) = other.rsplit_once('-').unwrap();
        assert!(key
            .verify_label(&format!("65535-{}-{tag}", s.0.simple()))
            .is_none());
        assert!(key.verify_label(&label.replace("65535", "8080")).is_none());
        assert!(key.verify_label(&label.to_uppercase()).is_none());
        assert!(PreviewKey::random().verify_label(&label).is_none());
        assert!(key.verify(&label).is_none(), "a label is not a path token");
        let token = key.token(s, 65535);
        let path_mac = token.rsplit('-').next().unwrap();
        assert!(
            !path_mac.starts_with(label.rsplit('-').next().unwrap()),
            "one spelling's MAC is not a prefix of the other's"
        );
    }
}
