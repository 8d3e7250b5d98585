//! Blobs as files under a directory of this host (the default: `<data-dir>/blobs`).

use super::{check_key, BlobStore, ByteStream};
use async_trait::async_trait;
use futures::StreamExt;
use std::path::{Path, PathBuf};
use tokio::io::AsyncWriteExt;

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Blobs as files under a root directory.
pub struct LocalBlobStore {
    root: PathBuf,
}

impl LocalBlobStore {
    pub fn new(root: impl Into<PathBuf>) -> std::io::Result<Self> {
        let root = root.into();
        std::fs::create_dir_all(&root)?;
        Ok(Self { root })
    }

    /// Keys are `a/b/c` made by the lifecycle; anything that could leave the root is refused.
    fn path(&self, key: &str) -> std::io::Result<PathBuf> {
        check_key(key)?;
        Ok(self.root.join(key))
    }
}

#[async_trait]
impl BlobStore for LocalBlobStore {
    async fn put(&self, key: &str, mut data: ByteStream) -> std::io::Result<u64> {
        let path = self.path(key)?;
        let dir = path.parent().unwrap_or(Path::new("/")).to_owned();
        tokio::fs::create_dir_all(&dir).await?;
        // Write beside, fsync, then rename: a crash leaves the old blob or the new one. The
        // partial file is named after the key, so `delete` finds what a crash left of it.
        let tmp = dir.join(format!(
            ".{}.{}.partial",
            file_name(&path),
            uuid::Uuid::new_v4().simple()
        ));
        let mut file = tokio::fs::File::create(&tmp).await?;
        let mut size = 0u64;
        let written: std::io::Result<()> = async {
            while let Some(chunk) = data.next().await {
                let chunk = chunk?;
                size += chunk.len() as u64;
                file.write_all(&chunk).await?;
            }
            file.sync_all().await
        }
        .await;
        if let Err(e) = written {
            let _ = tokio::fs::remove_file(&tmp).await;
            return Err(e);
        }
        tokio::fs::rename(&tmp, &path).await?;
        Ok(size)
    }

    async fn get(&self, key: &str) -> std::io::Result<ByteStream> {
        let file = tokio::fs::File::open(self.path(key)?).await?;
        Ok(tokio_util::io::ReaderStream::with_capacity(file, 64 * 1024).boxed())
    }

    /// Removes the blob and whatever an interrupted `put` of it left beside it.
    async fn delete(&self, key: &str) -> std::io::Result<()> {
        let path = self.path(key)?;
        let partial = format!(".{}.", file_name(&path));
        if let Some(dir) = path.parent() {
            if let Ok(mut entries) = tokio::fs::read_dir(dir).await {
                while let Ok(Some(e)) = entries.next_entry().await {
                    let name = e.file_name().to_string_lossy().into_owned();
                    if name.starts_with(&partial) && name.ends_with(".partial") {
                        let _ = tokio::fs::remove_file(e.path()).await;
                    }
                }
            }
        }
        match tokio::fs::remove_file(&path).await {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    #[tokio::test]
    async fn blobs_round_trip_and_keys_cannot_escape() {
        let root = std::env::temp_dir().join(format!("sa-blobs-{}", uuid::Uuid::new_v4().simple()));
        let store = LocalBlobStore::new(&root).unwrap();
        let data = futures::stream::iter(vec![
            Ok(Bytes::from_static(b"hello ")),
            Ok(Bytes::from_static(b"world")),
        ])
        .boxed();
        assert_eq!(
            store.put("sessions/a/workspace.tar", data).await.unwrap(),
            11
        );
        let mut got = Vec::new();
        let mut s = store.get("sessions/a/workspace.tar").await.unwrap();
        while let Some(c) = s.next().await {
            got.extend_from_slice(&c.unwrap());
        }
        assert_eq!(got, b"hello world");
        store.delete("sessions/a/workspace.tar").await.unwrap();
        store.delete("sessions/a/workspace.tar").await.unwrap();
        assert_eq!(
            store
                .get("sessions/a/workspace.tar")
                .await
                .err()
                .unwrap()
                .kind(),
            std::io::ErrorKind::NotFound
        );
        for bad in ["../x", "/etc/passwd", "a//b", ""] {
            assert!(store.get(bad).await.is_err(), "{bad}");
        }
        // What an interrupted put left goes with the blob's delete; other blobs' do not.
        let left = root.join("tmp/.upload-1.0123.partial");
        let other = root.join("tmp/.upload-10.4567.partial");
        std::fs::create_dir_all(left.parent().unwrap()).unwrap();
        std::fs::write(&left, b"half").unwrap();
        std::fs::write(&other, b"half").unwrap();
        store.delete("tmp/upload-1").await.unwrap();
        assert!(!left.exists() && other.exists());
        std::fs::remove_dir_all(root).unwrap();
    }
}
