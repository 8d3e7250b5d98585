//! Reading workspaces from tar archives (blocking): a stopped session's workspace archive,
//! listed or scanned for one file, and the one-file archive a running sandbox answers a read
//! with. Links in an archive are never followed.

use crate::listing::ls_permissions;
use crate::paths::{escapes, is_dir, missing, shown, Op};
use crate::stream::Sink;
use sandbox_agents_domain::session::WorkspaceEntry;
use sandbox_agents_errors::{Result, ServiceError};
use sandbox_agents_sandbox::path::WorkspacePath;
use std::collections::{BTreeMap, HashMap};
use std::io::Read;
use tar::EntryType;

/// An archive entry's name as workspace-relative components joined by `/`; `None` for
/// entries outside `workspace/` (or climbing with `..`). `""` is the workspace itself.
pub(crate) fn workspace_name(raw: &[u8]) -> Option<String> {
    let raw = String::from_utf8_lossy(raw);
    let mut parts = raw.split('/').filter(|c| !c.is_empty() && *c != ".");
    if parts.next()? != "workspace" {
        return None;
    }
    let rest: Vec<&str> = parts.collect();
    if rest.contains(&"..") {
        return None;
    }
    Some(rest.join("/"))
}

/// Is `a` a proper ancestor of `b` (both workspace-relative, `""` = the root)?
pub fn is_ancestor(a: &str, b: &str) -> bool {
    if a.is_empty() {
        !b.is_empty()
    } else {
        b.len() > a.len() && b.starts_with(a) && b.as_bytes()[a.len()] == b'/'
    }
}

fn parent_of(name: &str) -> &str {
    name.rsplit_once('/').map_or("", |(p, _)| p)
}

fn tar_io(e: std::io::Error) -> ServiceError {
    ServiceError::Internal(anyhow::anyhow!("reading the workspace archive: {e}"))
}

/// The owner or group an archive header names: its name, else the sandbox user's for 1000.
fn tar_owner(name: Option<&[u8]>, id: Option<u64>) -> String {
    match (name.filter(|n| !n.is_empty()), id) {
        (Some(n), _) => String::from_utf8_lossy(n).into_owned(),
        (None, Some(1000)) => "sandbox".into(),
        (None, Some(0)) => "root".into(),
        (None, Some(id)) => id.to_string(),
        (None, None) => String::new(),
    }
}

/// One entry of an archived workspace, as listed.
fn tar_entry<R: Read>(
    path: String,
    e: &tar::Entry<'_, R>,
    sizes: &HashMap<String, u64>,
) -> WorkspaceEntry {
    let h = e.header();
    let mode = h.mode().unwrap_or(0);
    let (kind, letter, size) = match h.entry_type() {
        EntryType::Directory => ("directory", 'd', 0),
        EntryType::Regular | EntryType::Continuous | EntryType::GNUSparse => {
            ("file", '-', e.size())
        }
        EntryType::Link => {
            // A hard link: its data is the earlier entry's it names.
            let target = e
                .link_name_bytes()
                .and_then(|l| workspace_name(&l))
                .and_then(|t| sizes.get(&t).copied())
                .unwrap_or(0);
            ("file", '-', target)
        }
        EntryType::Symlink => (
            "symlink",
            'l',
            e.link_name_bytes().map_or(0, |l| l.len() as u64),
        ),
        EntryType::Fifo => ("other", 'p', 0),
        EntryType::Char => ("other", 'c', 0),
        EntryType::Block => ("other", 'b', 0),
        _ => ("other", '?', 0),
    };
    WorkspaceEntry {
        path: if path.is_empty() { ".".into() } else { path },
        kind: kind.into(),
        size: i64::try_from(size).unwrap_or(i64::MAX),
        permissions: ls_permissions(letter, mode),
        owner: tar_owner(h.username_bytes(), h.uid().ok()),
        group: tar_owner(h.groupname_bytes(), h.gid().ok()),
    }
}

