//! Writing a writable mount back: the mount's tree read out of the sandbox and hashed, then
//! only the files whose content differs from what was staged (or that are new) uploaded,
//! each streamed from the sandbox on its own, and the staged keys whose file is gone deleted.
//!
//! Every write is conditional on the bucket's object being the one that was staged: an upload
//! of a staged key carries `If-Match` with its ETag, one of a new key `If-None-Match: *`, and a
//! delete is made only while a HEAD finds the staged ETag. When someone else changed the
//! object meanwhile, theirs stays and the sandbox's version is uploaded beside it as a
//! conflict copy (`name.conflict-<session>.ext`). Two windows remain: a change between the
//! HEAD and the DELETE, and one made during an upload in parts (files over 8 MiB, which
//! `object_store` cannot make conditional: theirs is checked with a HEAD just before).

use super::stage::digest;
use super::{Mount, S3Client, StagedObject};
use crate::stream::{blocking_reader, stream_from_blocking};
use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use object_store::path::Path as ObjectPath;
use object_store::{
    ObjectStore, PutMode, PutOptions, PutPayload, PutResult, UpdateVersion, WriteMultipart,
};
use sandbox_agents_errors::{Result, ServiceError};
use sandbox_agents_sandbox::{SandboxBackend, SandboxError, WORKDIR};
use serde::Serialize;
use std::collections::{HashMap, HashSet};

/// Files up to this size go up in one request; larger ones in parts.
const SINGLE_PUT_MAX: u64 = 8 * 1024 * 1024;

/// What a write-back did: the listing that now holds (what the next one compares with), the
/// files someone else changed in the bucket meanwhile, and the failure that stopped it part
/// way, if one did (the listing then records what was done before it).
#[derive(Debug)]
pub struct WriteBack {
    pub listing: Vec<StagedObject>,
    pub conflicts: Vec<Conflict>,
    pub failed: Option<ServiceError>,
}

/// A file of the mount that was changed both in the sandbox and in the bucket since it was
/// staged; the bucket's version was kept at `key`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Conflict {
    /// Relative to the mount's prefix, as in the sandbox.
    pub key: String,
    /// `changed`: both changed it; `created`: both created it; `deleted`: the sandbox deleted
    /// it and the bucket's was changed, so it was not deleted.
    pub kind: &'static str,
    /// Where the sandbox's version was uploaded (relative to the prefix); null for `deleted`.
    pub sandbox_copy: Option<String>,
}

