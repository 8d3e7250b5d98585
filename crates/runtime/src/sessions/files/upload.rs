//! Building an upload: the tar framing around one file streamed into the sandbox, and the file
//! names allowed. The file's bytes are never held in memory: the framing is a header block (with
//! a directory entry for each parent, so none is created by the Engine as root), the bytes as
//! they stream, then padding and the end-of-archive blocks.

use super::{gone, MAX_UPLOAD_BYTES};
use crate::error::{Result, RuntimeError};
use crate::sessions::Runtime;
use bytes::Bytes;
use futures::{Stream, StreamExt};
use sandbox_agents_sandbox::docker::archive::parent_dirs;
use sandbox_agents_sandbox::docker::{SANDBOX_GID, SANDBOX_UID};
use sandbox_agents_store::garbage;
use std::path::{Component, Path};
use std::time::Duration;
use tar::EntryType;

const BLOCK: u64 = 512;

fn header(kind: EntryType, mode: u32, size: u64, mtime: u64) -> tar::Header {
    let mut h = tar::Header::new_gnu();
    h.set_entry_type(kind);
    h.set_mode(mode);
    h.set_size(size);
    h.set_mtime(mtime);
    h.set_uid(SANDBOX_UID);
    h.set_gid(SANDBOX_GID);
    h
}

/// Everything of the archive before the file's bytes: its parent directories (0755) and its
/// own header (a regular file of `size` bytes, 0644), all owned by the sandbox user. `entry`
/// is relative and has no `.`/`..` components.
pub(super) fn upload_head(entry: &str, size: u64) -> std::io::Result<Vec<u8>> {
    let path = Path::new(entry);
    if entry.is_empty() || !path.components().all(|c| matches!(c, Component::Normal(_))) {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("'{entry}' is not a plain relative path"),
        ));
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let mut b = tar::Builder::new(Vec::new());
    for dir in parent_dirs(path) {
        b.append_data(
            &mut header(EntryType::Directory, 0o755, 0, now),
            dir,
            std::io::empty(),
        )?;
    }
    // The data is not appended here: the builder writes the header (and a long-name entry
    // when the path needs one) and no bytes for an empty reader.
    b.append_data(
        &mut header(EntryType::Regular, 0o644, size, now),
        path,
        std::io::empty(),
    )?;
    let head = b.get_ref().clone();
    Ok(head)
}

/// Everything after the file's `size` bytes: padding to a block, and the two zero blocks that
/// end an archive.
pub(super) fn upload_tail(size: u64) -> Vec<u8> {
    let pad = (BLOCK - size % BLOCK) % BLOCK;
    vec![0u8; (pad + 2 * BLOCK) as usize]
}

