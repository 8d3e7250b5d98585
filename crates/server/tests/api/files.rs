//! The workspace files API on real Docker sandboxes: upload, list, read, delete, path
//! confinement (lexical and through symbolic links), and reading a stopped session's archive
//! without booting it.

use reqwest::multipart::{Form, Part};
use reqwest::{Response, StatusCode};
use sandbox_agents_testkit::files::{content, content_ok};
use sandbox_agents_testkit::TestApp;
use serde_json::{json, Value};
use std::time::Duration;

const BOOT: Duration = Duration::from_secs(60);

fn files_url(app: &TestApp, id: &str) -> String {
    app.url(&format!("/api/sessions/{id}/files"))
}

/// `POST …/files` the way the client sends it: one part `file`, with a filename.
async fn upload(
    app: &TestApp,
    id: &str,
    path: Option<&str>,
    filename: &str,
    data: Vec<u8>,
) -> Response {
    let part = Part::bytes(data)
        .file_name(filename.to_owned())
        .mime_str("application/octet-stream")
        .unwrap();
    let mut req = app
        .http
        .post(files_url(app, id))
        .multipart(Form::new().part("file", part));
    if let Some(p) = path {
        req = req.query(&[("path", p)]);
    }
    req.send().await.unwrap()
}

async fn list(app: &TestApp, id: &str, path: &str) -> Response {
    app.http
        .get(files_url(app, id))
        .query(&[("path", path)])
        .send()
        .await
        .unwrap()
}

async fn list_ok(app: &TestApp, id: &str, path: &str) -> Vec<Value> {
    let r = list(app, id, path).await;
    assert_eq!(r.status(), 200, "list {path}");
    r.json().await.unwrap()
}

async fn delete(app: &TestApp, id: &str, path: &str, recursive: Option<bool>) -> Response {
    let mut q = vec![("path", path.to_owned())];
    if let Some(r) = recursive {
        q.push(("recursive", r.to_string()));
    }
    app.http
        .delete(files_url(app, id))
        .query(&q)
        .send()
        .await
        .unwrap()
}

async fn detail(r: Response) -> String {
    let v: Value = r.json().await.unwrap();
    v["detail"].as_str().unwrap_or_default().to_owned()
}

/// Deterministic bytes that are not text.
fn noise(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
    (0..n)
        .map(|_| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (x >> 56) as u8
        })
        .collect()
}

fn paths(entries: &[Value]) -> Vec<&str> {
    entries
        .iter()
        .map(|e| e["path"].as_str().unwrap())
        .collect()
}