/// Lists `rel` from an archived workspace (blocking): the directory's entries, or the one
/// entry (a link is listed as itself, never followed).
pub fn list_archive<R: Read>(reader: R, p: &WorkspacePath) -> Result<Vec<WorkspaceEntry>> {
    let rel = p.relative();
    let mut this: Option<WorkspaceEntry> = None;
    let mut children: BTreeMap<String, WorkspaceEntry> = BTreeMap::new();
    let mut has_descendants = false;
    let mut sizes: HashMap<String, u64> = HashMap::new();
    let mut archive = tar::Archive::new(reader);
    for entry in archive.entries().map_err(tar_io)? {
        let entry = entry.map_err(tar_io)?;
        let Some(name) = workspace_name(&entry.path_bytes()) else {
            continue;
        };
        let kind = entry.header().entry_type();
        if kind.is_file() {
            sizes.insert(name.clone(), entry.size());
        }
        if kind.is_symlink() && is_ancestor(&name, rel) {
            return Err(escapes(p));
        }
        if name == rel {
            this = Some(tar_entry(name, &entry, &sizes));
        } else if is_ancestor(rel, &name) {
            has_descendants = true;
            if parent_of(&name) == rel {
                let e = tar_entry(name.clone(), &entry, &sizes);
                children.insert(name, e);
            }
        }
    }
    match this {
        Some(e) if e.kind != "directory" => Ok(vec![e]),
        None if !has_descendants => Err(missing(p)),
        _ => Ok(children.into_values().collect()),
    }
}

/// What scanning an archive for the wanted entry ended with.
pub enum Scan {
    /// The entry was found and sent (or the reason it cannot be, reported).
    Done,
    /// The entry is a hard link to this (workspace-relative) name.
    Follow(String),
    /// No such entry; `true` when entries below it exist (an implicit directory).
    Missing(bool),
}

/// Looks for `want` in an archived workspace and streams it to `sink` (blocking).
pub fn scan_archive<R: Read>(reader: R, want: &str, p: &WorkspacePath, sink: &mut Sink) -> Scan {
    let mut archive = tar::Archive::new(reader);
    let mut below = false;
    let entries = match archive.entries() {
        Ok(e) => e,
        Err(e) => {
            sink.fail(tar_io(e));
            return Scan::Done;
        }
    };
    for entry in entries {
        let mut entry = match entry {
            Ok(e) => e,
            Err(e) => {
                sink.fail(tar_io(e));
                return Scan::Done;
            }
        };
        let Some(name) = workspace_name(&entry.path_bytes()) else {
            continue;
        };
        let kind = entry.header().entry_type();
        if kind.is_symlink() && is_ancestor(&name, want) {
            sink.fail(escapes(p));
            return Scan::Done;
        }
        if is_ancestor(want, &name) {
            below = true;
        }
        if name != want {
            continue;
        }
        match kind {
            EntryType::Regular | EntryType::Continuous | EntryType::GNUSparse => {
                let size = entry.size();
                sink.send(size, &mut entry);
            }
            EntryType::Directory => sink.fail(is_dir(p, Op::Read)),
            EntryType::Symlink => sink.fail(ServiceError::BadRequest(format!(
                "'{}' is a symbolic link; links are not followed in a stopped session's workspace",
                shown(p)
            ))),
            EntryType::Link => match entry.link_name_bytes().and_then(|l| workspace_name(&l)) {
                Some(target) => return Scan::Follow(target),
                None => sink.fail(ServiceError::BadRequest(format!(
                    "'{}' is a link to outside the workspace",
                    shown(p)
                ))),
            },
            _ => sink.fail(ServiceError::BadRequest(format!(
                "'{}' is not a regular file",
                shown(p)
            ))),
        }
        return Scan::Done;
    }
    Scan::Missing(below)
}