impl Runtime {
    /// Spools an upload to the blob store (its size goes in the tar header before its bytes),
    /// then streams it into the sandbox inside the framing of `upload::upload_head`: memory
    /// stays bounded whatever the size. The spool is queued as garbage for an hour first, so a
    /// crash mid-way leaves nothing behind for longer; it is removed at once otherwise.
    pub(super) async fn stream_upload<S>(
        &self,
        container: &str,
        existing: &str,
        entry: &str,
        data: S,
    ) -> Result<u64>
    where
        S: Stream<Item = std::io::Result<Bytes>> + Unpin + Send + 'static,
    {
        let st = &self.inner;
        let spool = format!("tmp/upload-{}", uuid::Uuid::now_v7().simple());
        let row =
            garbage::queue_unless_done(&st.db, "blob", &spool, Duration::from_secs(3600)).await?;
        let result = async {
            let mut seen: u64 = 0;
            // What goes wrong on the caller's side is marked, so that it is a 400 and the
            // server's own trouble (a full disk) a 500.
            let limited = data.map(move |chunk| {
                let chunk = chunk.map_err(|e| std::io::Error::other(CallerSide(e.to_string())))?;
                seen += chunk.len() as u64;
                if seen > MAX_UPLOAD_BYTES {
                    return Err(std::io::Error::other(CallerSide(format!(
                        "the file is larger than {} MiB",
                        MAX_UPLOAD_BYTES / (1024 * 1024)
                    ))));
                }
                Ok(chunk)
            });
            let size = st.blobs.put(&spool, limited.boxed()).await.map_err(|e| {
                match e
                    .get_ref()
                    .and_then(|inner| inner.downcast_ref::<CallerSide>())
                {
                    Some(CallerSide(msg)) if msg.starts_with("the file is larger") => {
                        RuntimeError::BadRequest(msg.clone())
                    }
                    Some(CallerSide(msg)) => {
                        RuntimeError::BadRequest(format!("the upload could not be read: {msg}"))
                    }
                    None => RuntimeError::Internal(anyhow::anyhow!("spooling the upload: {e}")),
                }
            })?;
            let head =
                upload_head(entry, size).map_err(|e| RuntimeError::BadRequest(e.to_string()))?;
            let body = futures::stream::once(async move { Ok(Bytes::from(head)) })
                .chain(self.blob_stream(&spool).await?)
                .chain(futures::stream::once(async move {
                    Ok(Bytes::from(upload_tail(size)))
                }))
                .boxed();
            st.backend
                .put_archive_stream(container, existing, body)
                .await
                .map_err(gone)?;
            Ok(size)
        }
        .await;
        // The file is in the sandbox (or the upload failed) either way: a cleanup that fails
        // here is left to the queued row, not reported as the upload's failure.
        if st.blobs.delete(&spool).await.is_ok() {
            if let Err(e) = garbage::done(&st.db, row).await {
                tracing::warn!(error = %e, "the spooled upload is removed; its queue row stays until the sweep");
            }
        }
        result
    }
}

/// An upload error the caller caused (a broken body, a file over the limit).
#[derive(Debug)]
struct CallerSide(String);

impl std::fmt::Display for CallerSide {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for CallerSide {}

/// Is `name` usable as a file name on its own?
pub(super) fn plain_name(name: &str) -> bool {
    !name.is_empty() && name != "." && name != ".." && !name.contains('/') && !name.contains('\0')
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sessions::files::archive::is_ancestor;
    use std::io::Read;

    #[test]
    fn the_framing_around_the_bytes_is_a_tar_of_one_file_owned_by_the_sandbox_user() {
        let long = format!("{}/b.txt", "d".repeat(150));
        for (entry, data) in [
            ("a/b.txt", &b"abcde"[..]),
            (long.as_str(), &[7u8; 1024][..]),
        ] {
            let mut tar = upload_head(entry, data.len() as u64).unwrap();
            tar.extend_from_slice(data);
            tar.extend(upload_tail(data.len() as u64));
            let mut a = tar::Archive::new(&tar[..]);
            let mut entries = a.entries().unwrap();
            let dir = entries.next().unwrap().unwrap();
            assert_eq!(dir.header().entry_type(), EntryType::Directory);
            assert_eq!(dir.header().uid().unwrap(), SANDBOX_UID);
            let mut e = entries.next().unwrap().unwrap();
            assert_eq!(e.path().unwrap().to_str().unwrap(), entry);
            let mut got = Vec::new();
            e.read_to_end(&mut got).unwrap();
            assert_eq!(got, data);
            assert_eq!(e.header().mode().unwrap(), 0o644);
            assert_eq!(e.header().gid().unwrap(), SANDBOX_GID);
            drop(e);
            assert!(entries.next().is_none());
        }
        assert!(upload_head("../x", 1).is_err() && upload_head("/abs", 1).is_err());
        assert!(is_ancestor("", "a") && is_ancestor("a", "a/b") && !is_ancestor("a", "ab"));
        assert!(plain_name("x.txt") && !plain_name("..") && !plain_name("a/b"));
    }
}
