//! Turning a manifest into the workspace's first contents: one tar archive, extracted into
//! the sandbox's workspace at boot. Every entry and every parent directory is owned by the
//! sandbox user, so the agent can change what it starts with.

use sandbox_agents_domain::git_source::GitSource;
use sandbox_agents_domain::manifest::{check_relative_path, EntrySpec, ManifestSpec};
use std::io::Read;
use std::path::{Path, PathBuf};

/// The uid/gid of the `sandbox` user in the sandbox image.
pub const SANDBOX_UID: u64 = 1000;

/// Most bytes a manifest may put into a workspace at boot (inline files and local dirs).
pub const MAX_MANIFEST_BYTES: u64 = 512 * 1024 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    #[error("manifest entry '{path}': {reason}")]
    Entry { path: String, reason: String },
    #[error("building the workspace archive: {0}")]
    Io(#[from] std::io::Error),
}

fn entry_err(path: &str, reason: impl Into<String>) -> ManifestError {
    ManifestError::Entry {
        path: path.to_owned(),
        reason: reason.into(),
    }
}

/// Which entry kinds a boot can write, and where `local_dir` may read from.
#[derive(Clone, Debug, Default)]
pub struct ManifestPolicy {
    /// Host directories `local_dir` entries may copy from; empty disables `local_dir`, because
    /// it would let any API caller read the control-plane host's files.
    pub local_dir_roots: Vec<PathBuf>,
}

impl ManifestPolicy {
    /// Refuses, before anything is created, entries a boot cannot write. Returns the entry
    /// path and the reason.
    pub fn check(&self, manifest: &ManifestSpec) -> Result<(), (String, String)> {
        for (path, entry) in &manifest.entries {
            match entry {
                EntrySpec::File { .. } | EntrySpec::Dir {} => {}
                EntrySpec::GitRepo { .. } => {
                    git_source(entry).map_err(|reason| (path.clone(), reason))?;
                }
                // Whether the server can reach the bucket is the boot's to say (a missing
                // bucket or missing credentials fail it naming the bucket and prefix).
                EntrySpec::S3Mount { .. } => {}
                EntrySpec::LocalDir { src } => {
                    self.local_source(src)
                        .map_err(|reason| (path.clone(), reason))?;
                }
            }
        }
        Ok(())
    }

    /// The real path of a host directory `src` names, if it lies under an allowed root.
    pub fn local_source(&self, src: &str) -> Result<PathBuf, String> {
        if self.local_dir_roots.is_empty() {
            return Err("local_dir entries are disabled on this server (set SANDBOX_AGENTS_LOCAL_DIR_ROOTS to allow some host directories)".into());
        }
        let real = std::fs::canonicalize(src).map_err(|e| format!("cannot read {src}: {e}"))?;
        if !real.is_dir() {
            return Err(format!("{src} is not a directory"));
        }
        if !self
            .local_dir_roots
            .iter()
            .any(|root| real.starts_with(root))
        {
            return Err(format!(
                "{src} is outside the directories this server may copy from"
            ));
        }
        Ok(real)
    }
}

/// The workspace archive for `manifest`: paths relative to the workspace root.
pub fn build_archive(
    manifest: &ManifestSpec,
    policy: &ManifestPolicy,
) -> Result<Vec<u8>, ManifestError> {
    let mut b = Archive::new();
    for (path, entry) in &manifest.entries {
        check_relative_path(path).map_err(|r| entry_err(path, r))?;
        let rel = normalise(path);
        match entry {
            EntrySpec::File { content } => b.file(&rel, content.as_bytes(), 0o644)?,
            EntrySpec::Dir {} => b.dir(&rel)?,
            EntrySpec::LocalDir { src } => {
                let real = policy.local_source(src).map_err(|r| entry_err(path, r))?;
                b.dir(&rel)?;
                b.copy_tree(&real, &real, &rel, false)
                    .map_err(|r| match r {
                        ManifestError::Entry { reason, .. } => entry_err(path, reason),
                        other => other,
                    })?;
            }
            // Checked out inside the sandbox after this archive is extracted (see
            // `git_checkouts`); only the checks happen here.
            EntrySpec::GitRepo { .. } => {
                git_source(entry).map_err(|r| entry_err(path, r))?;
            }
            // Staged by the control plane's S3 client after this archive (see `crate::s3`).
            EntrySpec::S3Mount { .. } => {}
        }
        if b.bytes > MAX_MANIFEST_BYTES {
            return Err(entry_err(
                path,
                format!(
                    "the manifest is larger than {} MiB",
                    MAX_MANIFEST_BYTES >> 20
                ),
            ));
        }
    }
    b.finish()
}