#[tokio::test]
async fn files_are_uploaded_listed_read_and_deleted() {
    let app = TestApp::builder().spawn().await;
    let id = app.running_session("filer", json!({})).await;

    // Upload to the default place, then to a path whose parents do not exist yet.
    let r = upload(&app, &id, None, "hello.txt", b"hello\n".to_vec()).await;
    assert_eq!(r.status(), 201);
    assert_eq!(
        r.json::<Value>().await.unwrap(),
        json!({"path": "uploads/hello.txt", "size": 6})
    );
    let report = noise(10_000, 1);
    let r = upload(
        &app,
        &id,
        Some("out/deep/report.md"),
        "r.md",
        report.clone(),
    )
    .await;
    assert_eq!(r.status(), 201);
    assert_eq!(
        r.json::<Value>().await.unwrap(),
        json!({"path": "out/deep/report.md", "size": 10_000})
    );
    let (code, out, _) = app
        .exec(
            &id,
            "stat -c '%n %U %G %a' uploads uploads/hello.txt out out/deep out/deep/report.md",
        )
        .await;
    assert_eq!(code, 0);
    assert_eq!(
        out,
        "uploads sandbox sandbox 755\nuploads/hello.txt sandbox sandbox 644\nout sandbox sandbox 755\n\
         out/deep sandbox sandbox 755\nout/deep/report.md sandbox sandbox 644\n"
    );
    // A path ending in `/` names the directory the file goes into.
    let r = upload(&app, &id, Some("inbox/"), "n.txt", b"n".to_vec()).await;
    assert_eq!(r.status(), 201);
    assert_eq!(r.json::<Value>().await.unwrap()["path"], "inbox/n.txt");
    assert_eq!(delete(&app, &id, "inbox", Some(true)).await.status(), 204);
    // Uploading over an existing file replaces it.
    let r = upload(&app, &id, Some("uploads/hello.txt"), "x", b"bye\n".to_vec()).await;
    assert_eq!(r.status(), 201);
    assert_eq!(content_ok(&app, &id, "uploads/hello.txt").await, b"bye\n");

    // Listing: the root, a directory, one file.
    let root = list_ok(&app, &id, ".").await;
    assert_eq!(paths(&root), ["out", "uploads"]);
    assert_eq!(root[0]["kind"], "directory");
    assert_eq!(root[0]["permissions"], "drwxr-xr-x");
    let r = app.http.get(files_url(&app, &id)).send().await.unwrap();
    assert_eq!(
        r.json::<Vec<Value>>().await.unwrap(),
        root,
        "path defaults to ."
    );
    let deep = list_ok(&app, &id, "out/deep").await;
    assert_eq!(paths(&deep), ["out/deep/report.md"]);
    let one = list_ok(&app, &id, "out/deep/report.md").await;
    assert_eq!(
        one,
        [
            json!({"path": "out/deep/report.md", "kind": "file", "size": 10_000,
                 "permissions": "-rw-r--r--", "owner": "sandbox", "group": "sandbox"})
        ]
    );
    assert_eq!(content_ok(&app, &id, "out/deep/report.md").await, report);

    // A binary file made in the sandbox comes back byte for byte: upload what was read and
    // let the sandbox compare.
    let (code, _, _) = app
        .exec(&id, "head -c 2000000 /dev/urandom > data.bin")
        .await;
    assert_eq!(code, 0);
    let r = content(&app, &id, "data.bin").await;
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["content-length"], "2000000");
    let data = r.bytes().await.unwrap();
    assert_eq!(data.len(), 2_000_000);
    let r = upload(&app, &id, Some("copy.bin"), "copy.bin", data.to_vec()).await;
    assert_eq!(r.status(), 201);
    assert_eq!(
        app.exec(&id, "cmp data.bin copy.bin && echo same").await.1,
        "same\n"
    );

    // Each upload is in the log.
    let log = app.events(&id).await;
    let uploads: Vec<&Value> = log.iter().filter(|e| e["type"] == "user.file").collect();
    assert_eq!(uploads.len(), 5);
    assert!(uploads[0]["run_id"].is_null());
    assert_eq!(
        uploads[0]["payload"],
        json!({"path": "uploads/hello.txt", "size": 6, "filename": "hello.txt"})
    );
    assert_eq!(
        uploads[1]["payload"],
        json!({"path": "out/deep/report.md", "size": 10_000, "filename": "r.md"})
    );
    assert_eq!(
        uploads[2]["payload"],
        json!({"path": "inbox/n.txt", "size": 1, "filename": "n.txt"})
    );

    // Misses and directories.
    let r = content(&app, &id, "nope.txt").await;
    assert_eq!(r.status(), 404);
    assert_eq!(detail(r).await, "no such file or directory: nope.txt");
    assert_eq!(list(&app, &id, "nope").await.status(), 404);
    assert_eq!(delete(&app, &id, "nope", None).await.status(), 404);
    assert_eq!(content(&app, &id, "out").await.status(), 400);
    assert_eq!(content(&app, &id, ".").await.status(), 400);
    let r = upload(&app, &id, Some("out"), "x", b"x".to_vec()).await;
    assert_eq!(r.status(), 400, "uploading over a directory");
    let r = upload(&app, &id, Some("copy.bin/x"), "x", b"x".to_vec()).await;
    assert_eq!(r.status(), 400, "a parent that is a file");
    for bad in ["..", "a/b", "."] {
        let r = upload(&app, &id, None, bad, b"x".to_vec()).await;
        assert_eq!(r.status(), 400, "filename {bad}");
    }
    let r = app
        .http
        .post(files_url(&app, &id))
        .multipart(Form::new().text("other", "x"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 422, "no file part");

    // Deleting: a file, a directory only when recursive, never the root.
    assert_eq!(
        delete(&app, &id, "uploads/hello.txt", None).await.status(),
        204
    );
    assert_eq!(list(&app, &id, "uploads/hello.txt").await.status(), 404);
    let r = delete(&app, &id, "out", Some(false)).await;
    assert_eq!(r.status(), 400);
    assert!(detail(r).await.contains("recursive=true"));
    assert_eq!(list_ok(&app, &id, "out/deep").await.len(), 1);
    assert_eq!(delete(&app, &id, "out", Some(true)).await.status(), 204);
    assert_eq!(list(&app, &id, "out").await.status(), 404);
    assert_eq!(delete(&app, &id, ".", Some(true)).await.status(), 400);
    assert_eq!(
        app.exec(&id, "ls -A").await.1,
        "copy.bin\ndata.bin\nuploads\n"
    );

    app.delete_session(&id).await;
}

