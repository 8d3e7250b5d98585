//! Secrets (write-only values, bound into sandboxes as variables): sealing values, and resolving bindings into a sandbox's environment.
//!
//! Invariants:
//! * a value is sealed with the secret's id as associated data, so a sealed value copied onto
//!   another row does not open;
//! * a boot resolves the bindings once, and the variables it got are stored sealed on the
//!   session (the session's id as associated data) for as long as that sandbox is up: every
//!   command of the sandbox runs with them, a rotation reaches the next boot and never a
//!   running sandbox, and no plaintext is stored, logged or put in an event;
//! * the variables are passed with each exec, never put in the sandbox's configuration, so
//!   neither the backend's view of the sandbox (`docker inspect`, say) nor a snapshot image
//!   shows them.

use crate::Credentials;
use sandbox_agents_domain::secret::{effective_bindings, SecretCreate, SecretUpdate};
use sandbox_agents_domain::secret_binding::EgressCredential;
use sandbox_agents_domain::tools::SecretBinding;
use sandbox_agents_domain::{ProjectId, SessionId, Violations};
use sandbox_agents_errors::{Result, ServiceError};
use sandbox_agents_store::sealed::{reseal, Resealed, SealedColumn};
use sandbox_agents_store::secrets::{self, SecretRecord, SecretRef};
use sandbox_agents_vault::MasterKey;
use serde_json::Value;
use std::collections::BTreeMap;
use uuid::Uuid;

fn value_aad(id: Uuid) -> Vec<u8> {
    [b"secret:".as_slice(), id.as_bytes()].concat()
}

fn env_aad(session: SessionId) -> Vec<u8> {
    [b"sandbox-env:".as_slice(), session.0.as_bytes()].concat()
}

fn sealing(e: sandbox_agents_vault::VaultError) -> ServiceError {
    ServiceError::Internal(anyhow::anyhow!("sealing a secret: {e}"))
}

/// The variables a boot resolved (a placeholder binding's holds its placeholder), the
/// credentials the egress proxy is to apply (see [`crate::egress`]), and the secrets they
/// came from.
pub struct Resolved {
    pub env: BTreeMap<String, String>,
    pub egress: Vec<EgressCredential>,
    pub ids: Vec<Uuid>,
}

impl std::fmt::Debug for Resolved {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&String> = self.env.keys().collect();
        write!(f, "Resolved({names:?}, {:?})", self.egress)
    }
}

/// Seals the variables of a sandbox that is up; None when there are none.
pub fn seal_env(
    key: &MasterKey,
    session: SessionId,
    env: &BTreeMap<String, String>,
) -> Result<Option<Vec<u8>>> {
    if env.is_empty() {
        return Ok(None);
    }
    let plain = serde_json::to_vec(env).map_err(|e| anyhow::anyhow!("encoding: {e}"))?;
    key.seal(&plain, &env_aad(session))
        .map(Some)
        .map_err(sealing)
}

/// Opens what [`seal_env`] sealed.
pub fn open_env(
    key: &MasterKey,
    session: SessionId,
    sealed: &[u8],
) -> Result<BTreeMap<String, String>> {
    let plain = key.open(sealed, &env_aad(session)).map_err(|_| {
        ServiceError::Internal(anyhow::anyhow!(
            "the sandbox's secret variables cannot be opened (was the master key changed?); \
             restart the session to resolve them again"
        ))
    })?;
    serde_json::from_slice(&plain).map_err(|e| anyhow::anyhow!("decoding: {e}").into())
}

/// The names bound, one each.
fn names(bindings: &[SecretBinding]) -> Vec<String> {
    let mut names: Vec<String> = bindings.iter().map(|b| b.secret.clone()).collect();
    names.sort();
    names.dedup();
    names
}

