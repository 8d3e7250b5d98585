//! Archives extracted into a directory (`PUT /v1/archive?dir=`): what the Engine's archive
//! upload does as root, done by the sandbox user, so whatever it writes belongs to that user
//! and lands only where that user may write.
//!
//! Why it exists: the Engine serialises archive uploads behind a re-exec of itself (about
//! 60 ms of its CPU each on two cores), so twenty boots that each upload their workspace wait
//! for one another there; through the daemon a boot makes no Engine call at all.
//!
//! The archive is read as it arrives and written entry by entry, in constant memory. Every
//! entry goes through `tar`'s `unpack_in`, which refuses paths that climb out of the
//! directory and writes through no symlink that leads out of it. The control plane checks and
//! rewrites an archive whole before it sends it (`owned_by_sandbox_user`); what the daemon
//! guards is itself, as everywhere: a malformed archive is an error of its request.

use super::error::{Failure, Json};
use crate::proto::{check_path, ArchiveReport, ErrorKind};
use axum::body::Body;
use axum::extract::Query;
use futures::TryStreamExt;
use std::io::Read;
use std::path::{Path, PathBuf};

#[derive(serde::Deserialize)]
pub struct ArchiveQuery {
    /// The directory the entries' paths are relative to; it must exist.
    dir: String,
}

pub async fn extract(
    Query(q): Query<ArchiveQuery>,
    body: Body,
) -> Result<Json<ArchiveReport>, Failure> {
    check_path(&q.dir)?;
    let m = tokio::fs::metadata(&q.dir)
        .await
        .map_err(|e| Failure::io(&q.dir, &e))?;
    if !m.is_dir() {
        return Err(Failure::new(
            ErrorKind::NotADirectory,
            format!("{}: not a directory", q.dir),
        ));
    }
    let reader =
        tokio_util::io::StreamReader::new(body.into_data_stream().map_err(std::io::Error::other));
    let dir = PathBuf::from(q.dir);
    tokio::task::spawn_blocking(move || unpack(tokio_util::io::SyncIoBridge::new(reader), &dir))
        .await
        .map_err(|e| Failure::new(ErrorKind::Internal, format!("extracting the archive: {e}")))?
        .map(Json)
}

/// A directory entry for a directory that exists inside `dir` and is not this user's: its
/// mode and times are not the archive's to set (this user could not), and it exists already,
/// so the entry is done. It is a volume's mount point, such as the workspace on Kubernetes (an
/// emptyDir owned by root that the sandbox user may write in), which a stop's archive of the
/// workspace names as `workspace/`. A path that climbs out or goes through a symlink is never
/// such a directory: `unpack_in` judges it as before.
fn kept_as_it_is(dir: &Path, path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    use std::path::Component;
    if !path
        .components()
        .all(|c| matches!(c, Component::Normal(_) | Component::CurDir))
    {
        return false;
    }
    let target = dir.join(path);
    let (Ok(real), Ok(root)) = (target.canonicalize(), dir.canonicalize()) else {
        return false;
    };
    // Where it really is must be where it is named: no component is a symlink.
    let named: std::path::PathBuf = path
        .components()
        .filter(|c| matches!(c, Component::Normal(_)))
        .collect();
    let unlinked = real.strip_prefix(&root).is_ok_and(|rel| rel == named);
    unlinked
        && std::fs::symlink_metadata(&target)
            .is_ok_and(|m| m.is_dir() && m.uid() != nix::unistd::geteuid().as_raw())
}

fn unpack(r: impl Read, dir: &Path) -> Result<ArchiveReport, Failure> {
    let malformed = |e: std::io::Error| Failure::invalid(format!("a malformed archive: {e}"));
    let mut archive = tar::Archive::new(r);
    archive.set_preserve_permissions(true);
    archive.set_preserve_mtime(true);
    archive.set_overwrite(true);
    archive.set_unpack_xattrs(false);
    let mut report = ArchiveReport::default();
    for entry in archive.entries().map_err(malformed)? {
        let mut entry = entry.map_err(malformed)?;
        let path = entry
            .path()
            .map_err(malformed)?
            .to_string_lossy()
            .into_owned();
        let target = dir.join(&path).display().to_string();
        if entry.header().entry_type().is_dir() && kept_as_it_is(dir, Path::new(&path)) {
            report.entries += 1;
            continue;
        }
        let written = entry.unpack_in(dir).map_err(|e| {
            let failure = Failure::io(&target, &e);
            // Not an error of the file system: the archive's (a symlink it would write
            // through out of the directory, an entry it cannot hold).
            if failure.0.kind == ErrorKind::Internal {
                Failure::invalid(format!("'{path}' cannot be extracted: {e}"))
            } else {
                failure
            }
        })?;
        if !written {
            return Err(Failure::invalid(format!(
                "'{path}' leaves {}",
                dir.display()
            )));
        }
        report.entries += 1;
        if entry.header().entry_type().is_file() {
            report.bytes += entry.size();
        }
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::kept_as_it_is;
    use std::path::Path;

    #[test]
    fn only_an_existing_directory_of_another_user_inside_the_target_is_kept_as_it_is() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        std::fs::create_dir_all(dir.join("own/sub")).unwrap();
        std::fs::create_dir(dir.join("mount")).unwrap();
        std::os::unix::fs::symlink("mount", dir.join("link")).unwrap();
        let me = nix::unistd::geteuid();
        let other = if me.is_root() {
            // As root (CI), a directory of another user is made; as anyone else, `/` is one.
            let other = nix::unistd::Uid::from_raw(4242);
            nix::unistd::chown(&dir.join("mount"), Some(other), None).unwrap();
            Some(dir.join("mount"))
        } else {
            None
        };
        assert!(
            !kept_as_it_is(dir, Path::new("own/")),
            "this user's directory gets its entry"
        );
        assert!(!kept_as_it_is(dir, Path::new("own/sub")));
        assert!(
            !kept_as_it_is(dir, Path::new("missing/")),
            "a new directory is made"
        );
        if let Some(mount) = other {
            assert!(kept_as_it_is(dir, Path::new("mount/")));
            assert!(kept_as_it_is(dir, Path::new("./mount")));
            assert!(
                !kept_as_it_is(dir, Path::new("link")),
                "not through a symlink"
            );
            assert!(
                !kept_as_it_is(&mount, Path::new("../mount")),
                "not by climbing out"
            );
        } else {
            assert!(!kept_as_it_is(dir, Path::new("../../../../../../../../")));
            assert!(kept_as_it_is(Path::new("/"), Path::new(".")));
        }
    }
}
