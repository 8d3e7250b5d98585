//! Git deploy keys: generated on the server, shown by their
//! public half only, sealed at rest, unique by name, held by the agents that use them, and
//! tested with `git ls-remote` (the end-to-end run against a real sshd is in `sshd.rs`).

mod races;
mod references;
mod sshd;

use sandbox_agents_testkit::TestApp;
use serde_json::{json, Value};

/// `POST /api/git-keys`, asserting the 201.
pub async fn create_key(app: &TestApp, name: &str) -> Value {
    let r = app
        .http
        .post(app.url("/api/git-keys"))
        .json(&json!({ "name": name }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201, "{}", r.text().await.unwrap_or_default());
    r.json().await.unwrap()
}

/// `POST /api/git-keys/{id}/test` with `body`: (status, JSON body).
pub async fn test_key(app: &TestApp, id: &str, body: Value) -> (u16, Value) {
    let r = app
        .http
        .post(app.url(&format!("/api/git-keys/{id}/test")))
        .json(&body)
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
}

pub async fn list_keys(app: &TestApp) -> Vec<Value> {
    let r = app.http.get(app.url("/api/git-keys")).send().await.unwrap();
    assert_eq!(r.status(), 200);
    r.json().await.unwrap()
}

pub async fn delete_key(app: &TestApp, id: &str) -> (u16, Value) {
    let r = app
        .http
        .delete(app.url(&format!("/api/git-keys/{id}")))
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
}

/// The private key of `id`, opened from the database with the deployment's master key.
async fn private_pem(app: &TestApp, id: &str) -> String {
    let id = uuid::Uuid::parse_str(id).unwrap();
    let (sealed,): (Vec<u8>,) =
        sqlx::query_as("select private_key_sealed from git_keys where id = $1")
            .bind(id)
            .fetch_one(&app.db)
            .await
            .unwrap();
    let text = String::from_utf8_lossy(&sealed).into_owned();
    assert!(
        !text.contains("OPENSSH PRIVATE KEY"),
        "the private key is stored in plaintext"
    );
    let pem = app
        .sessions
        .credentials()
        .master_key()
        .open(&sealed, &[b"git-key:".as_slice(), id.as_bytes()].concat())
        .expect("the key is sealed for its id");
    String::from_utf8(pem).unwrap()
}

/// `ssh-keygen -lf` on a public key: its own idea of the fingerprint and type.
fn ssh_keygen_fingerprint(public_key: &str) -> String {
    let path = std::env::temp_dir().join(format!("sa-pub-{}.pub", uuid::Uuid::new_v4().simple()));
    std::fs::write(&path, format!("{public_key}\n")).unwrap();
    let out = std::process::Command::new("ssh-keygen")
        .arg("-lf")
        .arg(&path)
        .output()
        .expect("ssh-keygen (openssh-client) is installed");
    std::fs::remove_file(&path).unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[tokio::test]
async fn a_key_is_generated_listed_and_deleted_and_its_private_half_never_leaves_the_server() {
    let app = TestApp::builder().spawn().await;
    let first = create_key(&app, "ci").await;
    let second = create_key(&app, "  deploy key  ").await;
    let id = first["id"].as_str().unwrap().to_owned();
    let public = first["public_key"].as_str().unwrap();
    assert!(public.starts_with("ssh-ed25519 AAAA"), "{public}");
    assert!(public.ends_with(" sandbox-agents:default:ci"), "{public}");
    assert_eq!(second["name"], "deploy key", "names are trimmed");
    assert!(first["created_at"].is_string() && first["last_used_at"].is_null());
    let fingerprint = first["fingerprint"].as_str().unwrap();
    assert!(fingerprint.starts_with("SHA256:"));
    // ssh-keygen parses the public key as ed25519 and agrees on the fingerprint.
    let printed = ssh_keygen_fingerprint(public);
    assert!(
        printed.starts_with(&format!("256 {fingerprint} "))
            && printed.trim_end().ends_with("(ED25519)"),
        "{printed} vs {fingerprint}"
    );

    let listed = list_keys(&app).await;
    assert_eq!(listed.len(), 2);
    assert_eq!(listed[0], first, "oldest first, the same as created");
    assert_eq!(listed[1]["id"], second["id"]);

    // Nothing returned carries the private half, in any form.
    let pem = private_pem(&app, &id).await;
    assert!(pem.starts_with("-----BEGIN OPENSSH PRIVATE KEY-----\n"));
    let (_, tested) = test_key(&app, &id, json!({"repo": "o/r", "host": "git@127.0.0.1:1"})).await;
    let everything = format!("{first}{second}{listed:?}{tested}");
    assert!(!everything.contains("PRIVATE KEY"));
    for line in pem.lines().filter(|l| !l.starts_with("-----")) {
        assert!(
            !everything.contains(line),
            "a line of the private key was returned"
        );
    }

    assert_eq!(delete_key(&app, &id).await.0, 204);
    let (status, body) = delete_key(&app, &id).await;
    assert_eq!(status, 404, "{body}");
    assert!(body["detail"].as_str().unwrap().contains("not found"));
    assert_eq!(delete_key(&app, "not-a-uuid").await.0, 404);
    assert_eq!(
        test_key(&app, &id, json!({"repo": "o/r", "host": "github.com"}))
            .await
            .0,
        404
    );
    let listed = list_keys(&app).await;
    assert_eq!(listed.len(), 1);
    app.stop().await;
}

#[tokio::test]
async fn names_are_unique_in_a_project_and_never_blank() {
    let app = TestApp::builder().spawn().await;
    create_key(&app, "ci").await;
    for (body, status) in [
        (json!({"name": "ci"}), 409),
        (json!({"name": " ci "}), 409),
        (json!({"name": "   "}), 422),
        (json!({"name": "a\nb"}), 422),
        (json!({}), 422),
        (json!({"name": null}), 422),
    ] {
        let r = app
            .http
            .post(app.url("/api/git-keys"))
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), status, "{body}");
        let detail = r.json::<Value>().await.unwrap()["detail"].clone();
        if status == 422 {
            assert!(detail.is_array(), "{detail}");
        } else {
            assert!(
                detail.as_str().unwrap().contains("already exists"),
                "{detail}"
            );
        }
    }
    app.stop().await;
}