/// Streams the single regular file of a sandbox's `get_archive` answer (blocking).
pub fn scan_single<R: Read>(reader: R, p: &WorkspacePath, sink: &mut Sink) {
    let mut archive = tar::Archive::new(reader);
    let entries = match archive.entries() {
        Ok(e) => e,
        Err(e) => return sink.fail(tar_io(e)),
    };
    // The archive of one file has exactly one entry.
    if let Some(entry) = entries.into_iter().next() {
        let mut entry = match entry {
            Ok(e) => e,
            Err(e) => return sink.fail(tar_io(e)),
        };
        match entry.header().entry_type() {
            EntryType::Regular | EntryType::Continuous | EntryType::GNUSparse => {
                let size = entry.size();
                return sink.send(size, &mut entry);
            }
            EntryType::Directory => return sink.fail(is_dir(p, Op::Read)),
            _ => {
                return sink.fail(ServiceError::BadRequest(format!(
                    "'{}' is not a regular file",
                    shown(p)
                )))
            }
        }
    }
    sink.fail(missing(p))
}

#[cfg(test)]
mod tests {
    use super::*;
    use sandbox_agents_sandbox::SandboxError;

    fn archive() -> Vec<u8> {
        let mut b = tar::Builder::new(Vec::new());
        let dir = |b: &mut tar::Builder<Vec<u8>>, name: &str| {
            let mut h = tar::Header::new_gnu();
            h.set_entry_type(EntryType::Directory);
            h.set_mode(0o755);
            h.set_uid(1000);
            h.set_size(0);
            b.append_data(&mut h, name, std::io::empty()).unwrap();
        };
        dir(&mut b, "workspace/");
        dir(&mut b, "workspace/out/");
        let mut h = tar::Header::new_gnu();
        h.set_mode(0o644);
        h.set_uid(1000);
        h.set_size(5);
        let long = format!("workspace/out/{}.md", "x".repeat(120));
        b.append_data(&mut h, &long, &b"hello"[..]).unwrap();
        let mut h = tar::Header::new_gnu();
        h.set_mode(0o644);
        h.set_size(2);
        h.set_username("alice").unwrap();
        b.append_data(&mut h, "workspace/a.txt", &b"hi"[..])
            .unwrap();
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(EntryType::Symlink);
        h.set_size(0);
        b.append_link(&mut h, "workspace/etc", "/etc").unwrap();
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(EntryType::Link);
        h.set_size(0);
        b.append_link(&mut h, "workspace/hard", "workspace/a.txt")
            .unwrap();
        b.into_inner().unwrap()
    }

    #[test]
    fn archived_workspaces_are_listed_without_following_links() {
        let tar = archive();
        let root = list_archive(&tar[..], &WorkspacePath::parse(".").unwrap()).unwrap();
        let paths: Vec<_> = root.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(paths, ["a.txt", "etc", "hard", "out"]);
        assert_eq!(root[0].owner, "alice");
        assert_eq!(root[1].kind, "symlink");
        assert_eq!((root[2].kind.as_str(), root[2].size), ("file", 2));
        assert_eq!(root[3].permissions, "drwxr-xr-x");
        let out = list_archive(&tar[..], &WorkspacePath::parse("out").unwrap()).unwrap();
        assert_eq!(
            (out.len(), out[0].owner.as_str(), out[0].size),
            (1, "sandbox", 5)
        );
        let one = list_archive(&tar[..], &WorkspacePath::parse("a.txt").unwrap()).unwrap();
        assert_eq!(one[0].path, "a.txt");
        let e = list_archive(&tar[..], &WorkspacePath::parse("etc/passwd").unwrap()).unwrap_err();
        assert!(matches!(e, ServiceError::BadRequest(_)), "{e}");
        let e = list_archive(&tar[..], &WorkspacePath::parse("nope").unwrap()).unwrap_err();
        assert!(matches!(
            e,
            ServiceError::Sandbox(SandboxError::NoSuchPath(_))
        ));
    }
}
