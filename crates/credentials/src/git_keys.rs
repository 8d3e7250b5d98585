//! Git deploy keys (read-only keys for the control plane's clones): ed25519 pairs generated here, the private half sealed under
//! the master key with the key's id as associated data and opened only to hand it to `ssh`
//! for one command (see [`super::git_probe`]). No function returns the private half to a
//! caller outside this crate, and nothing logs it.

use crate::git_probe;
use crate::Credentials;
use sandbox_agents_domain::git_key::{GitKeyTest, GitRemote};
use sandbox_agents_domain::ids::GitKeyId;
use sandbox_agents_domain::ProjectId;
use sandbox_agents_errors::{Result, ServiceError};
use sandbox_agents_store::git_keys::{self, GitKeyRecord, NewGitKey};
use sandbox_agents_store::projects;
use sandbox_agents_vault::MasterKey;
use ssh_key::rand_core::OsRng;
use ssh_key::{Algorithm, HashAlg, LineEnding, PrivateKey};
use zeroize::Zeroizing;

/// A freshly generated key: what is shown, and the private half sealed for its id.
struct Generated {
    public_key: String,
    fingerprint: String,
    private_key_sealed: Vec<u8>,
}

/// Generates an ed25519 pair whose public key carries `comment`, and seals the private half
/// (OpenSSH PEM) for `id`.
fn generate(master: &MasterKey, id: GitKeyId, comment: &str) -> anyhow::Result<Generated> {
    let mut private = PrivateKey::random(&mut OsRng, Algorithm::Ed25519)?;
    private.set_comment(comment);
    let public = private.public_key();
    let pem: Zeroizing<String> = private.to_openssh(LineEnding::LF)?;
    Ok(Generated {
        public_key: public.to_openssh()?,
        fingerprint: public.fingerprint(HashAlg::Sha256).to_string(),
        private_key_sealed: master.seal(pem.as_bytes(), &aad(id.0))?,
    })
}

/// The associated data a deploy key's private half is sealed with: its id, with a prefix of
/// its own so that no other kind of sealed value (a webhook secret is sealed with its bare id)
/// can be taken for it.
pub(crate) fn aad(id: uuid::Uuid) -> Vec<u8> {
    [b"git-key:".as_slice(), id.as_bytes()].concat()
}

/// Opens the private half sealed for `id`; the plaintext is wiped when dropped.
pub(crate) fn open(
    master: &MasterKey,
    id: GitKeyId,
    sealed: &[u8],
) -> anyhow::Result<Zeroizing<String>> {
    let bytes = Zeroizing::new(master.open(sealed, &aad(id.0))?);
    let text = std::str::from_utf8(&bytes)
        .map_err(|_| anyhow::anyhow!("the sealed private key is not text"))?;
    Ok(Zeroizing::new(text.to_owned()))
}

/// The comment in a public key: where it came from, so that a git host's key list says so.
/// Whitespace in the name would end the comment early in some tools; it becomes `-`.
fn comment(project_slug: &str, name: &str) -> String {
    let name: String = name
        .chars()
        .map(|c| if c.is_whitespace() { '-' } else { c })
        .collect();
    format!("sandbox-agents:{project_slug}:{name}")
}

impl Credentials {
    /// Generates and stores a key named `name` (already checked) in `project`. A name taken
    /// in the project is a `Conflict`.
    #[tracing::instrument(skip_all, fields(project.id = %project))]
    pub async fn create_git_key(&self, project: ProjectId, name: &str) -> Result<GitKeyRecord> {
        let db = &self.db;
        let slug = projects::get(db, project).await?.slug;
        let id = GitKeyId::new();
        let master = self.key.clone();
        let comment = comment(&slug, name);
        // Key generation and sealing are CPU work; keep them off the async workers.
        let generated = tokio::task::spawn_blocking(move || generate(&master, id, &comment))
            .await
            .map_err(|e| anyhow::anyhow!("generating a key pair: {e}"))?
            .map_err(|e| ServiceError::Internal(e.context("generating a key pair")))?;
        let record = git_keys::insert(
            db,
            &NewGitKey {
                id,
                project,
                name,
                public_key: &generated.public_key,
                fingerprint: &generated.fingerprint,
                private_key_sealed: &generated.private_key_sealed,
            },
        )
        .await?;
        tracing::info!(git_key.id = %id, fingerprint = %record.fingerprint, "git key created");
        Ok(record)
    }