#[tokio::test]
async fn repos_and_hosts_that_could_smuggle_options_are_422_and_nothing_runs() {
    let app = TestApp::builder().spawn().await;
    let key = create_key(&app, "k").await;
    let id = key["id"].as_str().unwrap();
    let marker = std::env::temp_dir().join(format!("sa-pwned-{}", uuid::Uuid::new_v4().simple()));
    let m = marker.display();
    for (body, field) in [
        (
            json!({"repo": "o/r", "host": format!("-oProxyCommand=touch {m}")}),
            "host",
        ),
        (
            json!({"repo": "o/r", "host": format!("-oProxyCommand=touch${{IFS}}{m}")}),
            "host",
        ),
        (
            json!({"repo": "o/r", "host": "git@-oProxyCommand=x"}),
            "host",
        ),
        (json!({"repo": "o/r", "host": "github.com:99999"}), "host"),
        (json!({"repo": "o/r", "host": "git hub.com"}), "host"),
        (
            json!({"repo": format!("--upload-pack=touch {m}"), "host": "github.com"}),
            "repo",
        ),
        (json!({"repo": "o/r;id", "host": "github.com"}), "repo"),
        (json!({"repo": "o/r\n", "host": "github.com"}), "repo"),
    ] {
        let (status, b) = test_key(&app, id, body.clone()).await;
        assert_eq!(status, 422, "{body}: {b}");
        assert_eq!(b["detail"][0]["loc"], json!(["body", field]), "{b}");
    }
    let (status, _) = test_key(&app, id, json!({"host": "github.com"})).await;
    assert_eq!(status, 422, "repo is required");
    assert!(!marker.exists(), "a command ran");
    assert!(list_keys(&app).await[0]["last_used_at"].is_null());
    app.stop().await;
}

#[tokio::test]
async fn a_host_that_refuses_the_connection_is_ok_false_with_ssh_s_words() {
    let app = TestApp::builder().spawn().await;
    let key = create_key(&app, "k").await;
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let (status, t) = test_key(
        &app,
        key["id"].as_str().unwrap(),
        json!({"repo": "o/r", "host": format!("git@127.0.0.1:{closed}")}),
    )
    .await;
    assert_eq!(status, 200, "{t}");
    assert_eq!(t["ok"], false);
    let detail = t["detail"].as_str().unwrap();
    assert!(detail.contains("Connection refused"), "{detail}");
    assert!(detail.len() <= 4 * 2000, "bounded: {}", detail.len());
    assert!(list_keys(&app).await[0]["last_used_at"].is_null());
    app.stop().await;
}

/// An agent's `skills_source` cloning `o/r` from GitHub with the deploy key `key`.
pub fn git_source(key: &str) -> Value {
    json!({"kind": "git_repo", "repo": "o/r", "ref": "main", "host": "github.com",
           "subpath": null, "ssh_key_id": key})
}
