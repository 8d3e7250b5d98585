//! The workspace files API: list, read, upload and delete, confined to `/workspace`.
//!
//! Every path is workspace-relative and checked lexically first ([`WorkspacePath`]). On a
//! running session the path is then resolved **inside the sandbox** (`realpath -m`, as the
//! sandbox user) and must stay under `/workspace`, so a symbolic link in any component cannot
//! lead outside it; the check and the action share one exec where they can (one round trip),
//! with paths passed as arguments, never as shell text. On a stopped session, listing and
//! reading come from the workspace archive its stop made, read from the blob store without
//! booting anything; links in the archive are never followed.
//!
//! The tar parsing, the confinement scripts and the path errors are
//! `sandbox-agents-workspace`'s; this module decides where a session's workspace is (its
//! sandbox or its archive) and records what happened.
//!
//! Reads are streamed: the tar stream (from the sandbox or from the blob store) is parsed on a
//! blocking thread and the file's bytes are handed over a channel as they come.

mod upload;

use crate::exec::sandbox_env;
use crate::lease::not_found;
use crate::Sessions;
use bytes::Bytes;
use futures::{Stream, StreamExt};
use sandbox_agents_domain::event::{EventType, NewEvent};
use sandbox_agents_domain::session::SessionStatus;
use sandbox_agents_domain::session::{UploadResult, WorkspaceEntry};
use sandbox_agents_domain::{ProjectId, SessionId};
use sandbox_agents_errors::{Result, ServiceError};
use sandbox_agents_sandbox::SandboxError;
use sandbox_agents_store::sessions;
use sandbox_agents_store::{events, snapshots};
use sandbox_agents_workspace::archive::{list_archive, scan_archive, scan_single, Scan};
use sandbox_agents_workspace::blobs::BlobStore;
use sandbox_agents_workspace::listing::{child, parse_find};
use sandbox_agents_workspace::paths::{gone, is_dir, missing, parse, shown, Op};
use sandbox_agents_workspace::scripts::{
    run_script, script_failed, DELETE_SCRIPT, LIST_SCRIPT, READ_SCRIPT, UPLOAD_SCRIPT,
};
use sandbox_agents_workspace::stream::{blocking_reader, stream_from_blocking};
use sandbox_agents_workspace::upload::plain_name;
pub use sandbox_agents_workspace::FileContent;
use serde_json::json;
use std::io::Read;
use std::sync::Arc;
use std::time::Duration;

/// The largest file one upload may carry.
pub const MAX_UPLOAD_BYTES: u64 = 100 * 1024 * 1024;
/// Most bytes of `find` output a listing reads (about a million entries).
const LIST_MAX_OUTPUT: usize = 64 * 1024 * 1024;
/// How long the short checking scripts may run.
const CHECK_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a delete may run (a large tree takes a while).
const DELETE_TIMEOUT: Duration = Duration::from_secs(300);

/// Where a session's workspace can be read.
enum Workspace {
    /// A running sandbox: its id, and the environment its commands run with.
    Live(String, Vec<(String, String)>),
    /// A stopped session: the blob key of its workspace archive (entries `workspace/...`).
    Archived(String),
}

impl Sessions {
    /// Where the session's workspace can be read: the running sandbox, or a stopped
    /// session's archive (never booting anything). Other states are 409.
    async fn workspace(&self, project: ProjectId, id: SessionId) -> Result<Workspace> {
        let st = &self.inner;
        let s = sessions::get(&st.db, project, id)
            .await
            .map_err(|e| not_found(e, id))?;
        match (s.status, &s.sandbox_id) {
            (SessionStatus::Running, Some(c)) => Ok(Workspace::Live(c.clone(), sandbox_env(&s))),
            (SessionStatus::Stopped, _) => {
                if let Some(key) = &s.workspace_archive {
                    return Ok(Workspace::Archived(key.clone()));
                }
                if let Some(snap) = s.boot_snapshot_id {
                    // Stopped before its first boot from a snapshot: the snapshot is its workspace.
                    if let Ok(snap) = snapshots::get(&st.db, project, snap).await {
                        return Ok(Workspace::Archived(snap.archive));
                    }
                }
                Err(ServiceError::Conflict(format!(
                    "{}; its workspace was never archived",
                    crate::not_running(&s)
                )))
            }
            _ => Err(crate::not_running(&s)),
        }
    }

