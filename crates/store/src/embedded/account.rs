//! The OS user the cluster runs as, and making sure that user can reach its directory.
//!
//! `initdb` and `postgres` refuse to run as root (a compromised server process must not own the
//! machine), yet servers and CI often run as root. Then the cluster runs as an unprivileged
//! system user: `postgres` when it exists (Debian's postgresql package creates it), otherwise
//! [`FALLBACK_USER`], created on demand. When the server is not root the cluster simply runs as
//! the server's own user and nothing here changes anything.
//!
//! Children are spawned with `Command::uid`/`gid`. As root, std then also clears the supplementary
//! groups, so the cluster's credentials are exactly (uid, primary gid): permission checks here
//! consider that primary group only, which is what the kernel will check for the cluster too.

use anyhow::{bail, Context};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::Stdio;
use tokio::process::Command;

/// The system user created when running as root on a machine without a `postgres` user.
pub(super) const FALLBACK_USER: &str = "sandbox-agents-pg";

/// An unprivileged user the cluster's processes run as (only when the server is root).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct RunAs {
    pub(super) name: String,
    pub(super) uid: u32,
    pub(super) gid: u32,
}

impl RunAs {
    /// Makes `command` run as this user.
    pub(super) fn apply(&self, command: &mut Command) {
        command.uid(self.uid).gid(self.gid);
    }
}

/// `None` when the server is not root (the cluster runs as the server's user), else the user
/// to run it as, creating [`FALLBACK_USER`] if neither it nor `postgres` exists.
pub(super) async fn service_account() -> anyhow::Result<Option<RunAs>> {
    let status =
        std::fs::read_to_string("/proc/self/status").context("reading /proc/self/status")?;
    let euid = parse_euid(&status).context("no effective uid in /proc/self/status")?;
    if euid != 0 {
        return Ok(None);
    }
    for name in ["postgres", FALLBACK_USER] {
        if let Some(user) = lookup_user(name).await? {
            if user.uid == 0 {
                bail!("the system user `{name}` has uid 0, but PostgreSQL refuses to run as root; give it an unprivileged uid or set DATABASE_URL.");
            }
            return Ok(Some(user));
        }
    }
    create_system_user(FALLBACK_USER).await?;
    lookup_user(FALLBACK_USER)
        .await?
        .with_context(|| {
            format!("the system user {FALLBACK_USER} was created but cannot be looked up")
        })
        .map(Some)
}

/// The effective uid from `/proc/self/status` ("Uid:\treal\teffective\tsaved\tfs").
fn parse_euid(status: &str) -> Option<u32> {
    let line = status.lines().find(|line| line.starts_with("Uid:"))?;
    line.split_whitespace().nth(2)?.parse().ok()
}

