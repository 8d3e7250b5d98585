//! A sandbox's filesystem as a map of absolute, normalised paths to entries.
//!
//! Invariant: every entry's parent is a directory entry (the root `/` always exists), so a
//! directory's children are exactly the keys under `dir/` with no further `/`. Paths are
//! normalised before they reach the map (no `.`, no `..`, no trailing or doubled `/`);
//! symbolic links are stored but never followed.

use bytes::Bytes;
use std::collections::BTreeMap;

/// The sandbox user (the image's `sandbox`, uid and gid), as on Docker.
pub(crate) const SANDBOX_UID: u64 = 1000;

/// A device node the base image has; reads of the endless ones are bounded by the reader.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Device {
    Null,
    Zero,
    Urandom,
}

#[derive(Clone, Debug)]
pub(crate) enum Kind {
    Dir,
    File(Bytes),
    Symlink(String),
    Device(Device),
}

#[derive(Clone, Debug)]
pub(crate) struct Entry {
    pub kind: Kind,
    pub mode: u32,
    pub uid: u64,
    pub gid: u64,
    /// Unchanged since the sandbox was created from its image: not counted as written.
    pub from_image: bool,
}

impl Entry {
    pub fn dir(uid: u64, mode: u32) -> Entry {
        Entry {
            kind: Kind::Dir,
            mode,
            uid,
            gid: uid,
            from_image: false,
        }
    }

    pub fn file(data: Bytes, uid: u64, mode: u32) -> Entry {
        Entry {
            kind: Kind::File(data),
            mode,
            uid,
            gid: uid,
            from_image: false,
        }
    }

    pub fn is_dir(&self) -> bool {
        matches!(self.kind, Kind::Dir)
    }

    pub fn size(&self) -> u64 {
        match &self.kind {
            Kind::File(data) => data.len() as u64,
            Kind::Symlink(target) => target.len() as u64,
            Kind::Dir | Kind::Device(_) => 0,
        }
    }
}

/// Why an operation failed, in the words coreutils use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FsError {
    NotFound,
    NotADirectory,
    IsADirectory,
    Exists,
    NotEmpty,
    PermissionDenied,
}

impl std::fmt::Display for FsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            FsError::NotFound => "No such file or directory",
            FsError::NotADirectory => "Not a directory",
            FsError::IsADirectory => "Is a directory",
            FsError::Exists => "File exists",
            FsError::NotEmpty => "Directory not empty",
            FsError::PermissionDenied => "Permission denied",
        })
    }
}

pub(crate) type FsResult<T> = std::result::Result<T, FsError>;

/// `path` resolved against `cwd` and normalised (`..` at the root stays at the root).
pub(crate) fn normalize(cwd: &str, path: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    let joined = if path.starts_with('/') {
        path.to_owned()
    } else {
        format!("{cwd}/{path}")
    };
    for part in joined.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            p => parts.push(p),
        }
    }
    format!("/{}", parts.join("/"))
}

/// The parent of a normalised path (`/` for `/` itself).
pub(crate) fn parent(path: &str) -> &str {
    match path.rfind('/') {
        Some(0) | None => "/",
        Some(i) => &path[..i],
    }
}

/// The last component of a normalised path (empty for `/`).
pub(crate) fn base_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or("")
}

/// The prefix every key strictly under `dir` starts with.
fn under(dir: &str) -> String {
    if dir == "/" {
        "/".to_owned()
    } else {
        format!("{dir}/")
    }
}

#[derive(Clone, Debug, Default)]
pub(crate) struct Fs {
    entries: BTreeMap<String, Entry>,
}

