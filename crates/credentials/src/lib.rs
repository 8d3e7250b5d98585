//! Credentials a project stores for its sandboxes: secrets (values that become environment
//! variables at boot) and git deploy keys (used by the control plane, never by a sandbox);
//! and the credentials of callers with what they reach: people (passwords, browser sessions,
//! recovery codes), API keys, projects and their memberships.
//! Every stored value is sealed under the deployment's master key with its owner's id as
//! associated data; nothing here returns or logs a plaintext except to the code that uses it.
//!
//! Why a crate of its own: credentials are the one place that holds the master key, and they
//! are needed by several services that must not need each other for it: the lifecycle
//! resolves and seals a boot's variables and opens them for each command, the run loop masks
//! tool output, and the API manages secrets and keys. Keeping them here means the master key
//! has one owner, and what grows next (git checkouts with deploy keys, bucket credentials)
//! finds the sealing and the probe in one place. The callers' side is here for the same
//! reason one level up: the rules of who may sign in and what a credential reaches (the last
//! operator stays, a project keeps an admin, a password is hashed before it is stored) are
//! the API's to call and not its to hold, and they share the store's identity tables.
//!
//! Entry point: [`Credentials`].

pub mod api_keys;
pub mod egress;
pub mod git_clone;
pub mod git_keys;
pub mod git_probe;
pub mod people;
pub mod projects;
pub mod secrets;

use sandbox_agents_store::Db;
use sandbox_agents_vault::MasterKey;
use std::path::PathBuf;

/// Secrets and deploy keys of every project; cheap to clone.
#[derive(Clone)]
pub struct Credentials {
    db: Db,
    /// Seals and opens secret values, the environment a sandbox was booted with and deploy
    /// keys. Every process of a deployment holds the same.
    key: MasterKey,
    /// The deployment's known_hosts for git over ssh: host keys are accepted on first use and
    /// checked on every later one.
    git_known_hosts: PathBuf,
    /// The CA bundle git trusts over https (`GIT_SSL_CAINFO`): the system's and the extra
    /// certificates; `None`: git's own default.
    git_ca_bundle: Option<PathBuf>,
}

impl Credentials {
    pub fn new(db: Db, key: MasterKey, git_known_hosts: PathBuf) -> Self {
        Credentials {
            db,
            key,
            git_known_hosts,
            git_ca_bundle: None,
        }
    }

    /// Points the git this process runs at `bundle` for https (see `git_ca_bundle`).
    pub fn with_git_ca_bundle(mut self, bundle: Option<PathBuf>) -> Self {
        self.git_ca_bundle = bundle;
        self
    }

    /// The master key (the webhooks seal their signing secrets under it too).
    pub fn master_key(&self) -> &MasterKey {
        &self.key
    }
}
