//! The workspace files API: list, read, upload and delete (API.md §2.6, §8.1).
//!
//! Every path is workspace-relative and checked lexically first ([`WorkspacePath`]). On a
//! running session the path is then resolved **inside the sandbox** (`realpath -m`, as the
//! sandbox user) and must stay under `/workspace`, so a symbolic link in any component cannot
//! lead outside it; the check and the action share one exec where they can (one round trip),
//! with paths passed as arguments, never as shell text. On a stopped session, listing and
//! reading come from the workspace archive its stop made, read from the blob store without
//! booting anything; links in the archive are never followed.
//!
//! Reads are streamed: the tar stream (from the sandbox or from the blob store) is parsed on a
//! blocking thread and the file's bytes are handed over a channel as they come.

use super::lifecycle::not_found;
use super::Runtime;
use crate::blobs::{BlobStore, ByteStream};
use crate::error::{Result, RuntimeError};
use bytes::Bytes;
use futures::{Stream, StreamExt};
use sandbox_agents_domain::event::{EventType, NewEvent};
use sandbox_agents_domain::session::{UploadResult, WorkspaceEntry};
use sandbox_agents_domain::{ProjectId, SessionId};
use sandbox_agents_sandbox::path::WorkspacePath;
use sandbox_agents_sandbox::{ExecOutput, ExecRequest, SandboxError, WORKDIR};
use sandbox_agents_store::sessions::{self, SessionRecord};
use sandbox_agents_store::{events, snapshots};
use serde_json::json;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::io::Read;
use std::sync::Arc;
use std::time::Duration;
use tar::EntryType;
use tokio::sync::{mpsc, oneshot};
use tokio_util::io::{StreamReader, SyncIoBridge};

/// The largest file one upload may carry.
pub const MAX_UPLOAD_BYTES: u64 = 100 * 1024 * 1024;
/// Bytes of a file handed over per chunk while streaming it out.
const CHUNK: usize = 64 * 1024;
/// Most bytes of `find` output a listing reads (about a million entries).
const LIST_MAX_OUTPUT: usize = 64 * 1024 * 1024;
/// How long the short checking scripts may run.
const CHECK_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a delete may run (a large tree takes a while).
const DELETE_TIMEOUT: Duration = Duration::from_secs(300);

// The scripts' exit codes, chosen clear of those of `sh`, `timeout` and the tools.
const EXIT_UNRESOLVABLE: i64 = 80;
const EXIT_ESCAPES: i64 = 81;
const EXIT_MISSING: i64 = 82;
const EXIT_IS_DIR: i64 = 83;
const EXIT_NOT_REGULAR: i64 = 84;
const EXIT_PARENT_NOT_DIR: i64 = 85;
const EXIT_IS_LINK: i64 = 86;
const EXIT_RM_FAILED: i64 = 87;