/// A user from `/etc/passwd`, else from `getent passwd` (users from LDAP, sssd, ...).
async fn lookup_user(name: &str) -> anyhow::Result<Option<RunAs>> {
    match std::fs::read_to_string("/etc/passwd") {
        Ok(passwd) => {
            if let Some(user) = passwd
                .lines()
                .find_map(|line| parse_passwd_line(line, name))
            {
                return Ok(Some(user));
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e).context("reading /etc/passwd"),
    }
    let output = Command::new("getent")
        .args(["passwd", name])
        .stdin(Stdio::null())
        .output()
        .await;
    Ok(match output {
        Ok(output) if output.status.success() => String::from_utf8_lossy(&output.stdout)
            .lines()
            .find_map(|line| parse_passwd_line(line, name)),
        _ => None,
    })
}

/// `name:password:uid:gid:gecos:home:shell`, if the line is `name`'s.
fn parse_passwd_line(line: &str, name: &str) -> Option<RunAs> {
    let mut fields = line.split(':');
    if fields.next()? != name {
        return None;
    }
    let uid = fields.nth(1)?.parse().ok()?;
    let gid = fields.next()?.parse().ok()?;
    Some(RunAs {
        name: name.to_owned(),
        uid,
        gid,
    })
}

async fn create_system_user(name: &str) -> anyhow::Result<()> {
    // useradd refuses `--user-group` when a group of that name already exists.
    let group_exists = std::fs::read_to_string("/etc/group").is_ok_and(|groups| {
        groups
            .lines()
            .any(|line| line.split(':').next() == Some(name))
    });
    let group_args: &[&str] = if group_exists {
        &["--gid", name]
    } else {
        &["--user-group"]
    };
    let output = Command::new("useradd")
        .args([
            "--system",
            "--no-create-home",
            "--shell",
            "/usr/sbin/nologin",
        ])
        .args(group_args)
        .arg(name)
        .stdin(Stdio::null())
        .output()
        .await;
    let output = match output {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => bail!(
            "the server runs as root and PostgreSQL refuses to, but there is no `postgres` user and \
             no `useradd` to create `{name}`; create one of these system users, run the server as \
             a non-root user, or set DATABASE_URL."
        ),
        result => result.context("running useradd")?,
    };
    if !output.status.success() {
        // Another server starting at the same time may have created it first.
        if lookup_user(name).await?.is_some() {
            return Ok(());
        }
        bail!(
            "creating the system user `{name}` (to run the embedded PostgreSQL, which refuses to run \
             as root) failed: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    tracing::info!(
        user = name,
        "created a system user to run the embedded PostgreSQL (it refuses to run as root)"
    );
    Ok(())
}

/// Gives `user` every file under `root` (not following symlinks), skipping what it already owns.
pub(super) fn chown_tree(root: &Path, user: &RunAs) -> std::io::Result<()> {
    let mut pending = vec![root.to_path_buf()];
    while let Some(path) = pending.pop() {
        let meta = std::fs::symlink_metadata(&path)?;
        if meta.uid() != user.uid || meta.gid() != user.gid {
            std::os::unix::fs::lchown(&path, Some(user.uid), Some(user.gid))?;
        }
        if meta.is_dir() {
            for entry in std::fs::read_dir(&path)? {
                pending.push(entry?.path());
            }
        }
    }
    Ok(())
}

/// Makes every ancestor of `dir` searchable (x) by `user`, so the cluster can reach its files.
///
/// The classic case is a checkout under `/root` (mode 0700): root can use it, `postgres` cannot
/// even reach the data directory inside it. Only search permission is granted, never read: the
/// user can then open paths it already knows inside those directories but cannot list them.
/// Each change is logged as a warning because it loosens permissions outside our own directory.
pub(super) async fn ensure_search_access(dir: &Path, user: &RunAs) -> anyhow::Result<()> {
    let mut ancestors: Vec<&Path> = dir.ancestors().skip(1).collect();
    ancestors.reverse();
    // Top down: a directory can only be probed once its parents are searchable.
    for ancestor in ancestors {
        let meta = std::fs::metadata(ancestor)
            .with_context(|| format!("inspecting {}", ancestor.display()))?;
        if meta.mode() & class_bit(&meta, user) != 0 || can_search(ancestor, user).await? {
            // The second test catches access granted by an ACL, which the mode bits do not show.
            continue;
        }
        grant_search(ancestor, &meta, user).await?;
        if !can_search(ancestor, user).await? {
            bail!(
                "the embedded PostgreSQL runs as user `{}`, which cannot reach {} because it may not \
                 search {}, and granting that failed; choose a --data-dir outside it or set DATABASE_URL.",
                user.name,
                dir.display(),
                ancestor.display()
            );
        }
    }
    Ok(())
}

/// The search bit of the permission class the kernel applies to `user` for this file.
fn class_bit(meta: &std::fs::Metadata, user: &RunAs) -> u32 {
    if meta.uid() == user.uid {
        0o100
    } else if meta.gid() == user.gid {
        0o010
    } else {
        0o001
    }
}

/// Whether `user` may search `dir`, asked of the kernel by a process running as that user.
async fn can_search(dir: &Path, user: &RunAs) -> anyhow::Result<bool> {
    let mut command = Command::new("/bin/sh");
    command
        .args(["-c", "test -x \"$1\"", "sh"])
        .arg(dir)
        .current_dir("/");
    command
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    user.apply(&mut command);
    let status = command
        .status()
        .await
        .context("running /bin/sh to check directory permissions")?;
    Ok(status.success())
}

/// Grants `user` search permission on `dir`: an ACL entry for just that user when `setfacl` is
/// available (and the user is not the owner), else the x bit of the class that applies to it
/// (for most directories "other", as in `chmod o+x`).
async fn grant_search(dir: &Path, meta: &std::fs::Metadata, user: &RunAs) -> anyhow::Result<()> {
    let bit = class_bit(meta, user);
    if bit != 0o100 && super::binaries::find_on_path("setfacl").is_some() {
        let spec = format!("u:{}:x", user.name);
        let output = Command::new("setfacl")
            .arg("-m")
            .arg(&spec)
            .arg(dir)
            .stdin(Stdio::null())
            .output()
            .await;
        match output {
            Ok(output) if output.status.success() => {
                tracing::warn!(
                    directory = %dir.display(),
                    user = %user.name,
                    "granted search (x) permission with `setfacl -m {spec}` so the embedded PostgreSQL can reach its data directory"
                );
                return Ok(());
            }
            // E.g. a file system without ACL support: fall back to the mode bits.
            Ok(output) => {
                tracing::debug!(stderr = %String::from_utf8_lossy(&output.stderr).trim(), "setfacl failed")
            }
            Err(e) => tracing::debug!(error = %e, "running setfacl failed"),
        }
    }
    let class = match bit {
        0o100 => "u",
        0o010 => "g",
        _ => "o",
    };
    std::fs::set_permissions(
        dir,
        std::fs::Permissions::from_mode(meta.mode() & 0o7777 | bit),
    )
    .with_context(|| {
        format!(
            "granting search permission on {} (chmod {class}+x)",
            dir.display()
        )
    })?;
    tracing::warn!(
        directory = %dir.display(),
        user = %user.name,
        "granted search (x) permission with `chmod {class}+x` so the embedded PostgreSQL can reach its data directory"
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_effective_uid() {
        let status = "Name:\tx\nUmask:\t0022\nUid:\t1000\t0\t0\t0\nGid:\t5\t5\t5\t5\n";
        assert_eq!(parse_euid(status), Some(0));
    }

    #[test]
    fn parses_passwd_lines() {
        let line = "postgres:x:101:104:PostgreSQL administrator,,,:/var/lib/postgresql:/bin/bash";
        assert_eq!(
            parse_passwd_line(line, "postgres"),
            Some(RunAs {
                name: "postgres".into(),
                uid: 101,
                gid: 104
            })
        );
        assert_eq!(parse_passwd_line(line, "post"), None);
        assert_eq!(
            parse_passwd_line("postgres:x:oops:104::/:/bin/sh", "postgres"),
            None
        );
    }
}
