//! A shallow clone with a deploy key, on the control plane (skills sources with an
//! `ssh_key_id`: the sandbox gets plain files, the key never enters it).
//!
//! Invariants, beside those of [`crate::git_probe`] (whose key handling, environment and
//! process-group killing this shares):
//! - the key file exists only while git runs, in a 0700 directory of its own, removed however
//!   the clone ends; the checkout lives in another 0700 directory, removed when the
//!   [`Checkout`] is dropped (or at once when the clone fails);
//! - the remote comes from a checked [`GitRemote`] and the ref from [`check_ref`]; both follow
//!   `--` or an `=`, so neither can be read as an option;
//! - the whole clone is bounded by [`CLONE_TIMEOUT`], and the tree by [`MAX_CHECKOUT_BYTES`];
//!   a failure says which, with the repository and the ref;
//! - the checkout holds no `.git`. Symbolic links of the repository are kept as links:
//!   whoever copies the tree must not follow them (they may point anywhere on this host).

use crate::git_probe::{bounded_detail, read_bounded, ssh_command, GroupKiller, PrivateDir};
use crate::{git_keys, Credentials};
use sandbox_agents_domain::git_key::GitRemote;
use sandbox_agents_domain::git_source::{check_ref, is_commit_id};
use sandbox_agents_domain::ids::GitKeyId;
use sandbox_agents_domain::{ProjectId, Violations};
use sandbox_agents_errors::{Result, ServiceError};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

/// Longest a clone may take, every git command included.
pub const CLONE_TIMEOUT: Duration = Duration::from_secs(300);
/// Largest checkout kept (the files of the tree, `.git` excluded).
pub const MAX_CHECKOUT_BYTES: u64 = 512 * 1024 * 1024;

/// A checkout on the control plane's disk, removed when dropped.
pub struct Checkout {
    dir: PrivateDir,
}

impl Checkout {
    /// The tree, without `.git`.
    pub fn path(&self) -> PathBuf {
        self.dir.path().join("tree")
    }
}

impl std::fmt::Debug for Checkout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Checkout")
            .field("path", &self.path())
            .finish()
    }
}

/// Where and how git runs for one clone.
struct Run<'a> {
    key: &'a Path,
    home: &'a Path,
    known_hosts: &'a Path,
    ca_bundle: Option<&'a Path>,
    deadline: Instant,
}

impl Run<'_> {
    /// Runs `git <args>` in `cwd`; git's words when it fails, `None` on timeout.
    async fn git(&self, cwd: &Path, args: &[&str]) -> std::io::Result<Result<(), Option<String>>> {
        let mut cmd = tokio::process::Command::new("git");
        cmd.args(["-c", "credential.helper=", "-c", "protocol.allow=never"])
            .args([
                "-c",
                "protocol.ssh.allow=always",
                "-c",
                "advice.detachedHead=false",
            ])
            .args(["-c", "init.defaultBranch=main"])
            .args(args)
            .env_clear()
            .env(
                "PATH",
                std::env::var_os("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into()),
            )
            .env("HOME", self.home)
            .env("LC_ALL", "C")
            .env("GIT_SSH_COMMAND", ssh_command(self.key, self.known_hosts))
            .env("GIT_TERMINAL_PROMPT", "0")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_CEILING_DIRECTORIES", self.home)
            .current_dir(cwd)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .process_group(0);
        if let Some(bundle) = self.ca_bundle {
            cmd.env("GIT_SSL_CAINFO", bundle);
        }
        let mut child = cmd.spawn()?;
        let mut group = GroupKiller(child.id());
        let stderr = child.stderr.take();
        let left = self.deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, async {
            tokio::join!(child.wait(), read_bounded(stderr))
        })
        .await
        {
            Ok((status, said)) => {
                group.0 = None;
                if status?.success() {
                    Ok(Ok(()))
                } else {
                    Ok(Err(Some(bounded_detail(&said))))
                }
            }
            Err(_) => {
                group.kill();
                let _ = child.wait().await;
                Ok(Err(None))
            }
        }
    }
}

