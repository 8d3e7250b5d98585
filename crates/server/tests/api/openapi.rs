//! The committed OpenAPI document must equal the generated one, and every documented
//! operation must be routed. Regenerate with `UPDATE_OPENAPI=1 cargo test -p sandbox-agents-server openapi`.

use sandbox_agents_testkit::TestApp;
use std::path::PathBuf;

fn committed_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../openapi/openapi.json")
}

#[test]
fn the_committed_document_is_the_generated_one() {
    let generated = sandbox_agents_api::openapi().to_pretty_json().unwrap() + "\n";
    if std::env::var_os("UPDATE_OPENAPI").is_some() {
        std::fs::write(committed_path(), &generated).unwrap();
    }
    let committed = std::fs::read_to_string(committed_path()).unwrap_or_default();
    assert!(
        committed == generated,
        "openapi/openapi.json is out of date: run `UPDATE_OPENAPI=1 cargo test -p sandbox-agents-server openapi` and commit it"
    );
}

/// Every `$ref` names a schema the document defines (a type whose schema is written by hand
/// must hand its nested types on too, or generators such as openapi-typescript stop).
#[test]
fn every_reference_resolves() {
    let doc: serde_json::Value =
        serde_json::from_str(&sandbox_agents_api::openapi().to_json().unwrap()).unwrap();
    fn refs<'a>(v: &'a serde_json::Value, out: &mut Vec<&'a str>) {
        match v {
            serde_json::Value::Object(m) => {
                if let Some(r) = m.get("$ref").and_then(|r| r.as_str()) {
                    out.push(r);
                }
                m.values().for_each(|x| refs(x, out));
            }
            serde_json::Value::Array(a) => a.iter().for_each(|x| refs(x, out)),
            _ => {}
        }
    }
    let mut found = Vec::new();
    refs(&doc, &mut found);
    assert!(!found.is_empty());
    let missing: Vec<&&str> = found
        .iter()
        .filter(|r| doc.pointer(r.trim_start_matches('#')).is_none())
        .collect();
    assert!(missing.is_empty(), "unresolved references: {missing:?}");
}

/// Every route the contract requires so far is documented.
#[test]
fn the_document_covers_every_route() {
    let doc = sandbox_agents_api::openapi();
    let expected = [
        ("get", "/api/health"),
        ("get", "/api/auth/check"),
        ("get", "/api/me"),
        ("get", "/api/backends"),
        ("get", "/api/models"),
        ("get", "/api/git-keys"),
        ("post", "/api/git-keys"),
        ("post", "/api/git-keys/{key_id}/test"),
        ("delete", "/api/git-keys/{key_id}"),
        ("get", "/api/agents"),
        ("post", "/api/agents"),
        ("get", "/api/agents/{ref}"),
        ("patch", "/api/agents/{ref}"),
        ("delete", "/api/agents/{ref}"),
        ("post", "/api/agents/{ref}/archive"),
        ("post", "/api/agents/{ref}/unarchive"),
        ("get", "/api/agents/{ref}/memory"),
        ("put", "/api/agents/{ref}/memory"),
        ("get", "/api/sessions"),
        ("get", "/api/sessions/{session_id}"),
        ("patch", "/api/sessions/{session_id}"),
        ("get", "/api/sessions/{session_id}/events"),
        ("get", "/api/sessions/{session_id}/events/stream"),
        ("post", "/api/sessions"),
        ("delete", "/api/sessions/{session_id}"),
        ("post", "/api/sessions/{session_id}/start"),
        ("post", "/api/sessions/{session_id}/stop"),
        ("post", "/api/sessions/{session_id}/interrupt"),
        ("post", "/api/sessions/{session_id}/exec"),
        ("post", "/api/sessions/{session_id}/messages"),
        ("get", "/api/sessions/{session_id}/files"),
        ("post", "/api/sessions/{session_id}/files"),
        ("delete", "/api/sessions/{session_id}/files"),
        ("get", "/api/sessions/{session_id}/files/content"),
        ("get", "/api/sessions/{session_id}/ports/{port}"),
        ("get", "/api/sessions/{session_id}/snapshots"),
        ("post", "/api/sessions/{session_id}/snapshots"),
        (
            "post",
            "/api/sessions/{session_id}/snapshots/{snapshot_id}/restore",
        ),
        ("get", "/api/usage"),
        ("get", "/api/environments"),
        ("post", "/api/environments"),
        ("get", "/api/environments/{ref}"),
        ("patch", "/api/environments/{ref}"),
        ("delete", "/api/environments/{ref}"),
        ("post", "/api/environments/{ref}/archive"),
        ("get", "/api/environments/{ref}/build-log"),
    ];
    let json = serde_json::to_value(&doc).unwrap();
    for (method, path) in expected {
        assert!(
            json["paths"][path][method].is_object(),
            "{method} {path} is not documented"
        );
    }
}