/// Checks that every bound secret exists, and locks them against deletion until `tx` ends
/// (session create calls this in the transaction that inserts the session). 422 naming the
/// first missing one.
pub async fn check_bound(
    tx: &mut sqlx::PgConnection,
    project: ProjectId,
    agent: &[SecretBinding],
    session: &[SecretBinding],
) -> Result<()> {
    let wanted = effective_bindings(agent, session);
    if wanted.is_empty() {
        return Ok(());
    }
    let found = secrets::sealed_by_names(tx, project, &names(&wanted)).await?;
    if let Some(b) = wanted
        .iter()
        .find(|b| !found.iter().any(|s| s.name == b.secret))
    {
        let by = if session.contains(b) {
            "the session"
        } else {
            "the agent"
        };
        return Err(ServiceError::field(
            &["secret_bindings"],
            format!(
                "there is no secret named '{}' in this project (bound to {} by {by}); create it first",
                b.secret, b.target()
            ),
            Value::from(b.secret.as_str()),
        ));
    }
    Ok(())
}

/// Most bytes of secret values one sandbox may be given: every command carries all of them,
/// and the kernel refuses a command whose environment is too large (E2BIG).
pub const MAX_SANDBOX_SECRET_BYTES: usize = 1024 * 1024;

// The one masking rule lives in the domain crate, so that crates below this one (the MCP
// hub) mask with it too.
pub use sandbox_agents_domain::secret::{mask, MIN_MASKED_LEN};

/// [`mask`] for text that arrives in pieces (a command's output as it is written): a value
/// split between two pieces is still hidden whole, because the tail of a piece that could be
/// the start of a value is held back until the next piece (or [`StreamMask::finish`]) shows
/// whether it is one.
pub struct StreamMask {
    values: Vec<String>,
    longest: usize,
    held: String,
}

impl StreamMask {
    pub fn new(values: &[String]) -> Self {
        let values: Vec<String> = values
            .iter()
            .filter(|v| v.len() >= MIN_MASKED_LEN)
            .cloned()
            .collect();
        let longest = values.iter().map(String::len).max().unwrap_or(0);
        StreamMask {
            values,
            longest,
            held: String::new(),
        }
    }

    /// What of the text so far may be shown now, masked.
    pub fn push(&mut self, text: &str) -> String {
        self.held.push_str(text);
        let masked = mask(std::mem::take(&mut self.held), &self.values);
        if self.longest == 0 {
            return masked;
        }
        // The earliest place in the last `longest - 1` bytes where a value could begin.
        let from = masked.len().saturating_sub(self.longest - 1);
        let cut = (from..masked.len())
            .filter(|&i| masked.is_char_boundary(i))
            .find(|&i| {
                let tail = &masked[i..];
                self.values
                    .iter()
                    .any(|v| v.len() > tail.len() && v.starts_with(tail))
            })
            .unwrap_or(masked.len());
        let mut shown = masked;
        self.held = shown.split_off(cut);
        shown
    }

    /// The rest, at the end of the text.
    pub fn finish(&mut self) -> String {
        mask(std::mem::take(&mut self.held), &self.values)
    }
}

impl Credentials {
    /// The secret values of the session's sandbox as it is now, for [`mask`]; empty when it
    /// has none (or they cannot be opened: then commands fail loudly anyway).
    pub async fn secret_values(&self, project: ProjectId, id: SessionId) -> Vec<String> {
        match sandbox_agents_store::sessions::get(&self.db, project, id).await {
            Ok(s) => match &s.sandbox_secrets {
                Some(sealed) => open_env(&self.key, id, sealed)
                    .map(|env| env.into_values().collect())
                    .unwrap_or_default(),
                None => Vec::new(),
            },
            Err(_) => Vec::new(),
        }
    }

