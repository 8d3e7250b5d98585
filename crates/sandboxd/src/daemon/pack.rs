//! A path packed as a tar stream (`GET /v1/archive?path=`): what the Engine's
//! `GET /containers/{id}/archive?path=` answers, for backends without an Engine.
//!
//! Entries are named as the Engine names them: the path's last component, then what lies
//! under it (`workspace/`, `workspace/src/main.rs` for `/workspace`); a file is one entry.
//! Directories come before what they hold, siblings in byte order of their names;
//! directories end in `/`. Symlinks are stored as symlinks, never followed (the path itself
//! included, which is how a caller learns where a link points), a file with several names is
//! stored once and linked to after, sockets are left out.
//!
//! The archive is built in a blocking task that writes into a small channel the response
//! reads, so memory does not grow with the tree: a slow reader holds the walk back. It is
//! read as the daemon's user: an entry below the path that user may not read is left out
//! (with a warning) rather than failing the whole archive, as a workspace archived on stop
//! must not be lost to one unreadable file. The path itself must be readable: a missing path
//! is `NotFound`, an unreadable one `PermissionDenied`, both before the first byte.

use super::error::Failure;
use crate::proto::{check_path, ErrorKind};
use axum::body::Body;
use axum::extract::Query;
use axum::response::{IntoResponse, Response};
use bytes::{Bytes, BytesMut};
use std::collections::HashMap;
use std::fs;
use std::io::{self, Read, Write};
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};
use tar::{EntryType, Header, HeaderMode};
use tokio::sync::mpsc;

/// The size of the chunks the response is sent in.
const CHUNK: usize = 64 * 1024;

#[derive(serde::Deserialize)]
pub struct PackQuery {
    /// The file or directory to pack (absolute).
    path: String,
}

pub async fn pack(Query(q): Query<PackQuery>) -> Result<Response, Failure> {
    check_path(&q.path)?;
    let path = PathBuf::from(&q.path);
    let checked = path.clone();
    tokio::task::spawn_blocking(move || readable(&checked))
        .await
        .map_err(|e| Failure::new(ErrorKind::Internal, format!("packing {}: {e}", q.path)))?
        .map_err(|e| Failure::io(&q.path, &e))?;
    let (tx, rx) = mpsc::channel::<io::Result<Bytes>>(4);
    tokio::task::spawn_blocking(move || {
        let out = ChannelWriter {
            tx: tx.clone(),
            buf: BytesMut::with_capacity(CHUNK),
        };
        if let Err(e) = write_tar(&path, out) {
            // Ends the response with an error (a reset stream), so a reader never takes a
            // cut archive for a whole one. A reader gone already is why it failed.
            let _ = tx.blocking_send(Err(e));
        }
    });
    let body = Body::from_stream(tokio_stream::wrappers::ReceiverStream::new(rx));
    Ok(([(http::header::CONTENT_TYPE, "application/x-tar")], body).into_response())
}

/// Fails as reading `path` would: missing, or a file or directory this user may not read.
fn readable(path: &Path) -> io::Result<()> {
    let meta = fs::symlink_metadata(path)?;
    if meta.is_dir() {
        fs::read_dir(path).map(drop)
    } else if meta.is_file() {
        fs::File::open(path).map(drop)
    } else {
        Ok(())
    }
}

/// The entry name of `path` itself: its last component, empty for `/`.
fn top_name(path: &Path) -> PathBuf {
    path.file_name().map(PathBuf::from).unwrap_or_default()
}