    fn blob_reader_opener(
        &self,
        key: String,
    ) -> impl Fn(&tokio::runtime::Handle) -> Result<Box<dyn Read + Send>> + Send + 'static {
        let blobs: Arc<dyn BlobStore> = self.inner.blobs.clone();
        move |handle| {
            let stream = handle.block_on(blobs.get(&key)).map_err(|e| {
                ServiceError::Internal(anyhow::anyhow!("opening the workspace archive {key}: {e}"))
            })?;
            Ok(Box::new(blocking_reader(stream, handle.clone())))
        }
    }

    /// `GET /files`: a directory's entries (not recursive, sorted by path), or the file itself
    /// as one entry.
    #[tracing::instrument(skip_all, fields(session.id = %id))]
    pub async fn list_files(
        &self,
        project: ProjectId,
        id: SessionId,
        path: &str,
    ) -> Result<Vec<WorkspaceEntry>> {
        let p = parse(path)?;
        match self.workspace(project, id).await? {
            Workspace::Live(sandbox, env) => {
                let abs = p.absolute();
                let out = run_script(
                    self.inner.backend.as_ref(),
                    &sandbox,
                    &env,
                    LIST_SCRIPT,
                    &[&abs],
                    CHECK_TIMEOUT,
                    LIST_MAX_OUTPUT,
                )
                .await?;
                if out.exit_code != 0 || out.timed_out {
                    return Err(script_failed(&out, &p, Op::List));
                }
                if out.stdout_truncated {
                    return Err(ServiceError::BadRequest(format!(
                        "'{}' has too many entries to list",
                        shown(&p)
                    )));
                }
                Ok(parse_find(&out.stdout, p.relative()))
            }
            Workspace::Archived(key) => {
                let open = self.blob_reader_opener(key);
                let handle = tokio::runtime::Handle::current();
                tokio::task::spawn_blocking(move || list_archive(open(&handle)?, &p))
                    .await
                    .map_err(|e| anyhow::anyhow!("listing the workspace archive: {e}"))?
            }
        }
    }

    /// `GET /files/content`: a regular file's bytes, streamed.
    #[tracing::instrument(skip_all, fields(session.id = %id))]
    pub async fn read_file(
        &self,
        project: ProjectId,
        id: SessionId,
        path: &str,
    ) -> Result<FileContent> {
        let p = parse(path)?;
        if p.is_root() {
            return Err(is_dir(&p, Op::Read));
        }
        let handle = tokio::runtime::Handle::current();
        match self.workspace(project, id).await? {
            Workspace::Live(sandbox, env) => {
                let abs = p.absolute();
                let out = run_script(
                    self.inner.backend.as_ref(),
                    &sandbox,
                    &env,
                    READ_SCRIPT,
                    &[&abs],
                    CHECK_TIMEOUT,
                    64 * 1024,
                )
                .await?;
                if out.exit_code != 0 || out.timed_out {
                    return Err(script_failed(&out, &p, Op::Read));
                }
                let resolved = String::from_utf8(out.stdout).map_err(|_| {
                    ServiceError::BadRequest(format!(
                        "'{}' has a name that is not UTF-8",
                        shown(&p)
                    ))
                })?;
                // Through the daemon, the bytes come as they are (no tar, no archive call to
                // the backend); without one, out of a tar of the file.
                if let Some(client) = self.inner.backend.daemon(&sandbox).await {
                    return daemon_read(&client, &resolved, &p).await;
                }
                let stream = self
                    .inner
                    .backend
                    .get_archive(&sandbox, &resolved)
                    .await
                    .map_err(|e| match e {
                        SandboxError::NoSuchPath(_) => missing(&p),
                        other => gone(other),
                    })?
                    .map(|r| r.map_err(|e| std::io::Error::other(e.to_string())))
                    .boxed();
                stream_from_blocking(move |sink| {
                    scan_single(blocking_reader(stream, handle), &p, sink)
                })
                .await
            }
            Workspace::Archived(key) => {
                let open = self.blob_reader_opener(key);
                stream_from_blocking(move |sink| {
                    let mut want = p.relative().to_owned();
                    // At most one hop: a hard link names a regular file stored earlier.
                    for hop in 0..2 {
                        let reader = match open(&handle) {
                            Ok(r) => r,
                            Err(e) => return sink.fail(e),
                        };
                        match scan_archive(reader, &want, &p, sink) {
                            Scan::Done => return,
                            Scan::Follow(target) if hop == 0 => want = target,
                            Scan::Follow(_) => break,
                            Scan::Missing(true) => return sink.fail(is_dir(&p, Op::Read)),
                            Scan::Missing(false) => return sink.fail(missing(&p)),
                        }
                    }
                    sink.fail(missing(&p))
                })
                .await
            }
        }
    }

    /// `POST /files`: writes one file (mode 0644, owned by the sandbox user, parents created)
    /// at `path`, or at `uploads/<filename>` when there is none (a `path` ending in `/` names a
    /// directory to put it in). Checks the session and the path before reading `data`; `data`
    /// longer than [`MAX_UPLOAD_BYTES`] is refused. Records a `user.file` event.
    #[tracing::instrument(skip_all, fields(session.id = %id))]
    pub async fn upload_file<S>(
        &self,
        project: ProjectId,
        id: SessionId,
        path: Option<&str>,
        filename: Option<&str>,
        data: S,
    ) -> Result<UploadResult>
    where
        S: Stream<Item = std::io::Result<Bytes>> + Unpin + Send + 'static,
    {
        self.put_file(project, id, path, filename, data, true).await
    }

    /// [`Sessions::upload_file`]; `announce` says whether to record `user.file` (a run's
    /// `write_file` tool writes without it: its own `agent.tool_use` says what happened).
    pub async fn put_file<S>(
        &self,
        project: ProjectId,
        id: SessionId,
        path: Option<&str>,
        filename: Option<&str>,
        data: S,
        announce: bool,
    ) -> Result<UploadResult>
    where
        S: Stream<Item = std::io::Result<Bytes>> + Unpin + Send + 'static,
    {
        let named = |f: Option<&str>| -> Result<String> {
            match f {
                Some(f) if plain_name(f) => Ok(f.to_owned()),
                Some(f) => Err(ServiceError::BadRequest(format!(
                    "the upload's filename '{f}' must be a plain file name (no '/', not '.' or '..')"
                ))),
                None => Err(ServiceError::BadRequest(
                    "the multipart part 'file' has no filename; send one, or name the target with ?path=".into(),
                )),
            }
        };
        let p = match path {
            None => parse(&format!("uploads/{}", named(filename)?))?,
            Some(raw) if raw.ends_with('/') => parse(raw)?
                .join(&named(filename)?)
                .map_err(ServiceError::BadRequest)?,
            Some(raw) => parse(raw)?,
        };
        let Some(name) = p.file_name().map(str::to_owned) else {
            return Err(ServiceError::BadRequest(
                "the workspace root is a directory; name a file to upload to".into(),
            ));
        };
        let (session, sandbox) = self.running(project, id).await?;
        let env = sandbox_env(&session);
        let parent = p.parent().absolute();
        let out = run_script(
            self.inner.backend.as_ref(),
            &sandbox,
            &env,
            UPLOAD_SCRIPT,
            &[&parent, &name],
            CHECK_TIMEOUT,
            64 * 1024,
        )
        .await?;
        if out.exit_code != 0 || out.timed_out {
            return Err(script_failed(&out, &p, Op::Upload));
        }
        let text = String::from_utf8(out.stdout).map_err(|_| {
            ServiceError::BadRequest(format!("'{}' has a name that is not UTF-8", shown(&p)))
        })?;
        let (existing, resolved) = text
            .split_once('\0')
            .ok_or_else(|| anyhow::anyhow!("the upload check printed {text:?}"))?;
        // The archive is extracted into the deepest directory that exists (no link in it);
        // the directories still missing come with it, owned by the sandbox user. The daemon,
        // which runs as the sandbox user, creates them itself.
        let below = resolved
            .strip_prefix(existing)
            .map(|s| s.trim_start_matches('/'))
            .ok_or_else(|| anyhow::anyhow!("the upload check printed {text:?}"))?;
        let entry = child(below, &name);

        let size = match self.inner.backend.daemon(&sandbox).await {
            Some(client) => upload::daemon_write(&client, existing, resolved, &name, data).await?,
            None => self.stream_upload(&sandbox, existing, &entry, data).await?,
        };
        sessions::touch(&self.inner.db, id).await?;
        let filename = filename.unwrap_or(&name);
        if announce {
            events::append_now(
                &self.inner.db,
                id,
                &[NewEvent::new(
                    EventType::UserFile,
                    None,
                    json!({"path": p.relative(), "size": size, "filename": filename}),
                )],
            )
            .await?;
        }
        tracing::info!(path = p.relative(), bytes = size, "file uploaded");
        Ok(UploadResult {
            path: p.relative().to_owned(),
            size: i64::try_from(size).unwrap_or(i64::MAX),
        })
    }

    /// `DELETE /files`: removes a file or link (never what a link points at), or a directory
    /// when `recursive`. The workspace root cannot be deleted.
    #[tracing::instrument(skip_all, fields(session.id = %id))]
    pub async fn delete_file(
        &self,
        project: ProjectId,
        id: SessionId,
        path: &str,
        recursive: bool,
    ) -> Result<()> {
        let p = parse(path)?;
        let Some(name) = p.file_name().map(str::to_owned) else {
            return Err(ServiceError::BadRequest(
                "the workspace root cannot be deleted".into(),
            ));
        };
        let (session, sandbox) = self.running(project, id).await?;
        let env = sandbox_env(&session);
        let parent = p.parent().absolute();
        let flag = if recursive { "1" } else { "0" };
        let out = run_script(
            self.inner.backend.as_ref(),
            &sandbox,
            &env,
            DELETE_SCRIPT,
            &[&parent, &name, flag],
            DELETE_TIMEOUT,
            64 * 1024,
        )
        .await?;
        if out.exit_code != 0 || out.timed_out {
            return Err(script_failed(&out, &p, Op::Delete));
        }
        sessions::touch(&self.inner.db, id).await?;
        tracing::info!(path = p.relative(), recursive, "file deleted");
        Ok(())
    }
}

