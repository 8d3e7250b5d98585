//! The control-plane web UI: the files `npm run build` writes to `web/dist`, embedded in a
//! release binary (`rust-embed`; a debug build reads them from disk at run time, so a rebuilt
//! UI shows without recompiling), served from `/` by the router's fallback.
//!
//! Invariants:
//! * **The UI never shadows a route of ours.** It is only the fallback: `/api`, `/docs`,
//!   `/openapi.json`, the account pages and `/preview/` are routes and answer first; a path
//!   under a reserved prefix ([`RESERVED`]) that no route takes is the JSON 404 it always
//!   was, never `index.html`.
//! * **`/assets/` holds only content-hashed files** (Vite names them `name-<hash>.ext`): they
//!   are cached for a year, immutably, and a missing one is a 404, never `index.html` (a
//!   stale page asking for an old bundle must fail loudly, not parse HTML as script).
//!   `index.html` and the other files at the root are `no-cache` (revalidated by ETag), so
//!   a new build shows on the next load.
//! * Any other GET that asks for HTML (a browser's navigation) is a client route:
//!   `index.html`, whose router draws the page; one that does not (an API client probing a
//!   path) is the JSON 404 of every unknown route. Without a built UI, a short page says how
//!   to build one, so `cargo build` works without Node.
//! * **A file is sent compressed when the build left a compressed copy and the client takes
//!   it.** `npm run build` writes `name.br` and `name.gz` beside each text file (when smaller);
//!   a client whose `Accept-Encoding` names `br` (first) or `gzip` gets that copy with
//!   `Content-Encoding` and the original's `Content-Type`, any other the file itself. Every
//!   file answer says `Vary: Accept-Encoding`, so a shared cache keeps the copies apart; each
//!   copy's ETag is its own bytes' hash, so a revalidation never mixes them either.

use crate::error::ApiError;
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use rust_embed::Embed;
use sha2::{Digest, Sha256};
use std::borrow::Cow;
use std::path::{Path, PathBuf};

/// `web/dist`, as `npm run build` leaves it. Missing is fine: the binary then has no UI.
#[derive(Embed)]
#[folder = "../../web/dist/"]
#[allow_missing = true]
struct Dist;

/// Path prefixes the UI never answers for: the API, the reference, the previews' notice and
/// the account pages' own script. Client routes must not start with them.
pub const RESERVED: &[&str] = &["/api", "/docs", "/openapi.json", "/preview", "/_account"];

/// Where the UI's files come from.
#[derive(Clone, Debug, Default)]
pub enum UiAssets {
    /// The files embedded at build time (in debug builds, `web/dist` read at run time).
    #[default]
    Embedded,
    /// A folder read on every request (tests give a fixture).
    Dir(PathBuf),
}

/// One file of the UI.
struct Asset {
    bytes: Cow<'static, [u8]>,
    content_type: String,
    /// A strong ETag: the SHA-256 of the bytes.
    etag: String,
    /// The `Content-Encoding` of `bytes`, when they are a precompressed copy.
    encoding: Option<&'static str>,
}

/// The precompressed copies the build writes, in the order they are preferred (brotli is the
/// smaller), as (`Content-Encoding`, file suffix).
const ENCODINGS: [(&str, &str); 2] = [("br", ".br"), ("gzip", ".gz")];

impl UiAssets {
    /// Whether there is a UI to serve (an `index.html`), or only the placeholder.
    pub fn is_built(&self) -> bool {
        match self {
            UiAssets::Embedded if cfg!(debug_assertions) => dev_dist().join("index.html").is_file(),
            UiAssets::Embedded => Dist::get("index.html").is_some(),
            UiAssets::Dir(dir) => dir.join("index.html").is_file(),
        }
    }

    /// The file at `rel` (no leading slash), if it exists. A path with an empty, `.` or `..`
    /// segment, a backslash or a NUL names nothing.
    async fn get(&self, rel: &str) -> Option<Asset> {
        let safe = !rel.is_empty()
            && !rel.contains(['\\', '\0'])
            && rel
                .split('/')
                .all(|s| !s.is_empty() && s != "." && s != "..");
        if !safe {
            return None;
        }
        let (bytes, hash): (Cow<'static, [u8]>, [u8; 32]) = match self {
            UiAssets::Embedded if cfg!(debug_assertions) => read(&dev_dist(), rel).await?,
            UiAssets::Embedded => {
                let f = Dist::get(rel)?;
                let hash = f.metadata.sha256_hash();
                (f.data, hash)
            }
            UiAssets::Dir(dir) => read(dir, rel).await?,
        };
        Some(Asset {
            bytes,
            content_type: content_type(rel),
            etag: format!("\"{}\"", hex::encode(&hash[..16])),
            encoding: None,
        })
    }

