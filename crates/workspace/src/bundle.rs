//! Checking a skill bundle's archive before anything of it is stored.
//!
//! A push is a gzip-compressed or plain tar, told apart by content (the gzip magic `1f 8b`),
//! never by filename. [`inspect`] reads the **whole** archive and refuses it at the first
//! member that could not be staged into a sandbox safely, or that the sandbox's skill
//! discovery could not copy:
//!
//! - a name that is empty, absolute, not UTF-8, or has a `..` component (it would land outside
//!   the root), or a `.git` component (a nested repository);
//! - any link, symbolic or hard (a link can resolve outside the root, and the tree is copied
//!   file by file), and any device, FIFO or other special member;
//! - a member under a path that an earlier member made a regular file (it could not be
//!   unpacked);
//! - more than [`MAX_ARCHIVE_MEMBERS`] members or more than [`MAX_UNPACKED_BYTES`] of file
//!   contents (a small gzip stream can expand without bound);
//! - an archive with no regular file at all, a zip, or bytes that are not a tar.
//!
//! Validation walks the headers and reads each member's contents through (nothing is written
//! to disk), so it works on a stream from the blob store, in constant memory.

use sandbox_agents_domain::bundle::{MAX_ARCHIVE_MEMBERS, MAX_UNPACKED_BYTES};
use std::collections::{BTreeSet, HashSet};
use std::io::{BufRead, BufReader, Read};
use std::path::{Component, Path};

/// What an acceptable archive holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Inspection {
    /// Regular files.
    pub file_count: u64,
    /// Every directory holding a `SKILL.md`, relative to the root, sorted; `.` for the root.
    pub skills: Vec<String>,
    /// The sum of the regular files' sizes.
    pub unpacked_bytes: u64,
}

/// Why an archive is refused: said to the caller as it is (a 400).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Refusal(pub String);

fn refuse(msg: impl Into<String>) -> Refusal {
    Refusal(msg.into())
}

/// Reads the whole archive from `reader` and says what it holds, or why it is refused.
pub fn inspect(reader: impl Read) -> Result<Inspection, Refusal> {
    let mut reader = BufReader::with_capacity(64 * 1024, reader);
    let head = reader
        .fill_buf()
        .map_err(|e| refuse(format!("the archive could not be read: {e}")))?;
    if head.is_empty() {
        return Err(refuse(
            "the archive is empty: push a tar or tar.gz of the skills tree",
        ));
    }
    if head.starts_with(b"PK\x03\x04") || head.starts_with(b"PK\x05\x06") {
        return Err(refuse(
            "zip archives are not supported: push a tar or a gzip-compressed tar (tar.gz)",
        ));
    }
    if head.starts_with(&[0x1f, 0x8b]) {
        walk(flate2::read::GzDecoder::new(reader))
    } else {
        walk(reader)
    }
}