    /// Runs `git ls-remote` against `remote` with the key, from this process (the key never
    /// enters a sandbox). A failure is `ok: false` with git's or ssh's words; a success
    /// records `last_used_at`.
    #[tracing::instrument(skip_all, fields(project.id = %project, git_key.id = %id))]
    pub async fn test_git_key(
        &self,
        project: ProjectId,
        id: GitKeyId,
        remote: &GitRemote,
    ) -> Result<GitKeyTest> {
        let db = &self.db;
        let record = git_keys::get(db, project, id).await?;
        let pem = open(&self.key, id, &record.private_key_sealed)
            .map_err(|e| ServiceError::Internal(e.context("opening the sealed deploy key")))?;
        let scratch = std::env::temp_dir();
        let probe = git_probe::Probe {
            known_hosts: &self.git_known_hosts,
            scratch: &scratch,
            within: git_probe::TIMEOUT,
            ca_bundle: self.git_ca_bundle.as_deref(),
        };
        let outcome = git_probe::ls_remote(&pem, &remote.url(), probe).await;
        drop(pem);
        if outcome.ok {
            git_keys::touch(db, project, id).await?;
        }
        tracing::info!(ok = outcome.ok, "git key tested");
        Ok(outcome)
    }
}

/// For agent writes, inside their transaction: a `skills_source.ssh_key_id` must name a key
/// of the project (422 otherwise). The key is locked `for share` until the transaction ends,
/// so a concurrent delete either sees this agent or happens first (and then this is a 422).
/// The id is stored in canonical form, which is what deletes look for.
pub async fn hold_referenced_key(
    tx: &mut sqlx::PgConnection,
    project: ProjectId,
    spec: &mut sandbox_agents_domain::agent::AgentSpec,
) -> Result<()> {
    use sandbox_agents_domain::tools::SkillsSource;
    let Some(SkillsSource::GitRepo {
        ssh_key_id: Some(raw),
        ..
    }) = spec.skills_source.as_mut()
    else {
        return Ok(());
    };
    let held = match GitKeyId::parse(raw) {
        Some(id) => match git_keys::hold(tx, project, id).await {
            Ok(()) => Some(id),
            Err(sandbox_agents_store::Error::NotFound) => None,
            Err(e) => return Err(e.into()),
        },
        None => None,
    };
    match held {
        Some(id) => {
            *raw = id.to_string();
            Ok(())
        }
        None => {
            let mut errors = sandbox_agents_domain::Violations::new();
            errors.push(
                "value_error",
                &["skills_source", "ssh_key_id"],
                format!("there is no git key '{raw}' in this project; create one with POST /api/git-keys"),
                serde_json::Value::from(raw.as_str()),
            );
            errors.into_result().map_err(ServiceError::Validation)
        }
    }
}

impl Credentials {
    /// Deletes a key nobody references: 409 while an agent's `skills_source` uses it (the
    /// delete's row lock and agent writes' `for share` exclude each other).
    pub async fn delete_git_key(&self, project: ProjectId, id: GitKeyId) -> Result<()> {
        let mut tx = self.db.begin().await?;
        git_keys::delete_unreferenced(&mut tx, project, id).await?;
        tx.commit().await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_generated_key_is_ed25519_and_its_sealed_half_opens_only_for_its_id() {
        let master = MasterKey::random();
        let id = GitKeyId::new();
        let g = generate(&master, id, "sandbox-agents:p:ci").unwrap();
        assert!(
            g.public_key.starts_with("ssh-ed25519 AAAA"),
            "{}",
            g.public_key
        );
        assert!(g.public_key.ends_with(" sandbox-agents:p:ci"));
        assert!(g.fingerprint.starts_with("SHA256:"));
        let pem = open(&master, id, &g.private_key_sealed).unwrap();
        assert!(pem.starts_with("-----BEGIN OPENSSH PRIVATE KEY-----"));
        assert!(
            pem.ends_with('\n'),
            "ssh refuses a key file without the final newline"
        );
        let parsed = PrivateKey::from_openssh(pem.as_str()).unwrap();
        assert_eq!(parsed.public_key().to_openssh().unwrap(), g.public_key);
        assert!(!g.private_key_sealed.windows(7).any(|w| w == b"OPENSSH"));
        assert!(open(&master, GitKeyId::new(), &g.private_key_sealed).is_err());
    }

    #[test]
    fn comments_name_the_project_and_the_key_without_whitespace() {
        assert_eq!(comment("proj", "ci key\t1"), "sandbox-agents:proj:ci-key-1");
    }
}
