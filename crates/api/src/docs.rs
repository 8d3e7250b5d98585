//! `/openapi.json` and a readable reference at `/docs`, with every asset served from the
//! binary itself (no CDN: deployments are often offline).

use axum::http::header;
use axum::response::{Html, IntoResponse};
use axum::routing::get;
use axum::Router;

const REDOC_JS: &str = include_str!("../assets/redoc.standalone.js");

const PAGE: &str = r#"<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <meta name="viewport" content="width=device-width, initial-scale=1">
  <title>Sandbox Agents API reference</title>
  <style>body { margin: 0; }</style>
</head>
<body>
  <redoc spec-url="/openapi.json" hide-download-button="false"></redoc>
  <script src="/docs/redoc.standalone.js"></script>
</body>
</html>
"#;

pub fn routes<S: Clone + Send + Sync + 'static>(doc: utoipa::openapi::OpenApi) -> Router<S> {
    let json = doc
        .to_pretty_json()
        .expect("the OpenAPI document serializes");
    Router::new()
        .route(
            "/openapi.json",
            get(move || async move { ([(header::CONTENT_TYPE, "application/json")], json) }),
        )
        .route("/docs", get(|| async { Html(PAGE) }))
        .route(
            "/docs/redoc.standalone.js",
            get(|| async {
                (
                    [
                        (
                            header::CONTENT_TYPE,
                            "application/javascript; charset=utf-8",
                        ),
                        (header::CACHE_CONTROL, "public, max-age=86400"),
                    ],
                    REDOC_JS,
                )
                    .into_response()
            }),
        )
}
