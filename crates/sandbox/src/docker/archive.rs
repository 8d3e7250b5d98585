//! Copying files in and out of a sandbox as tar archives.
//!
//! The Engine extracts uploads as root and keeps the archive's owners, so uploads are first
//! rewritten to belong to the sandbox user: every entry owned by uid/gid 1000, no
//! setuid/setgid bits, no device nodes, no `..`, and a directory entry for every parent
//! directory (which the Engine would otherwise create owned by root).
//!
//! A checked upload then goes through the sandbox's daemon where it answers (extracted by the
//! sandbox user itself, the same result), and through the Engine otherwise: the Engine
//! extracts behind a re-exec of itself that costs about 60 ms of its CPU per upload, and
//! serialises them, which made the uploads of a burst of boots wait for one another.

use super::{error, SANDBOX_GID, SANDBOX_UID};
use crate::path::parent_dirs;
use crate::{Result, SandboxError};
use bollard::query_parameters::{DownloadFromContainerOptions, UploadToContainerOptions};
use bollard::{body_full, body_try_stream, Docker};
use bytes::Bytes;
use futures::stream::{self, BoxStream};
use futures::StreamExt;
use std::collections::HashSet;
use std::io::Read;
use std::path::{Component, Path, PathBuf};
use tar::{EntryType, Header};

pub(crate) async fn put_archive(
    docker: &Docker,
    daemon: Option<sandboxd::client::Client>,
    id: &str,
    dir: &str,
    tar: Bytes,
) -> Result<()> {
    if !dir.starts_with('/') {
        return Err(SandboxError::Backend(format!(
            "put_archive: '{dir}' is not absolute"
        )));
    }
    let tar = Bytes::from(
        tokio::task::spawn_blocking(move || owned_by_sandbox_user(&tar))
            .await
            .map_err(|e| SandboxError::Backend(format!("put_archive: {e}")))??,
    );
    if let Some(client) = daemon {
        use sandboxd::client::ClientError;
        let whole = stream::once(std::future::ready(Ok(tar.clone()))).boxed();
        match client.put_archive(dir, whole).await {
            Ok(_) => return Ok(()),
            Err(ClientError::Daemon(e)) if e.kind == sandboxd::proto::ErrorKind::NotFound => {
                return Err(SandboxError::NoSuchPath(dir.to_owned()))
            }
            // Something of the image's that the sandbox user may not replace (a root-owned
            // file under the directory): the Engine, as root, writes it as it always did.
            Err(ClientError::Daemon(e))
                if e.kind == sandboxd::proto::ErrorKind::PermissionDenied =>
            {
                tracing::debug!(error = %e.detail, "put_archive: the daemon may not write there; through the Engine")
            }
            Err(ClientError::Daemon(e)) => {
                return Err(SandboxError::Backend(format!("put_archive: {}", e.detail)))
            }
            // A daemon older than the operation, or a connection that broke: the Engine
            // writes the same entries (again).
            Err(e) => {
                tracing::debug!(error = %e, "put_archive: through the Engine instead of the daemon")
            }
        }
    }
    let options = UploadToContainerOptions {
        path: dir.to_owned(),
        no_overwrite_dir_non_dir: Some("true".to_owned()),
        copy_uidgid: None,
    };
    docker
        .upload_to_container(id, Some(options), body_full(tar))
        .await
        .map_err(|e| error::archive(id, dir, e))
}

/// Streams an archive the control plane built or this deployment's sandboxes produced into
/// `dir`, unchanged (see `SandboxBackend::put_archive_stream`).
pub(crate) async fn put_archive_stream(
    docker: &Docker,
    id: &str,
    dir: &str,
    tar: BoxStream<'static, std::io::Result<Bytes>>,
) -> Result<()> {
    if !dir.starts_with('/') {
        return Err(SandboxError::Backend(format!(
            "put_archive_stream: '{dir}' is not absolute"
        )));
    }
    let options = UploadToContainerOptions {
        path: dir.to_owned(),
        no_overwrite_dir_non_dir: Some("true".to_owned()),
        copy_uidgid: None,
    };
    docker
        .upload_to_container(id, Some(options), body_try_stream(tar))
        .await
        .map_err(|e| error::archive(id, dir, e))
}