#[tokio::test]
async fn paths_cannot_leave_the_workspace_lexically_or_through_links() {
    let app = TestApp::builder().spawn().await;
    let id = app.running_session("jailed", json!({})).await;
    let (code, _, err) = app
        .exec(
            &id,
            "ln -s /etc/passwd leak && ln -s /etc etcdir && mkdir -p sub real && ln -s ../.. sub/up \
             && echo inside > real/f && ln -s real inlink",
        )
        .await;
    assert_eq!(code, 0, "{err}");

    for bad in ["../x", "/etc/passwd", "a/../../x"] {
        assert_eq!(list(&app, &id, bad).await.status(), 400, "list {bad}");
        assert_eq!(content(&app, &id, bad).await.status(), 400, "read {bad}");
        assert_eq!(
            delete(&app, &id, bad, Some(true)).await.status(),
            400,
            "delete {bad}"
        );
        let r = upload(&app, &id, Some(bad), "x", b"x".to_vec()).await;
        assert_eq!(r.status(), 400, "upload {bad}");
    }

    // A link to a file outside: not readable, not listable through.
    let r = content(&app, &id, "leak").await;
    assert_eq!(r.status(), 400);
    let text = r.text().await.unwrap();
    assert!(
        text.contains("leaves the workspace") && !text.contains("root:"),
        "{text}"
    );
    let r = list(&app, &id, "leak").await;
    assert_eq!(r.status(), 400);
    assert!(!r.text().await.unwrap().contains("passwd"));
    // Listing the directory shows the link as a link, and nothing of /etc.
    let root = list_ok(&app, &id, ".").await;
    assert_eq!(paths(&root), ["etcdir", "inlink", "leak", "real", "sub"]);
    assert_eq!(root[2]["kind"], "symlink");
    assert!(root[2]["permissions"].as_str().unwrap().starts_with('l'));

    // A link in a parent component: every operation refuses it.
    assert_eq!(content(&app, &id, "etcdir/passwd").await.status(), 400);
    assert_eq!(list(&app, &id, "etcdir").await.status(), 400);
    assert_eq!(list(&app, &id, "sub/up").await.status(), 400);
    let r = delete(&app, &id, "etcdir/passwd", None).await;
    assert_eq!(r.status(), 400);
    assert!(detail(r).await.contains("leaves the workspace"));
    let r = upload(&app, &id, Some("etcdir/x"), "x", b"x".to_vec()).await;
    assert_eq!(r.status(), 400);
    let r = upload(&app, &id, Some("sub/up/tmp/x"), "x", b"x".to_vec()).await;
    assert_eq!(r.status(), 400);
    // Uploading onto a link would write through it.
    let r = upload(&app, &id, Some("leak"), "x", b"x".to_vec()).await;
    assert_eq!(r.status(), 400);
    assert_eq!(
        app.exec(
            &id,
            "test -f /etc/passwd && test ! -e /etc/x && test ! -e /tmp/x && echo ok"
        )
        .await
        .1,
        "ok\n"
    );

    // Links that stay inside the workspace are fine.
    assert_eq!(content_ok(&app, &id, "inlink/f").await, b"inside\n");
    assert_eq!(paths(&list_ok(&app, &id, "inlink").await), ["inlink/f"]);
    let r = upload(&app, &id, Some("inlink/g"), "g", b"g".to_vec()).await;
    assert_eq!(r.status(), 201);
    assert_eq!(app.exec(&id, "cat real/g").await.1, "g");

    // Deleting a link removes the link, never what it points at.
    assert_eq!(delete(&app, &id, "leak", None).await.status(), 204);
    assert_eq!(delete(&app, &id, "inlink", None).await.status(), 204);
    assert_eq!(
        app.exec(
            &id,
            "test -f /etc/passwd && test ! -L leak && test -f real/f && echo ok"
        )
        .await
        .1,
        "ok\n"
    );

    app.delete_session(&id).await;
}