impl Fs {
    /// The base image's filesystem: the directories and devices the control plane and its
    /// commands expect, root's except the sandbox user's home and `/workspace`.
    pub fn base_image() -> Fs {
        let mut fs = Fs::default();
        fs.entries.insert("/".into(), Entry::dir(0, 0o755));
        for dir in [
            "/bin",
            "/dev",
            "/etc",
            "/home",
            "/opt",
            "/root",
            "/usr",
            "/usr/bin",
            "/usr/local",
            "/var",
            "/var/tmp",
        ] {
            fs.entries.insert(dir.into(), Entry::dir(0, 0o755));
        }
        fs.entries.insert("/tmp".into(), Entry::dir(0, 0o1777));
        fs.entries
            .insert("/home/sandbox".into(), Entry::dir(SANDBOX_UID, 0o755));
        fs.entries
            .insert(crate::WORKDIR.into(), Entry::dir(SANDBOX_UID, 0o755));
        for (path, device) in [
            ("/dev/null", Device::Null),
            ("/dev/zero", Device::Zero),
            ("/dev/urandom", Device::Urandom),
        ] {
            let mut e = Entry::dir(0, 0o666);
            e.kind = Kind::Device(device);
            fs.entries.insert(path.into(), e);
        }
        fs.entries.insert(
            "/etc/passwd".into(),
            Entry::file(
                Bytes::from_static(
                    b"root:x:0:0:root:/root:/bin/sh\nsandbox:x:1000:1000::/home/sandbox:/bin/sh\n",
                ),
                0,
                0o644,
            ),
        );
        fs.mark_as_image();
        fs
    }

    /// Marks every entry as the image's (a sandbox created from it has written nothing yet).
    pub fn mark_as_image(&mut self) {
        for e in self.entries.values_mut() {
            e.from_image = true;
        }
    }

    pub fn get(&self, path: &str) -> Option<&Entry> {
        self.entries.get(path)
    }

    pub fn get_mut(&mut self, path: &str) -> Option<&mut Entry> {
        self.entries.get_mut(path)
    }

    pub fn is_dir(&self, path: &str) -> bool {
        self.get(path).is_some_and(Entry::is_dir)
    }

    /// The names of a directory's children, sorted.
    pub fn children(&self, dir: &str) -> Vec<String> {
        let prefix = under(dir);
        self.entries
            .range(prefix.clone()..)
            .take_while(|(k, _)| k.starts_with(&prefix))
            .filter_map(|(k, _)| {
                let rest = &k[prefix.len()..];
                (!rest.is_empty() && !rest.contains('/')).then(|| rest.to_owned())
            })
            .collect()
    }

    /// `path` and everything under it, in path order (a directory before its contents).
    pub fn subtree(&self, path: &str) -> Vec<(String, Entry)> {
        let Some(top) = self.get(path) else {
            return Vec::new();
        };
        let prefix = under(path);
        let mut out = vec![(path.to_owned(), top.clone())];
        if top.is_dir() {
            out.extend(
                self.entries
                    .range(prefix.clone()..)
                    .take_while(|(k, _)| k.starts_with(&prefix))
                    .filter(|(k, _)| k.as_str() != path)
                    .map(|(k, e)| (k.clone(), e.clone())),
            );
        }
        out
    }

    /// Whether `uid` may create, replace or remove `path` (root may do anything): the entry
    /// is its own or world-writable, or, for a new one, its parent is.
    pub fn writable_by(&self, path: &str, uid: u64) -> bool {
        if uid == 0 {
            return true;
        }
        let own = |e: &Entry| e.uid == uid || e.mode & 0o002 != 0;
        match self.get(path) {
            Some(e) if !e.is_dir() && own(e) => true,
            _ => self.get(parent(path)).is_some_and(own),
        }
    }

    fn parent_dir(&self, path: &str) -> FsResult<()> {
        match self.get(parent(path)) {
            None => Err(FsError::NotFound),
            Some(e) if !e.is_dir() => Err(FsError::NotADirectory),
            Some(_) => Ok(()),
        }
    }

    /// Inserts `entry` at `path` (replacing a non-directory); the parent must be a directory.
    pub fn put(&mut self, path: &str, entry: Entry) -> FsResult<()> {
        if path == "/" {
            return Err(FsError::Exists);
        }
        self.parent_dir(path)?;
        match self.get(path) {
            Some(old) if old.is_dir() && !entry.is_dir() => Err(FsError::IsADirectory),
            Some(old) if old.is_dir() => {
                // A directory entry over a directory changes its owner and mode only.
                let old = self.entries.get_mut(path).expect("present");
                (old.mode, old.uid, old.gid, old.from_image) =
                    (entry.mode, entry.uid, entry.gid, false);
                Ok(())
            }
            Some(Entry {
                kind: Kind::Device(_),
                ..
            }) => Ok(()), // writing to a device discards the bytes
            _ => {
                self.entries.insert(path.to_owned(), entry);
                Ok(())
            }
        }
    }

