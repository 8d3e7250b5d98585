//! Streaming an upload into the sandbox: spooled to the blob store first (the tar header needs
//! the size before the bytes), then sent inside the framing of
//! `sandbox_agents_workspace::upload`. The file's bytes are never held in memory.

use super::MAX_UPLOAD_BYTES;
use crate::Sessions;
use bytes::Bytes;
use futures::{Stream, StreamExt};
use sandbox_agents_errors::{Result, ServiceError};
use sandbox_agents_store::garbage;
use sandbox_agents_workspace::paths::gone;
use sandbox_agents_workspace::upload::{upload_head, upload_tail};
use std::time::Duration;

impl Sessions {
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
                        ServiceError::BadRequest(msg.clone())
                    }
                    Some(CallerSide(msg)) => {
                        ServiceError::BadRequest(format!("the upload could not be read: {msg}"))
                    }
                    None => ServiceError::Internal(anyhow::anyhow!("spooling the upload: {e}")),
                }
            })?;
            let head =
                upload_head(entry, size).map_err(|e| ServiceError::BadRequest(e.to_string()))?;
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