    /// Resolves bindings into variables and egress credentials for a boot of session `id`
    /// (its placeholders are made from it). A binding whose secret is gone fails the boot with
    /// a message that says which.
    pub async fn resolve_secrets(
        &self,
        project: ProjectId,
        id: SessionId,
        agent: &[SecretBinding],
        session: &[SecretBinding],
    ) -> Result<Resolved> {
        let wanted = effective_bindings(agent, session);
        let mut resolved = Resolved {
            env: BTreeMap::new(),
            egress: Vec::new(),
            ids: Vec::new(),
        };
        if wanted.is_empty() {
            return Ok(resolved);
        }
        let mut conn = self.db.acquire().await?;
        let found = secrets::sealed_by_names(&mut conn, project, &names(&wanted)).await?;
        drop(conn);
        for b in &wanted {
            let Some(s) = found.iter().find(|s| s.name == b.secret) else {
                return Err(ServiceError::BadRequest(format!(
                    "secret '{}' (bound to {}) does not exist in this project",
                    b.secret,
                    b.target()
                )));
            };
            let value = self.open_value(s)?;
            let (env, egress) = crate::egress::bind(&self.key, id, b, value);
            if let Some((name, value)) = env {
                resolved.env.insert(name, value);
            }
            resolved.egress.extend(egress);
            if !resolved.ids.contains(&s.id) {
                resolved.ids.push(s.id);
            }
        }
        let total: usize = resolved.env.iter().map(|(k, v)| k.len() + v.len()).sum();
        if total > MAX_SANDBOX_SECRET_BYTES {
            return Err(ServiceError::BadRequest(format!(
                "the bound secrets total {total} bytes; a sandbox takes at most {MAX_SANDBOX_SECRET_BYTES}"
            )));
        }
        Ok(resolved)
    }

    /// The values of the project's secrets with these names, for what the control plane itself
    /// sends (an MCP server's headers): never into a sandbox, a log or an event. A name that
    /// names nothing is an error naming it.
    pub async fn values_by_name(
        &self,
        project: ProjectId,
        names: &[String],
    ) -> Result<BTreeMap<String, String>> {
        let mut conn = self.db.acquire().await?;
        let found = secrets::sealed_by_names(&mut conn, project, names).await?;
        drop(conn);
        let mut out = BTreeMap::new();
        for name in names {
            let Some(s) = found.iter().find(|s| &s.name == name) else {
                return Err(ServiceError::BadRequest(format!(
                    "there is no secret named '{name}' in this project"
                )));
            };
            out.insert(name.clone(), self.open_value(s)?);
        }
        Ok(out)
    }

    fn open_value(&self, s: &secrets::SealedSecret) -> Result<String> {
        let plain = self
            .key
            .open(&s.value_sealed, &value_aad(s.id))
            .map_err(|_| {
                ServiceError::Internal(anyhow::anyhow!(
                "secret '{}' cannot be opened (was the master key changed?); set its value again",
                s.name
            ))
            })?;
        Ok(String::from_utf8(plain)
            .map_err(|_| anyhow::anyhow!("secret '{}' is not UTF-8", s.name))?)
    }

    /// Moves secret values, sandbox variables, egress credentials and deploy keys sealed under a previous master
    /// key to the current one.
    pub async fn reseal_secrets(&self) -> Result<Vec<(SealedColumn, Resealed)>> {
        let db = &self.db;
        let key = &self.key;
        let values = reseal(db, SealedColumn::SecretValues, |id, s| {
            key.reseal(s, &value_aad(id))
        })
        .await?;
        let sandboxes = reseal(db, SealedColumn::SandboxSecrets, |id, s| {
            key.reseal(s, &env_aad(SessionId(id)))
        })
        .await?;
        let egress = reseal(db, SealedColumn::EgressCredentials, |id, s| {
            key.reseal(s, &crate::egress::egress_aad(SessionId(id)))
        })
        .await?;
        let git_keys = reseal(db, SealedColumn::GitKeys, |id, s| {
            key.reseal(s, &crate::git_keys::aad(id))
        })
        .await?;
        Ok(vec![
            (SealedColumn::SecretValues, values),
            (SealedColumn::SandboxSecrets, sandboxes),
            (SealedColumn::EgressCredentials, egress),
            (SealedColumn::GitKeys, git_keys),
        ])
    }

    /// Stores a new secret, sealed.
    #[tracing::instrument(skip_all, fields(project.id = %project))]
    pub async fn create_secret(
        &self,
        project: ProjectId,
        body: SecretCreate,
    ) -> Result<SecretRecord> {
        let mut v = Violations::new();
        body.validate(&mut v);
        v.into_result().map_err(ServiceError::Validation)?;
        let id = Uuid::now_v7();
        let sealed = self
            .key
            .seal(body.value.0.as_bytes(), &value_aad(id))
            .map_err(sealing)?;
        let record = secrets::insert(
            &self.db,
            project,
            id,
            &body.name,
            &body.description,
            &sealed,
        )
        .await?;
        tracing::info!(secret.id = %id, secret.name = %record.name, "secret created");
        Ok(record)
    }