    /// The file at `rel` as the client takes it best: its brotli or gzip copy when there is
    /// one and `Accept-Encoding` allows it, else the file itself.
    async fn get_for(&self, rel: &str, req: &HeaderMap) -> Option<Asset> {
        for (coding, suffix) in ENCODINGS {
            if !accepts_encoding(req, coding) {
                continue;
            }
            if let Some(mut a) = self.get(&format!("{rel}{suffix}")).await {
                a.content_type = content_type(rel);
                a.encoding = Some(coding);
                return Some(a);
            }
        }
        self.get(rel).await
    }
}

/// Whether `Accept-Encoding` names `coding` (or `*`) with a non-zero weight. No header means
/// no coding but identity (RFC 9110 12.5.3 lets a server choose; we choose the safe one).
fn accepts_encoding(req: &HeaderMap, coding: &str) -> bool {
    req.get_all(header::ACCEPT_ENCODING)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|item| {
            let mut parts = item.split(';');
            let name = parts.next().unwrap_or("").trim();
            let refused = parts.any(|p| {
                p.trim()
                    .strip_prefix("q=")
                    .and_then(|q| q.trim().parse::<f32>().ok())
                    .is_some_and(|q| q <= 0.0)
            });
            (name.eq_ignore_ascii_case(coding) || name == "*") && !refused
        })
}

/// `web/dist` where this crate was compiled. Debug builds read it at run time, so that a new
/// build of the UI shows without recompiling the server (and one made after the server was
/// compiled shows at all: rust-embed's own run-time reader refuses a folder that did not
/// exist at compile time).
fn dev_dist() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../web/dist")
}

/// A file under `dir` (`rel` already checked) and its SHA-256.
async fn read(dir: &Path, rel: &str) -> Option<(Cow<'static, [u8]>, [u8; 32])> {
    let path = dir.join(rel);
    if !tokio::fs::metadata(&path).await.ok()?.is_file() {
        return None;
    }
    let data = tokio::fs::read(&path).await.ok()?;
    let hash = Sha256::digest(&data).into();
    Some((Cow::Owned(data), hash))
}

/// The MIME type by extension, with a charset for text.
fn content_type(rel: &str) -> String {
    // The one type browsers expect of scripts, whatever the guess table says.
    if rel.ends_with(".js") || rel.ends_with(".mjs") {
        return "text/javascript; charset=utf-8".into();
    }
    let mime = mime_guess::from_path(rel).first_or_octet_stream();
    let textual = mime.type_() == mime_guess::mime::TEXT
        || matches!(mime.subtype().as_str(), "javascript" | "json" | "xml")
        || mime.suffix().is_some_and(|s| s == mime_guess::mime::XML);
    if textual {
        format!("{}; charset=utf-8", mime.essence_str())
    } else {
        mime.essence_str().to_owned()
    }
}

const IMMUTABLE: &str = "public, max-age=31536000, immutable";
const NO_CACHE: &str = "no-cache";

/// What the fallback answers: a file of the UI, `index.html` for a client route, the
/// placeholder when no UI was built, or the JSON 404 for everything that is not the UI's.
pub async fn fallback(
    assets: &UiAssets,
    method: &Method,
    uri: &Uri,
    headers: &HeaderMap,
) -> Response {
    let path = uri.path();
    let ours = RESERVED.iter().any(|p| {
        path == *p
            || path
                .strip_prefix(p)
                .is_some_and(|rest| rest.starts_with('/'))
    });
    if ours || (method != Method::GET && method != Method::HEAD) {
        return not_found();
    }
    let rel = path.trim_start_matches('/');
    if rel.starts_with("assets/") {
        return match assets.get_for(rel, headers).await {
            Some(a) => file(a, IMMUTABLE, headers),
            None => ApiError::NotFound(format!(
                "no UI asset at {path}: the UI was probably rebuilt since this page loaded; reload it"
            ))
            .into_response(),
        };
    }
    if !rel.is_empty() && rel != "index.html" {
        if let Some(a) = assets.get_for(rel, headers).await {
            return file(a, NO_CACHE, headers);
        }
    }
    // A client route is for a browser's navigation, which asks for HTML; a client of the API
    // probing a path it does not know (`Accept: */*` or JSON) gets the JSON 404 every unknown
    // route answers. The root is the UI's whatever the request accepts.
    if !rel.is_empty() && !wants_html(headers) {
        return not_found();
    }
    match assets.get_for("index.html", headers).await {
        Some(a) => file(a, NO_CACHE, headers),
        None => placeholder(),
    }
}

