//! `git ls-remote` with a deploy key, from the control plane.
//!
//! Invariants:
//! * the private key exists on disk only as a 0600 file in a fresh 0700 directory of its own,
//!   removed when the probe ends however it ends (success, failure, timeout, or the request
//!   being dropped);
//! * git and ssh see no configuration or credentials of this process: the environment is
//!   cleared, system and global git config are off, no repository is discovered around the
//!   working directory, ssh reads no config file and offers no agent key, only this one;
//! * the URL comes from a [`sandbox_agents_domain::git_key::GitRemote`] (checked, no option
//!   look-alikes) and follows `--`;
//! * git runs in a process group of its own; on timeout (or drop) the whole group, ssh
//!   included, is killed before git is reaped, so the group id cannot have been reused.

use sandbox_agents_domain::git_key::GitKeyTest;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::Duration;
use tokio::io::AsyncReadExt;

/// How long one test may take. The published client waits 120 s for the response; this
/// leaves it time to arrive.
pub const TIMEOUT: Duration = Duration::from_secs(100);
/// How long ssh waits for the TCP connection and the SSH handshake.
const CONNECT_TIMEOUT_SECS: u32 = 30;
/// Most characters of git's and ssh's output shown in `detail`.
pub const MAX_DETAIL: usize = 2000;
/// Most bytes of their output kept (the rest is read and dropped, so they never block).
const MAX_STDERR: usize = 64 * 1024;

/// Where and how long a probe runs.
#[derive(Clone, Copy, Debug)]
pub struct Probe<'a> {
    /// The deployment's known_hosts: host keys are learnt on first use and checked after.
    pub known_hosts: &'a Path,
    /// Where the key's private directory is made (the system's temp dir).
    pub scratch: &'a Path,
    pub within: Duration,
    /// The CA bundle for https (`GIT_SSL_CAINFO`); `None`: git's default.
    pub ca_bundle: Option<&'a Path>,
}

/// Tries to read `url` with the private key `pem` (OpenSSH format). Never fails: what went
/// wrong is `ok: false` and `detail`.
pub async fn ls_remote(pem: &str, url: &str, probe: Probe<'_>) -> GitKeyTest {
    match run(pem, url, probe).await {
        Ok(outcome) => outcome,
        Err(e) => {
            tracing::warn!(error = %e, "could not run git ls-remote");
            GitKeyTest {
                ok: false,
                detail: format!(
                    "the server could not run git ({e}); git and ssh must be installed on the control plane"
                ),
            }
        }
    }
}

async fn run(pem: &str, url: &str, probe: Probe<'_>) -> std::io::Result<GitKeyTest> {
    let Probe {
        known_hosts,
        scratch,
        within,
        ca_bundle,
    } = probe;
    let dir = PrivateDir::create(scratch)?;
    let key = dir.path().join("id_ed25519");
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&key)?
        .write_all(pem.as_bytes())?;
    if let Some(parent) = known_hosts.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)?;
    }
    let mut cmd = tokio::process::Command::new("git");
    cmd.args(["-c", "credential.helper=", "-c", "protocol.allow=never"])
        .args(["-c", "protocol.ssh.allow=always", "ls-remote", "--", url])
        .env_clear()
        .env(
            "PATH",
            std::env::var_os("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into()),
        )
        .env("HOME", dir.path())
        .env("LC_ALL", "C")
        .env("GIT_SSH_COMMAND", ssh_command(&key, known_hosts))
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CEILING_DIRECTORIES", dir.path())
        .current_dir(dir.path())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .process_group(0);
    if let Some(bundle) = ca_bundle {
        cmd.env("GIT_SSL_CAINFO", bundle);
    }
    let mut child = cmd.spawn()?;
    // Declared after `child`, so dropped before it: the group dies before git is reaped.
    let mut group = GroupKiller(child.id());
    let stderr = child.stderr.take();
    let finished = tokio::time::timeout(within, async {
        tokio::join!(child.wait(), read_bounded(stderr))
    })
    .await;
    let outcome = match finished {
        Ok((status, output)) => {
            group.0 = None;
            outcome(status?, &output, url)
        }
        Err(_) => {
            group.kill();
            let _ = child.wait().await;
            GitKeyTest {
                ok: false,
                detail: format!(
                    "git ls-remote {url} did not finish within {} s; is the host reachable from the server?",
                    within.as_secs()
                ),
            }
        }
    };
    Ok(outcome)
}

