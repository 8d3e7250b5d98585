//! Finding the system's PostgreSQL server binaries.

use anyhow::{anyhow, bail};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;

/// Where the Debian/Ubuntu packages install each major version's server binaries.
const VERSIONED_ROOT: &str = "/usr/lib/postgresql";

const NOT_FOUND: &str = "PostgreSQL server binaries (initdb, pg_ctl) were not found on PATH or \
     under /usr/lib/postgresql/*/bin; install them with `apt-get install -y postgresql` or set \
     DATABASE_URL to use an existing server.";

/// The two programs the embedded cluster is driven with. `pg_ctl` and `initdb` find the
/// `postgres` server next to their own (symlink-resolved) location, so both always come from
/// one directory: mixing major versions would create a cluster the server cannot start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PgBinaries {
    pub initdb: PathBuf,
    pub pg_ctl: PathBuf,
}

/// The binaries a new cluster is created with: the first directory on `PATH` that holds both
/// `initdb` and `pg_ctl`, else the highest major version under `/usr/lib/postgresql/*/bin`
/// (Debian keeps the server binaries off `PATH`).
pub fn find_binaries() -> anyhow::Result<PgBinaries> {
    candidates()
        .into_iter()
        .next()
        .ok_or_else(|| anyhow!(NOT_FOUND))
}

/// The binaries for an existing cluster, which only the major version that created it can run
/// (`data/PG_VERSION`). Candidates are tried in [`find_binaries`] order, so with several
/// versions installed an upgrade of the default does not strand an existing cluster.
pub(super) async fn find_for_major(major: &str, data_dir: &Path) -> anyhow::Result<PgBinaries> {
    let mut found = Vec::new();
    for candidate in candidates() {
        match major_version(&candidate.pg_ctl).await {
            Some(version) if version == major => return Ok(candidate),
            Some(version) if !found.contains(&version) => found.push(version),
            _ => {}
        }
    }
    if found.is_empty() {
        bail!(NOT_FOUND);
    }
    bail!(
        "the embedded PostgreSQL cluster in {} was created by PostgreSQL {major}, but only \
         PostgreSQL {} server binaries were found; install PostgreSQL {major} (e.g. `apt-get \
         install -y postgresql-{major}`), or move that directory aside to start with an empty \
         cluster.",
        data_dir.display(),
        found.join(", ")
    )
}

/// An executable named `name` in a directory on `PATH`.
pub(super) fn find_on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| is_executable(candidate))
}

/// Every usable pair, best first: `PATH` directories in order, then the versioned directories
/// from the highest major version down.
fn candidates() -> Vec<PgBinaries> {
    let mut out: Vec<PgBinaries> = Vec::new();
    if let Some(path) = std::env::var_os("PATH") {
        out.extend(std::env::split_paths(&path).filter_map(|dir| in_dir(&dir)));
    }
    out.extend(
        versioned_dirs(Path::new(VERSIONED_ROOT))
            .iter()
            .filter_map(|dir| in_dir(dir)),
    );
    out
}

fn in_dir(dir: &Path) -> Option<PgBinaries> {
    let binaries = PgBinaries {
        initdb: dir.join("initdb"),
        pg_ctl: dir.join("pg_ctl"),
    };
    (is_executable(&binaries.initdb) && is_executable(&binaries.pg_ctl)).then_some(binaries)
}

/// `<root>/<version>/bin` for every version-named entry of `root`, highest version first.
fn versioned_dirs(root: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(root) else {
        return Vec::new();
    };
    let mut versions: Vec<(Vec<u32>, PathBuf)> = entries
        .filter_map(|entry| entry.ok())
        .filter_map(|entry| {
            let name = entry.file_name().into_string().ok()?;
            let version = name
                .split('.')
                .map(|part| part.parse().ok())
                .collect::<Option<Vec<u32>>>()?;
            Some((version, entry.path().join("bin")))
        })
        .collect();
    versions.sort_by(|a, b| b.0.cmp(&a.0));
    versions.into_iter().map(|(_, dir)| dir).collect()
}

fn is_executable(path: &Path) -> bool {
    std::fs::metadata(path)
        .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
}

/// The major version a `pg_ctl` belongs to, spelled as in `PG_VERSION` ("15", "9.6").
async fn major_version(pg_ctl: &Path) -> Option<String> {
    let output = tokio::process::Command::new(pg_ctl)
        .arg("--version")
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .await
        .ok()?;
    if !output.status.success() {
        return None;
    }
    parse_major(&String::from_utf8_lossy(&output.stdout))
}

/// The major version in `pg_ctl --version` output such as
/// "pg_ctl (PostgreSQL) 15.13 (Debian 15.13-0+deb12u1)" or "pg_ctl (PostgreSQL) 16beta1".
pub(super) fn parse_major(version_output: &str) -> Option<String> {
    let version = version_output
        .split_whitespace()
        .find(|token| token.starts_with(|c: char| c.is_ascii_digit()))?;
    let mut parts = version.split('.').map(|part| {
        let digits: String = part.chars().take_while(char::is_ascii_digit).collect();
        digits.parse::<u32>().ok()
    });
    let first = parts.next()??;
    // Before 10 the major version had two parts (9.6); since 10 it is one number.
    if first >= 10 {
        Some(first.to_string())
    } else {
        Some(format!("{first}.{}", parts.next()??))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn major_versions_are_spelled_like_pg_version() {
        assert_eq!(
            parse_major("pg_ctl (PostgreSQL) 15.13 (Debian 15.13-0+deb12u1)\n").as_deref(),
            Some("15")
        );
        assert_eq!(
            parse_major("pg_ctl (PostgreSQL) 16beta1").as_deref(),
            Some("16")
        );
        assert_eq!(
            parse_major("pg_ctl (PostgreSQL) 9.6.24").as_deref(),
            Some("9.6")
        );
        assert_eq!(parse_major("pg_ctl (PostgreSQL)"), None);
    }

    #[test]
    fn versioned_dirs_are_ordered_highest_first_and_skip_other_names() {
        let root = std::env::temp_dir().join(format!("sa-pgbin-{}", uuid::Uuid::new_v4().simple()));
        for name in ["9.6", "15", "13", "16", "common", "16.x"] {
            std::fs::create_dir_all(root.join(name).join("bin")).unwrap();
        }
        let dirs = versioned_dirs(&root);
        std::fs::remove_dir_all(&root).unwrap();
        let names: Vec<_> = dirs
            .iter()
            .map(|dir| {
                dir.parent()
                    .unwrap()
                    .file_name()
                    .unwrap()
                    .to_string_lossy()
                    .into_owned()
            })
            .collect();
        assert_eq!(names, ["16", "15", "13", "9.6"]);
    }
}