/// Resolves `$1` and refuses what leaves the workspace; shared by every script.
const RESOLVE: &str = r#"r=$(realpath -m -- "$1") || exit 80
case "$r" in /workspace|/workspace/*) ;; *) exit 81 ;; esac
"#;

/// `$1`: the absolute path. Lists a directory's entries, or the file itself, NUL-separated.
const LIST_SCRIPT: &str = r#"[ -e "$r" ] || exit 82
if [ -d "$r" ]; then
  exec find "$r" -mindepth 1 -maxdepth 1 -printf '%y\t%s\t%M\t%u\t%g\t%P\0'
fi
exec find "$r" -maxdepth 0 -printf '%y\t%s\t%M\t%u\t%g\t\0'
"#;

/// `$1`: the absolute path. Prints the resolved path of a regular file.
const READ_SCRIPT: &str = r#"[ -e "$r" ] || exit 82
[ -d "$r" ] && exit 83
[ -f "$r" ] || exit 84
printf '%s' "$r"
"#;

/// `$1`: the parent directory, `$2`: the file name. Prints the deepest existing ancestor of
/// the resolved parent and the resolved parent, NUL-separated; writes nothing.
const UPLOAD_SCRIPT: &str = r#"d=$r
while [ ! -e "$d" ] && [ ! -L "$d" ]; do d=$(dirname -- "$d"); done
{ [ -d "$d" ] && [ ! -L "$d" ]; } || exit 85
t=$r/$2
[ -L "$t" ] && exit 86
[ -d "$t" ] && exit 83
printf '%s\0%s' "$d" "$r"
"#;

/// `$1`: the parent directory, `$2`: the name, `$3`: `1` to remove directories. The last
/// component is never followed: a link is removed, not what it points at.
const DELETE_SCRIPT: &str = r#"t=$r/$2
[ -e "$t" ] || [ -L "$t" ] || exit 82
if [ -d "$t" ] && [ ! -L "$t" ]; then
  [ "$3" = 1 ] || exit 83
  rm -rf -- "$t" || exit 87
else
  rm -f -- "$t" || exit 87
fi
"#;

/// A file's bytes, streamed.
pub struct FileContent {
    /// The file's size (the stream's length).
    pub size: u64,
    pub body: ByteStream,
}

/// Where a session's workspace can be read.
enum Workspace {
    /// A running sandbox (its container id).
    Live(String),
    /// A stopped session: the blob key of its workspace archive (entries `workspace/...`).
    Archived(String),
}

/// What an operation was, for the "is a directory" message.
#[derive(Clone, Copy)]
enum Op {
    List,
    Read,
    Upload,
    Delete,
}

fn parse(raw: &str) -> Result<WorkspacePath> {
    WorkspacePath::parse(raw).map_err(RuntimeError::BadRequest)
}

/// How a path is named in messages: workspace-relative, `.` for the root.
fn shown(p: &WorkspacePath) -> String {
    if p.is_root() {
        ".".into()
    } else {
        p.relative().to_owned()
    }
}

fn missing(p: &WorkspacePath) -> RuntimeError {
    RuntimeError::Sandbox(SandboxError::NoSuchPath(shown(p)))
}

fn escapes(p: &WorkspacePath) -> RuntimeError {
    RuntimeError::BadRequest(format!(
        "path leaves the workspace: '{}' resolves outside {WORKDIR} through a symbolic link",
        shown(p)
    ))
}

fn is_dir(p: &WorkspacePath, op: Op) -> RuntimeError {
    let name = shown(p);
    RuntimeError::BadRequest(match op {
        Op::Read => format!("'{name}' is a directory; list it with GET /files instead"),
        Op::Delete => format!("'{name}' is a directory; pass recursive=true to delete it"),
        Op::Upload => format!("'{name}' is a directory; name a file to upload to"),
        Op::List => format!("'{name}' is a directory"),
    })
}

fn not_running(s: &SessionRecord) -> RuntimeError {
    RuntimeError::Conflict(format!(
        "session is not running (it is {}); start it first",
        match s.stopped_reason.as_deref() {
            Some(r) if s.status == "stopped" => format!("stopped, {r}"),
            _ => s.status.clone(),
        }
    ))
}

/// What a failed script means.
fn script_failed(out: &ExecOutput, p: &WorkspacePath, op: Op) -> RuntimeError {
    let stderr = String::from_utf8_lossy(&out.stderr).trim().to_owned();
    let name = shown(p);
    if out.timed_out {
        return RuntimeError::Conflict(format!(
            "the sandbox did not answer in time for '{name}'; try again"
        ));
    }
    match out.exit_code {
        EXIT_UNRESOLVABLE => RuntimeError::BadRequest(format!(
            "'{name}' cannot be resolved in the sandbox: {stderr}"
        )),
        EXIT_ESCAPES => escapes(p),
        EXIT_MISSING => missing(p),
        EXIT_IS_DIR => is_dir(p, op),
        EXIT_NOT_REGULAR => RuntimeError::BadRequest(format!("'{name}' is not a regular file")),
        EXIT_PARENT_NOT_DIR => RuntimeError::BadRequest(format!(
            "'{name}' cannot be written: one of its parents is not a directory"
        )),
        EXIT_IS_LINK => RuntimeError::BadRequest(format!(
            "'{name}' is a symbolic link; uploads do not write through links"
        )),
        EXIT_RM_FAILED => {
            RuntimeError::Conflict(format!("'{name}' could not be deleted: {stderr}"))
        }
        code => RuntimeError::Internal(anyhow::anyhow!(
            "a workspace script failed for '{name}' (exit {code}): {stderr}"
        )),
    }
}

/// `ls -l` style permissions: the type letter, then `rwx` three times with set-id and sticky
/// bits shown as `s`/`S` and `t`/`T`.
fn ls_permissions(kind: char, mode: u32) -> String {
    let mut s = String::with_capacity(10);
    s.push(kind);
    for (shift, special, (lower, upper)) in [
        (6, 0o4000, ('s', 'S')),
        (3, 0o2000, ('s', 'S')),
        (0, 0o1000, ('t', 'T')),
    ] {
        let bits = (mode >> shift) & 7;
        s.push(if bits & 4 != 0 { 'r' } else { '-' });
        s.push(if bits & 2 != 0 { 'w' } else { '-' });
        s.push(match (bits & 1 != 0, mode & special != 0) {
            (true, true) => lower,
            (false, true) => upper,
            (true, false) => 'x',
            (false, false) => '-',
        });
    }
    s
}

/// `rel/name`, or `name` at the root.
fn child(rel: &str, name: &str) -> String {
    if rel.is_empty() {
        name.to_owned()
    } else {
        format!("{rel}/{name}")
    }
}

/// Parses `find -printf '%y\t%s\t%M\t%u\t%g\t%P\0'` output; `rel` is the listed path.
fn parse_find(out: &[u8], rel: &str) -> Vec<WorkspaceEntry> {
    let mut entries: Vec<WorkspaceEntry> = out
        .split(|b| *b == 0)
        .filter(|r| !r.is_empty())
        .filter_map(|record| {
            let record = String::from_utf8_lossy(record);
            let mut f = record.splitn(6, '\t');
            let (y, size, perms, owner, group, name) = (
                f.next()?,
                f.next()?,
                f.next()?,
                f.next()?,
                f.next()?,
                f.next()?,
            );
            Some(WorkspaceEntry {
                path: if name.is_empty() {
                    if rel.is_empty() {
                        ".".into()
                    } else {
                        rel.to_owned()
                    }
                } else {
                    child(rel, name)
                },
                kind: match y {
                    "f" => "file",
                    "d" => "directory",
                    "l" => "symlink",
                    _ => "other",
                }
                .into(),
                size: size.parse().unwrap_or(0),
                permissions: perms.into(),
                owner: owner.into(),
                group: group.into(),
            })
        })
        .collect();
    entries.sort_by(|a, b| a.path.cmp(&b.path));
    entries
}

/// An archive entry's name as workspace-relative components joined by `/`; `None` for
/// entries outside `workspace/` (or climbing with `..`). `""` is the workspace itself.
fn workspace_name(raw: &[u8]) -> Option<String> {
    let raw = String::from_utf8_lossy(raw);
    let mut parts = raw.split('/').filter(|c| !c.is_empty() && *c != ".");
    if parts.next()? != "workspace" {
        return None;
    }
    let rest: Vec<&str> = parts.collect();
    if rest.contains(&"..") {
        return None;
    }
    Some(rest.join("/"))
}

/// Is `a` a proper ancestor of `b` (both workspace-relative, `""` = the root)?
fn is_ancestor(a: &str, b: &str) -> bool {
    if a.is_empty() {
        !b.is_empty()
    } else {
        b.len() > a.len() && b.starts_with(a) && b.as_bytes()[a.len()] == b'/'
    }
}

fn parent_of(name: &str) -> &str {
    name.rsplit_once('/').map_or("", |(p, _)| p)
}

fn tar_io(e: std::io::Error) -> RuntimeError {
    RuntimeError::Internal(anyhow::anyhow!("reading the workspace archive: {e}"))
}

/// The owner or group an archive header names: its name, else the sandbox user's for 1000.
fn tar_owner(name: Option<&[u8]>, id: Option<u64>) -> String {
    match (name.filter(|n| !n.is_empty()), id) {
        (Some(n), _) => String::from_utf8_lossy(n).into_owned(),
        (None, Some(1000)) => "sandbox".into(),
        (None, Some(0)) => "root".into(),
        (None, Some(id)) => id.to_string(),
        (None, None) => String::new(),
    }
}

/// One entry of an archived workspace, as listed.
fn tar_entry<R: Read>(
    path: String,
    e: &tar::Entry<'_, R>,
    sizes: &HashMap<String, u64>,
) -> WorkspaceEntry {
    let h = e.header();
    let mode = h.mode().unwrap_or(0);
    let (kind, letter, size) = match h.entry_type() {
        EntryType::Directory => ("directory", 'd', 0),
        EntryType::Regular | EntryType::Continuous | EntryType::GNUSparse => {
            ("file", '-', e.size())
        }
        EntryType::Link => {
            // A hard link: its data is the earlier entry's it names.
            let target = e
                .link_name_bytes()
                .and_then(|l| workspace_name(&l))
                .and_then(|t| sizes.get(&t).copied())
                .unwrap_or(0);
            ("file", '-', target)
        }
        EntryType::Symlink => (
            "symlink",
            'l',
            e.link_name_bytes().map_or(0, |l| l.len() as u64),
        ),
        EntryType::Fifo => ("other", 'p', 0),
        EntryType::Char => ("other", 'c', 0),
        EntryType::Block => ("other", 'b', 0),
        _ => ("other", '?', 0),
    };
    WorkspaceEntry {
        path: if path.is_empty() { ".".into() } else { path },
        kind: kind.into(),
        size: i64::try_from(size).unwrap_or(i64::MAX),
        permissions: ls_permissions(letter, mode),
        owner: tar_owner(h.username_bytes(), h.uid().ok()),
        group: tar_owner(h.groupname_bytes(), h.gid().ok()),
    }
}

/// Lists `rel` from an archived workspace (blocking): the directory's entries, or the one
/// entry (a link is listed as itself, never followed).
fn list_archive<R: Read>(reader: R, p: &WorkspacePath) -> Result<Vec<WorkspaceEntry>> {
    let rel = p.relative();
    let mut this: Option<WorkspaceEntry> = None;
    let mut children: BTreeMap<String, WorkspaceEntry> = BTreeMap::new();
    let mut has_descendants = false;
    let mut sizes: HashMap<String, u64> = HashMap::new();
    let mut archive = tar::Archive::new(reader);
    for entry in archive.entries().map_err(tar_io)? {
        let entry = entry.map_err(tar_io)?;
        let Some(name) = workspace_name(&entry.path_bytes()) else {
            continue;
        };
        let kind = entry.header().entry_type();
        if kind.is_file() {
            sizes.insert(name.clone(), entry.size());
        }
        if kind.is_symlink() && is_ancestor(&name, rel) {
            return Err(escapes(p));
        }
        if name == rel {
            this = Some(tar_entry(name, &entry, &sizes));
        } else if is_ancestor(rel, &name) {
            has_descendants = true;
            if parent_of(&name) == rel {
                let e = tar_entry(name.clone(), &entry, &sizes);
                children.insert(name, e);
            }
        }
    }
    match this {
        Some(e) if e.kind != "directory" => Ok(vec![e]),
        None if !has_descendants => Err(missing(p)),
        _ => Ok(children.into_values().collect()),
    }
}

/// Where the bytes of the entry being read go: first its size (or why there is none), then
/// its data in chunks.
struct Sink {
    ready: Option<oneshot::Sender<Result<u64>>>,
    chunks: mpsc::Sender<std::io::Result<Bytes>>,
}

impl Sink {
    fn fail(&mut self, e: RuntimeError) {
        match self.ready.take() {
            Some(ready) => {
                let _ = ready.send(Err(e));
            }
            None => {
                let _ = self
                    .chunks
                    .blocking_send(Err(std::io::Error::other(e.to_string())));
            }
        }
    }

    /// Announces the entry and sends its data; stops early when the reader went away.
    fn send<R: Read>(&mut self, size: u64, data: &mut R) {
        if let Some(ready) = self.ready.take() {
            if ready.send(Ok(size)).is_err() {
                return;
            }
        }
        let mut buf = vec![0u8; CHUNK];
        loop {
            match data.read(&mut buf) {
                Ok(0) => return,
                Ok(n) => {
                    if self
                        .chunks
                        .blocking_send(Ok(Bytes::copy_from_slice(&buf[..n])))
                        .is_err()
                    {
                        return;
                    }
                }
                Err(e) => {
                    let _ = self.chunks.blocking_send(Err(e));
                    return;
                }
            }
        }
    }
}

/// What scanning an archive for the wanted entry ended with.
enum Scan {
    /// The entry was found and sent (or the reason it cannot be, reported).
    Done,
    /// The entry is a hard link to this (workspace-relative) name.
    Follow(String),
    /// No such entry; `true` when entries below it exist (an implicit directory).
    Missing(bool),
}

/// Looks for `want` in an archived workspace and streams it to `sink` (blocking).
fn scan_archive<R: Read>(reader: R, want: &str, p: &WorkspacePath, sink: &mut Sink) -> Scan {
    let mut archive = tar::Archive::new(reader);
    let mut below = false;
    let entries = match archive.entries() {
        Ok(e) => e,
        Err(e) => {
            sink.fail(tar_io(e));
            return Scan::Done;
        }
    };
    for entry in entries {
        let mut entry = match entry {
            Ok(e) => e,
            Err(e) => {
                sink.fail(tar_io(e));
                return Scan::Done;
            }
        };
        let Some(name) = workspace_name(&entry.path_bytes()) else {
            continue;
        };
        let kind = entry.header().entry_type();
        if kind.is_symlink() && is_ancestor(&name, want) {
            sink.fail(escapes(p));
            return Scan::Done;
        }
        if is_ancestor(want, &name) {
            below = true;
        }
        if name != want {
            continue;
        }
        match kind {
            EntryType::Regular | EntryType::Continuous | EntryType::GNUSparse => {
                let size = entry.size();
                sink.send(size, &mut entry);
            }
            EntryType::Directory => sink.fail(is_dir(p, Op::Read)),
            EntryType::Symlink => sink.fail(RuntimeError::BadRequest(format!(
                "'{}' is a symbolic link; links are not followed in a stopped session's workspace",
                shown(p)
            ))),
            EntryType::Link => match entry.link_name_bytes().and_then(|l| workspace_name(&l)) {
                Some(target) => return Scan::Follow(target),
                None => sink.fail(RuntimeError::BadRequest(format!(
                    "'{}' is a link to outside the workspace",
                    shown(p)
                ))),
            },
            _ => sink.fail(RuntimeError::BadRequest(format!(
                "'{}' is not a regular file",
                shown(p)
            ))),
        }
        return Scan::Done;
    }
    Scan::Missing(below)
}

/// Streams the single regular file of a sandbox's `get_archive` answer (blocking).
fn scan_single<R: Read>(reader: R, p: &WorkspacePath, sink: &mut Sink) {
    let mut archive = tar::Archive::new(reader);
    let entries = match archive.entries() {
        Ok(e) => e,
        Err(e) => return sink.fail(tar_io(e)),
    };
    // The archive of one file has exactly one entry.
    if let Some(entry) = entries.into_iter().next() {
        let mut entry = match entry {
            Ok(e) => e,
            Err(e) => return sink.fail(tar_io(e)),
        };
        match entry.header().entry_type() {
            EntryType::Regular | EntryType::Continuous | EntryType::GNUSparse => {
                let size = entry.size();
                return sink.send(size, &mut entry);
            }
            EntryType::Directory => return sink.fail(is_dir(p, Op::Read)),
            _ => {
                return sink.fail(RuntimeError::BadRequest(format!(
                    "'{}' is not a regular file",
                    shown(p)
                )))
            }
        }
    }
    sink.fail(missing(p))
}

/// A blocking reader over a byte stream (for use on a blocking thread).
fn blocking_reader(stream: ByteStream, handle: tokio::runtime::Handle) -> impl Read {
    SyncIoBridge::new_with_handle(StreamReader::new(stream), handle)
}

/// Runs `work` on a blocking thread with a [`Sink`]; returns once it announced the entry
/// (or failed), with the rest of the data arriving through the stream.
async fn stream_from_blocking<F>(work: F) -> Result<FileContent>
where
    F: FnOnce(&mut Sink) + Send + 'static,
{
    let (ready_tx, ready_rx) = oneshot::channel();
    let (tx, mut rx) = mpsc::channel::<std::io::Result<Bytes>>(8);
    tokio::task::spawn_blocking(move || {
        let mut sink = Sink {
            ready: Some(ready_tx),
            chunks: tx,
        };
        work(&mut sink);
    });
    let size = ready_rx
        .await
        .map_err(|_| anyhow::anyhow!("the workspace reader stopped unexpectedly"))??;
    let body = futures::stream::poll_fn(move |cx| rx.poll_recv(cx)).boxed();
    Ok(FileContent { size, body })
}

/// A `Read` over a list of chunks, for building the upload's tar without joining them first.
struct Chunks(VecDeque<Bytes>);

impl Read for Chunks {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        while let Some(front) = self.0.front_mut() {
            if front.is_empty() {
                self.0.pop_front();
                continue;
            }
            let n = front.len().min(buf.len());
            buf[..n].copy_from_slice(&front[..n]);
            bytes::Buf::advance(front, n);
            return Ok(n);
        }
        Ok(0)
    }
}

/// A tar with one regular file, `name` (relative), mode 0644.
fn single_file_tar(name: &str, size: u64, data: VecDeque<Bytes>) -> std::io::Result<Vec<u8>> {
    let mut b = tar::Builder::new(Vec::with_capacity(size as usize + 4096 + name.len()));
    let mut h = tar::Header::new_gnu();
    h.set_entry_type(EntryType::Regular);
    h.set_mode(0o644);
    h.set_size(size);
    h.set_mtime(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0),
    );
    b.append_data(&mut h, name, Chunks(data))?;
    b.into_inner()
}

/// Is `name` usable as a file name on its own?
fn plain_name(name: &str) -> bool {
    !name.is_empty() && name != "." && name != ".." && !name.contains('/') && !name.contains('\0')
}

impl Runtime {
    /// Where the session's workspace can be read: the running sandbox, or a stopped
    /// session's archive (never booting anything). Other states are 409.
    async fn workspace(&self, project: ProjectId, id: SessionId) -> Result<Workspace> {
        let st = &self.inner;
        let s = sessions::get(&st.db, project, id)
            .await
            .map_err(|e| not_found(e, id))?;
        match (s.status.as_str(), &s.container_id) {
            ("running", Some(c)) => Ok(Workspace::Live(c.clone())),
            ("stopped", _) => {
                if let Some(key) = &s.workspace_archive {
                    return Ok(Workspace::Archived(key.clone()));
                }
                if let Some(snap) = s.boot_snapshot_id {
                    // Stopped before its first boot from a snapshot: the snapshot is its workspace.
                    if let Ok(snap) = snapshots::get(&st.db, project, snap).await {
                        return Ok(Workspace::Archived(snap.archive));
                    }
                }
                Err(RuntimeError::Conflict(format!(
                    "{}; its workspace was never archived",
                    not_running(&s)
                )))
            }
            _ => Err(not_running(&s)),
        }
    }

    /// Runs `sh -c RESOLVE+script sh args...` as the sandbox user.
    async fn workspace_script(
        &self,
        container: &str,
        script: &str,
        args: &[&str],
        timeout: Duration,
        max_output: usize,
    ) -> Result<ExecOutput> {
        let mut argv = vec![
            "sh".to_owned(),
            "-c".to_owned(),
            format!("{RESOLVE}{script}"),
            "sh".to_owned(),
        ];
        argv.extend(args.iter().map(|a| (*a).to_owned()));
        let req = ExecRequest {
            argv,
            workdir: None,
            env: Vec::new(),
            timeout,
            max_output,
            stdin: None,
        };
        self.inner.backend.exec(container, &req).await.map_err(gone)
    }

    fn blob_reader_opener(
        &self,
        key: String,
    ) -> impl Fn(&tokio::runtime::Handle) -> Result<Box<dyn Read + Send>> + Send + 'static {
        let blobs: Arc<dyn BlobStore> = self.inner.blobs.clone();
        move |handle| {
            let stream = handle.block_on(blobs.get(&key)).map_err(|e| {
                RuntimeError::Internal(anyhow::anyhow!("opening the workspace archive {key}: {e}"))
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
            Workspace::Live(container) => {
                let abs = p.absolute();
                let out = self
                    .workspace_script(
                        &container,
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
                    return Err(RuntimeError::BadRequest(format!(
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
            Workspace::Live(container) => {
                let abs = p.absolute();
                let out = self
                    .workspace_script(&container, READ_SCRIPT, &[&abs], CHECK_TIMEOUT, 64 * 1024)
                    .await?;
                if out.exit_code != 0 || out.timed_out {
                    return Err(script_failed(&out, &p, Op::Read));
                }
                let resolved = String::from_utf8(out.stdout).map_err(|_| {
                    RuntimeError::BadRequest(format!(
                        "'{}' has a name that is not UTF-8",
                        shown(&p)
                    ))
                })?;
                let stream = self
                    .inner
                    .backend
                    .get_archive(&container, &resolved)
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
        mut data: S,
    ) -> Result<UploadResult>
    where
        S: Stream<Item = std::io::Result<Bytes>> + Unpin + Send,
    {
        let named = |f: Option<&str>| -> Result<String> {
            match f {
                Some(f) if plain_name(f) => Ok(f.to_owned()),
                Some(f) => Err(RuntimeError::BadRequest(format!(
                    "the upload's filename '{f}' must be a plain file name (no '/', not '.' or '..')"
                ))),
                None => Err(RuntimeError::BadRequest(
                    "the multipart part 'file' has no filename; send one, or name the target with ?path=".into(),
                )),
            }
        };
        let p = match path {
            None => parse(&format!("uploads/{}", named(filename)?))?,
            Some(raw) if raw.ends_with('/') => parse(raw)?
                .join(&named(filename)?)
                .map_err(RuntimeError::BadRequest)?,
            Some(raw) => parse(raw)?,
        };
        let Some(name) = p.file_name().map(str::to_owned) else {
            return Err(RuntimeError::BadRequest(
                "the workspace root is a directory; name a file to upload to".into(),
            ));
        };
        let (_, container) = self.running(project, id).await?;
        let parent = p.parent().absolute();
        let out = self
            .workspace_script(
                &container,
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
            RuntimeError::BadRequest(format!("'{}' has a name that is not UTF-8", shown(&p)))
        })?;
        let (existing, resolved) = text
            .split_once('\0')
            .ok_or_else(|| anyhow::anyhow!("the upload check printed {text:?}"))?;
        // The archive is extracted into the deepest directory that exists (no link in it);
        // the directories still missing come with it, owned by the sandbox user.
        let below = resolved
            .strip_prefix(existing)
            .map(|s| s.trim_start_matches('/'))
            .ok_or_else(|| anyhow::anyhow!("the upload check printed {text:?}"))?;
        let entry = child(below, &name);

        let mut chunks = VecDeque::new();
        let mut size: u64 = 0;
        while let Some(chunk) = data.next().await {
            let chunk = chunk.map_err(|e| {
                RuntimeError::BadRequest(format!("the upload could not be read: {e}"))
            })?;
            size += chunk.len() as u64;
            if size > MAX_UPLOAD_BYTES {
                return Err(RuntimeError::BadRequest(format!(
                    "the file is larger than {} MiB",
                    MAX_UPLOAD_BYTES / (1024 * 1024)
                )));
            }
            chunks.push_back(chunk);
        }
        let tar = tokio::task::spawn_blocking(move || single_file_tar(&entry, size, chunks))
            .await
            .map_err(|e| anyhow::anyhow!("building the upload: {e}"))?
            .map_err(|e| anyhow::anyhow!("building the upload: {e}"))?;
        self.inner
            .backend
            .put_archive(&container, existing, Bytes::from(tar))
            .await
            .map_err(gone)?;
        sessions::touch(&self.inner.db, id).await?;
        let filename = filename.unwrap_or(&name);
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
            return Err(RuntimeError::BadRequest(
                "the workspace root cannot be deleted".into(),
            ));
        };
        let (_, container) = self.running(project, id).await?;
        let parent = p.parent().absolute();
        let flag = if recursive { "1" } else { "0" };
        let out = self
            .workspace_script(
                &container,
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

/// A sandbox that vanished under a running session (a concurrent stop) is a conflict.
fn gone(e: SandboxError) -> RuntimeError {
    match e {
        SandboxError::NotFound(_) => RuntimeError::Conflict(
            "session is not running any more (its sandbox is gone); start it first".into(),
        ),
        other => other.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permissions_are_ls_style() {
        assert_eq!(ls_permissions('-', 0o644), "-rw-r--r--");
        assert_eq!(ls_permissions('d', 0o755), "drwxr-xr-x");
        assert_eq!(ls_permissions('-', 0o4755), "-rwsr-xr-x");
        assert_eq!(ls_permissions('d', 0o1777), "drwxrwxrwt");
        assert_eq!(ls_permissions('-', 0o2640), "-rw-r-S---");
    }

    #[test]
    fn find_output_is_parsed_and_sorted() {
        let out =
            b"f\t3\t-rw-r--r--\tsandbox\tsandbox\tb\tc\0d\t4096\tdrwxr-xr-x\tsandbox\tsandbox\ta\0";
        let got = parse_find(out, "out");
        assert_eq!(got.len(), 2);
        assert_eq!(
            (got[0].path.as_str(), got[0].kind.as_str()),
            ("out/a", "directory")
        );
        assert_eq!((got[1].path.as_str(), got[1].size), ("out/b\tc", 3));
        let one = parse_find(b"f\t3\t-rw-r--r--\tsandbox\tsandbox\t\0", "out/x.md");
        assert_eq!(one[0].path, "out/x.md");
    }

    fn archive() -> Vec<u8> {
        let mut b = tar::Builder::new(Vec::new());
        let dir = |b: &mut tar::Builder<Vec<u8>>, name: &str| {
            let mut h = tar::Header::new_gnu();
            h.set_entry_type(EntryType::Directory);
            h.set_mode(0o755);
            h.set_uid(1000);
            h.set_size(0);
            b.append_data(&mut h, name, std::io::empty()).unwrap();
        };
        dir(&mut b, "workspace/");
        dir(&mut b, "workspace/out/");
        let mut h = tar::Header::new_gnu();
        h.set_mode(0o644);
        h.set_uid(1000);
        h.set_size(5);
        let long = format!("workspace/out/{}.md", "x".repeat(120));
        b.append_data(&mut h, &long, &b"hello"[..]).unwrap();
        let mut h = tar::Header::new_gnu();
        h.set_mode(0o644);
        h.set_size(2);
        h.set_username("alice").unwrap();
        b.append_data(&mut h, "workspace/a.txt", &b"hi"[..])
            .unwrap();
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(EntryType::Symlink);
        h.set_size(0);
        b.append_link(&mut h, "workspace/etc", "/etc").unwrap();
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(EntryType::Link);
        h.set_size(0);
        b.append_link(&mut h, "workspace/hard", "workspace/a.txt")
            .unwrap();
        b.into_inner().unwrap()
    }

    #[test]
    fn archived_workspaces_are_listed_without_following_links() {
        let tar = archive();
        let root = list_archive(&tar[..], &WorkspacePath::parse(".").unwrap()).unwrap();
        let paths: Vec<_> = root.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(paths, ["a.txt", "etc", "hard", "out"]);
        assert_eq!(root[0].owner, "alice");
        assert_eq!(root[1].kind, "symlink");
        assert_eq!((root[2].kind.as_str(), root[2].size), ("file", 2));
        assert_eq!(root[3].permissions, "drwxr-xr-x");
        let out = list_archive(&tar[..], &WorkspacePath::parse("out").unwrap()).unwrap();
        assert_eq!(
            (out.len(), out[0].owner.as_str(), out[0].size),
            (1, "sandbox", 5)
        );
        let one = list_archive(&tar[..], &WorkspacePath::parse("a.txt").unwrap()).unwrap();
        assert_eq!(one[0].path, "a.txt");
        let e = list_archive(&tar[..], &WorkspacePath::parse("etc/passwd").unwrap()).unwrap_err();
        assert!(matches!(e, RuntimeError::BadRequest(_)), "{e}");
        let e = list_archive(&tar[..], &WorkspacePath::parse("nope").unwrap()).unwrap_err();
        assert!(matches!(
            e,
            RuntimeError::Sandbox(SandboxError::NoSuchPath(_))
        ));
    }

    #[test]
    fn upload_tars_hold_one_file() {
        let data: VecDeque<Bytes> = [Bytes::from_static(b"ab"), Bytes::from_static(b"cde")].into();
        let tar = single_file_tar("a/b.txt", 5, data).unwrap();
        let mut a = tar::Archive::new(&tar[..]);
        let mut e = a.entries().unwrap().next().unwrap().unwrap();
        let mut s = String::new();
        e.read_to_string(&mut s).unwrap();
        assert_eq!((s.as_str(), e.header().mode().unwrap()), ("abcde", 0o644));
        assert!(is_ancestor("", "a") && is_ancestor("a", "a/b") && !is_ancestor("a", "ab"));
        assert!(plain_name("x.txt") && !plain_name("..") && !plain_name("a/b"));
    }
}