/// Every error answer is documented with its body (`{"detail": ...}`, a list of field errors
/// for a 422), and every operation that takes a body, query parameters or headers documents the
/// 422 its extractors give: the API fuzz (`scripts/test-api-fuzz`) checks answers against this.
#[test]
fn every_error_answer_is_documented_with_its_body() {
    let json = serde_json::to_value(sandbox_agents_api::openapi()).unwrap();
    for (path, item) in json["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            let responses = op["responses"].as_object().unwrap();
            for (status, response) in responses {
                if !(status.starts_with('4') || status.starts_with('5')) {
                    continue;
                }
                let expected = if status == "422" {
                    "#/components/schemas/ValidationErrorBody"
                } else {
                    "#/components/schemas/ErrorBody"
                };
                assert_eq!(
                    response["content"]["application/json"]["schema"]["$ref"], expected,
                    "{method} {path}: {status}"
                );
            }
            let takes_input = op.get("requestBody").is_some()
                || op["parameters"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|p| p["in"] == "query" || p["in"] == "header");
            assert!(
                !takes_input || responses.contains_key("422"),
                "{method} {path} takes input but documents no 422"
            );
        }
    }
    // Statuses the fuzz found answered but not documented.
    for (method, path, status) in [
        ("post", "/api/sessions/{session_id}/start", "409"),
        ("post", "/api/auth/recovery", "429"),
        ("get", "/api/agents", "422"),
        ("post", "/api/sessions/{session_id}/exec", "422"),
    ] {
        assert!(
            json["paths"][path][method]["responses"][status].is_object(),
            "{method} {path} does not document {status}"
        );
    }
}

/// Every documented operation is routed: no 404 from the fallback, no 405.
#[tokio::test]
async fn every_documented_operation_is_served() {
    let app = TestApp::builder().spawn().await;
    let json = serde_json::to_value(sandbox_agents_api::openapi()).unwrap();
    for (path, item) in json["paths"].as_object().unwrap() {
        for method in item.as_object().unwrap().keys() {
            let concrete = path
                .replace("{ref}", "nobody")
                .replace("{session_id}", &uuid::Uuid::now_v7().to_string());
            let req = app
                .http
                .request(method.to_uppercase().parse().unwrap(), app.url(&concrete));
            let r = req.send().await.unwrap();
            assert_ne!(r.status(), 405, "{method} {path}");
            if r.status() == 404 {
                let body: serde_json::Value = r.json().await.unwrap();
                assert_ne!(
                    body["detail"], "Not Found",
                    "{method} {path} fell through to the fallback"
                );
            }
        }
    }
}

#[tokio::test]
async fn the_reference_page_and_its_assets_are_served_locally() {
    let app = TestApp::builder().spawn().await;
    let page = app
        .http
        .get(app.url("/docs"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(page.contains("/openapi.json"));
    assert!(
        !page.contains("http://") && !page.contains("https://"),
        "no asset from elsewhere"
    );
    let js = app
        .http
        .get(app.url("/docs/redoc.standalone.js"))
        .send()
        .await
        .unwrap();
    assert_eq!(js.status(), 200);
    assert!(js.bytes().await.unwrap().len() > 100_000);
    let doc: serde_json::Value = app
        .http
        .get(app.url("/openapi.json"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(doc["paths"]["/api/agents"].is_object());
}

/// The document's security is the server's: with a token configured, every operation that
/// requires a credential answers 401 without one, and every public operation does not.
#[tokio::test]
async fn the_documented_security_is_what_the_server_enforces() {
    let app = sandbox_agents_testkit::TestApp::builder()
        .with_token("sesame")
        .spawn()
        .await;
    let json = serde_json::to_value(sandbox_agents_api::openapi()).unwrap();
    let schemes = json["components"]["securitySchemes"].as_object().unwrap();
    assert_eq!(schemes["bearer"]["scheme"], "bearer");
    assert_eq!(schemes["session"]["in"], "cookie");
    assert_eq!(schemes["session"]["name"], "sa_session");
    assert_eq!(
        json["security"],
        serde_json::json!([{"bearer": []}, {"session": []}])
    );
    let mut public = Vec::new();
    for (path, item) in json["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            let is_public = op["security"] == serde_json::json!([{}]);
            let concrete = path
                .replace("{ref}", "nobody")
                .replace("{session_id}", &uuid::Uuid::now_v7().to_string());
            let r = app
                .http
                .request(method.to_uppercase().parse().unwrap(), app.url(&concrete))
                .send()
                .await
                .unwrap();
            if is_public {
                public.push(format!("{method} {path}"));
                assert_ne!(r.status(), 401, "{method} {path} is documented as public");
            } else {
                assert_eq!(r.status(), 401, "{method} {path} is documented as secured");
                assert!(
                    op["responses"]["401"].is_object(),
                    "{method} {path} documents no 401"
                );
            }
        }
    }
    public.sort();
    assert_eq!(
        public,
        [
            "get /api/health",
            "get /api/me",
            "post /api/auth/login",
            "post /api/auth/logout",
            "post /api/auth/recovery"
        ]
    );
}
