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
