//! envd's `/files`: a file's bytes (`GET`), and writes (`POST`) as the SDKs send them: the raw
//! bytes (`application/octet-stream`, gzip-encoded when the caller asked for it) to the query's
//! `path`, or multipart parts named `file`, each written whole to its filename (the full path;
//! the query's `path` names a single file's instead). Each file is at most
//! [`SANDBOX_FILE_MAX_BYTES`]; a body over it, or over [`MAX_UPLOAD_BYTES`] in all, is a 413.

use super::errors::{answer as http_error, service_error};
use super::target::Target;
use crate::state::AppState;
use axum::body::Body;
use axum::extract::Request;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use futures::stream::{BoxStream, StreamExt, TryStreamExt};
use sandbox_agents_domain::e2b::{e2b_path, sandbox_path};
use sandbox_agents_sessions::SANDBOX_FILE_MAX_BYTES;
use serde_json::{json, Value};

/// The most bytes one upload's body carries, all its files together.
pub const MAX_UPLOAD_BYTES: u64 = 4 * SANDBOX_FILE_MAX_BYTES;

/// The query's `path`, once: given twice it is refused, and under a signed URL it must be the
/// path the signature covers (else a URL signed for one file, with another `path` put first,
/// would open that other file).
fn query_path(req: &Request, t: &Target) -> Result<Option<String>, (StatusCode, &'static str)> {
    let mut paths = form_urlencoded::parse(req.uri().query().unwrap_or("").as_bytes())
        .filter(|(k, _)| k == "path")
        .map(|(_, v)| v.into_owned());
    let path = paths.next();
    if paths.next().is_some() {
        return Err((StatusCode::BAD_REQUEST, "path is given more than once"));
    }
    match (&t.only_path, &path) {
        (Some(signed), Some(p)) if signed == p => Ok(path),
        (Some(_), _) => Err((
            StatusCode::UNAUTHORIZED,
            "a signed URL opens the path it signs, no other",
        )),
        (None, _) => Ok(path),
    }
}

fn too_large() -> Response {
    http_error(
        StatusCode::PAYLOAD_TOO_LARGE,
        format!("a file is at most {SANDBOX_FILE_MAX_BYTES} bytes, and an upload at most {MAX_UPLOAD_BYTES}"),
    )
}

/// `GET /files?path=`: the file's bytes.
pub(super) async fn download(st: &AppState, t: &Target, req: Request) -> Response {
    let path = match query_path(&req, t) {
        Ok(Some(p)) => p,
        Ok(None) => return http_error(StatusCode::BAD_REQUEST, "path is required"),
        Err((status, why)) => return http_error(status, why),
    };
    let path = sandbox_path(&path);
    match st
        .e2b
        .sessions()
        .read_sandbox_file(t.project, t.id, &path)
        .await
    {
        Ok((size, stream)) => Response::builder()
            .header(header::CONTENT_TYPE, "application/octet-stream")
            .header(header::CONTENT_LENGTH, size)
            .body(Body::from_stream(stream))
            .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response()),
        Err(e) => service_error(e),
    }
}

/// `POST /files`: what was written, one `{name, type, path}` per file (paths as E2B sees them).
pub(super) async fn upload(st: &AppState, t: &Target, req: Request) -> Response {
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if declared.is_some_and(|n| n > MAX_UPLOAD_BYTES) {
        return too_large();
    }
    let query = match query_path(&req, t) {
        Ok(q) => q,
        Err((status, why)) => return http_error(status, why),
    };
    let content_type = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    let gzip = req
        .headers()
        .get(header::CONTENT_ENCODING)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("gzip"));
    let body = req
        .into_body()
        .into_data_stream()
        .map_err(std::io::Error::other)
        .boxed();
    let body = if gzip { gunzip(body) } else { body };
    if content_type.starts_with("multipart/form-data") {
        return parts(st, t, query, &content_type, body).await;
    }
    let Some(path) = query else {
        return http_error(StatusCode::BAD_REQUEST, "path is required");
    };
    match write(st, t, &path, body).await {
        Ok(written) => axum::Json(json!([written])).into_response(),
        Err(r) => r,
    }
}

/// The body, decompressed as it streams.
fn gunzip(
    body: BoxStream<'static, std::io::Result<bytes::Bytes>>,
) -> BoxStream<'static, std::io::Result<bytes::Bytes>> {
    let reader = tokio_util::io::StreamReader::new(body);
    let decoder = async_compression::tokio::bufread::GzipDecoder::new(reader);
    tokio_util::io::ReaderStream::new(decoder).boxed()
}

/// Every `file` part, written in order; the first failure answers for the request (the files
/// before it are written).
async fn parts(
    st: &AppState,
    t: &Target,
    query: Option<String>,
    content_type: &str,
    body: BoxStream<'static, std::io::Result<bytes::Bytes>>,
) -> Response {
    let Ok(boundary) = multer::parse_boundary(content_type) else {
        return http_error(
            StatusCode::BAD_REQUEST,
            "a multipart body needs its boundary in Content-Type",
        );
    };
    let constraints = multer::Constraints::new()
        .size_limit(multer::SizeLimit::new().whole_stream(MAX_UPLOAD_BYTES));
    let mut form = multer::Multipart::with_constraints(body, boundary, constraints);
    let mut written = Vec::new();
    loop {
        let field = match form.next_field().await {
            Ok(Some(f)) => f,
            Ok(None) => break,
            Err(e) => return multipart_error(e),
        };
        if field.name() != Some("file") {
            continue;
        }
        // A signed URL writes the one file it signs: the query's, once.
        if t.only_path.is_some() && !written.is_empty() {
            return http_error(
                StatusCode::BAD_REQUEST,
                "a signed upload URL writes one file, the one it names",
            );
        }
        // The query names a single file's path; with several, each part's filename does.
        let path =
            match (&query, field.file_name()) {
                (Some(q), _) if written.is_empty() => q.clone(),
                (_, Some(name)) if !name.is_empty() => name.to_owned(),
                _ => return http_error(
                    StatusCode::BAD_REQUEST,
                    "each file's path is its part's filename (or, for one file, the query's path)",
                ),
            };
        let data = field.map_err(std::io::Error::other).boxed();
        match write(st, t, &path, data).await {
            Ok(w) => written.push(w),
            Err(r) => return r,
        }
    }
    if written.is_empty() {
        return http_error(
            StatusCode::BAD_REQUEST,
            "Field required: a multipart part named 'file'",
        );
    }
    axum::Json(written).into_response()
}

fn multipart_error(e: multer::Error) -> Response {
    match e {
        multer::Error::StreamSizeExceeded { .. } | multer::Error::FieldSizeExceeded { .. } => {
            too_large()
        }
        other => http_error(
            StatusCode::BAD_REQUEST,
            format!("the multipart body could not be read: {other}"),
        ),
    }
}

/// One file written whole to `path` (E2B's view).
async fn write(
    st: &AppState,
    t: &Target,
    path: &str,
    data: BoxStream<'static, std::io::Result<bytes::Bytes>>,
) -> Result<Value, Response> {
    let path = sandbox_path(path);
    st.e2b
        .sessions()
        .write_sandbox_file(t.project, t.id, &path, None, data)
        .await
        .map_err(service_error)?;
    let name = path.rsplit('/').next().unwrap_or(&path).to_owned();
    Ok(json!({"name": name, "type": "file", "path": e2b_path(&path)}))
}