/// The bytes of regular files under `dir` (links are not followed), stopping past `max`.
fn tree_size(dir: &Path, max: u64) -> std::io::Result<u64> {
    let mut total = 0u64;
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d)? {
            let e = e?;
            let meta = std::fs::symlink_metadata(e.path())?;
            if meta.is_dir() {
                stack.push(e.path());
            } else if meta.is_file() {
                total += meta.len();
                if total > max {
                    return Ok(total);
                }
            }
        }
    }
    Ok(total)
}

impl Credentials {
    /// Clones `repo` at `git_ref` from `host` (`[user@]hostname[:port]`, as a key test takes
    /// it) with the deploy key `key_id` of `project`: shallow, a branch or tag by name or a
    /// full commit id by id, `.git` removed. A bad host, repo or ref is a 422; a clone that
    /// fails, takes longer than [`CLONE_TIMEOUT`] or is larger than [`MAX_CHECKOUT_BYTES`]
    /// is a `BadRequest` naming the repository and the ref. A success records the key's
    /// `last_used_at`.
    #[tracing::instrument(skip_all, fields(project.id = %project, git_key.id = %key_id))]
    pub async fn clone_with_key(
        &self,
        project: ProjectId,
        key_id: GitKeyId,
        host: &str,
        repo: &str,
        git_ref: &str,
    ) -> Result<Checkout> {
        let mut v = Violations::new();
        let remote = GitRemote::parse(&mut v, repo, host);
        if let Err(reason) = check_ref(git_ref) {
            v.push(
                "value_error",
                &["ref"],
                reason,
                serde_json::Value::from(git_ref),
            );
        }
        v.into_result().map_err(ServiceError::Validation)?;
        let remote = remote.expect("checked above");
        let record = sandbox_agents_store::git_keys::get(&self.db, project, key_id).await?;
        let pem = git_keys::open(&self.key, key_id, &record.private_key_sealed)
            .map_err(|e| ServiceError::Internal(e.context("opening the sealed deploy key")))?;
        let failed = |why: String| {
            ServiceError::BadRequest(format!(
                "could not clone {repo} at ref '{git_ref}' from {host} with the deploy key: {why}"
            ))
        };
        let scratch = std::env::temp_dir();
        let checkout = Checkout {
            dir: PrivateDir::create(&scratch).map_err(anyhow::Error::from)?,
        };
        let cloned = {
            // The key's directory goes when this block ends, whatever happened in it.
            let key_dir = PrivateDir::create(&scratch).map_err(anyhow::Error::from)?;
            let key = key_dir.path().join("id_ed25519");
            write_key(&key, &pem).map_err(anyhow::Error::from)?;
            drop(pem);
            if let Some(parent) = self.git_known_hosts.parent() {
                std::fs::create_dir_all(parent).map_err(anyhow::Error::from)?;
            }
            let run = Run {
                key: &key,
                home: key_dir.path(),
                known_hosts: &self.git_known_hosts,
                ca_bundle: self.git_ca_bundle.as_deref(),
                deadline: Instant::now() + CLONE_TIMEOUT,
            };
            clone(&run, &remote.url(), git_ref, &checkout.path())
                .await
                .map_err(anyhow::Error::from)?
        };
        match cloned {
            Ok(()) => {}
            Err(None) => {
                return Err(failed(format!(
                    "git did not finish within {} s; is the host reachable from the server?",
                    CLONE_TIMEOUT.as_secs()
                )))
            }
            Err(Some(said)) => return Err(failed(said)),
        }
        let tree = checkout.path();
        let size = tokio::task::spawn_blocking(move || {
            std::fs::remove_dir_all(tree.join(".git"))?;
            tree_size(&tree, MAX_CHECKOUT_BYTES)
        })
        .await
        .map_err(|e| anyhow::anyhow!("measuring the checkout: {e}"))?
        .map_err(anyhow::Error::from)?;
        if size > MAX_CHECKOUT_BYTES {
            return Err(failed(format!(
                "the checkout is larger than {} MiB",
                MAX_CHECKOUT_BYTES >> 20
            )));
        }
        sandbox_agents_store::git_keys::touch(&self.db, project, key_id).await?;
        tracing::info!(bytes = size, "cloned with a deploy key");
        Ok(checkout)
    }
}

