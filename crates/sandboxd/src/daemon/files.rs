//! Files by absolute path, anywhere the sandbox user may read or write: contents streamed
//! in chunks both ways, stat, listings, removal, renames, directories.

use super::error::{Failure, Json};
use crate::proto::{
    check_path, DirListing, ErrorKind, FileKind, FileStat, MkdirRequest, RenameRequest, CHUNK,
    MAX_DIR_ENTRIES, SIZE_HEADER,
};
use axum::body::Body;
use axum::extract::Query;
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use tokio::io::AsyncWriteExt;

#[derive(serde::Deserialize)]
pub struct PathQuery {
    path: String,
}

fn checked(path: &str) -> Result<&str, Failure> {
    check_path(path)?;
    Ok(path)
}

fn kind_of(t: std::fs::FileType) -> FileKind {
    if t.is_symlink() {
        FileKind::Symlink
    } else if t.is_dir() {
        FileKind::Dir
    } else if t.is_file() {
        FileKind::File
    } else {
        FileKind::Other
    }
}

fn stat_of(name: String, m: &std::fs::Metadata) -> FileStat {
    FileStat {
        name,
        kind: kind_of(m.file_type()),
        size: m.len(),
        mode: m.mode() & 0o7777,
        mtime_ms: m.mtime() * 1000 + m.mtime_nsec() / 1_000_000,
    }
}

fn name_of(path: &str) -> String {
    Path::new(path)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "/".to_owned())
}

pub async fn stat(Query(q): Query<PathQuery>) -> Result<Json<FileStat>, Failure> {
    let path = checked(&q.path)?;
    let m = tokio::fs::metadata(path)
        .await
        .map_err(|e| Failure::io(path, &e))?;
    Ok(Json(stat_of(name_of(path), &m)))
}

/// The file's bytes, streamed; its size in [`SIZE_HEADER`].
pub async fn read(Query(q): Query<PathQuery>) -> Result<Response, Failure> {
    let path = checked(&q.path)?;
    let file = tokio::fs::File::open(path)
        .await
        .map_err(|e| Failure::io(path, &e))?;
    let m = file.metadata().await.map_err(|e| Failure::io(path, &e))?;
    if m.is_dir() {
        return Err(Failure::new(
            ErrorKind::IsADirectory,
            format!("{path} is a directory"),
        ));
    }
    let stream = tokio_util::io::ReaderStream::with_capacity(file, CHUNK);
    let mut response = Body::from_stream(stream).into_response();
    if let Ok(v) = HeaderValue::from_str(&m.len().to_string()) {
        response.headers_mut().insert(SIZE_HEADER, v);
    }
    Ok(response)
}

#[derive(serde::Deserialize)]
pub struct WriteQuery {
    path: String,
    /// The permission bits (0o644 when absent).
    #[serde(default)]
    mode: Option<u32>,
    /// Create missing parent directories.
    #[serde(default)]
    mkdirs: bool,
}

/// Writes the body to the path: into a new file beside it, renamed over it once whole, so
/// that a reader never sees half a file; where the directory is not writable but the file
/// is, in place.
pub async fn write(Query(q): Query<WriteQuery>, body: Body) -> Result<Json<FileStat>, Failure> {
    let path = checked(&q.path)?;
    let mode = q.mode.unwrap_or(0o644) & 0o7777;
    let target = Path::new(path);
    let parent = target
        .parent()
        .ok_or_else(|| Failure::invalid("cannot write to /"))?;
    if q.mkdirs {
        tokio::fs::create_dir_all(parent)
            .await
            .map_err(|e| Failure::io(&parent.display().to_string(), &e))?;
    }
    if let Ok(m) = tokio::fs::metadata(path).await {
        if m.is_dir() {
            return Err(Failure::new(
                ErrorKind::IsADirectory,
                format!("{path} is a directory"),
            ));
        }
    }
    let temp = parent.join(format!(
        ".{}.sandboxd-{}",
        name_of(path),
        &uuid::Uuid::new_v4().simple().to_string()[..8]
    ));
    let mut options = tokio::fs::OpenOptions::new();
    options.write(true).create_new(true).mode(mode);
    let (file, in_place) = match options.open(&temp).await {
        Ok(f) => (f, false),
        // A file the user may write in a directory it may not: written in place.
        Err(e)
            if e.kind() == std::io::ErrorKind::PermissionDenied
                && tokio::fs::try_exists(path).await.unwrap_or(false) =>
        {
            let f = tokio::fs::OpenOptions::new()
                .write(true)
                .truncate(true)
                .open(path)
                .await
                .map_err(|e| Failure::io(path, &e))?;
            (f, true)
        }
        Err(e) => return Err(Failure::io(&parent.display().to_string(), &e)),
    };
    let written = copy_body(body, file).await;
    let result = async {
        written.map_err(|e| Failure::io(path, &e))?;
        if !in_place {
            // `mode` at creation is filtered by the umask; set it exactly.
            tokio::fs::set_permissions(&temp, std::fs::Permissions::from_mode(mode))
                .await
                .map_err(|e| Failure::io(path, &e))?;
            tokio::fs::rename(&temp, path)
                .await
                .map_err(|e| Failure::io(path, &e))?;
        }
        let m = tokio::fs::metadata(path)
            .await
            .map_err(|e| Failure::io(path, &e))?;
        Ok(Json(stat_of(name_of(path), &m)))
    }
    .await;
    if result.is_err() && !in_place {
        let _ = tokio::fs::remove_file(&temp).await;
    }
    result
}