/// The checked source of a `git_repo` entry; the reason, naming the field, when a part is
/// refused. `None` for entries of other kinds.
pub fn git_source(entry: &EntrySpec) -> Result<Option<GitSource>, String> {
    let EntrySpec::GitRepo {
        repo,
        git_ref,
        host,
        subpath,
    } = entry
    else {
        return Ok(None);
    };
    GitSource::parse(host, repo, git_ref, subpath.as_deref())
        .map(Some)
        .map_err(|e| format!("{}: {}", e.field, e.reason))
}

/// The manifest's `git_repo` entries, in path order, each with its workspace-relative path
/// (normalised) and its checked source: what a boot checks out inside the sandbox.
pub fn git_checkouts(manifest: &ManifestSpec) -> Result<Vec<(String, GitSource)>, ManifestError> {
    let mut out = Vec::new();
    for (path, entry) in &manifest.entries {
        if let Some(src) = git_source(entry).map_err(|r| entry_err(path, r))? {
            check_relative_path(path).map_err(|r| entry_err(path, r))?;
            out.push((normalise(path), src));
        }
    }
    Ok(out)
}

/// A manifest path without `.` and empty components (`./a//b/` is `a/b`).
pub fn normalise(path: &str) -> String {
    path.split('/')
        .filter(|c| !c.is_empty() && *c != ".")
        .collect::<Vec<_>>()
        .join("/")
}

/// A tar builder that adds each parent directory once, owned by the sandbox user; into
/// memory by default, or into any writer (a pipe to the sandbox).
pub struct Archive<W: std::io::Write = Vec<u8>> {
    tar: tar::Builder<W>,
    dirs: std::collections::BTreeSet<String>,
    bytes: u64,
    /// The uid and gid of what is added from now on (the sandbox user unless set).
    owner: u64,
}

impl Default for Archive {
    fn default() -> Self {
        Self::new()
    }
}

impl Archive {
    pub fn new() -> Self {
        Self::into_writer(Vec::new())
    }

    pub fn finish(self) -> Result<Vec<u8>, ManifestError> {
        Ok(self.tar.into_inner()?)
    }
}

impl<W: std::io::Write> Archive<W> {
    pub fn into_writer(out: W) -> Self {
        let mut tar = tar::Builder::new(out);
        tar.mode(tar::HeaderMode::Deterministic);
        Self {
            tar,
            dirs: Default::default(),
            bytes: 0,
            owner: SANDBOX_UID,
        }
    }

    /// The bytes of file contents added so far.
    pub fn content_bytes(&self) -> u64 {
        self.bytes
    }

    /// Writes the archive's end and returns the writer.
    pub fn into_inner(self) -> std::io::Result<W> {
        self.tar.into_inner()
    }

    /// Entries added from now on belong to `uid` (and the group of the same number): root's
    /// (0) for what the sandbox user must not change.
    pub fn set_owner(&mut self, uid: u64) {
        self.owner = uid;
    }

    fn header(&self, kind: tar::EntryType, size: u64, mode: u32) -> tar::Header {
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(kind);
        h.set_size(size);
        h.set_mode(mode);
        h.set_uid(self.owner);
        h.set_gid(self.owner);
        h.set_mtime(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
        );
        h
    }

    fn parents(&mut self, rel: &str) -> std::io::Result<()> {
        let parts: Vec<&str> = rel.split('/').collect();
        for i in 1..parts.len() {
            self.dir(&parts[..i].join("/"))?;
        }
        Ok(())
    }

    /// A directory (and its parents).
    pub fn dir(&mut self, rel: &str) -> std::io::Result<()> {
        if rel.is_empty() || self.dirs.contains(rel) {
            return Ok(());
        }
        self.parents(rel)?;
        let mut h = self.header(tar::EntryType::Directory, 0, 0o755);
        self.tar
            .append_data(&mut h, format!("{rel}/"), std::io::empty())?;
        self.dirs.insert(rel.to_owned());
        Ok(())
    }

    /// A regular file (and its parents).
    pub fn file(&mut self, rel: &str, data: &[u8], mode: u32) -> std::io::Result<()> {
        self.file_from(rel, data.len() as u64, mode, data)
    }

    /// A regular file of `size` bytes read from `data` (and its parents).
    pub fn file_from(
        &mut self,
        rel: &str,
        size: u64,
        mode: u32,
        data: impl std::io::Read,
    ) -> std::io::Result<()> {
        self.parents(rel)?;
        let mut h = self.header(tar::EntryType::Regular, size, mode);
        self.tar.append_data(&mut h, rel, data)?;
        self.bytes += size;
        Ok(())
    }