#[tokio::test]
async fn a_stopped_session_is_listed_and_read_from_its_archive_without_booting() {
    let app = TestApp::builder().spawn().await;
    let id = app.running_session("archived", json!({})).await;
    let long = format!("docs/{}.md", "n".repeat(150));
    let r = upload(&app, &id, Some("docs/a.txt"), "a.txt", b"alpha\n".to_vec()).await;
    assert_eq!(r.status(), 201);
    let (code, _, err) = app
        .exec(
            &id,
            &format!(
                "head -c 300000 /dev/urandom > bin.dat && ln bin.dat hard.dat && echo long > {long} \
                 && ln -s /etc/passwd leak && ln -s /etc etcdir && mkdir empty && chmod 700 empty"
            ),
        )
        .await;
    assert_eq!(code, 0, "{err}");
    let bin = content_ok(&app, &id, "bin.dat").await;
    assert_eq!(bin.len(), 300_000);
    let strip = |entries: Vec<Value>| -> Vec<Value> {
        // Directory sizes are the filesystem's while running and 0 in an archive.
        entries
            .into_iter()
            .map(|mut e| {
                if e["kind"] != "file" {
                    e["size"] = json!(null);
                }
                e
            })
            .collect()
    };
    let live_root = strip(list_ok(&app, &id, ".").await);
    let live_docs = strip(list_ok(&app, &id, "docs").await);

    app.stop_session(&id).await;
    let before = app.events(&id).await.len();

    assert_eq!(strip(list_ok(&app, &id, ".").await), live_root);
    assert_eq!(strip(list_ok(&app, &id, "docs").await), live_docs);
    let one = list_ok(&app, &id, "docs/a.txt").await;
    assert_eq!(
        one,
        [json!({"path": "docs/a.txt", "kind": "file", "size": 6,
                 "permissions": "-rw-r--r--", "owner": "sandbox", "group": "sandbox"})]
    );
    let empty = list_ok(&app, &id, "empty").await;
    assert!(empty.is_empty());
    assert_eq!(content_ok(&app, &id, "docs/a.txt").await, b"alpha\n");
    assert_eq!(content_ok(&app, &id, "bin.dat").await, bin);
    assert_eq!(content_ok(&app, &id, "hard.dat").await, bin, "a hard link");
    assert_eq!(content_ok(&app, &id, &long).await, b"long\n");

    // Links are never followed in an archive.
    let r = content(&app, &id, "leak").await;
    assert_eq!(r.status(), 400);
    assert!(!r.text().await.unwrap().contains("root:"));
    assert_eq!(content(&app, &id, "etcdir/passwd").await.status(), 400);
    assert_eq!(list(&app, &id, "etcdir/passwd").await.status(), 400);
    let leak = list_ok(&app, &id, "leak").await;
    assert_eq!(leak.len(), 1);
    assert_eq!(leak[0]["kind"], "symlink");
    assert_eq!(content(&app, &id, "docs").await.status(), 400);
    assert_eq!(content(&app, &id, "nope").await.status(), 404);
    assert_eq!(list(&app, &id, "nope").await.status(), 404);
    assert_eq!(list(&app, &id, "../x").await.status(), 400);
    assert_eq!(content(&app, &id, "/etc/passwd").await.status(), 400);

    // Writes need a running sandbox.
    let r = upload(&app, &id, None, "x.txt", b"x".to_vec()).await;
    assert_eq!(r.status(), 409);
    assert!(detail(r).await.starts_with("session is not running"));
    assert_eq!(delete(&app, &id, "docs/a.txt", None).await.status(), 409);

    // Nothing booted.
    assert_eq!(app.session(&id).await["status"], "stopped");
    let log = app.events(&id).await;
    assert_eq!(log.len(), before, "no event since the stop");
    assert_eq!(
        log.iter()
            .filter(|e| e["type"] == "session.status_running")
            .count(),
        1
    );

    app.delete_session(&id).await;
}

