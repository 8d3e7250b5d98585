//! Skill bundles: registered by slug, pushed as tar or tar.gz archives that are checked whole
//! before anything is stored, numbered from a high-water mark that never reissues a number,
//! retired, and protected from deletion while an agent names them.

use futures::StreamExt;
use reqwest::multipart::{Form, Part};
use sandbox_agents_testkit::skill_bundles::{create, get, push, skills_tree, tar, FILE};
use sandbox_agents_testkit::TestApp;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::io::Write;

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(bytes).unwrap();
    gz.finish().unwrap()
}

async fn delete(app: &TestApp, path: &str) -> (u16, Value) {
    let r = app.http.delete(app.url(path)).send().await.unwrap();
    (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
}

/// The archives in the blob store, under `bundles/`.
fn stored_archives(app: &TestApp) -> Vec<String> {
    let root = app.blobs_dir.join("bundles");
    let mut out = Vec::new();
    for dir in std::fs::read_dir(&root).into_iter().flatten().flatten() {
        for f in std::fs::read_dir(dir.path()).unwrap().flatten() {
            out.push(f.file_name().to_string_lossy().into_owned());
        }
    }
    out
}

#[tokio::test]
async fn versions_are_numbered_from_a_high_water_mark_and_retiring_moves_latest_down() {
    let app = TestApp::builder().spawn().await;
    let (s, b) = create(&app, json!({"slug": "tools", "description": "Our tools"})).await;
    assert_eq!(s, 201, "{b}");
    assert_eq!(b["slug"], "tools");
    assert_eq!(b["description"], "Our tools");
    assert_eq!(b["latest_version"], Value::Null);
    assert!(
        b["created_at"].is_string() && b["updated_at"].is_string(),
        "{b}"
    );

    let tgz = gzip(&skills_tree("one"));
    let (s, v1) = push(&app, "tools", tgz.clone()).await;
    assert_eq!(s, 201, "{v1}");
    assert_eq!(v1["version"], 1);
    assert_eq!(v1["size_bytes"], tgz.len());
    assert_eq!(v1["file_count"], 4);
    assert_eq!(v1["digest"], hex::encode(Sha256::digest(&tgz)));
    assert_eq!(v1["skills"], json!(["csv", "pdf"]));
    assert!(v1["created_at"].is_string());

    // A plain tar is told apart by content, whatever its filename says.
    let (s, v2) = push(&app, "tools", skills_tree("two")).await;
    assert_eq!((s, v2["version"].clone()), (201, json!(2)), "{v2}");
    // The same bytes again: the same digest, a new number.
    let (s, v3) = push(&app, "tools", tgz.clone()).await;
    assert_eq!((s, v3["version"].clone()), (201, json!(3)));
    assert_eq!(v3["digest"], v1["digest"]);

    let (_, list) = get(&app, "/api/skill-bundles/tools/versions").await;
    let numbers: Vec<i64> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["version"].as_i64().unwrap())
        .collect();
    assert_eq!(numbers, vec![3, 2, 1], "newest first");

    // Retire the latest: latest moves down; the number is never issued again.
    assert_eq!(
        delete(&app, "/api/skill-bundles/tools/versions/3").await.0,
        204
    );
    let (_, b) = get(&app, "/api/skill-bundles/tools").await;
    assert_eq!(b["latest_version"], 2);
    let (s, v4) = push(&app, "tools", skills_tree("four")).await;
    assert_eq!((s, v4["version"].clone()), (201, json!(4)));
    assert_eq!(
        delete(&app, "/api/skill-bundles/tools/versions/3").await.0,
        404,
        "already retired"
    );
    assert_eq!(
        delete(&app, "/api/skill-bundles/tools/versions/99").await.0,
        404
    );
    assert_eq!(
        delete(&app, "/api/skill-bundles/tools/versions/x").await.0,
        404
    );
    for v in [4, 2, 1] {
        assert_eq!(
            delete(&app, &format!("/api/skill-bundles/tools/versions/{v}"))
                .await
                .0,
            204
        );
    }
    let (_, b) = get(&app, "/api/skill-bundles/tools").await;
    assert_eq!(b["latest_version"], Value::Null, "nothing left");

    // By id as well as by slug; listed by slug.
    let (s, by_id) = get(
        &app,
        &format!("/api/skill-bundles/{}", b["id"].as_str().unwrap()),
    )
    .await;
    assert_eq!((s, by_id["slug"].clone()), (200, json!("tools")));
    create(&app, json!({"slug": "alpha"})).await;
    let (_, all) = get(&app, "/api/skill-bundles").await;
    let slugs: Vec<&str> = all
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["slug"].as_str().unwrap())
        .collect();
    assert_eq!(slugs, vec!["alpha", "tools"]);
    app.stop().await;
}