fn write_key(path: &Path, pem: &str) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?
        .write_all(pem.as_bytes())
}

/// The clone itself into `tree` (which must not exist): `Err(None)` on timeout.
async fn clone(
    run: &Run<'_>,
    url: &str,
    git_ref: &str,
    tree: &Path,
) -> std::io::Result<Result<(), Option<String>>> {
    let tree_s = tree.to_string_lossy();
    let cwd = tree.parent().expect("the checkout's directory");
    if !is_commit_id(git_ref) {
        let branch = format!("--branch={git_ref}");
        let args = [
            "clone",
            "-q",
            "--depth",
            "1",
            "--single-branch",
            &branch,
            "--",
            url,
            &tree_s,
        ];
        return run.git(cwd, &args).await;
    }
    if let Err(e) = run.git(cwd, &["init", "-q", "--", &tree_s]).await? {
        return Ok(Err(e));
    }
    match run
        .git(tree, &["fetch", "-q", "--depth", "1", "--", url, git_ref])
        .await?
    {
        Ok(()) => {
            run.git(tree, &["checkout", "-q", "--detach", "FETCH_HEAD"])
                .await
        }
        Err(None) => Ok(Err(None)),
        Err(Some(first)) => {
            // A server that will not send a commit by id: fetch its branches and tags.
            let all = "+refs/heads/*:refs/remotes/origin/*";
            if let Err(e) = run
                .git(tree, &["fetch", "-q", "--tags", "--", url, all])
                .await?
            {
                return Ok(Err(e.map(|e| format!("{first}\n{e}"))));
            }
            match run
                .git(tree, &["checkout", "-q", "--detach", git_ref])
                .await?
            {
                Ok(()) => Ok(Ok(())),
                Err(None) => Ok(Err(None)),
                Err(Some(_)) => Ok(Err(Some(format!(
                    "commit {git_ref} is not in the repository"
                )))),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_clone_that_takes_too_long_is_stopped_and_says_so() {
        // A listener that is never accepted from: ssh connects and waits for a banner.
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("ssh://git@127.0.0.1:{}/o/r", l.local_addr().unwrap().port());
        let scratch = PrivateDir::create(&std::env::temp_dir()).unwrap();
        let key = scratch.path().join("id_ed25519");
        write_key(&key, "not a key\n").unwrap();
        let run = Run {
            key: &key,
            home: scratch.path(),
            known_hosts: Path::new("/dev/null"),
            ca_bundle: None,
            deadline: Instant::now() + Duration::from_millis(500),
        };
        let started = Instant::now();
        for git_ref in ["main", "0123456789abcdef0123456789abcdef01234567"] {
            let tree = scratch.path().join(format!("tree-{git_ref}"));
            let got = clone(&run, &url, git_ref, &tree).await.unwrap();
            assert_eq!(got, Err(None), "{git_ref}");
        }
        assert!(started.elapsed() < Duration::from_secs(10));
    }

    #[test]
    fn sizes_count_files_and_not_what_links_point_to() {
        let dir = PrivateDir::create(&std::env::temp_dir()).unwrap();
        std::fs::create_dir(dir.path().join("a")).unwrap();
        std::fs::write(dir.path().join("a/f"), [0u8; 100]).unwrap();
        std::os::unix::fs::symlink("/usr", dir.path().join("usr")).unwrap();
        assert_eq!(tree_size(dir.path(), u64::MAX).unwrap(), 100);
        assert!(tree_size(dir.path(), 10).unwrap() > 10);
    }
}