/// Whether the request names `text/html` among what it accepts, as browsers do for a
/// navigation (`text/html,application/xhtml+xml,...`). `*/*` alone is not enough.
fn wants_html(headers: &HeaderMap) -> bool {
    crate::extract::accepts_any(headers, &["text/html", "application/xhtml+xml"])
}

/// The fallback's JSON 404, as every unknown route of the API answers.
pub fn not_found() -> Response {
    (
        StatusCode::NOT_FOUND,
        axum::Json(serde_json::json!({"detail": "Not Found"})),
    )
        .into_response()
}

/// A file with its type, cache policy and ETag; a 304 when the client has this version.
fn file(a: Asset, cache: &'static str, req: &HeaderMap) -> Response {
    let etag = HeaderValue::from_str(&a.etag).expect("a hex ETag is a header value");
    let cached = req
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == a.etag || t.trim() == "*"));
    let mut h = HeaderMap::new();
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static(cache));
    h.insert(header::ETAG, etag);
    h.insert(header::VARY, HeaderValue::from_static("accept-encoding"));
    if cached {
        return (StatusCode::NOT_MODIFIED, h).into_response();
    }
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_str(&a.content_type)
            .unwrap_or(HeaderValue::from_static("application/octet-stream")),
    );
    if let Some(coding) = a.encoding {
        h.insert(header::CONTENT_ENCODING, HeaderValue::from_static(coding));
    }
    (h, a.bytes.into_owned()).into_response()
}

/// What `/` shows in a binary built without the UI.
const PLACEHOLDER: &str = r#"<!doctype html><html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width,initial-scale=1">
<title>Sandbox Agents</title><link rel="stylesheet" href="/_account/account.css"></head>
<body><main><h1>Sandbox Agents</h1>
<p>This server was built without its web UI. The API is at <a href="/api/health">/api</a> and its
reference at <a href="/docs">/docs</a>.</p>
<p>To build the UI (Node 20 or later), then rebuild or restart the server:</p>
<pre>cd web &amp;&amp; npm ci &amp;&amp; npm run build</pre>
<p>or run <code>scripts/serve</code>, which builds the UI and the server together.</p>
</main></body></html>
"#;

fn placeholder() -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CACHE_CONTROL, NO_CACHE),
        ],
        PLACEHOLDER,
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_types_carry_a_charset_for_text() {
        assert_eq!(content_type("index.html"), "text/html; charset=utf-8");
        assert_eq!(
            content_type("assets/index-abc123.js"),
            "text/javascript; charset=utf-8"
        );
        assert_eq!(content_type("assets/x-1.css"), "text/css; charset=utf-8");
        assert_eq!(
            content_type("assets/logo-1.svg"),
            "image/svg+xml; charset=utf-8"
        );
        assert_eq!(content_type("assets/a-1.png"), "image/png");
    }

    #[test]
    fn an_encoding_is_taken_when_named_or_starred_and_not_refused() {
        let with = |v: &str| {
            let mut h = HeaderMap::new();
            h.insert(header::ACCEPT_ENCODING, HeaderValue::from_str(v).unwrap());
            h
        };
        assert!(accepts_encoding(&with("gzip, deflate, br, zstd"), "br"));
        assert!(accepts_encoding(&with("gzip, deflate, br, zstd"), "gzip"));
        assert!(accepts_encoding(&with("BR;q=0.5"), "br"));
        assert!(accepts_encoding(&with("*"), "gzip"));
        assert!(!accepts_encoding(&with("gzip;q=0, br"), "gzip"));
        assert!(!accepts_encoding(&with("br; q=0.000"), "br"));
        assert!(!accepts_encoding(&with("identity"), "gzip"));
        assert!(!accepts_encoding(&with("gzipped"), "gzip"));
        assert!(!accepts_encoding(&HeaderMap::new(), "br"));
    }

    #[tokio::test]
    async fn paths_that_leave_the_folder_name_nothing() {
        let dir = std::env::temp_dir().join(format!("sa-ui-{}", uuid::Uuid::now_v7()));
        std::fs::create_dir_all(dir.join("assets")).unwrap();
        std::fs::write(dir.join("assets/a.js"), "1").unwrap();
        let assets = UiAssets::Dir(dir.join("assets"));
        assert!(assets.get("a.js").await.is_some());
        for bad in [
            "../assets/a.js",
            "./a.js",
            "",
            "/a.js",
            "a.js/",
            "..\\a.js",
            "x//a.js",
        ] {
            assert!(assets.get(bad).await.is_none(), "{bad}");
        }
        std::fs::remove_dir_all(dir).unwrap();
    }
}
