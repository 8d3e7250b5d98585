//! Telling a running postmaster of this cluster from the leftovers of one that died.
//!
//! A postmaster records its PID in `data/postmaster.pid` and in `run/.s.PGSQL.<port>.lock`,
//! and refuses to start while those name a live process. After a crash or a reboot the PID may
//! have been reused by an unrelated process, and PostgreSQL (which only checks that the PID is
//! alive) would then refuse to start forever. So a PID counts as this cluster's postmaster only if
//! the process runs a `postgres` executable whose working directory is this data directory
//! (the postmaster chdirs there); anything else is stale and removed. Conversely a live
//! postmaster of this cluster is adopted rather than replaced, since it survived a crash of the
//! server and two postmasters on one data directory would corrupt it.

use anyhow::{bail, Context};
use std::io::ErrorKind;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// What `data/postmaster.pid` says.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum PidFile {
    /// No pid file: the cluster was shut down cleanly (or never started).
    Missing,
    /// This cluster's postmaster is running with this PID.
    Running(u32),
    /// Left behind by a postmaster that is gone; the reason is for the log.
    Stale(String),
}

/// Reads `data/postmaster.pid` and decides whether it names this cluster's live postmaster.
pub(super) fn inspect(data_dir: &Path) -> anyhow::Result<PidFile> {
    let path = data_dir.join("postmaster.pid");
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(PidFile::Missing),
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };
    let Some(pid) = first_line_pid(&text) else {
        return Ok(PidFile::Stale("it does not start with a process id".into()));
    };
    Ok(match identify(pid, data_dir)? {
        None => PidFile::Running(pid),
        Some(reason) => PidFile::Stale(reason),
    })
}

/// Removes what a dead postmaster left behind: `postmaster.pid` (when `remove_pid_file`) and the
/// socket lock files in `socket_dir` whose PID is not a live postmaster of this cluster, with
/// their sockets. Never touches anything of a live postmaster.
pub(super) fn clear_stale_files(
    data_dir: &Path,
    socket_dir: &Path,
    remove_pid_file: bool,
) -> anyhow::Result<()> {
    if remove_pid_file {
        remove_if_exists(&data_dir.join("postmaster.pid"))?;
    }
    let entries = match std::fs::read_dir(socket_dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e).with_context(|| format!("listing {}", socket_dir.display())),
    };
    for entry in entries {
        let entry = entry.with_context(|| format!("listing {}", socket_dir.display()))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(socket_name) = name
            .strip_prefix(".s.PGSQL.")
            .and_then(|rest| rest.strip_suffix(".lock"))
        else {
            continue;
        };
        let lock = entry.path();
        let pid = std::fs::read_to_string(&lock)
            .ok()
            .and_then(|text| first_line_pid(&text));
        if let Some(pid) = pid {
            if identify(pid, data_dir)?.is_none() {
                bail!(
                    "a postmaster of the embedded cluster (pid {pid}) still serves {} although \
                     data/postmaster.pid is missing; stop it (`kill -INT {pid}`) and start again.",
                    socket_dir.display()
                );
            }
        }
        remove_if_exists(&lock)?;
        remove_if_exists(&socket_dir.join(format!(".s.PGSQL.{socket_name}")))?;
        tracing::debug!(lock = %lock.display(), "removed a stale socket lock file");
    }
    Ok(())
}

/// The PID on the first line of a postmaster pid or socket lock file.
pub(super) fn first_line_pid(text: &str) -> Option<u32> {
    text.lines()
        .next()?
        .trim()
        .parse()
        .ok()
        .filter(|pid| *pid > 0)
}

/// `None` when `pid` is a live postmaster of the cluster in `data_dir`, else why it is not.
fn identify(pid: u32, data_dir: &Path) -> anyhow::Result<Option<String>> {
    let proc_dir = PathBuf::from(format!("/proc/{pid}"));
    let process = match std::fs::metadata(&proc_dir) {
        Ok(meta) => meta,
        Err(e) if e.kind() == ErrorKind::NotFound => {
            return Ok(Some(format!("process {pid} is not running")))
        }
        Err(e) => return Err(e).with_context(|| format!("inspecting {}", proc_dir.display())),
    };
    // PostgreSQL only runs as the owner of its data directory. Checking that first also avoids
    // asking about other users' processes, whose /proc entries we may not read.
    let owner = std::fs::metadata(data_dir)
        .with_context(|| format!("inspecting {}", data_dir.display()))?
        .uid();
    if process.uid() != owner {
        return Ok(Some(format!(
            "process {pid} belongs to uid {}, not to the cluster's owner",
            process.uid()
        )));
    }
    let gone = || Ok(Some(format!("process {pid} has exited")));
    let exe = match std::fs::read_link(proc_dir.join("exe")) {
        Ok(exe) => exe,
        Err(e) if e.kind() == ErrorKind::NotFound => return gone(),
        Err(e) => {
            return Err(e).with_context(|| {
                format!("checking whether process {pid} is the embedded postmaster")
            })
        }
    };
    // "starts with": an upgraded package shows the running binary as "postgres (deleted)".
    if !exe
        .file_name()
        .is_some_and(|name| name.to_string_lossy().starts_with("postgres"))
    {
        return Ok(Some(format!(
            "process {pid} runs {}, not postgres",
            exe.display()
        )));
    }
    let cwd = match std::fs::canonicalize(proc_dir.join("cwd")) {
        Ok(cwd) => cwd,
        Err(e) if e.kind() == ErrorKind::NotFound => return gone(),
        Err(e) => {
            return Err(e).with_context(|| {
                format!("checking whether process {pid} is the embedded postmaster")
            })
        }
    };
    let data_dir = data_dir
        .canonicalize()
        .with_context(|| format!("resolving {}", data_dir.display()))?;
    if cwd != data_dir {
        return Ok(Some(format!(
            "process {pid} is a postgres serving {}",
            cwd.display()
        )));
    }
    Ok(None)
}

fn remove_if_exists(path: &Path) -> anyhow::Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != ErrorKind::NotFound => {
            Err(e).with_context(|| format!("removing {}", path.display()))
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_pid_from_the_first_line() {
        assert_eq!(
            first_line_pid("4242\n/var/lib/data\n1700000000\n5432\n"),
            Some(4242)
        );
        assert_eq!(first_line_pid(""), None);
        assert_eq!(first_line_pid("0\n"), None);
        assert_eq!(first_line_pid("garbage\n"), None);
    }

    #[test]
    fn a_live_process_that_is_not_postgres_is_not_a_postmaster() {
        let dir = std::env::temp_dir();
        let reason = identify(std::process::id(), &dir).unwrap();
        assert!(
            reason.is_some(),
            "the test process must not pass for a postmaster"
        );
    }
}