/// Writes `mount` back from `container`'s workspace; `session` names the conflict copies. A
/// mount whose directory is gone is left alone: removing the mount's root is not taken for
/// deleting the whole prefix.
pub async fn write_back(
    client: &S3Client,
    backend: &dyn SandboxBackend,
    container: &str,
    mount: &Mount,
    staged: &[StagedObject],
    session: &str,
) -> Result<WriteBack> {
    let unchanged = || WriteBack {
        listing: staged.to_vec(),
        conflicts: Vec::new(),
        failed: None,
    };
    let root = format!("{WORKDIR}/{}", mount.path);
    let tree = match backend.get_archive(container, &root).await {
        Ok(t) => t,
        Err(SandboxError::NoSuchPath(_)) => {
            tracing::warn!(mount = %mount.path, "the mount's directory is gone; nothing written back");
            return Ok(unchanged());
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
        return Ok(unchanged());
    };

    let store = client.store(mount)?;
    let mut done = Progress::default();
    let failed = apply(
        &store, backend, container, mount, &root, staged, &files, session, &mut done,
    )
    .await
    .err();
    tracing::info!(
        mount = %mount.path,
        uploaded = done.uploaded,
        deleted = done.deleted,
        conflicts = done.conflicts.len(),
        failed = failed.is_some(),
        "s3 mount written back"
    );
    Ok(WriteBack {
        listing: done.listing(staged),
        conflicts: done.conflicts,
        failed,
    })
}

/// What a write-back has done so far.
#[derive(Default)]
struct Progress {
    /// The files of the mount dealt with, as they now stand.
    written: Vec<StagedObject>,
    /// Staged keys whose file is gone and that were dealt with (deleted, found gone, or kept
    /// for the bucket's change): no longer part of the listing.
    removed: HashSet<String>,
    conflicts: Vec<Conflict>,
    uploaded: usize,
    deleted: usize,
}

impl Progress {
    /// The listing to record: what was dealt with, and the rest as it was staged. After a
    /// failure part way, the files already uploaded are recorded with their new ETags, so
    /// that a retry does not take the session's own uploads for someone else's change.
    fn listing(&self, staged: &[StagedObject]) -> Vec<StagedObject> {
        let written: HashSet<&str> = self.written.iter().map(|o| o.key.as_str()).collect();
        let mut out = self.written.clone();
        out.extend(
            staged
                .iter()
                .filter(|o| !written.contains(o.key.as_str()) && !self.removed.contains(&o.key))
                .cloned(),
        );
        out.sort_by(|a, b| a.key.cmp(&b.key));
        out
    }
}

/// Uploads the changed and new files of `files`, deletes the staged keys whose file is gone,
/// and records each step in `done` as it is taken.
#[allow(clippy::too_many_arguments)]
async fn apply(
    store: &impl ObjectStore,
    backend: &dyn SandboxBackend,
    container: &str,
    mount: &Mount,
    root: &str,
    staged: &[StagedObject],
    files: &[StagedObject],
    session: &str,
    done: &mut Progress,
) -> Result<()> {
    let before: HashMap<&str, &StagedObject> = staged.iter().map(|o| (o.key.as_str(), o)).collect();
    for f in files {
        let was = before.get(f.key.as_str()).copied();
        if was.is_some_and(|o| o.sha256 == f.sha256) {
            done.written.push(StagedObject {
                e_tag: was.and_then(|o| o.e_tag.clone()),
                ..f.clone()
            });
            continue;
        }
        let source = Source {
            backend,
            container,
            path: format!("{root}/{}", f.key),
        };
        let key = mount.key(&f.key);
        let failed = |e: &dyn std::fmt::Display| mount.refused(format!("uploading {}: {e}", f.key));
        let e_tag = match upload(store, &source, &key, condition(was)).await {
            Ok(put) => {
                done.uploaded += 1;
                put.e_tag
            }
            Err(Upload::Refused) => {
                let copy = conflict_copy(&f.key, session);
                upload(store, &source, &mount.key(&copy), PutMode::Overwrite)
                    .await
                    .map_err(|e| failed(&e))?;
                tracing::warn!(mount = %mount.path, key = %f.key, copy = %copy, "changed in the bucket meanwhile; the sandbox's version kept beside it");
                done.conflicts.push(Conflict {
                    key: f.key.clone(),
                    kind: if was.is_some() { "changed" } else { "created" },
                    sandbox_copy: Some(copy),
                });
                // The version the sandbox started from stays the condition: the sandbox
                // has not seen the bucket's, so a later change of its file conflicts again
                // (refreshing the copy) rather than replacing theirs. Its file, unchanged,
                // is not uploaded again.
                was.and_then(|o| o.e_tag.clone())
            }
            Err(e) => return Err(failed(&e)),
        };
        done.written.push(StagedObject { e_tag, ..f.clone() });
    }
    let now: HashSet<&str> = files.iter().map(|f| f.key.as_str()).collect();
    for o in staged.iter().filter(|o| !now.contains(o.key.as_str())) {
        let key = mount.key(&o.key);
        let refused = |e: &dyn std::fmt::Display| mount.refused(format!("deleting {}: {e}", o.key));
        // Deleted only while it is the version staged; an object whose version was never
        // known (a record from before ETags were kept, or a key both sides created) is kept.
        match store.head(&key).await {
            Err(object_store::Error::NotFound { .. }) => {}
            Err(e) => return Err(refused(&e)),
            Ok(m) if o.e_tag.is_some() && m.e_tag == o.e_tag => match store.delete(&key).await {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => done.deleted += 1,
                Err(e) => return Err(refused(&e)),
            },
            Ok(_) => {
                tracing::warn!(mount = %mount.path, key = %o.key, "deleted in the sandbox but not the version it staged; kept");
                done.conflicts.push(Conflict {
                    key: o.key.clone(),
                    kind: "deleted",
                    sandbox_copy: None,
                });
            }
        }
        done.removed.insert(o.key.clone());
    }
    Ok(())
}

/// The condition an upload of a file staged as `was` (or new, `None`) is made on. A version
/// never known (no ETag) is never overwritten: such a file is created only where nothing is.
fn condition(was: Option<&StagedObject>) -> PutMode {
    match was {
        None | Some(StagedObject { e_tag: None, .. }) => PutMode::Create,
        Some(StagedObject {
            e_tag: Some(e_tag), ..
        }) => PutMode::Update(UpdateVersion {
            e_tag: Some(e_tag.clone()),
            version: None,
        }),
    }
}

/// `dir/name.ext` → `dir/name.conflict-<session>.ext`; a name without an extension (or a
/// dotfile) gets the suffix at its end.
fn conflict_copy(key: &str, session: &str) -> String {
    let (dir, name) = match key.rsplit_once('/') {
        Some((d, n)) => (Some(d), n),
        None => (None, key),
    };
    let name = match name.rsplit_once('.') {
        Some((stem, ext)) if !stem.is_empty() => format!("{stem}.conflict-{session}.{ext}"),
        _ => format!("{name}.conflict-{session}"),
    };
    match dir {
        Some(d) => format!("{d}/{name}"),
        None => name,
    }
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
        out.push(StagedObject {
            key,
            size,
            sha256,
            e_tag: None,
        });
    }
    Ok(Some(out))
}