/// Writes the body into `file`. A tokio file hands every write to a blocking thread, so the
/// body's frames (16 KiB each) are gathered into writes of a mebibyte. Not synced to disk:
/// a sandbox's files are as durable as the sandbox (Docker's archive API does not sync
/// either); readers never see half a file because it is renamed into place whole.
async fn copy_body(body: Body, file: tokio::fs::File) -> std::io::Result<()> {
    let mut file = tokio::io::BufWriter::with_capacity(1 << 20, file);
    let mut stream = body.into_data_stream();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(std::io::Error::other)?;
        file.write_all(&chunk).await?;
    }
    file.flush().await
}

#[derive(serde::Deserialize)]
pub struct ListQuery {
    path: String,
    #[serde(default)]
    limit: Option<usize>,
}

/// The directory's entries by name (symlinks as such, not followed).
pub async fn list(Query(q): Query<ListQuery>) -> Result<Json<DirListing>, Failure> {
    let path = checked(&q.path)?.to_owned();
    let limit = q.limit.unwrap_or(MAX_DIR_ENTRIES).min(MAX_DIR_ENTRIES);
    let listing = tokio::task::spawn_blocking(move || -> Result<DirListing, Failure> {
        let dir = std::fs::read_dir(&path).map_err(|e| Failure::io(&path, &e))?;
        let mut entries = Vec::new();
        let mut truncated = false;
        for entry in dir {
            let entry = entry.map_err(|e| Failure::io(&path, &e))?;
            if entries.len() == limit {
                truncated = true;
                break;
            }
            let name = entry.file_name().to_string_lossy().into_owned();
            // An entry removed meanwhile is left out.
            if let Ok(m) = entry.metadata() {
                entries.push(stat_of(name, &m));
            }
        }
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(DirListing { entries, truncated })
    })
    .await
    .map_err(|_| Failure::new(ErrorKind::Internal, "listing failed"))??;
    Ok(Json(listing))
}

#[derive(serde::Deserialize)]
pub struct RemoveQuery {
    path: String,
    #[serde(default)]
    recursive: bool,
}

pub async fn remove(Query(q): Query<RemoveQuery>) -> Result<StatusCode, Failure> {
    let path = checked(&q.path)?;
    if Path::new(path).parent().is_none() {
        return Err(Failure::invalid("cannot remove /"));
    }
    let m = tokio::fs::symlink_metadata(path)
        .await
        .map_err(|e| Failure::io(path, &e))?;
    let removed = if m.is_dir() && q.recursive {
        tokio::fs::remove_dir_all(path).await
    } else if m.is_dir() {
        tokio::fs::remove_dir(path).await
    } else {
        tokio::fs::remove_file(path).await
    };
    removed.map_err(|e| Failure::io(path, &e))?;
    Ok(StatusCode::NO_CONTENT)
}

pub async fn rename(Json(req): Json<RenameRequest>) -> Result<StatusCode, Failure> {
    checked(&req.from)?;
    checked(&req.to)?;
    tokio::fs::rename(&req.from, &req.to)
        .await
        .map_err(|e| Failure::io(&req.from, &e))?;
    Ok(StatusCode::NO_CONTENT)
}

pub async fn mkdir(Json(req): Json<MkdirRequest>) -> Result<Json<FileStat>, Failure> {
    let path = checked(&req.path)?;
    let made = if req.parents {
        tokio::fs::create_dir_all(path).await
    } else {
        tokio::fs::create_dir(path).await
    };
    made.map_err(|e| Failure::io(path, &e))?;
    let m = tokio::fs::metadata(path)
        .await
        .map_err(|e| Failure::io(path, &e))?;
    Ok(Json(stat_of(name_of(path), &m)))
}