#[tokio::test]
async fn uploads_larger_than_100_mib_get_413() {
    let app = TestApp::builder().spawn().await;
    let id = app.running_session("bulky", json!({})).await;
    let big = vec![7u8; 101 * 1024 * 1024];

    // With a Content-Length: refused before the body is read.
    let r = upload(&app, &id, Some("big.bin"), "big.bin", big.clone()).await;
    assert_eq!(r.status(), StatusCode::PAYLOAD_TOO_LARGE);
    assert!(detail(r).await.contains("100 MiB"));

    // Streamed (chunked, no length): refused once it passes the limit.
    let chunks: Vec<Result<Vec<u8>, std::io::Error>> =
        big.chunks(1024 * 1024).map(|c| Ok(c.to_vec())).collect();
    let part = Part::stream(reqwest::Body::wrap_stream(futures::stream::iter(chunks)))
        .file_name("big.bin")
        .mime_str("application/octet-stream")
        .unwrap();
    let r = app
        .http
        .post(files_url(&app, &id))
        .multipart(Form::new().part("file", part))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::PAYLOAD_TOO_LARGE);
    assert!(r.json::<Value>().await.unwrap()["detail"].is_string());
    assert_eq!(app.exec(&id, "ls -A").await.1, "", "nothing was written");
    assert!(
        !app.events(&id)
            .await
            .iter()
            .any(|e| e["type"] == "user.file"),
        "no user.file event"
    );

    // Exactly 100 MiB is fine.
    let max = vec![1u8; 100 * 1024 * 1024];
    let r = upload(&app, &id, Some("max.bin"), "max.bin", max).await;
    assert_eq!(r.status(), 201);
    assert_eq!(r.json::<Value>().await.unwrap()["size"], 100 * 1024 * 1024);
    let (_, out, _) = app
        .exec(&id, "stat -c %s max.bin; tr -d '\\001' < max.bin | wc -c")
        .await;
    assert_eq!(out, "104857600\n0\n", "every byte arrived as sent");

    // Uploads are spooled through the blob store: nothing of them stays there, nor queued.
    let spools: Vec<_> = std::fs::read_dir(app.blobs_dir.join("tmp"))
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    assert!(spools.is_empty(), "spooled uploads left: {spools:?}");
    let (queued,): (i64,) = sqlx::query_as("select count(*) from garbage")
        .fetch_one(&app.db)
        .await
        .unwrap();
    assert_eq!(queued, 0);

    app.delete_session(&id).await;
}

#[tokio::test]
async fn a_session_that_failed_to_boot_has_no_files_to_show() {
    let app = TestApp::builder().spawn().await;
    app.create_agent(
        "broken-files",
        json!({"image": "sandbox-agents-no-such-image:0"}),
    )
    .await;
    let s = app
        .create_session(json!({"agent_id": "broken-files"}))
        .await;
    let id = s["id"].as_str().unwrap().to_owned();
    app.wait_for_status(&id, "error", BOOT).await;
    let r = list(&app, &id, ".").await;
    assert_eq!(r.status(), 409);
    assert!(detail(r).await.starts_with("session is not running"));
    assert_eq!(content(&app, &id, "x").await.status(), 409);
    assert_eq!(
        upload(&app, &id, None, "x", b"x".to_vec()).await.status(),
        409
    );
    assert_eq!(delete(&app, &id, "x", None).await.status(), 409);
    let r = list(&app, "00000000-0000-0000-0000-000000000000", ".").await;
    assert_eq!(r.status(), 404);
    app.delete_session(&id).await;
}
