//! Files by absolute path anywhere the sandbox user may read or write, through the
//! sandbox's daemon: raw bytes streamed both ways, up to [`SANDBOX_FILE_MAX_BYTES`] each way.
//! Unlike the workspace's files they are not confined to the workspace and write no
//! `user.file` event: they are the sandbox's own business (a provider's plumbing, a tool's
//! scratch files), not the conversation's.

use crate::processes::daemon_error;
use crate::Sessions;
use bytes::Bytes;
use futures::stream::BoxStream;
use futures::StreamExt;
use sandbox_agents_domain::process::SandboxFile;
use sandbox_agents_domain::{ProjectId, SessionId};
use sandbox_agents_errors::{Result, ServiceError};
use sandbox_agents_sandbox::sandboxd::proto::{self, FileKind};
use time::OffsetDateTime;

/// The most bytes a read or a write of one sandbox file carries.
pub const SANDBOX_FILE_MAX_BYTES: u64 = 100 * 1024 * 1024;

fn absolute(path: &str) -> Result<()> {
    proto::check_path(path).map_err(|e| ServiceError::BadRequest(e.detail))
}

fn too_large() -> ServiceError {
    ServiceError::TooLarge(format!(
        "a sandbox file is at most {SANDBOX_FILE_MAX_BYTES} bytes (100 MiB) each way"
    ))
}

impl Sessions {
    /// The file's size and bytes, streamed.
    #[tracing::instrument(skip_all, fields(session.id = %id, path = %path))]
    pub async fn read_sandbox_file(
        &self,
        project: ProjectId,
        id: SessionId,
        path: &str,
    ) -> Result<(u64, BoxStream<'static, std::io::Result<Bytes>>)> {
        // The session first: another project's is a 404 whatever the path.
        let (_, client) = self.daemon_of(project, id).await?;
        absolute(path)?;
        let stat = client.stat(path).await.map_err(daemon_error)?;
        if stat.kind == FileKind::Dir {
            return Err(ServiceError::Conflict(format!("{path} is a directory")));
        }
        if stat.size > SANDBOX_FILE_MAX_BYTES {
            return Err(too_large());
        }
        let (size, stream) = client.read_file(path).await.map_err(daemon_error)?;
        let _ = sandbox_agents_store::sessions::touch(&self.inner.db, id).await;
        // A file that grows while it is read is cut at the limit.
        let mut sent = 0u64;
        let capped = stream
            .map(|chunk| chunk.map_err(std::io::Error::other))
            .take_while(move |chunk| {
                let ok = match chunk {
                    Ok(c) => {
                        sent += c.len() as u64;
                        sent <= SANDBOX_FILE_MAX_BYTES
                    }
                    Err(_) => true,
                };
                futures::future::ready(ok)
            })
            .boxed();
        Ok((size.unwrap_or(stat.size), capped))
    }

    /// Writes the file whole (readers never see half of it), creating missing parent
    /// directories; `mode` defaults to 0o644.
    #[tracing::instrument(skip_all, fields(session.id = %id, path = %path))]
    pub async fn write_sandbox_file(
        &self,
        project: ProjectId,
        id: SessionId,
        path: &str,
        mode: Option<u32>,
        body: BoxStream<'static, std::io::Result<Bytes>>,
    ) -> Result<SandboxFile> {
        let (_, client) = self.daemon_of(project, id).await?;
        absolute(path)?;
        if mode.is_some_and(|m| m > 0o7777) {
            return Err(ServiceError::BadRequest(
                "mode is the permission bits, at most 0o7777".into(),
            ));
        }
        let over = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = over.clone();
        let mut received = 0u64;
        let capped = body
            .map(move |chunk| {
                let chunk = chunk?;
                received += chunk.len() as u64;
                if received > SANDBOX_FILE_MAX_BYTES {
                    flag.store(true, std::sync::atomic::Ordering::Relaxed);
                    return Err(std::io::Error::other("over the limit"));
                }
                Ok(chunk)
            })
            .boxed();
        let written = client.write_file(path, mode, true, capped).await;
        if over.load(std::sync::atomic::Ordering::Relaxed) {
            return Err(too_large());
        }
        let stat = written.map_err(daemon_error)?;
        let _ = sandbox_agents_store::sessions::touch(&self.inner.db, id).await;
        Ok(SandboxFile {
            path: path.to_owned(),
            size: stat.size,
            mode: stat.mode,
            modified_at: OffsetDateTime::from_unix_timestamp_nanos(
                i128::from(stat.mtime_ms) * 1_000_000,
            )
            .unwrap_or(OffsetDateTime::UNIX_EPOCH),
        })
    }
}

/// Paths of a running sandbox by absolute path, as the daemon sees them (the E2B API's
/// filesystem service): each call checks the session first, so another project's is a 404
/// whatever the path.
impl Sessions {
    pub async fn stat_sandbox_path(
        &self,
        project: ProjectId,
        id: SessionId,
        path: &str,
    ) -> Result<proto::FileStat> {
        let (_, client) = self.daemon_of(project, id).await?;
        absolute(path)?;
        client.stat(path).await.map_err(daemon_error)
    }

    pub async fn list_sandbox_dir(
        &self,
        project: ProjectId,
        id: SessionId,
        path: &str,
    ) -> Result<proto::DirListing> {
        let (_, client) = self.daemon_of(project, id).await?;
        absolute(path)?;
        client.list_dir(path).await.map_err(daemon_error)
    }

    /// Makes the directory and its missing parents; a 409 when it exists already.
    pub async fn make_sandbox_dir(
        &self,
        project: ProjectId,
        id: SessionId,
        path: &str,
    ) -> Result<proto::FileStat> {
        let (_, client) = self.daemon_of(project, id).await?;
        absolute(path)?;
        if client.stat(path).await.is_ok() {
            return Err(ServiceError::Conflict(format!("{path} exists already")));
        }
        client.mkdir(path, true).await.map_err(daemon_error)
    }

    pub async fn remove_sandbox_path(
        &self,
        project: ProjectId,
        id: SessionId,
        path: &str,
    ) -> Result<()> {
        let (_, client) = self.daemon_of(project, id).await?;
        absolute(path)?;
        client.remove(path, true).await.map_err(daemon_error)
    }

    pub async fn rename_sandbox_path(
        &self,
        project: ProjectId,
        id: SessionId,
        from: &str,
        to: &str,
    ) -> Result<proto::FileStat> {
        let (_, client) = self.daemon_of(project, id).await?;
        absolute(from)?;
        absolute(to)?;
        client.rename(from, to).await.map_err(daemon_error)?;
        client.stat(to).await.map_err(daemon_error)
    }
}
