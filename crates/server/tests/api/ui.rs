//! The web UI from the server's own origin: `index.html` for client routes, hashed assets
//! cached for good, the placeholder when no UI was built, and never in the way of a route of
//! ours (the API, the reference, the account pages, previews).

use reqwest::header::{
    ACCEPT_ENCODING, CACHE_CONTROL, CONTENT_ENCODING, CONTENT_SECURITY_POLICY, CONTENT_TYPE, ETAG,
    IF_NONE_MATCH, VARY,
};
use reqwest::{Method, StatusCode};
use sandbox_agents_api::ui::UiAssets;
use sandbox_agents_testkit::TestApp;
use serde_json::{json, Value};
use std::path::PathBuf;

const INDEX: &str = r#"<!doctype html><html><head><meta charset="utf-8"><title>Sandbox Agents</title>
<script type="module" crossorigin src="/assets/index-abc123.js"></script>
<link rel="stylesheet" href="/assets/index-def456.css"></head><body><div id="root"></div></body></html>"#;
const SCRIPT: &str = "console.log('the UI');";
/// What stands for the script's brotli copy: the server never reads a copy, it only sends it,
/// so any bytes tell which file was sent.
const SCRIPT_BR: &[u8] = b"brotli bytes of the script";

/// A folder shaped like `npm run build`'s output, removed when dropped.
struct Dist(PathBuf);

impl Dist {
    fn new(with_ui: bool) -> Dist {
        let dir = std::env::temp_dir().join(format!("sa-ui-dist-{}", uuid::Uuid::now_v7()));
        std::fs::create_dir_all(dir.join("assets")).unwrap();
        if with_ui {
            std::fs::write(dir.join("index.html"), INDEX).unwrap();
            std::fs::write(dir.join("assets/index-abc123.js"), SCRIPT).unwrap();
            std::fs::write(dir.join("assets/index-def456.css"), "body{margin:0}").unwrap();
            std::fs::write(
                dir.join("favicon.svg"),
                "<svg xmlns=\"http://www.w3.org/2000/svg\"/>",
            )
            .unwrap();
        }
        Dist(dir)
    }
}