fn write_tar(root: &Path, out: impl Write) -> io::Result<()> {
    let mut b = tar::Builder::new(out);
    // The first name of every file with several, by (device, inode).
    let mut linked: HashMap<(u64, u64), PathBuf> = HashMap::new();
    // Depth first; each directory's children are pushed in reverse order, so they come off
    // in byte order of their names.
    let mut pending = vec![(root.to_path_buf(), top_name(root))];
    while let Some((path, name)) = pending.pop() {
        let meta = match fs::symlink_metadata(&path) {
            Ok(m) => m,
            // Removed since its directory was listed: as if it never was.
            Err(e) if e.kind() == io::ErrorKind::NotFound && path != root => continue,
            Err(e) if path != root => {
                tracing::warn!(path = %path.display(), error = %e, "left out of an archive");
                continue;
            }
            Err(e) => return Err(e),
        };
        if !name.as_os_str().is_empty() {
            append(&mut b, &path, &name, &meta, &mut linked)?;
        }
        if meta.is_dir() {
            let mut children = match fs::read_dir(&path) {
                Ok(entries) => entries
                    .filter_map(|e| e.ok().map(|e| e.file_name()))
                    .collect::<Vec<_>>(),
                Err(e) => {
                    tracing::warn!(path = %path.display(), error = %e, "a directory's entries left out of an archive");
                    continue;
                }
            };
            children.sort();
            pending.extend(
                children
                    .into_iter()
                    .rev()
                    .map(|c| (path.join(&c), name.join(&c))),
            );
        }
    }
    b.into_inner()?.flush()
}

/// Appends one entry (a directory's own, not what it holds).
fn append<W: Write>(
    b: &mut tar::Builder<W>,
    path: &Path,
    name: &Path,
    meta: &fs::Metadata,
    linked: &mut HashMap<(u64, u64), PathBuf>,
) -> io::Result<()> {
    let mut h = Header::new_gnu();
    h.set_metadata_in_mode(meta, HeaderMode::Complete);
    // The permission bits only, as the Engine writes them (not the file type's).
    h.set_mode(meta.mode() & 0o7777);
    let kind = meta.file_type();
    if !kind.is_dir() && meta.nlink() > 1 {
        match linked.get(&(meta.dev(), meta.ino())) {
            Some(first) => {
                h.set_entry_type(EntryType::Link);
                h.set_size(0);
                return b.append_link(&mut h, name, first);
            }
            None => {
                linked.insert((meta.dev(), meta.ino()), name.to_path_buf());
            }
        }
    }
    if kind.is_dir() {
        let mut dir = name.as_os_str().to_owned();
        dir.push("/");
        b.append_data(&mut h, dir, io::empty())
    } else if kind.is_symlink() {
        let target = fs::read_link(path)?;
        b.append_link(&mut h, name, target)
    } else if kind.is_file() {
        let file = match fs::File::open(path) {
            Ok(f) => f,
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "left out of an archive");
                linked.remove(&(meta.dev(), meta.ino()));
                return Ok(());
            }
        };
        // Exactly the size the header says, whatever the file does meanwhile: a file that
        // grew is cut, one that shrank is padded with zeros; the archive stays well formed.
        let size = meta.len();
        let data = file.take(size).chain(io::repeat(0)).take(size);
        b.append_data(&mut h, name, data)
    } else if kind.is_char_device() || kind.is_block_device() {
        h.set_device_major(nix::sys::stat::major(meta.rdev()) as u32)?;
        h.set_device_minor(nix::sys::stat::minor(meta.rdev()) as u32)?;
        h.set_size(0);
        b.append_data(&mut h, name, io::empty())
    } else if kind.is_fifo() {
        h.set_size(0);
        b.append_data(&mut h, name, io::empty())
    } else {
        // A socket: nothing a reader could recreate.
        Ok(())
    }
}

/// Hands what the tar builder writes to the response, a chunk at a time; blocks while the
/// channel is full (the reader is slow), fails once the reader is gone.
struct ChannelWriter {
    tx: mpsc::Sender<io::Result<Bytes>>,
    buf: BytesMut,
}

impl ChannelWriter {
    fn send(&mut self) -> io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let chunk = self.buf.split().freeze();
        self.tx
            .blocking_send(Ok(chunk))
            .map_err(|_| io::Error::new(io::ErrorKind::BrokenPipe, "the archive's reader is gone"))
    }
}

impl Write for ChannelWriter {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        self.buf.extend_from_slice(data);
        if self.buf.len() >= CHUNK {
            self.send()?;
        }
        Ok(data.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.send()
    }
}