#[tokio::test]
async fn a_refused_archive_stores_nothing_and_uses_no_number() {
    let app = TestApp::builder().spawn().await;
    create(&app, json!({"slug": "b"})).await;
    let (s, _) = push(&app, "b", gzip(&skills_tree("ok"))).await;
    assert_eq!(s, 201);
    let before = stored_archives(&app);
    assert_eq!(before.len(), 1);

    let hostile: Vec<(Vec<u8>, &str)> = vec![
        (
            tar(&[("ok/SKILL.md", FILE, "x"), ("../escape", FILE, "x")]),
            "\"../escape\"",
        ),
        (tar(&[("/etc/cron.d/x", FILE, "x")]), "absolute"),
        (tar(&[("a/.git/config", FILE, "x")]), ".git"),
        (
            tar(&[
                ("ok/SKILL.md", FILE, "x"),
                ("ok/link", tar::EntryType::Symlink, ""),
            ]),
            "symbolic link",
        ),
        (
            tar(&[
                ("ok/SKILL.md", FILE, "x"),
                ("ok/h", tar::EntryType::Link, ""),
            ]),
            "hard link",
        ),
        (tar(&[("ok/fifo", tar::EntryType::Fifo, "")]), "FIFO"),
        (tar(&[("ok/", tar::EntryType::Directory, "")]), "no files"),
        (b"PK\x03\x04 a zip".to_vec(), "zip"),
        (
            b"not an archive at all, just text that is long enough".repeat(20),
            "not a readable tar",
        ),
        (Vec::new(), "empty"),
    ];
    for (bytes, says) in hostile {
        let (s, body) = push(&app, "b", bytes.clone()).await;
        let detail = body["detail"].as_str().unwrap_or_default();
        assert_eq!(s, 400, "{says}: {body}");
        assert!(detail.contains(says), "{says}: {detail}");
        // The same members gzipped are refused too (what they say may differ: a gzipped
        // zip is no tar at all).
        let (s, body) = push(&app, "b", gzip(&bytes)).await;
        assert_eq!(s, 400, "{says} (gzip): {body}");
    }
    assert_eq!(
        stored_archives(&app),
        before,
        "no refused archive is left in the blob store"
    );
    let (_, b) = get(&app, "/api/skill-bundles/b").await;
    assert_eq!(b["latest_version"], 1);
    let (s, v) = push(&app, "b", skills_tree("next")).await;
    assert_eq!(
        (s, v["version"].clone()),
        (201, json!(2)),
        "refusals used no number"
    );

    // No file part, or no bundle: nothing read, nothing stored.
    let r = app
        .http
        .post(app.url("/api/skill-bundles/b/versions"))
        .multipart(Form::new().text("other", "x"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 422);
    let (s, body) = push(&app, "nope", skills_tree("x")).await;
    assert_eq!(s, 404, "{body}");
    assert!(body["detail"].as_str().unwrap().contains("nope"));
    app.stop().await;
}

#[tokio::test]
async fn an_archive_over_the_limit_is_a_413_naming_it_and_leaves_nothing() {
    let app = TestApp::builder().spawn().await;
    create(&app, json!({"slug": "big"})).await;
    // 201 MiB streamed without a length (chunked), so only the server's count can stop it.
    let chunk = bytes::Bytes::from(vec![0u8; 1024 * 1024]);
    let body = futures::stream::iter((0..201).map(move |_| Ok::<_, std::io::Error>(chunk.clone())));
    let part = Part::stream(reqwest::Body::wrap_stream(body.boxed())).file_name("bundle.tar");
    let r = app
        .http
        .post(app.url("/api/skill-bundles/big/versions"))
        .multipart(Form::new().part("file", part))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 413);
    let body: Value = r.json().await.unwrap();
    assert!(
        body["detail"].as_str().unwrap().contains("200 MiB"),
        "{body}"
    );
    assert!(stored_archives(&app).is_empty());
    let (_, b) = get(&app, "/api/skill-bundles/big").await;
    assert_eq!(b["latest_version"], Value::Null);
    app.stop().await;
}

#[tokio::test]
async fn bad_bodies_are_refused_and_a_bundle_an_agent_names_cannot_be_deleted() {
    let app = TestApp::builder().spawn().await;
    for (body, field) in [
        (json!({"slug": "Not A Slug"}), "slug"),
        (
            json!({"slug": "0193a1f2-7c3e-7a4b-9c1d-2e3f4a5b6c7d"}),
            "slug",
        ),
        (
            json!({"slug": "ok", "description": "x".repeat(4001)}),
            "description",
        ),
        (json!({"slug": "ok", "description": null}), "description"),
        (json!({}), "slug"),
    ] {
        let (s, b) = create(&app, body.clone()).await;
        assert_eq!(s, 422, "{body}: {b}");
        assert_eq!(b["detail"][0]["loc"][1], field, "{b}");
    }
    assert_eq!(
        get(&app, "/api/skill-bundles").await.1,
        json!([]),
        "nothing was written"
    );
    assert_eq!(create(&app, json!({"slug": "kit"})).await.0, 201);
    let (s, b) = create(&app, json!({"slug": "kit"})).await;
    assert_eq!(s, 409, "{b}");

    let agent = app
        .create_agent(
            "uses-kit",
            json!({"skills_source": {"kind": "bundle", "bundle": "kit"}}),
        )
        .await;
    let (s, b) = delete(&app, "/api/skill-bundles/kit").await;
    assert_eq!(s, 409, "{b}");
    assert!(b["detail"].as_str().unwrap().contains("uses-kit"), "{b}");
    let r = app
        .http
        .patch(app.url("/api/agents/uses-kit"))
        .json(&json!({"version": agent["version"], "skills_source": null}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(delete(&app, "/api/skill-bundles/kit").await.0, 204);
    assert_eq!(get(&app, "/api/skill-bundles/kit").await.0, 404);
    assert_eq!(delete(&app, "/api/skill-bundles/kit").await.0, 404);
    app.stop().await;
}
