//! Blobs in an object store (S3 and S3-compatible stores) under a prefix.
//!
//! A put streams: up to [`PART_BYTES`] it is one PUT, beyond that a multipart upload whose
//! parts are sent as they fill, at most [`PARTS_IN_FLIGHT`] at a time, so a blob of any size
//! holds at most `PART_BYTES × (PARTS_IN_FLIGHT + 1)` in memory. The object appears when the
//! PUT or the multipart completion succeeds, whole or not at all; a failed multipart upload
//! is aborted (and a bucket lifecycle rule for incomplete uploads catches what a crash
//! leaves, see the README).

use super::{check_key, BlobStore, ByteStream};
use async_trait::async_trait;
use futures::{StreamExt, TryStreamExt};
use object_store::buffered::BufWriter;
use object_store::path::Path as ObjectPath;
use object_store::ObjectStore;
use std::sync::Arc;
use tokio::io::AsyncWriteExt;

/// The size of a multipart upload's parts (S3 wants at least 5 MiB but for the last).
const PART_BYTES: usize = 8 << 20;
/// Parts uploading at once for one blob.
const PARTS_IN_FLIGHT: usize = 2;

pub struct ObjectBlobStore {
    store: Arc<dyn ObjectStore>,
    /// Without leading or trailing `/`; `""` is the bucket's root.
    prefix: String,
}

impl ObjectBlobStore {
    pub fn new(store: Arc<dyn ObjectStore>, prefix: &str) -> Self {
        Self {
            store,
            prefix: prefix.trim_matches('/').to_owned(),
        }
    }

    fn path(&self, key: &str) -> std::io::Result<ObjectPath> {
        check_key(key)?;
        let full = if self.prefix.is_empty() {
            key.to_owned()
        } else {
            format!("{}/{key}", self.prefix)
        };
        ObjectPath::parse(&full)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))
    }

    /// Lists the prefix once: fails when the bucket is missing or the credentials are refused.
    pub async fn probe(&self) -> object_store::Result<()> {
        let prefix = (!self.prefix.is_empty()).then(|| ObjectPath::from(self.prefix.as_str()));
        self.store
            .list_with_delimiter(prefix.as_ref())
            .await
            .map(|_| ())
    }
}

fn io(e: object_store::Error) -> std::io::Error {
    match e {
        object_store::Error::NotFound { .. } => {
            std::io::Error::new(std::io::ErrorKind::NotFound, e)
        }
        e => std::io::Error::other(e),
    }
}

#[async_trait]
impl BlobStore for ObjectBlobStore {
    async fn put(&self, key: &str, mut data: ByteStream) -> std::io::Result<u64> {
        let path = self.path(key)?;
        let mut w = BufWriter::with_capacity(self.store.clone(), path, PART_BYTES)
            .with_max_concurrency(PARTS_IN_FLIGHT);
        let mut size = 0u64;
        let written: std::io::Result<()> = async {
            while let Some(chunk) = data.next().await {
                let chunk = chunk?;
                size += chunk.len() as u64;
                w.put(chunk).await.map_err(io)?;
            }
            w.shutdown().await
        }
        .await;
        if let Err(e) = written {
            // Nothing was completed, so no object appeared; free the parts already sent.
            if let Err(abort) = w.abort().await {
                tracing::warn!(key, error = %abort, "a failed multipart upload could not be aborted");
            }
            return Err(e);
        }
        Ok(size)
    }

    async fn get(&self, key: &str) -> std::io::Result<ByteStream> {
        let got = self.store.get(&self.path(key)?).await.map_err(io)?;
        Ok(got.into_stream().map_err(io).boxed())
    }

    async fn delete(&self, key: &str) -> std::io::Result<()> {
        match self.store.delete(&self.path(key)?).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(io(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use object_store::memory::InMemory;

    async fn read(store: &ObjectBlobStore, key: &str) -> Vec<u8> {
        let mut s = store.get(key).await.unwrap();
        let mut got = Vec::new();
        while let Some(c) = s.next().await {
            got.extend_from_slice(&c.unwrap());
        }
        got
    }

    #[tokio::test]
    async fn blobs_stream_in_parts_under_the_prefix_and_keys_cannot_leave_it() {
        let mem = Arc::new(InMemory::new());
        let store = ObjectBlobStore::new(mem.clone(), "/deploy/a/");
        // Larger than a part: goes up as a multipart upload, chunk by chunk.
        let big: Vec<u8> = (0..(PART_BYTES * 2 + 123))
            .map(|i| (i % 251) as u8)
            .collect();
        let chunks: Vec<std::io::Result<Bytes>> = big
            .chunks(1 << 20)
            .map(|c| Ok(Bytes::copy_from_slice(c)))
            .collect();
        let size = store
            .put(
                "sessions/s/workspace.tar",
                futures::stream::iter(chunks).boxed(),
            )
            .await
            .unwrap();
        assert_eq!(size, big.len() as u64);
        assert_eq!(read(&store, "sessions/s/workspace.tar").await, big);
        // Stored under the prefix, nowhere else.
        assert!(mem
            .head(&ObjectPath::from("deploy/a/sessions/s/workspace.tar"))
            .await
            .is_ok());

        let small = futures::stream::iter(vec![Ok(Bytes::from_static(b"log"))]).boxed();
        assert_eq!(store.put("builds/x.log", small).await.unwrap(), 3);
        assert_eq!(read(&store, "builds/x.log").await, b"log");

        store.delete("builds/x.log").await.unwrap();
        store.delete("builds/x.log").await.unwrap();
        assert_eq!(
            store.get("builds/x.log").await.err().unwrap().kind(),
            std::io::ErrorKind::NotFound
        );
        for bad in ["../x", "/etc/passwd", "a//b", ""] {
            assert!(store.get(bad).await.is_err(), "{bad}");
        }
    }

    #[tokio::test]
    async fn a_stream_that_fails_midway_leaves_the_old_blob() {
        let store = ObjectBlobStore::new(Arc::new(InMemory::new()), "");
        let one = futures::stream::iter(vec![Ok(Bytes::from_static(b"old"))]).boxed();
        store.put("k", one).await.unwrap();
        let failing = futures::stream::iter(vec![
            Ok(Bytes::from(vec![7u8; PART_BYTES + 1])),
            Err(std::io::Error::other("the sandbox went away")),
        ])
        .boxed();
        assert!(store.put("k", failing).await.is_err());
        assert_eq!(read(&store, "k").await, b"old");
    }
}