fn walk(reader: impl Read) -> Result<Inspection, Refusal> {
    let mut archive = tar::Archive::new(reader);
    let entries = archive.entries().map_err(not_tar)?;
    let mut members = 0u64;
    let mut files: HashSet<String> = HashSet::new();
    let mut dirs: HashSet<String> = HashSet::new();
    let mut skills = BTreeSet::new();
    let mut unpacked = 0u64;
    for entry in entries {
        let mut entry = entry.map_err(not_tar)?;
        members += 1;
        if members > MAX_ARCHIVE_MEMBERS {
            return Err(refuse(format!(
                "the archive has more than {MAX_ARCHIVE_MEMBERS} members, the most a bundle may hold"
            )));
        }
        let raw = entry.path_bytes().into_owned();
        let name = String::from_utf8(raw)
            .map_err(|e| refuse(format!("member {:?}: names must be UTF-8", e.as_bytes())))?;
        let path = normalise(&name)?;
        let kind = entry.header().entry_type();
        if kind == tar::EntryType::XGlobalHeader {
            // pax metadata for the whole archive (`git archive` writes the commit id there),
            // not a member of the tree.
            continue;
        }
        let is_dir = kind.is_dir();
        if !is_dir && !kind.is_file() {
            return Err(refuse(format!(
                "member {name:?} is {}: only regular files and directories are allowed",
                describe(kind)
            )));
        }
        let Some(path) = path else {
            // The root itself (`.` or `./`): only as a directory.
            if is_dir {
                continue;
            }
            return Err(refuse(format!("member {name:?} has no name")));
        };
        for ancestor in ancestors(&path) {
            if files.contains(ancestor) {
                return Err(refuse(format!(
                    "member {name:?} is inside {ancestor:?}, which the archive made a file"
                )));
            }
            dirs.insert(ancestor.to_owned());
        }
        if is_dir {
            if files.contains(&path) {
                return Err(refuse(format!(
                    "member {name:?} is a directory where the archive already has a file"
                )));
            }
            dirs.insert(path);
            continue;
        }
        if dirs.contains(&path) {
            return Err(refuse(format!(
                "member {name:?} is a file where the archive already has a directory"
            )));
        }
        let size = std::io::copy(&mut entry, &mut std::io::sink()).map_err(not_tar)?;
        unpacked += size;
        if unpacked > MAX_UNPACKED_BYTES {
            return Err(refuse(format!(
                "the archive's files hold more than {} MiB once unpacked, the most a bundle may hold",
                MAX_UNPACKED_BYTES / (1024 * 1024)
            )));
        }
        if file_name(&path) == "SKILL.md" {
            skills.insert(parent(&path).unwrap_or(".").to_owned());
        }
        files.insert(path);
    }
    if files.is_empty() {
        return Err(refuse(
            "the archive holds no files: push a tar or tar.gz of the skills tree",
        ));
    }
    Ok(Inspection {
        file_count: files.len() as u64,
        skills: skills.into_iter().collect(),
        unpacked_bytes: unpacked,
    })
}

/// The member's path relative to the root, `/`-separated, without `.` components; `None` for
/// the root itself. Refuses what could leave the root or holds a repository.
fn normalise(name: &str) -> Result<Option<String>, Refusal> {
    if name.is_empty() {
        return Err(refuse("a member has an empty name"));
    }
    if name.contains('\0') {
        return Err(refuse(format!("member {name:?} has a NUL in its name")));
    }
    let mut parts = Vec::new();
    for c in Path::new(name).components() {
        match c {
            Component::Normal(p) => {
                let p = p.to_str().expect("the name is UTF-8");
                if p == ".git" {
                    return Err(refuse(format!(
                        "member {name:?} is inside a .git directory: nested repositories are not allowed"
                    )));
                }
                parts.push(p);
            }
            Component::CurDir => {}
            Component::ParentDir => {
                return Err(refuse(format!(
                    "member {name:?} has a '..' component: nothing may leave the bundle's root"
                )))
            }
            Component::RootDir | Component::Prefix(_) => {
                return Err(refuse(format!(
                "member {name:?} is an absolute path: names must be relative to the bundle's root"
            )))
            }
        }
    }
    Ok((!parts.is_empty()).then(|| parts.join("/")))
}

fn ancestors(path: &str) -> impl Iterator<Item = &str> {
    path.match_indices('/').map(move |(i, _)| &path[..i])
}

fn parent(path: &str) -> Option<&str> {
    path.rfind('/').map(|i| &path[..i])
}

fn file_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

fn describe(kind: tar::EntryType) -> &'static str {
    match kind {
        tar::EntryType::Symlink => "a symbolic link",
        tar::EntryType::Link => "a hard link",
        tar::EntryType::Char => "a character device",
        tar::EntryType::Block => "a block device",
        tar::EntryType::Fifo => "a FIFO",
        tar::EntryType::GNUSparse => "a sparse file",
        _ => "a special member",
    }
}

fn not_tar(e: std::io::Error) -> Refusal {
    refuse(format!(
        "the upload is not a readable tar or tar.gz archive: {e}"
    ))
}

#[cfg(test)]
#[path = "bundle_tests.rs"]
mod tests;
