//! Tar archives into and out of an in-memory filesystem, with the rules the Docker backend
//! follows: `put_archive` rewrites an archive with `docker::owned_by_sandbox_user` (every
//! entry the sandbox user's, no `..`, no device nodes) before extracting it, whoever owns
//! the target directory; `get_archive` names entries after the last component of the path
//! asked for (`dir/...` for `/workspace/dir`), as the Engine does.

use super::fs::{base_name, normalize, Entry, Fs, FsError, Kind};
use crate::{Result, SandboxError};
use bytes::Bytes;
use std::io::Read;
use std::path::{Component, Path};
use tar::{EntryType, Header};

fn invalid(what: &str, e: impl std::fmt::Display) -> SandboxError {
    SandboxError::Backend(format!("{what}: invalid tar archive: {e}"))
}

/// Checks that `dir` is an absolute path of an existing directory.
pub(super) fn target_dir(fs: &Fs, what: &str, dir: &str) -> Result<String> {
    if !dir.starts_with('/') {
        return Err(SandboxError::Backend(format!(
            "{what}: '{dir}' is not absolute"
        )));
    }
    let path = normalize("/", dir);
    match fs.get(&path) {
        Some(e) if e.is_dir() => Ok(path),
        Some(_) => Err(SandboxError::Backend(format!(
            "{what}: '{dir}' is not a directory"
        ))),
        None => Err(SandboxError::NoSuchPath(dir.to_owned())),
    }
}

/// Extracts `tar` into the directory `dir` as it is (owners and modes from the archive);
/// `..` is refused, leading `/` and `.` are dropped, hard links become copies.
pub(super) fn extract(fs: &mut Fs, dir: &str, tar: &[u8]) -> Result<()> {
    let what = "put_archive";
    let mut archive = tar::Archive::new(tar);
    for entry in archive.entries().map_err(|e| invalid(what, e))? {
        let mut entry = entry.map_err(|e| invalid(what, e))?;
        let raw = entry.path().map_err(|e| invalid(what, e))?.into_owned();
        let Some(rel) = relative(&raw) else {
            return Err(SandboxError::Backend(format!(
                "{what}: '{}' leaves the target directory",
                raw.display()
            )));
        };
        if rel.is_empty() {
            continue;
        }
        let path = normalize(dir, &rel);
        let h = entry.header();
        let (mode, uid, gid) = (
            h.mode().unwrap_or(0o644) & 0o7777,
            h.uid().unwrap_or(0),
            h.gid().unwrap_or(0),
        );
        let kind = match h.entry_type() {
            EntryType::Directory => Kind::Dir,
            EntryType::Regular | EntryType::Continuous | EntryType::GNUSparse => {
                let mut data = Vec::with_capacity(entry.size() as usize);
                entry.read_to_end(&mut data).map_err(|e| invalid(what, e))?;
                Kind::File(data.into())
            }
            EntryType::Symlink => {
                let target = entry.link_name().map_err(|e| invalid(what, e))?;
                Kind::Symlink(target.map(|t| t.display().to_string()).unwrap_or_default())
            }
            EntryType::Link => {
                let target = entry.link_name().map_err(|e| invalid(what, e))?;
                let target = target.as_deref().and_then(relative).ok_or_else(|| {
                    SandboxError::Backend(format!("{what}: hard link '{rel}' points outside"))
                })?;
                match fs.get(&normalize(dir, &target)).map(|e| e.kind.clone()) {
                    Some(kind @ Kind::File(_)) => kind,
                    _ => {
                        return Err(SandboxError::Backend(format!(
                            "{what}: hard link '{rel}' to '{target}', which is not a file"
                        )))
                    }
                }
            }
            // Pax and long-name headers are read by the tar crate; fifos hold nothing.
            _ => continue,
        };
        let entry = Entry {
            kind,
            mode,
            uid,
            gid,
            from_image: false,
        };
        fs.put(&path, entry).map_err(|e| match e {
            FsError::NotFound | FsError::NotADirectory => SandboxError::Backend(format!(
                "{what}: the archive has '{rel}' before its parent directory"
            )),
            e => SandboxError::Backend(format!("{what}: '{rel}': {e}")),
        })?;
    }
    Ok(())
}

/// A relative path without `.`, or `None` when it climbs with `..`.
fn relative(path: &Path) -> Option<String> {
    let mut parts = Vec::new();
    for c in path.components() {
        match c {
            Component::Normal(p) => parts.push(p.to_string_lossy().into_owned()),
            Component::CurDir | Component::RootDir => {}
            Component::ParentDir | Component::Prefix(_) => return None,
        }
    }
    Some(parts.join("/"))
}

/// An archive of `path` (normalised, existing) and everything under it.
pub(super) fn build(fs: &Fs, path: &str) -> Result<Bytes> {
    let io = |e: std::io::Error| SandboxError::Backend(format!("get_archive: {e}"));
    let top = base_name(path);
    let mut b = tar::Builder::new(Vec::new());
    for (key, e) in fs.subtree(path) {
        let rest = &key[path.len()..];
        let name = match (top, rest) {
            ("", rest) => rest.trim_start_matches('/').to_owned(),
            (top, rest) => format!("{top}{rest}"),
        };
        if name.is_empty() {
            continue;
        }
        let mut h = Header::new_gnu();
        h.set_mode(e.mode);
        h.set_uid(e.uid);
        h.set_gid(e.gid);
        h.set_size(0);
        match &e.kind {
            Kind::Dir => {
                h.set_entry_type(EntryType::Directory);
                b.append_data(&mut h, format!("{name}/"), std::io::empty())
                    .map_err(io)?;
            }
            Kind::File(data) => {
                h.set_entry_type(EntryType::Regular);
                h.set_size(data.len() as u64);
                b.append_data(&mut h, &name, &data[..]).map_err(io)?;
            }
            Kind::Symlink(target) => {
                h.set_entry_type(EntryType::Symlink);
                b.append_link(&mut h, &name, target).map_err(io)?;
            }
            Kind::Device(_) => {}
        }
    }
    b.into_inner().map(Bytes::from).map_err(io)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_archive_extracted_and_read_back_is_the_same() {
        let mut fs = Fs::base_image();
        let mut b = tar::Builder::new(Vec::new());
        let mut h = Header::new_gnu();
        h.set_size(2);
        h.set_mode(0o640);
        h.set_uid(1000);
        b.append_data(&mut h, "d/f.txt", &b"hi"[..]).unwrap();
        let tar = crate::docker::owned_by_sandbox_user(&b.into_inner().unwrap()).unwrap();
        extract(&mut fs, "/workspace", &tar).unwrap();
        assert_eq!(fs.get("/workspace/d").unwrap().uid, 1000);

        let out = build(&fs, "/workspace/d").unwrap();
        let names: Vec<String> = tar::Archive::new(&out[..])
            .entries()
            .unwrap()
            .map(|e| e.unwrap().path().unwrap().display().to_string())
            .collect();
        assert_eq!(names, ["d/", "d/f.txt"]);
    }
}