/// A live file's bytes through the sandbox's daemon, cut at the size it had when opened (the
/// response's length is announced before its bytes; a file that grows meanwhile is not read
/// past it, one that shrinks ends the body early).
async fn daemon_read(
    client: &sandbox_agents_sandbox::sandboxd::client::Client,
    resolved: &str,
    p: &sandbox_agents_sandbox::path::WorkspacePath,
) -> Result<FileContent> {
    use sandbox_agents_sandbox::sandboxd::client::is_not_found;
    let (size, stream) = match client.read_file(resolved).await {
        Ok((Some(size), stream)) => (size, stream),
        Ok((None, _)) => {
            return Err(ServiceError::Internal(anyhow::anyhow!(
                "the sandbox daemon sent a file without its size"
            )))
        }
        Err(e) if is_not_found(&e) => return Err(missing(p)),
        Err(e) => return Err(crate::processes::daemon_error(e)),
    };
    let body = stream
        .scan(size, |left, chunk| {
            if *left == 0 {
                return futures::future::ready(None);
            }
            let item = chunk.map_err(std::io::Error::other).map(|mut c| {
                let keep = usize::try_from(*left).unwrap_or(usize::MAX).min(c.len());
                c.truncate(keep);
                *left -= keep as u64;
                c
            });
            futures::future::ready(Some(item))
        })
        .boxed();
    Ok(FileContent { size, body })
}
