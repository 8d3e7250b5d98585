//! Secrets bound for egress (`inject`, `placeholder`): what a boot makes of them for the
//! egress proxy, sealed beside the sandbox's variables, and the placeholders a sandbox holds
//! in their stead.
//!
//! Invariants:
//! * the secret of such a binding is never in the sandbox: an inject binding puts nothing in
//!   its environment, a placeholder binding puts a placeholder there;
//! * a placeholder is `sa-ph-` and 32 hex digits of HMAC-SHA256, under a key derived from the
//!   master key, of the session's id and the variable: the same at every boot of the session
//!   (a tool may have written it to a file), different for every session and variable, and
//!   not computable by a sandbox; it reveals nothing of the secret;
//! * the credentials are sealed with the session's id as associated data (their own prefix,
//!   so they do not open as the variables, nor the variables as them), stored and cleared
//!   with the variables (`store::sessions::mark_running` and every stop).

use crate::Credentials;
use sandbox_agents_domain::secret_binding::{EgressCredential, EgressCredentialKind, VALUE_SLOT};
use sandbox_agents_domain::tools::SecretBinding;
use sandbox_agents_domain::SessionId;
use sandbox_agents_errors::{Result, ServiceError};
use sandbox_agents_vault::MasterKey;

/// What every placeholder starts with, so that it can be recognised in a sandbox.
pub const PLACEHOLDER_PREFIX: &str = "sa-ph-";

pub(crate) fn egress_aad(session: SessionId) -> Vec<u8> {
    [b"sandbox-egress:".as_slice(), session.0.as_bytes()].concat()
}

/// The placeholder session `session` holds in `env` for a secret the proxy swaps in.
pub fn placeholder(key: &MasterKey, session: SessionId, env: &str) -> String {
    let message = [
        b"egress-placeholder:".as_slice(),
        session.0.as_bytes(),
        env.as_bytes(),
    ]
    .concat();
    let hash = key.keyed_hash(&message);
    let hex: String = hash[..16].iter().map(|b| format!("{b:02x}")).collect();
    format!("{PLACEHOLDER_PREFIX}{hex}")
}

/// What binding `b` of `session`, whose secret is `value`, gives: the variable the sandbox
/// gets (none for an inject binding) and the credential the proxy applies (none for a plain
/// variable).
pub(crate) fn bind(
    key: &MasterKey,
    session: SessionId,
    b: &SecretBinding,
    value: String,
) -> (Option<(String, String)>, Option<EgressCredential>) {
    let lower = |hosts: &[String]| -> Vec<String> {
        hosts
            .iter()
            .map(|h| h.trim_end_matches('.').to_ascii_lowercase())
            .collect()
    };
    if let Some(inject) = &b.inject {
        let credential = EgressCredential {
            hosts: lower(std::slice::from_ref(&inject.host)),
            kind: EgressCredentialKind::Inject {
                header: inject.header.clone(),
                value: inject.format.replacen(VALUE_SLOT, &value, 1),
            },
        };
        return (None, Some(credential));
    }
    if let Some(p) = &b.placeholder {
        let stands_for = placeholder(key, session, &p.env);
        let credential = EgressCredential {
            hosts: lower(&p.hosts),
            kind: EgressCredentialKind::Swap {
                placeholder: stands_for.clone(),
                value,
            },
        };
        return (Some((p.env.clone(), stands_for)), Some(credential));
    }
    (Some((b.env.clone(), value)), None)
}

fn sealing(e: sandbox_agents_vault::VaultError) -> ServiceError {
    ServiceError::Internal(anyhow::anyhow!("sealing egress credentials: {e}"))
}

/// Seals the egress credentials of a sandbox that is up; None when there are none.
pub fn seal_egress(
    key: &MasterKey,
    session: SessionId,
    credentials: &[EgressCredential],
) -> Result<Option<Vec<u8>>> {
    if credentials.is_empty() {
        return Ok(None);
    }
    let plain = serde_json::to_vec(credentials).map_err(|e| anyhow::anyhow!("encoding: {e}"))?;
    key.seal(&plain, &egress_aad(session))
        .map(Some)
        .map_err(sealing)
}

