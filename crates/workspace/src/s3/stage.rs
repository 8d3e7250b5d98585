//! Staging a mount at boot: the prefix listed (its total checked against the cap before a
//! byte is read), then each object streamed from S3 into a tar that streams into the
//! sandbox, so neither an object nor the prefix is ever held whole in memory.

use super::{Mount, S3Client, StagedObject};
use crate::manifest::{Archive, SANDBOX_UID};
use crate::stream::{blocking_reader, pipe};
use futures::{StreamExt, TryStreamExt};
use object_store::path::Path as ObjectPath;
use object_store::{ObjectMeta, ObjectStore};
use sandbox_agents_domain::manifest::check_relative_path;
use sandbox_agents_errors::Result;
use sandbox_agents_sandbox::{SandboxBackend, WORKDIR};
use sha2::{Digest, Sha256};
use std::io::{Read, Write};
use std::sync::Arc;

/// Stages `mount` into the workspace of `container` and returns what it staged. A read-only
/// mount's files and directories belong to root (0644 and 0755), so the sandbox user can read
/// them but not change, add or delete anything; a writable one's belong to the sandbox user.
/// The directories above the mount belong to the sandbox user either way. What the mount's
/// path held before (a workspace archive of an older server could hold it) is removed first.
pub async fn stage(
    client: &S3Client,
    backend: &dyn SandboxBackend,
    container: &str,
    mount: &Mount,
) -> Result<Vec<StagedObject>> {
    let store = Arc::new(client.store(mount)?);
    let objects = list(store.as_ref(), mount, client.settings().stage_max_bytes).await?;
    backend
        .remove_system_path(container, &format!("{WORKDIR}/{}", mount.path))
        .await?;
    let (writer, stream) = pipe();
    let handle = tokio::runtime::Handle::current();
    let (m, st) = (mount.clone(), store.clone());
    let task = tokio::task::spawn_blocking(move || -> Result<Vec<StagedObject>> {
        let mut a = Archive::into_writer(writer);
        let io = |e: std::io::Error| m.refused(format!("staging failed: {e}"));
        if let Some((parent, _)) = m.path.rsplit_once('/') {
            a.dir(parent).map_err(io)?;
        }
        a.set_owner(if m.read_only { 0 } else { SANDBOX_UID });
        a.dir(&m.path).map_err(io)?;
        let mut staged = Vec::with_capacity(objects.len());
        for (rel, meta) in objects {
            let path = format!("{}/{rel}", m.path);
            if rel.ends_with('/') {
                a.dir(path.trim_end_matches('/')).map_err(io)?;
                continue;
            }
            if meta.size == 0 {
                // An empty folder marker (`a/`) is listed as `a` but cannot be read as it:
                // a directory. An empty object that can be read is an empty file.
                match handle.block_on(st.head(&meta.location)) {
                    Err(object_store::Error::NotFound { .. }) => {
                        a.dir(&path).map_err(io)?;
                        continue;
                    }
                    Err(e) => return Err(m.refused(format!("reading {}: {e}", meta.location))),
                    Ok(_) => {}
                }
            }
            let got = handle
                .block_on(st.get(&meta.location))
                .map_err(|e| m.refused(format!("reading {}: {e}", meta.location)))?;
            let e_tag = got.meta.e_tag.clone();
            let body = got.into_stream().map_err(std::io::Error::other).boxed();
            let mut hashed = Hashed::new(blocking_reader(body, handle.clone()));
            // Exactly the listed size: an object replaced meanwhile is cut or padded, never
            // mis-framed; the digest is of what the sandbox got.
            let len = meta.size;
            let data = (&mut hashed).take(len).chain(std::io::repeat(0)).take(len);
            a.file_from(&path, len, 0o644, data).map_err(io)?;
            staged.push(StagedObject {
                key: rel,
                size: len,
                sha256: hashed.hex(),
                e_tag,
            });
        }
        let mut w = a.into_inner().map_err(io)?;
        w.flush().map_err(io)?;
        Ok(staged)
    });
    let put = backend.put_archive_stream(container, WORKDIR, stream);
    let (put, staged) = tokio::join!(put, task);
    // The reading side's error says more than the upload's error it causes.
    let staged = staged.map_err(|e| anyhow::anyhow!("staging {} stopped: {e}", mount.url()))??;
    put?;
    Ok(staged)
}

/// The prefix's objects with their keys relative to it, sorted; refused when they add up to
/// more than `max` bytes or a key cannot be a workspace path.
async fn list(
    store: &impl ObjectStore,
    mount: &Mount,
    max: u64,
) -> Result<Vec<(String, ObjectMeta)>> {
    let prefix = (!mount.prefix.is_empty()).then(|| ObjectPath::from(mount.prefix.as_str()));
    let mut listing = store.list(prefix.as_ref());
    let mut out = Vec::new();
    let mut total = 0u64;
    while let Some(meta) = listing.next().await {
        let meta = meta.map_err(|e| {
            mount.refused(format!(
                "cannot list the bucket's prefix (is the bucket there, and may this server read it?): {e}"
            ))
        })?;
        total += meta.size;
        if total > max {
            return Err(mount.refused(format!(
                "the prefix holds more than {max} bytes, more than this server stages (--s3-stage-max-bytes); mount a narrower prefix"
            )));
        }
        let full = meta.location.as_ref();
        if full == mount.prefix {
            // The prefix's own folder marker (`prefix/`, as consoles make them).
            continue;
        }
        let rel = match mount.prefix.as_str() {
            "" => full,
            p => full
                .strip_prefix(p)
                .and_then(|r| r.strip_prefix('/'))
                .unwrap_or(full),
        }
        .to_owned();
        check_relative_path(rel.trim_end_matches('/')).map_err(|r| {
            mount.refused(format!(
                "the object '{full}' cannot be a workspace file: {r}"
            ))
        })?;
        out.push((rel, meta));
    }
    // A folder marker (`a/`, listed as `a`, empty) of a folder that holds objects would
    // become a file where a directory must be: left out, the directory comes from its objects.
    let dirs: std::collections::HashSet<String> = out
        .iter()
        .flat_map(|(rel, _)| {
            let parts: Vec<&str> = rel.split('/').collect();
            (1..parts.len()).map(move |i| parts[..i].join("/"))
        })
        .collect();
    out.retain(|(rel, meta)| !(meta.size == 0 && dirs.contains(rel)));
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

/// A reader that hashes what it reads.
pub(crate) struct Hashed<R> {
    inner: R,
    hash: Sha256,
}

impl<R: Read> Hashed<R> {
    pub(crate) fn new(inner: R) -> Self {
        Hashed {
            inner,
            hash: Sha256::new(),
        }
    }

    pub(crate) fn hex(self) -> String {
        hex::encode(self.hash.finalize())
    }
}

impl<R: Read> Read for Hashed<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.hash.update(&buf[..n]);
        Ok(n)
    }
}

/// The sha256 of a stream of bytes read to its end, as hex.
pub(crate) fn digest(r: impl Read) -> std::io::Result<(u64, String)> {
    let mut h = Hashed::new(r);
    let n = std::io::copy(&mut h, &mut std::io::sink())?;
    Ok((n, h.hex()))
}
