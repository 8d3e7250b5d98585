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
        sandbox: &str,
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
                .put_archive_stream(sandbox, existing, body)
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

/// Writes an upload through the sandbox's daemon, which runs as the sandbox user: no spool, no
/// tar, and the daemon replaces a file whole once every byte arrived (readers never see half
/// of it), mode 0644. Directories still missing between `existing` (the deepest one there) and
/// the target are made only once the whole file has arrived, in the same way: the file is
/// written next to them first and moved in. Over [`MAX_UPLOAD_BYTES`] the stream is cut and
/// nothing is left behind (a 400; the API turns a part over its limit into the 413).
pub(super) async fn daemon_write<S>(
    client: &sandbox_agents_sandbox::sandboxd::client::Client,
    existing: &str,
    parent: &str,
    name: &str,
    data: S,
) -> Result<u64>
where
    S: Stream<Item = std::io::Result<Bytes>> + Unpin + Send + 'static,
{
    use crate::processes::daemon_error;
    let target = format!("{}/{name}", parent.trim_end_matches('/'));
    let staged = (existing != parent).then(|| {
        format!(
            "{}/.sandbox-agents-upload-{}",
            existing.trim_end_matches('/'),
            uuid::Uuid::new_v4().simple()
        )
    });
    let over = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let broken = std::sync::Arc::new(std::sync::Mutex::new(None::<String>));
    let (flag, why) = (over.clone(), broken.clone());
    let mut seen: u64 = 0;
    let limited = data
        .map(move |chunk| {
            let chunk = chunk.inspect_err(|e| {
                *why.lock().unwrap_or_else(|p| p.into_inner()) = Some(e.to_string());
            })?;
            seen += chunk.len() as u64;
            if seen > MAX_UPLOAD_BYTES {
                flag.store(true, std::sync::atomic::Ordering::Relaxed);
                return Err(std::io::Error::other("over the limit"));
            }
            Ok(chunk)
        })
        .boxed();
    let first = staged.as_deref().unwrap_or(&target);
    let written = client.write_file(first, Some(0o644), false, limited).await;
    if over.load(std::sync::atomic::Ordering::Relaxed) {
        return Err(ServiceError::BadRequest(format!(
            "the file is larger than {} MiB",
            MAX_UPLOAD_BYTES / (1024 * 1024)
        )));
    }
    if let Some(msg) = broken.lock().unwrap_or_else(|p| p.into_inner()).take() {
        return Err(ServiceError::BadRequest(format!(
            "the upload could not be read: {msg}"
        )));
    }
    let stat = written.map_err(daemon_error)?;
    if let Some(staged) = &staged {
        let moved = async {
            client.mkdir(parent, true).await?;
            client.rename(staged, &target).await
        }
        .await;
        if let Err(e) = moved {
            let _ = client.remove(staged, false).await;
            return Err(daemon_error(e));
        }
    }
    Ok(stat.size)
}