/// The ssh command git runs (through a shell, hence the quoting). `-F /dev/null`: no config
/// file may add a ProxyCommand or other identities.
pub(crate) fn ssh_command(key: &Path, known_hosts: &Path) -> String {
    format!(
        "ssh -F /dev/null -i {} -o IdentitiesOnly=yes -o IdentityAgent=none -o BatchMode=yes \
         -o StrictHostKeyChecking=accept-new -o UserKnownHostsFile={} -o ConnectTimeout={}",
        sh_quote(&key.to_string_lossy()),
        sh_quote(&known_hosts.to_string_lossy()),
        CONNECT_TIMEOUT_SECS,
    )
}

fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

fn outcome(status: ExitStatus, stderr: &[u8], url: &str) -> GitKeyTest {
    if status.success() {
        return GitKeyTest {
            ok: true,
            detail: format!("git ls-remote {url} succeeded: the key can read the repository"),
        };
    }
    let detail = bounded_detail(stderr);
    GitKeyTest {
        ok: false,
        detail: if detail.is_empty() {
            format!("git ls-remote {url} failed ({status}) without saying why")
        } else {
            detail
        },
    }
}

/// git's and ssh's words, without ssh's note that it learnt a host key, trimmed and cut to
/// [`MAX_DETAIL`] characters.
pub fn bounded_detail(stderr: &[u8]) -> String {
    let text = String::from_utf8_lossy(stderr);
    let kept: Vec<&str> = text
        .lines()
        .map(|l| l.trim_end_matches('\r'))
        .filter(|l| !l.starts_with("Warning: Permanently added"))
        .collect();
    let text = kept.join("\n");
    let text = text.trim();
    match text.char_indices().nth(MAX_DETAIL) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

/// Reads all of `pipe` (so the writer never blocks on a full pipe), keeping the first
/// [`MAX_STDERR`] bytes.
pub(crate) async fn read_bounded(pipe: Option<tokio::process::ChildStderr>) -> Vec<u8> {
    let mut kept = Vec::new();
    let Some(mut pipe) = pipe else { return kept };
    let mut buf = [0u8; 8192];
    while let Ok(n) = pipe.read(&mut buf).await {
        if n == 0 {
            break;
        }
        let room = MAX_STDERR.saturating_sub(kept.len());
        kept.extend_from_slice(&buf[..n.min(room)]);
    }
    kept
}

/// Kills a process group when told to, or when dropped while still armed (`Some`).
pub(crate) struct GroupKiller(pub(crate) Option<u32>);

impl GroupKiller {
    pub(crate) fn kill(&mut self) {
        let pid = self.0.take().and_then(|p| i32::try_from(p).ok());
        if let Some(pid) = pid.and_then(rustix::process::Pid::from_raw) {
            // ESRCH (nothing left in the group) is fine.
            let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
        }
    }
}

impl Drop for GroupKiller {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A fresh directory only this user can enter, removed (with the key in it) on drop.
pub(crate) struct PrivateDir(PathBuf);

impl PrivateDir {
    pub(crate) fn create(scratch: &Path) -> std::io::Result<Self> {
        let path = scratch.join(format!("sa-git-{}", uuid::Uuid::new_v4().simple()));
        std::fs::DirBuilder::new().mode(0o700).create(&path)?;
        let dir = PrivateDir(path);
        // The umask can only narrow the mode; set it exactly anyway.
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700))?;
        Ok(dir)
    }

    pub(crate) fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for PrivateDir {
    fn drop(&mut self) {
        if let Err(e) = std::fs::remove_dir_all(&self.0) {
            tracing::error!(error = %e, dir = %self.0.display(), "could not remove a deploy key's directory");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn details_drop_the_host_key_note_and_stay_bounded() {
        let err = b"Warning: Permanently added '[127.0.0.1]:2222' (ED25519) to the list of known hosts.\r\n\
                    git@127.0.0.1: Permission denied (publickey).\r\n\
                    fatal: Could not read from remote repository.\n\n";
        assert_eq!(
            bounded_detail(err),
            "git@127.0.0.1: Permission denied (publickey).\nfatal: Could not read from remote repository."
        );
        let long = "é".repeat(MAX_DETAIL + 10);
        let cut = bounded_detail(long.as_bytes());
        assert_eq!(cut.chars().count(), MAX_DETAIL + 1);
        assert!(cut.ends_with('…'));
    }

    #[test]
    fn paths_are_quoted_for_the_shell_git_runs_ssh_through() {
        assert_eq!(sh_quote("/a b/it's"), r"'/a b/it'\''s'");
    }

    /// A scratch directory and known_hosts of the test's own.
    struct Scratch(PathBuf);

    impl Scratch {
        fn new() -> Self {
            let p =
                std::env::temp_dir().join(format!("sa-probe-{}", uuid::Uuid::new_v4().simple()));
            std::fs::create_dir_all(&p).unwrap();
            Scratch(p)
        }

        fn probe(&self, within: Duration) -> Probe<'_> {
            Probe {
                known_hosts: Path::new(KNOWN_HOSTS),
                scratch: &self.0,
                within,
                ca_bundle: None,
            }
        }

        fn entries(&self) -> usize {
            std::fs::read_dir(&self.0).unwrap().count()
        }

        /// Processes whose command line mentions this scratch directory (ssh's `-i`).
        fn processes(&self) -> Vec<String> {
            let needle = self.0.to_string_lossy().into_owned();
            std::fs::read_dir("/proc")
                .unwrap()
                .filter_map(|e| std::fs::read(e.ok()?.path().join("cmdline")).ok())
                .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
                .filter(|c| c.contains(&needle))
                .collect()
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    const KNOWN_HOSTS: &str = "/dev/null";

    #[tokio::test]
    async fn a_closed_port_is_ok_false_with_ssh_s_words_and_the_key_directory_is_gone() {
        let scratch = Scratch::new();
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let url = format!("ssh://git@127.0.0.1:{port}/o/r");
        let t = ls_remote("not a key\n", &url, scratch.probe(TIMEOUT)).await;
        assert!(!t.ok);
        assert!(t.detail.contains("Connection refused"), "{}", t.detail);
        assert_eq!(scratch.entries(), 0, "the key's directory was left behind");
    }

    #[tokio::test]
    async fn a_probe_that_takes_too_long_is_stopped_with_its_whole_group() {
        // A listener that is never accepted from: ssh connects and waits for a banner.
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("ssh://git@127.0.0.1:{}/o/r", l.local_addr().unwrap().port());
        let scratch = Scratch::new();
        let started = std::time::Instant::now();
        let t = ls_remote("k\n", &url, scratch.probe(Duration::from_millis(500))).await;
        assert!(!t.ok && t.detail.contains("did not finish"), "{}", t.detail);
        assert!(started.elapsed() < Duration::from_secs(10));
        assert_eq!(scratch.entries(), 0, "the key's directory was left behind");
        // SIGKILL is delivered asynchronously: allow the group a moment to go.
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while !scratch.processes().is_empty() {
            assert!(
                std::time::Instant::now() < deadline,
                "still running: {:?}",
                scratch.processes()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}