/// One root-owned file (see `SandboxBackend::put_system_file`): an archive of a single
/// entry, its path relative to `/`, uploaded to `/`. Only the file's entry is in it, so the
/// Engine creates a missing parent as root and leaves existing ones as they are.
pub(crate) async fn put_system_file(
    docker: &Docker,
    id: &str,
    path: &str,
    data: Bytes,
    mode: u32,
) -> Result<()> {
    let rel = path
        .strip_prefix('/')
        .and_then(|p| clean(Path::new(p)))
        .filter(|p| !p.as_os_str().is_empty())
        .ok_or_else(|| {
            SandboxError::Backend(format!(
                "put_system_file: '{path}' is not an absolute file path"
            ))
        })?;
    let tar = root_file_archive(&rel, &data, mode)
        .map_err(|e| SandboxError::Backend(format!("put_system_file: {e}")))?;
    let options = UploadToContainerOptions {
        path: "/".to_owned(),
        no_overwrite_dir_non_dir: Some("true".to_owned()),
        copy_uidgid: None,
    };
    docker
        .upload_to_container(id, Some(options), body_full(tar.into()))
        .await
        .map_err(|e| error::archive(id, path, e))
}

fn root_file_archive(rel: &Path, data: &[u8], mode: u32) -> std::io::Result<Vec<u8>> {
    let mut b = tar::Builder::new(Vec::new());
    let mut h = Header::new_gnu();
    h.set_entry_type(EntryType::Regular);
    h.set_size(data.len() as u64);
    h.set_mode(mode & 0o777);
    h.set_uid(0);
    h.set_gid(0);
    h.set_mtime(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0),
    );
    b.append_data(&mut h, rel, data)?;
    b.into_inner()
}

pub(crate) async fn get_archive(
    docker: &Docker,
    id: &str,
    path: &str,
) -> Result<BoxStream<'static, Result<Bytes>>> {
    if !path.starts_with('/') {
        return Err(SandboxError::Backend(format!(
            "get_archive: '{path}' is not absolute"
        )));
    }
    let options = DownloadFromContainerOptions {
        path: path.to_owned(),
    };
    let (id, path) = (id.to_owned(), path.to_owned());
    let mut body = docker.download_from_container(&id, Some(options)).boxed();
    // The Engine's answer (404 included) arrives with the first item: look at it before
    // handing out the stream, so a missing path is an error of this call.
    let first = match body.next().await {
        None => return Ok(stream::empty().boxed()),
        Some(Err(e)) => return Err(error::archive(&id, &path, e)),
        Some(Ok(chunk)) => chunk,
    };
    let rest = body.map(move |item| item.map_err(|e| error::archive(&id, &path, e)));
    Ok(stream::once(async move { Ok(first) }).chain(rest).boxed())
}

/// The archive rewritten as described in the module docs.
pub fn owned_by_sandbox_user(tar: &[u8]) -> Result<Vec<u8>> {
    let bad = |what: String| SandboxError::Backend(format!("put_archive: {what}"));
    let io = |e: std::io::Error| bad(format!("invalid tar archive: {e}"));
    let mut out = tar::Builder::new(Vec::with_capacity(tar.len() + 4096));
    let mut dirs: HashSet<PathBuf> = HashSet::new();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let mut archive = tar::Archive::new(tar);
    for entry in archive.entries().map_err(io)? {
        let mut entry = entry.map_err(io)?;
        let kind = entry.header().entry_type();
        if matches!(
            kind,
            EntryType::XGlobalHeader
                | EntryType::XHeader
                | EntryType::GNULongName
                | EntryType::GNULongLink
        ) {
            continue;
        }
        let raw = entry.path().map_err(io)?.into_owned();
        let Some(path) = clean(&raw) else {
            return Err(bad(format!(
                "'{}' leaves the target directory",
                raw.display()
            )));
        };
        if path.as_os_str().is_empty() {
            // `.` itself: the target directory, which is not the archive's to change.
            continue;
        }
        // Parents first, so that none is created by the Engine as root.
        for parent in parent_dirs(&path) {
            if dirs.insert(parent.to_owned()) {
                let mut h = header(EntryType::Directory, 0o755, now);
                out.append_data(&mut h, parent, std::io::empty())
                    .map_err(io)?;
            }
        }
        let mode = entry.header().mode().unwrap_or(0o644) & 0o777;
        let mtime = entry.header().mtime().unwrap_or(now);
        match kind {
            EntryType::Directory => {
                dirs.insert(path.clone());
                let mut h = header(EntryType::Directory, mode | 0o700, mtime);
                out.append_data(&mut h, &path, std::io::empty()).map_err(io)?;
            }
            EntryType::Regular | EntryType::Continuous | EntryType::GNUSparse => {
                let mut h = header(EntryType::Regular, mode | 0o600, mtime);
                h.set_size(entry.size());
                out.append_data(&mut h, &path, &mut entry as &mut dyn Read).map_err(io)?;
            }
            EntryType::Symlink => {
                let target = entry.link_name().map_err(io)?.ok_or_else(|| bad(format!("symlink '{}' has no target", path.display())))?;
                let mut h = header(EntryType::Symlink, 0o777, mtime);
                out.append_link(&mut h, &path, target).map_err(io)?;
            }
            EntryType::Link => {
                let target = entry.link_name().map_err(io)?.ok_or_else(|| bad(format!("hard link '{}' has no target", path.display())))?;
                let Some(target) = clean(&target) else {
                    return Err(bad(format!("hard link '{}' points outside the archive", path.display())));
                };
                let mut h = header(EntryType::Link, mode, mtime);
                out.append_link(&mut h, &path, target).map_err(io)?;
            }
            EntryType::Fifo => {
                let mut h = header(EntryType::Fifo, mode, mtime);
                out.append_data(&mut h, &path, std::io::empty()).map_err(io)?;
            }
            other => return Err(bad(format!("'{}' is a {other:?} entry; only files, directories, links and fifos can be uploaded", path.display()))),
        }
    }
    out.into_inner().map_err(io)
}