    /// Creates `path` and missing parents as directories of `uid` (`mkdir -p`).
    pub fn mkdir_all(&mut self, path: &str, uid: u64, mode: u32) -> FsResult<()> {
        let mut at = String::new();
        for part in path.split('/').filter(|p| !p.is_empty()) {
            at.push('/');
            at.push_str(part);
            match self.get(&at) {
                Some(e) if e.is_dir() => {}
                Some(_) => return Err(FsError::NotADirectory),
                None => {
                    self.entries.insert(at.clone(), Entry::dir(uid, mode));
                }
            }
        }
        Ok(())
    }

    /// Removes `path` and, when `recursive`, what is under it.
    pub fn remove(&mut self, path: &str, recursive: bool) -> FsResult<()> {
        let Some(e) = self.get(path) else {
            return Err(FsError::NotFound);
        };
        if e.is_dir() && !recursive && !self.children(path).is_empty() {
            return Err(FsError::NotEmpty);
        }
        for (k, _) in self.subtree(path) {
            self.entries.remove(&k);
        }
        Ok(())
    }

    /// Copies `from` (and what is under it) to `to`, which must not exist; copies belong to
    /// `uid` when given (`cp`), keep their owners otherwise (`mv`).
    pub fn copy_tree(&mut self, from: &str, to: &str, uid: Option<u64>) -> FsResult<()> {
        if self.get(from).is_none() {
            return Err(FsError::NotFound);
        }
        if to == from || to.starts_with(&under(from)) {
            return Err(FsError::Exists);
        }
        self.parent_dir(to)?;
        for (k, mut e) in self.subtree(from) {
            e.from_image = false;
            if let Some(uid) = uid {
                (e.uid, e.gid) = (uid, uid);
            }
            let dest = format!("{to}{}", &k[from.len()..]);
            self.entries.insert(dest, e);
        }
        Ok(())
    }

    /// The bytes of regular files changed or made since the sandbox was created.
    pub fn written_bytes(&self) -> u64 {
        self.entries
            .values()
            .filter(|e| !e.from_image)
            .map(Entry::size)
            .sum()
    }

    /// A copy of everything but what is under `/workspace` (a snapshot's image: the
    /// workspace is archived by the caller), marked as the image's.
    pub fn without_workspace(&self) -> Fs {
        let inside = under(crate::WORKDIR);
        let mut fs = Fs {
            entries: self
                .entries
                .iter()
                .filter(|(k, _)| !k.starts_with(&inside))
                .map(|(k, e)| (k.clone(), e.clone()))
                .collect(),
        };
        fs.mark_as_image();
        fs
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_normalised_against_the_working_directory() {
        assert_eq!(normalize("/workspace", "a/./b/../c"), "/workspace/a/c");
        assert_eq!(normalize("/workspace", "/../../etc//x/"), "/etc/x");
        assert_eq!(normalize("/", "."), "/");
        assert_eq!(
            (parent("/a/b"), parent("/a"), base_name("/a/b")),
            ("/a", "/", "b")
        );
    }

    #[test]
    fn children_are_direct_and_removal_takes_the_subtree() {
        let mut fs = Fs::base_image();
        fs.mkdir_all("/workspace/a/b", SANDBOX_UID, 0o755).unwrap();
        fs.put(
            "/workspace/a/f",
            Entry::file(Bytes::from_static(b"xy"), 1000, 0o644),
        )
        .unwrap();
        assert_eq!(fs.children("/workspace/a"), ["b", "f"]);
        assert_eq!(fs.written_bytes(), 2);
        assert_eq!(fs.remove("/workspace/a", false), Err(FsError::NotEmpty));
        fs.remove("/workspace/a", true).unwrap();
        assert!(fs.children("/workspace").is_empty());
        assert!(!fs.writable_by("/etc/x", SANDBOX_UID));
        assert!(fs.writable_by("/tmp/x", SANDBOX_UID));
    }
}