impl Drop for Dist {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

async fn app_with(dist: &Dist, preview_domain: Option<&str>) -> TestApp {
    TestApp::builder()
        .with_settings(|s| s.ui = UiAssets::Dir(dist.0.clone()))
        .with_config(|c| c.preview_domain = preview_domain.map(str::to_owned))
        .spawn()
        .await
}

/// What a browser asks for when it navigates.
const NAVIGATION: &str = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8";

/// A GET as a browser's navigation sends it.
async fn get(app: &TestApp, path: &str) -> reqwest::Response {
    app.http
        .get(app.url(path))
        .header(reqwest::header::ACCEPT, NAVIGATION)
        .send()
        .await
        .unwrap()
}

fn header(r: &reqwest::Response, name: reqwest::header::HeaderName) -> String {
    r.headers()
        .get(&name)
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default()
}

/// The JSON 404 of a path no route takes.
async fn assert_json_404(app: &TestApp, path: &str) -> String {
    let r = get(app, path).await;
    assert_eq!(r.status(), StatusCode::NOT_FOUND, "{path}");
    assert!(
        header(&r, CONTENT_TYPE).starts_with("application/json"),
        "{path}: {}",
        header(&r, CONTENT_TYPE)
    );
    let body: Value = r.json().await.unwrap();
    body["detail"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn client_routes_get_the_uis_page_and_it_is_revalidated_on_every_load() {
    let dist = Dist::new(true);
    let app = app_with(&dist, None).await;
    let session = uuid::Uuid::now_v7();
    for path in [
        "/".to_owned(),
        "/index.html".to_owned(),
        "/agents".to_owned(),
        "/agents/reviewer".to_owned(),
        format!("/sessions/{session}"),
        format!("/sessions/{session}/files?path=a.txt"),
        format!("/webhooks/{session}"),
        "/developers".to_owned(),
        "/settings/api-keys".to_owned(),
        "/usage?group_by=model".to_owned(),
    ] {
        let r = get(&app, &path).await;
        assert_eq!(r.status(), 200, "{path}");
        assert_eq!(
            header(&r, CONTENT_TYPE),
            "text/html; charset=utf-8",
            "{path}"
        );
        assert_eq!(header(&r, CACHE_CONTROL), "no-cache", "{path}");
        assert_eq!(r.text().await.unwrap(), INDEX, "{path}");
    }
    // A client of the API probing a path it does not know gets the JSON 404, not the page;
    // the root is the UI's whatever the request accepts.
    for accept in [None, Some("*/*"), Some("application/json")] {
        let mut req = app.http.get(app.url("/nothing-here"));
        if let Some(a) = accept {
            req = req.header(reqwest::header::ACCEPT, a);
        }
        let r = req.send().await.unwrap();
        assert_eq!(r.status(), StatusCode::NOT_FOUND, "{accept:?}");
        assert_eq!(
            r.json::<Value>().await.unwrap(),
            json!({"detail": "Not Found"})
        );
        let mut req = app.http.get(app.url("/"));
        if let Some(a) = accept {
            req = req.header(reqwest::header::ACCEPT, a);
        }
        assert_eq!(
            req.send().await.unwrap().text().await.unwrap(),
            INDEX,
            "{accept:?}"
        );
    }
    // Revalidation costs nothing while the build is the same.
    let r = get(&app, "/agents").await;
    let etag = header(&r, ETAG);
    assert!(etag.starts_with('"'), "{etag}");
    let again = app
        .http
        .get(app.url("/sessions"))
        .header(reqwest::header::ACCEPT, NAVIGATION)
        .header(IF_NONE_MATCH, &etag)
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), StatusCode::NOT_MODIFIED);
    // The browser merges a 304's headers into the page it stored: a policy on the 304 would
    // replace the page's own, so there is none (the stored page's policy stands).
    assert!(
        again.headers().get(CONTENT_SECURITY_POLICY).is_none(),
        "a 304 must not carry a policy: {:?}",
        again.headers().get(CONTENT_SECURITY_POLICY)
    );
    assert!(header(&r, CONTENT_SECURITY_POLICY).contains("script-src 'self'"));
    let head = app
        .http
        .request(Method::HEAD, app.url("/agents"))
        .header(reqwest::header::ACCEPT, NAVIGATION)
        .send()
        .await
        .unwrap();
    assert_eq!(head.status(), 200);
    // Files at the root (Vite's `public/`) are served as themselves, revalidated too.
    let r = get(&app, "/favicon.svg").await;
    assert_eq!(r.status(), 200);
    assert!(header(&r, CONTENT_TYPE).starts_with("image/svg+xml"));
    assert_eq!(header(&r, CACHE_CONTROL), "no-cache");
}

#[tokio::test]
async fn hashed_assets_are_cached_for_good_and_a_missing_one_is_a_404() {
    let dist = Dist::new(true);
    let app = app_with(&dist, None).await;
    let r = get(&app, "/assets/index-abc123.js").await;
    assert_eq!(r.status(), 200);
    assert_eq!(header(&r, CONTENT_TYPE), "text/javascript; charset=utf-8");
    assert_eq!(
        header(&r, CACHE_CONTROL),
        "public, max-age=31536000, immutable"
    );
    assert_eq!(
        header(&r, "x-content-type-options".parse().unwrap()),
        "nosniff"
    );
    assert_eq!(r.text().await.unwrap(), SCRIPT);
    let r = get(&app, "/assets/index-def456.css").await;
    assert_eq!(header(&r, CONTENT_TYPE), "text/css; charset=utf-8");
    assert_eq!(
        header(&r, CACHE_CONTROL),
        "public, max-age=31536000, immutable"
    );
    // A bundle of an older build is gone: loudly, never the page in its place.
    for path in [
        "/assets/index-000000.js",
        "/assets/",
        "/assets/nested/../x.js",
    ] {
        let detail = assert_json_404(&app, path).await;
        assert!(!detail.is_empty(), "{path}");
    }
}

#[tokio::test]
async fn the_ui_never_shadows_the_api_the_reference_the_account_pages_or_previews() {
    let dist = Dist::new(true);
    let app = app_with(&dist, None).await;
    for path in [
        "/api",
        "/api/",
        "/api/no-such-route",
        "/api/sessions/x/nothing-here",
        "/docs/nothing",
        "/openapi.json/x",
        "/_account/nothing.js",
    ] {
        assert_eq!(assert_json_404(&app, path).await, "Not Found", "{path}");
    }
    let detail = assert_json_404(&app, "/preview/abc-3000-def/").await;
    assert!(detail.contains("origin of their own"), "{detail}");
    let r = get(&app, "/api/health").await;
    assert_eq!(r.status(), 200);
    let doc: Value = get(&app, "/openapi.json").await.json().await.unwrap();
    assert!(doc["paths"]["/api/usage"].is_object());
    assert!(get(&app, "/docs")
        .await
        .text()
        .await
        .unwrap()
        .contains("redoc"));
    for page in ["/login", "/logout", "/recovery", "/settings"] {
        let body = get(&app, page).await.text().await.unwrap();
        assert!(body.contains("/_account/account.js"), "{page}: {body}");
        assert!(
            !body.contains("id=\"root\""),
            "{page} is the server's own page"
        );
    }
    let r = get(&app, "/_account/account.js").await;
    assert_eq!(r.status(), 200);
    assert!(header(&r, CONTENT_TYPE).starts_with("text/javascript"));
    let r = get(&app, "/_account/account.css").await;
    assert!(header(&r, CONTENT_TYPE).starts_with("text/css"));
    // The UI is only ever read: anything else to a client route is no route.
    let r = app.http.post(app.url("/agents")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn pages_may_frame_previews_and_nothing_else_and_run_only_our_scripts() {
    let dist = Dist::new(true);
    let app = app_with(&dist, None).await;
    let directives =
        |csp: &str| -> Vec<String> { csp.split(';').map(|d| d.trim().to_owned()).collect() };
    for path in [
        "/",
        "/sessions",
        "/assets/index-abc123.js",
        "/login",
        "/docs",
    ] {
        let r = get(&app, path).await;
        let csp = header(&r, CONTENT_SECURITY_POLICY);
        let d = directives(&csp);
        for want in [
            "default-src 'self'",
            "script-src 'self'",
            "style-src 'self' 'unsafe-inline'",
            "img-src 'self' data: blob:",
            "connect-src 'self'",
            "font-src 'self' data:",
            "worker-src 'self' blob:",
            "frame-ancestors 'none'",
            "base-uri 'none'",
            "form-action 'self'",
            "object-src 'none'",
        ] {
            assert!(d.iter().any(|x| x == want), "{path}: no {want} in {csp}");
        }
        assert!(
            d.contains(&format!("frame-src {}", app.preview_base)),
            "{path}: previews' origin not frameable: {csp}"
        );
        assert_eq!(header(&r, "x-frame-options".parse().unwrap()), "DENY");
    }
    // JSON is never a document.
    let r = get(&app, "/api/health").await;
    assert!(header(&r, CONTENT_SECURITY_POLICY).starts_with("default-src 'none'"));

    // With a preview domain, every preview origin under it.
    let app = app_with(&dist, Some("http://preview.localhost:8001")).await;
    let csp = header(&get(&app, "/").await, CONTENT_SECURITY_POLICY);
    assert!(
        directives(&csp).contains(&format!(
            "frame-src {} http://*.preview.localhost:8001",
            app.preview_base
        )),
        "{csp}"
    );
}

#[tokio::test]
async fn without_a_built_ui_the_root_says_how_to_build_one() {
    let dist = Dist::new(false);
    let app = app_with(&dist, None).await;
    for path in ["/", "/agents", "/sessions/x"] {
        let r = get(&app, path).await;
        assert_eq!(r.status(), 200, "{path}");
        assert_eq!(header(&r, CONTENT_TYPE), "text/html; charset=utf-8");
        assert_eq!(header(&r, CACHE_CONTROL), "no-cache");
        let body = r.text().await.unwrap();
        assert!(
            body.contains("cd web &amp;&amp; npm ci &amp;&amp; npm run build")
                && body.contains("scripts/serve"),
            "{body}"
        );
        assert!(!body.contains("<script"), "no script at all: {body}");
    }
    assert_json_404(&app, "/assets/index-abc123.js").await;
}

/// `s` gzipped, as the build's compression plugin writes a `.gz` copy.
fn gzip(s: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    e.write_all(s).unwrap();
    e.finish().unwrap()
}

fn gunzip(b: &[u8]) -> String {
    use std::io::Read;
    let mut out = String::new();
    flate2::read::GzDecoder::new(b)
        .read_to_string(&mut out)
        .unwrap();
    out
}

#[tokio::test]
async fn files_are_sent_precompressed_as_the_client_accepts_with_vary_and_their_own_type() {
    let dist = Dist::new(true);
    std::fs::write(dist.0.join("assets/index-abc123.js.br"), SCRIPT_BR).unwrap();
    std::fs::write(
        dist.0.join("assets/index-abc123.js.gz"),
        gzip(SCRIPT.as_bytes()),
    )
    .unwrap();
    std::fs::write(dist.0.join("index.html.gz"), gzip(INDEX.as_bytes())).unwrap();
    let app = app_with(&dist, None).await;
    let fetch = |path: &'static str, accept: Option<&'static str>| {
        let mut req = app
            .http
            .get(app.url(path))
            .header(reqwest::header::ACCEPT, NAVIGATION);
        if let Some(a) = accept {
            req = req.header(ACCEPT_ENCODING, a);
        }
        req.send()
    };
    let js = "/assets/index-abc123.js";

    // What a browser sends: brotli, the smaller, first.
    let r = fetch(js, Some("gzip, deflate, br, zstd")).await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(header(&r, CONTENT_ENCODING), "br");
    assert_eq!(header(&r, CONTENT_TYPE), "text/javascript; charset=utf-8");
    assert_eq!(header(&r, VARY).to_lowercase(), "accept-encoding");
    assert_eq!(
        header(&r, CACHE_CONTROL),
        "public, max-age=31536000, immutable"
    );
    let br_etag = header(&r, ETAG);
    assert_eq!(r.bytes().await.unwrap().as_ref(), SCRIPT_BR);

    // gzip only (or brotli refused): the gzip copy.
    for accept in ["gzip", "br;q=0, gzip;q=0.8"] {
        let r = fetch(js, Some(accept)).await.unwrap();
        assert_eq!(header(&r, CONTENT_ENCODING), "gzip", "{accept}");
        assert_eq!(header(&r, CONTENT_TYPE), "text/javascript; charset=utf-8");
        assert_eq!(header(&r, VARY).to_lowercase(), "accept-encoding");
        let gz_etag = header(&r, ETAG);
        assert_ne!(gz_etag, br_etag, "each copy is its own representation");
        assert_eq!(gunzip(&r.bytes().await.unwrap()), SCRIPT, "{accept}");
    }

    // Neither (or no header at all): the file itself.
    for accept in [None, Some("identity"), Some("deflate, zstd")] {
        let r = fetch(js, accept).await.unwrap();
        assert!(r.headers().get(CONTENT_ENCODING).is_none(), "{accept:?}");
        assert_eq!(header(&r, CONTENT_TYPE), "text/javascript; charset=utf-8");
        assert_eq!(header(&r, VARY).to_lowercase(), "accept-encoding");
        let etag = header(&r, ETAG);
        assert_ne!(etag, br_etag);
        assert_eq!(r.text().await.unwrap(), SCRIPT, "{accept:?}");
    }

    // A file with no brotli copy falls to its gzip one; one with no copy at all is itself.
    let r = fetch("/sessions", Some("br, gzip")).await.unwrap();
    assert_eq!(header(&r, CONTENT_ENCODING), "gzip");
    assert_eq!(header(&r, CONTENT_TYPE), "text/html; charset=utf-8");
    assert_eq!(gunzip(&r.bytes().await.unwrap()), INDEX);
    let r = fetch("/assets/index-def456.css", Some("br, gzip"))
        .await
        .unwrap();
    assert!(r.headers().get(CONTENT_ENCODING).is_none());
    assert_eq!(header(&r, VARY).to_lowercase(), "accept-encoding");
    assert_eq!(r.text().await.unwrap(), "body{margin:0}");

    // A revalidation of the brotli copy is a 304 for that copy only.
    let again = app
        .http
        .get(app.url(js))
        .header(ACCEPT_ENCODING, "br")
        .header(IF_NONE_MATCH, &br_etag)
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), StatusCode::NOT_MODIFIED);
    let other = app
        .http
        .get(app.url(js))
        .header(IF_NONE_MATCH, &br_etag)
        .send()
        .await
        .unwrap();
    assert_eq!(other.status(), 200);
    assert_eq!(other.text().await.unwrap(), SCRIPT);
}