fn header(kind: EntryType, mode: u32, mtime: u64) -> Header {
    let mut h = Header::new_gnu();
    h.set_entry_type(kind);
    h.set_mode(mode);
    h.set_mtime(mtime);
    h.set_uid(SANDBOX_UID);
    h.set_gid(SANDBOX_GID);
    h.set_size(0);
    h
}

/// A relative path without `.`; `None` when it is absolute-with-`..` or climbs with `..`.
/// A leading `/` is dropped: archive paths are relative to the target directory.
fn clean(path: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::Normal(p) => out.push(p),
            Component::CurDir | Component::RootDir => {}
            Component::ParentDir | Component::Prefix(_) => return None,
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(tar: &[u8]) -> Vec<(String, EntryType, u64, u32, Vec<u8>)> {
        let mut a = tar::Archive::new(tar);
        a.entries()
            .unwrap()
            .map(|e| {
                let mut e = e.unwrap();
                let mut data = Vec::new();
                e.read_to_end(&mut data).unwrap();
                let h = e.header();
                (
                    e.path().unwrap().display().to_string(),
                    h.entry_type(),
                    h.uid().unwrap(),
                    h.mode().unwrap(),
                    data,
                )
            })
            .collect()
    }

    #[test]
    fn uploads_belong_to_the_sandbox_user() {
        let mut b = tar::Builder::new(Vec::new());
        let mut h = Header::new_gnu();
        h.set_size(2);
        h.set_mode(0o4755);
        h.set_uid(0);
        let long = format!("a/b/{}.txt", "x".repeat(150));
        b.append_data(&mut h, &long, &b"hi"[..]).unwrap();
        let tar = owned_by_sandbox_user(&b.into_inner().unwrap()).unwrap();
        let got = entries(&tar);
        assert_eq!(got.len(), 3);
        assert_eq!(
            (got[0].0.as_str(), got[0].1, got[0].2),
            ("a", EntryType::Directory, 1000)
        );
        assert_eq!(got[1].0, "a/b");
        assert_eq!(
            (got[2].0.as_str(), got[2].2, got[2].3, &got[2].4[..]),
            (long.as_str(), 1000, 0o755, &b"hi"[..])
        );
    }

    #[test]
    fn escaping_paths_are_refused() {
        let mut b = tar::Builder::new(Vec::new());
        let mut h = Header::new_gnu();
        h.set_size(0);
        // `set_path` refuses `..`, so write the name field directly.
        h.as_old_mut().name[..5].copy_from_slice(b"../x\0");
        h.set_cksum();
        b.append(&h, std::io::empty()).unwrap();
        assert!(owned_by_sandbox_user(&b.into_inner().unwrap()).is_err());
    }
}