/// A file of the sandbox to upload.
struct Source<'a> {
    backend: &'a dyn SandboxBackend,
    container: &'a str,
    path: String,
}

/// Why an upload did not happen.
enum Upload {
    /// The bucket's object is not the one staged (or a new key exists): its condition failed.
    Refused,
    Failed(ServiceError),
}

impl std::fmt::Display for Upload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Upload::Refused => f.write_str("the object was changed in the bucket meanwhile"),
            Upload::Failed(e) => e.fmt(f),
        }
    }
}

impl<E: Into<ServiceError>> From<E> for Upload {
    fn from(e: E) -> Self {
        Upload::Failed(e.into())
    }
}

fn io(e: std::io::Error) -> Upload {
    Upload::Failed(anyhow::Error::from(e).into())
}

/// Uploads `source` to `key` on condition `mode`, streamed out of the sandbox.
async fn upload(
    store: &impl ObjectStore,
    source: &Source<'_>,
    key: &ObjectPath,
    mode: PutMode,
) -> std::result::Result<PutResult, Upload> {
    let conditional = |e: object_store::Error| match e {
        object_store::Error::Precondition { .. } | object_store::Error::AlreadyExists { .. } => {
            Upload::Refused
        }
        e => Upload::Failed(anyhow::Error::from(e).into()),
    };
    let one = source
        .backend
        .get_archive(source.container, &source.path)
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
    if content.size > SINGLE_PUT_MAX && !matches!(mode, PutMode::Overwrite) {
        // The condition of an upload in parts, checked just before it.
        let now = match store.head(key).await {
            Ok(m) => Some(m.e_tag),
            Err(object_store::Error::NotFound { .. }) => None,
            Err(e) => return Err(conditional(e)),
        };
        let holds = match &mode {
            PutMode::Overwrite => true,
            PutMode::Create => now.is_none(),
            PutMode::Update(v) => now.is_some_and(|t| t.is_some() && t == v.e_tag),
        };
        if !holds {
            return Err(Upload::Refused);
        }
    }
    if content.size <= SINGLE_PUT_MAX {
        let chunks: Vec<Bytes> = content.body.try_collect().await.map_err(io)?;
        let payload: PutPayload = chunks.into_iter().collect();
        let opts = PutOptions {
            mode,
            ..Default::default()
        };
        store
            .put_opts(key, payload, opts)
            .await
            .map_err(conditional)
    } else {
        let mut w = WriteMultipart::new(store.put_multipart(key).await.map_err(conditional)?);
        let mut body = content.body;
        while let Some(chunk) = body.next().await {
            let chunk = match chunk {
                Ok(c) => c,
                Err(e) => {
                    let _ = w.abort().await;
                    return Err(io(e));
                }
            };
            w.wait_for_capacity(4).await.map_err(conditional)?;
            w.put(chunk);
        }
        w.finish().await.map_err(conditional)
    }
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

    fn obj(key: &str, sha: &str, e_tag: Option<&str>) -> StagedObject {
        StagedObject {
            key: key.into(),
            size: 1,
            sha256: sha.into(),
            e_tag: e_tag.map(Into::into),
        }
    }

    #[test]
    fn a_listing_after_a_failure_part_way_keeps_what_was_done_and_the_rest_as_staged() {
        let staged = [
            obj("a", "1", Some("ea")),
            obj("b", "1", Some("eb")),
            obj("c", "1", Some("ec")),
            obj("d", "1", Some("ed")),
        ];
        // `a` was uploaded (a new ETag), `c` was deleted; then `b` failed, and `d` (gone from
        // the sandbox) was never reached.
        let done = Progress {
            written: vec![obj("a", "2", Some("ea2"))],
            removed: ["c".to_owned()].into(),
            ..Default::default()
        };
        assert_eq!(
            done.listing(&staged),
            vec![
                obj("a", "2", Some("ea2")),
                obj("b", "1", Some("eb")),
                obj("d", "1", Some("ed")),
            ]
        );
    }

    #[test]
    fn a_version_never_known_is_never_overwritten() {
        assert!(matches!(condition(None), PutMode::Create));
        assert!(matches!(
            condition(Some(&obj("a", "1", None))),
            PutMode::Create
        ));
        assert!(matches!(
            condition(Some(&obj("a", "1", Some("e")))),
            PutMode::Update(UpdateVersion { e_tag: Some(ref t), .. }) if t == "e"
        ));
    }

    #[test]
    fn a_conflict_copy_keeps_the_extension_and_the_directory() {
        assert_eq!(conflict_copy("d/a.csv", "S"), "d/a.conflict-S.csv");
        assert_eq!(conflict_copy("a.tar.gz", "S"), "a.tar.conflict-S.gz");
        assert_eq!(conflict_copy("d/e/README", "S"), "d/e/README.conflict-S");
        assert_eq!(conflict_copy(".env", "S"), ".env.conflict-S");
    }
}
