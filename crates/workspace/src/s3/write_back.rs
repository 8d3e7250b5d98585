//! Writing a writable mount back: the mount's tree read out of the sandbox and hashed, then
//! only the files whose content differs from what was staged (or that are new) uploaded,
//! each streamed from the sandbox on its own, and the staged keys whose file is gone deleted.

use super::stage::digest;
use super::{Mount, S3Client, StagedObject};
use crate::stream::{blocking_reader, stream_from_blocking};
use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use object_store::{ObjectStore, PutPayload, WriteMultipart};
use sandbox_agents_errors::{Result, ServiceError};
use sandbox_agents_sandbox::{SandboxBackend, SandboxError, WORKDIR};
use std::collections::HashMap;

/// Files up to this size go up in one request; larger ones in parts.
const SINGLE_PUT_MAX: u64 = 8 * 1024 * 1024;

/// Writes `mount` back from `container`'s workspace and returns the listing that now holds
/// (what the next write-back compares with). A mount whose directory is gone is left alone:
/// removing the mount's root is not taken for deleting the whole prefix.
pub async fn write_back(
    client: &S3Client,
    backend: &dyn SandboxBackend,
    container: &str,
    mount: &Mount,
    staged: &[StagedObject],
) -> Result<Vec<StagedObject>> {
    let root = format!("{WORKDIR}/{}", mount.path);
    let tree = match backend.get_archive(container, &root).await {
        Ok(t) => t,
        Err(SandboxError::NoSuchPath(_)) => {
            tracing::warn!(mount = %mount.path, "the mount's directory is gone; nothing written back");
            return Ok(staged.to_vec());
        }
        Err(e) => return Err(e.into()),
    };
    let handle = tokio::runtime::Handle::current();
    let tree = tree.map_err(std::io::Error::other).boxed();
    let files = tokio::task::spawn_blocking(move || hash_tree(blocking_reader(tree, handle)))
        .await
        .map_err(|e| anyhow::anyhow!("reading the mount stopped: {e}"))?
        .map_err(|e| mount.refused(format!("reading the mount's files: {e}")))?;
    let Some(files) = files else {
        tracing::warn!(mount = %mount.path, "the mount's path is no longer a directory; nothing written back");
        return Ok(staged.to_vec());
    };

    let store = client.store(mount)?;
    let before: HashMap<&str, &StagedObject> = staged.iter().map(|o| (o.key.as_str(), o)).collect();
    let mut after = Vec::with_capacity(files.len());
    let (mut uploaded, mut deleted) = (0usize, 0usize);
    for f in &files {
        if before
            .get(f.key.as_str())
            .is_some_and(|o| o.sha256 == f.sha256)
        {
            after.push(f.clone());
            continue;
        }
        upload(&store, backend, container, mount, &root, &f.key).await?;
        uploaded += 1;
        after.push(f.clone());
    }
    let now: std::collections::HashSet<&str> = files.iter().map(|f| f.key.as_str()).collect();
    for o in staged.iter().filter(|o| !now.contains(o.key.as_str())) {
        match store.delete(&mount.key(&o.key)).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => deleted += 1,
            Err(e) => return Err(mount.refused(format!("deleting {}: {e}", o.key))),
        }
    }
    tracing::info!(mount = %mount.path, uploaded, deleted, "s3 mount written back");
    after.sort_by(|a, b| a.key.cmp(&b.key));
    Ok(after)
}

/// Every regular file of the mount's archive (entries are `<mount dir>/...`), with its size
/// and digest; `None` when the mount's path is not a directory (a file put in its place is
/// not taken for every object deleted). Links and special files are not written back.
fn hash_tree(reader: impl std::io::Read) -> std::io::Result<Option<Vec<StagedObject>>> {
    let mut a = tar::Archive::new(reader);
    let mut out = Vec::new();
    let mut first = true;
    for e in a.entries()? {
        let e = e?;
        if std::mem::take(&mut first) && !e.header().entry_type().is_dir() {
            return Ok(None);
        }
        if !matches!(
            e.header().entry_type(),
            tar::EntryType::Regular | tar::EntryType::Continuous
        ) {
            continue;
        }
        let name = String::from_utf8_lossy(&e.path_bytes()).into_owned();
        let mut parts = name.split('/').filter(|c| !c.is_empty() && *c != ".");
        parts.next();
        let rel: Vec<&str> = parts.collect();
        if rel.is_empty() || rel.contains(&"..") {
            continue;
        }
        let key = rel.join("/");
        let (size, sha256) = digest(e)?;
        out.push(StagedObject { key, size, sha256 });
    }
    Ok(Some(out))
}

/// Uploads the file at `rel` of the mount, streamed out of the sandbox.
async fn upload(
    store: &impl ObjectStore,
    backend: &dyn SandboxBackend,
    container: &str,
    mount: &Mount,
    root: &str,
    rel: &str,
) -> Result<()> {
    let one = backend
        .get_archive(container, &format!("{root}/{rel}"))
        .await?
        .map_err(std::io::Error::other)
        .boxed();
    let handle = tokio::runtime::Handle::current();
    let content = stream_from_blocking(move |sink| {
        let mut a = tar::Archive::new(blocking_reader(one, handle));
        let first = a.entries().and_then(|mut es| es.next().transpose());
        match first {
            Ok(Some(mut e)) if e.header().entry_type().is_file() => {
                let size = e.header().size().unwrap_or(0);
                sink.send(size, &mut e);
            }
            Ok(_) => sink.fail(ServiceError::Conflict(
                "the file changed while it was written back".into(),
            )),
            Err(e) => sink.fail(anyhow::anyhow!("reading the file: {e}").into()),
        }
    })
    .await?;
    let key = mount.key(rel);
    let failed = |e: &dyn std::fmt::Display| mount.refused(format!("uploading {rel}: {e}"));
    if content.size <= SINGLE_PUT_MAX {
        let chunks: Vec<Bytes> = content.body.try_collect().await.map_err(|e| failed(&e))?;
        let payload: PutPayload = chunks.into_iter().collect();
        store.put(&key, payload).await.map_err(|e| failed(&e))?;
    } else {
        let mut w = WriteMultipart::new(store.put_multipart(&key).await.map_err(|e| failed(&e))?);
        let mut body = content.body;
        while let Some(chunk) = body.next().await {
            let chunk = match chunk {
                Ok(c) => c,
                Err(e) => {
                    let _ = w.abort().await;
                    return Err(failed(&e));
                }
            };
            w.wait_for_capacity(4).await.map_err(|e| failed(&e))?;
            w.put(chunk);
        }
        w.finish().await.map_err(|e| failed(&e))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::test_tar::tar_of;

    #[test]
    fn files_are_keyed_below_the_mount_and_a_file_in_its_place_writes_nothing_back() {
        let tree = tar_of(&[("out/", None), ("out/d/", None), ("out/d/a.txt", Some("a"))]);
        let got = hash_tree(tree.as_slice()).unwrap().unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].key, "d/a.txt");
        assert_eq!(got[0].size, 1);
        assert_eq!(
            got[0].sha256,
            "ca978112ca1bbdcafac231b39a23dc4da786eff8147c4e72b9807785afee48bb"
        );
        let replaced = tar_of(&[("out", Some("not a directory"))]);
        assert!(hash_tree(replaced.as_slice()).unwrap().is_none());
    }
}