/// Opens what [`seal_egress`] sealed.
pub fn open_egress(
    key: &MasterKey,
    session: SessionId,
    sealed: &[u8],
) -> Result<Vec<EgressCredential>> {
    let plain = key.open(sealed, &egress_aad(session)).map_err(|_| {
        ServiceError::Internal(anyhow::anyhow!(
            "the sandbox's egress credentials cannot be opened (was the master key changed?); \
             restart the session to resolve them again"
        ))
    })?;
    serde_json::from_slice(&plain).map_err(|e| anyhow::anyhow!("decoding: {e}").into())
}

impl Credentials {
    /// The credentials the egress proxy applies for `session`'s sandbox, from what its boot
    /// sealed (`store::sessions::network_layers_by_sandbox` reads it).
    pub fn open_egress(&self, session: SessionId, sealed: &[u8]) -> Result<Vec<EgressCredential>> {
        open_egress(&self.key, session, sealed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn binding(json: serde_json::Value) -> SecretBinding {
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn a_placeholder_is_stable_per_session_and_variable_and_unlike_the_secret() {
        let key = MasterKey::random();
        let (a, b) = (SessionId::new(), SessionId::new());
        let p = placeholder(&key, a, "TOKEN");
        assert!(p.starts_with(PLACEHOLDER_PREFIX) && p.len() == PLACEHOLDER_PREFIX.len() + 32);
        assert_eq!(p, placeholder(&key, a, "TOKEN"));
        assert_ne!(p, placeholder(&key, b, "TOKEN"));
        assert_ne!(p, placeholder(&key, a, "OTHER"));
        assert_ne!(p, placeholder(&MasterKey::random(), a, "TOKEN"));
    }

    #[test]
    fn each_kind_of_binding_gives_its_variable_and_credential() {
        let key = MasterKey::random();
        let s = SessionId::new();
        let (env, cred) = bind(
            &key,
            s,
            &binding(serde_json::json!({"secret": "S", "inject":
                {"host": "API.test", "header": "Authorization", "format": "Bearer {value}"}})),
            "hunter2".into(),
        );
        assert_eq!(env, None);
        let cred = cred.unwrap();
        assert_eq!(cred.hosts, ["api.test"]);
        assert!(
            cred.kind
                == EgressCredentialKind::Inject {
                    header: "Authorization".into(),
                    value: "Bearer hunter2".into()
                }
        );
        let (env, cred) = bind(
            &key,
            s,
            &binding(serde_json::json!({"secret": "S", "placeholder":
                {"env": "TOKEN", "hosts": ["a.test", "b.test"]}})),
            "hunter2".into(),
        );
        let (name, held) = env.unwrap();
        assert_eq!(
            (name.as_str(), held.as_str()),
            ("TOKEN", placeholder(&key, s, "TOKEN").as_str())
        );
        assert!(
            cred.unwrap().kind
                == EgressCredentialKind::Swap {
                    placeholder: held,
                    value: "hunter2".into()
                }
        );
        let (env, cred) = bind(&key, s, &SecretBinding::env("S", "TOKEN"), "hunter2".into());
        assert_eq!(env, Some(("TOKEN".into(), "hunter2".into())));
        assert!(cred.is_none());
    }

    #[test]
    fn sealed_credentials_open_only_for_their_session_and_not_as_variables() {
        let key = MasterKey::random();
        let s = SessionId::new();
        let creds = vec![EgressCredential {
            hosts: vec!["a.test".into()],
            kind: EgressCredentialKind::Inject {
                header: "X".into(),
                value: "hunter2".into(),
            },
        }];
        let sealed = seal_egress(&key, s, &creds).unwrap().unwrap();
        assert!(!sealed.windows(7).any(|w| w == b"hunter2"));
        assert_eq!(open_egress(&key, s, &sealed).unwrap(), creds);
        assert!(open_egress(&key, SessionId::new(), &sealed).is_err());
        assert!(crate::secrets::open_env(&key, s, &sealed).is_err());
        assert!(seal_egress(&key, s, &[]).unwrap().is_none());
    }
}
