//! Where workspace archives, snapshots, skill bundle versions, upload spools and environment
//! build logs live. [`BlobStore`] is what the services need; [`open`] picks the store a
//! deployment names with `--blob-url`:
//!
//! - none, or `file:///dir`: files under a directory of this host ([`LocalBlobStore`], the
//!   default `<data-dir>/blobs`). One host only: a second server process elsewhere cannot see
//!   them.
//! - `s3://bucket/prefix`: an S3 (or S3-compatible) bucket through the `object_store` crate
//!   ([`ObjectBlobStore`]), shared by every server process of the deployment.
//!
//! Why the local default is not `object_store`'s `LocalFileSystem`: it renames a finished
//! file into place without syncing it, so a crash right after a stop committed could leave a
//! workspace archive empty; ours syncs before the rename. Keys and layout are the same, so a
//! directory written by one can be served by the other.

mod local;
mod object;

pub use local::LocalBlobStore;
pub use object::ObjectBlobStore;

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::BoxStream;
use std::path::PathBuf;
use std::sync::Arc;

pub type ByteStream = BoxStream<'static, std::io::Result<Bytes>>;

#[async_trait]
pub trait BlobStore: Send + Sync + 'static {
    /// Stores `data` under `key`, replacing what was there; the new blob becomes visible
    /// whole or not at all. Returns its size.
    async fn put(&self, key: &str, data: ByteStream) -> std::io::Result<u64>;
    /// The blob's bytes, streamed; `NotFound` when there is none.
    async fn get(&self, key: &str) -> std::io::Result<ByteStream>;
    /// Removes a blob; a missing one is fine.
    async fn delete(&self, key: &str) -> std::io::Result<()>;
}

/// Keys are `a/b/c` made by the services; anything that could leave the store's root (or
/// its prefix in a bucket) is refused.
pub(crate) fn check_key(key: &str) -> std::io::Result<()> {
    let ok = !key.is_empty()
        && key
            .split('/')
            .all(|c| !c.is_empty() && c != "." && c != "..")
        && !key.contains('\0');
    if ok {
        Ok(())
    } else {
        Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("bad blob key {key:?}"),
        ))
    }
}

/// Where a deployment's blobs live, parsed from `--blob-url`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BlobLocation {
    Local(PathBuf),
    S3 { bucket: String, prefix: String },
}

impl BlobLocation {
    /// `file:///abs/dir` or `s3://bucket[/prefix]`; anything else is refused with the reason.
    pub fn parse(url: &str) -> Result<Self, String> {
        let url = url.trim();
        if let Some(path) = url.strip_prefix("file://") {
            if !path.starts_with('/') {
                return Err(format!(
                    "--blob-url {url:?}: a file URL names an absolute directory (file:///var/lib/sandbox-agents/blobs)"
                ));
            }
            return Ok(BlobLocation::Local(PathBuf::from(path)));
        }
        if let Some(rest) = url.strip_prefix("s3://") {
            let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
            if bucket.is_empty() {
                return Err(format!(
                    "--blob-url {url:?} names no bucket (s3://bucket/prefix)"
                ));
            }
            let prefix = prefix.trim_matches('/').to_owned();
            if !prefix.is_empty() {
                check_key(&prefix).map_err(|_| {
                    format!("--blob-url {url:?}: the prefix may not hold empty, '.' or '..' parts")
                })?;
            }
            return Ok(BlobLocation::S3 {
                bucket: bucket.to_owned(),
                prefix,
            });
        }
        Err(format!(
            "--blob-url {url:?}: expected s3://bucket/prefix or file:///directory"
        ))
    }
}

/// The store at `location`: a bucket is checked reachable with the credentials given (a HEAD
/// of one key), so a wrong key or bucket stops the server at start rather than at the first
/// stop that archives a workspace.
pub async fn open(
    location: &BlobLocation,
    s3: &crate::s3::S3Settings,
) -> anyhow::Result<Arc<dyn BlobStore>> {
    Ok(match location {
        BlobLocation::Local(dir) => Arc::new(LocalBlobStore::new(dir)?),
        BlobLocation::S3 { bucket, prefix } => {
            let store = crate::s3::build_store(s3, bucket, None)
                .map_err(|e| anyhow::anyhow!("the blob bucket {bucket}: {e}"))?;
            let blobs = ObjectBlobStore::new(Arc::new(store), prefix);
            blobs.probe().await.map_err(|e| {
                anyhow::anyhow!("the blob bucket s3://{bucket}/{prefix} is not usable: {e}")
            })?;
            Arc::new(blobs)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blob_urls_name_a_directory_or_a_bucket_and_prefix() {
        assert_eq!(
            BlobLocation::parse("s3://b/some/prefix/").unwrap(),
            BlobLocation::S3 {
                bucket: "b".into(),
                prefix: "some/prefix".into()
            }
        );
        assert_eq!(
            BlobLocation::parse("s3://b").unwrap(),
            BlobLocation::S3 {
                bucket: "b".into(),
                prefix: String::new()
            }
        );
        assert_eq!(
            BlobLocation::parse("file:///var/blobs").unwrap(),
            BlobLocation::Local("/var/blobs".into())
        );
        for bad in [
            "s3://",
            "s3:///x",
            "file://rel",
            "gs://b",
            "s3://b/../x",
            "/x",
        ] {
            assert!(BlobLocation::parse(bad).is_err(), "{bad}");
        }
    }
}