    /// Copies a host directory tree; a symlink is refused, since it could point anywhere on
    /// the host. With `skip_git`, `.git` directories are left out (a checkout's own).
    pub fn copy_tree(
        &mut self,
        root: &Path,
        dir: &Path,
        rel: &str,
        skip_git: bool,
    ) -> Result<(), ManifestError> {
        let mut entries: Vec<_> = std::fs::read_dir(dir)?.collect::<Result<_, _>>()?;
        entries.sort_by_key(|e| e.file_name());
        for e in entries {
            let name = e.file_name().to_string_lossy().into_owned();
            if skip_git && name == ".git" {
                continue;
            }
            let child_rel = if rel.is_empty() {
                name.clone()
            } else {
                format!("{rel}/{name}")
            };
            let meta = std::fs::symlink_metadata(e.path())?;
            let shown = e
                .path()
                .strip_prefix(root)
                .unwrap_or(&e.path())
                .display()
                .to_string();
            if meta.file_type().is_symlink() {
                return Err(entry_err(
                    rel,
                    format!("{shown} is a symlink; copy the files it points to instead"),
                ));
            } else if meta.is_dir() {
                self.dir(&child_rel)?;
                self.copy_tree(root, &e.path(), &child_rel, skip_git)?;
            } else if meta.is_file() {
                use std::os::unix::fs::PermissionsExt;
                let file = std::fs::File::open(e.path())?;
                let mode = meta.permissions().mode() & 0o755 | 0o644;
                // Exactly the size in the header: a file that grows or shrinks meanwhile is cut
                // or padded with zeros, never mis-framed.
                let len = meta.len();
                let data = file.take(len).chain(std::io::repeat(0)).take(len);
                self.file_from(&child_rel, len, mode, data)?;
            } else {
                return Err(entry_err(
                    rel,
                    format!("{shown} is not a regular file or directory"),
                ));
            }
            if self.bytes > MAX_MANIFEST_BYTES {
                return Err(entry_err(
                    rel,
                    format!(
                        "the directory is larger than {} MiB",
                        MAX_MANIFEST_BYTES >> 20
                    ),
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(archive: &[u8]) -> Vec<(String, u64)> {
        let mut a = tar::Archive::new(archive);
        a.entries()
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                (
                    e.path().unwrap().display().to_string(),
                    e.header().uid().unwrap(),
                )
            })
            .collect()
    }

    #[test]
    fn files_get_their_parent_directories_owned_by_the_sandbox_user() {
        let m: ManifestSpec = serde_json::from_str(
            r##"{"entries":{"docs/brief.md":{"kind":"file","content":"# hi"},"output":{"kind":"dir"}}}"##,
        )
        .unwrap();
        let tar = build_archive(&m, &ManifestPolicy::default()).unwrap();
        let got = names(&tar);
        assert_eq!(
            got.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>(),
            ["docs/", "docs/brief.md", "output/"]
        );
        assert!(got.iter().all(|(_, uid)| *uid == SANDBOX_UID));
    }

    #[test]
    fn local_dir_is_off_unless_a_root_allows_it() {
        let m: ManifestSpec =
            serde_json::from_str(r#"{"entries":{"etc":{"kind":"local_dir","src":"/etc"}}}"#)
                .unwrap();
        assert!(ManifestPolicy::default().check(&m).is_err());
        let allowed = ManifestPolicy {
            local_dir_roots: vec![PathBuf::from("/nonexistent-root")],
        };
        assert!(
            allowed.check(&m).is_err(),
            "/etc is outside the allowed roots"
        );
    }

    #[test]
    fn s3_mounts_are_accepted_and_left_out_of_the_archive() {
        let m: ManifestSpec =
            serde_json::from_str(r#"{"entries":{"b":{"kind":"s3_mount","bucket":"x"}}}"#).unwrap();
        ManifestPolicy::default().check(&m).unwrap();
        let tar = build_archive(&m, &ManifestPolicy::default()).unwrap();
        assert!(names(&tar).is_empty());
    }

    #[test]
    fn git_entries_are_checked_and_left_out_of_the_archive() {
        let m: ManifestSpec = serde_json::from_str(
            r#"{"entries":{"./src//repo/":{"kind":"git_repo","repo":"o/r","subpath":"docs"},"a.md":{"kind":"file","content":"x"}}}"#,
        )
        .unwrap();
        ManifestPolicy::default().check(&m).unwrap();
        let tar = build_archive(&m, &ManifestPolicy::default()).unwrap();
        let got = names(&tar);
        assert_eq!(got.len(), 1, "{got:?}");
        let checkouts = git_checkouts(&m).unwrap();
        assert_eq!(checkouts.len(), 1);
        assert_eq!(checkouts[0].0, "src/repo");
        assert_eq!(checkouts[0].1.https_url(), "https://github.com/o/r.git");
        assert_eq!(checkouts[0].1.subpath.as_deref(), Some("docs"));

        let bad: ManifestSpec = serde_json::from_str(
            r#"{"entries":{"r":{"kind":"git_repo","repo":"o/r","ref":"--upload-pack=x"}}}"#,
        )
        .unwrap();
        let (path, reason) = ManifestPolicy::default().check(&bad).unwrap_err();
        assert_eq!(path, "r");
        assert!(reason.starts_with("ref:"), "{reason}");
    }
}