    /// Changes the description and/or rotates the value (reaching each session at its next
    /// boot).
    #[tracing::instrument(skip_all, fields(project.id = %project))]
    pub async fn update_secret(
        &self,
        project: ProjectId,
        r: &SecretRef,
        body: SecretUpdate,
    ) -> Result<SecretRecord> {
        let mut v = Violations::new();
        body.validate(&mut v);
        v.into_result().map_err(ServiceError::Validation)?;
        let current = secrets::get(&self.db, project, r).await?;
        let sealed = match &body.value {
            Some(value) => Some(
                self.key
                    .seal(value.0.as_bytes(), &value_aad(current.id))
                    .map_err(sealing)?,
            ),
            None => None,
        };
        let record = secrets::update(
            &self.db,
            project,
            current.id,
            body.description.as_deref(),
            sealed.as_deref(),
        )
        .await?;
        if sealed.is_some() {
            tracing::info!(secret.id = %record.id, "secret rotated");
        }
        Ok(record)
    }

    /// Deletes a secret; 409 while an agent or session binds it.
    #[tracing::instrument(skip_all, fields(project.id = %project))]
    pub async fn delete_secret(&self, project: ProjectId, r: &SecretRef) -> Result<()> {
        let current = secrets::get(&self.db, project, r).await?;
        let mut tx = self.db.begin().await?;
        secrets::delete(&mut tx, project, current.id).await?;
        tx.commit().await?;
        tracing::info!(secret.id = %current.id, "secret deleted");
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sealed_variables_open_only_for_their_session() {
        let key = MasterKey::random();
        let a = SessionId::new();
        let env = BTreeMap::from([("TOKEN".to_owned(), "hunter2".to_owned())]);
        let sealed = seal_env(&key, a, &env).unwrap().unwrap();
        assert!(!sealed.windows(7).any(|w| w == b"hunter2"));
        assert_eq!(open_env(&key, a, &sealed).unwrap(), env);
        assert!(open_env(&key, SessionId::new(), &sealed).is_err());
        assert!(seal_env(&key, a, &BTreeMap::new()).unwrap().is_none());
    }

    #[test]
    fn masking_hides_every_value_whole() {
        let values = vec![
            "abc".to_owned(),
            "s3cr3t".to_owned(),
            "s3cr3t-longer".to_owned(),
        ];
        assert_eq!(
            mask("x s3cr3t-longer y s3cr3t z abc".into(), &values),
            "x *** y *** z abc"
        );
        assert_eq!(mask("nothing".into(), &[]), "nothing");
    }

    #[test]
    fn a_value_split_between_pieces_is_still_masked_whole() {
        let values = vec!["s3cr3t-value".to_owned(), "abc".to_owned()];
        let text = "before s3cr3t-value between s3cr3t-valu and after s3cr3t-value";
        for size in 1..=text.len() {
            let mut m = StreamMask::new(&values);
            let mut shown = String::new();
            for piece in text.as_bytes().chunks(size) {
                shown.push_str(&m.push(std::str::from_utf8(piece).unwrap()));
            }
            shown.push_str(&m.finish());
            assert_eq!(
                shown, "before *** between s3cr3t-valu and after ***",
                "pieces of {size}"
            );
        }
        // Text that cannot begin a value is shown at once.
        let mut m = StreamMask::new(&values);
        assert_eq!(m.push("plain output\n"), "plain output\n");
        assert_eq!(m.push("ends with s3c"), "ends with ");
        assert_eq!(m.finish(), "s3c");
        let mut none = StreamMask::new(&[]);
        assert_eq!(none.push("s3cr"), "s3cr");
    }

    #[test]
    fn debug_shows_names_not_values() {
        let r = Resolved {
            env: BTreeMap::from([("TOKEN".to_owned(), "hunter2".to_owned())]),
            egress: vec![],
            ids: vec![],
        };
        let shown = format!("{r:?}");
        assert!(shown.contains("TOKEN") && !shown.contains("hunter2"));
    }
}
