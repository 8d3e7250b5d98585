//! `s3_mount` entries end to end, on real Docker against a real S3-compatible server (moto,
//! `testkit::s3`): the control plane stages the prefix with its own client (the sandbox never
//! sees a key), read-only mounts belong to root, writable ones are written back at snapshot
//! and stop (changed and new files uploaded, untouched ones left alone, deleted ones deleted)
//! and are left out of the archives, so a fork stages the bucket again; failures name the
//! bucket and prefix.

use sandbox_agents_testkit::s3::{MotoServer, ACCESS_KEY_ID, SECRET_ACCESS_KEY};
use sandbox_agents_testkit::{TestApp, BOOT};
use sandbox_agents_workspace::s3::AmbientCredentials;
use serde_json::{json, Value};
use std::path::Path;

async fn app_for(moto: &MotoServer, max: Option<u64>) -> TestApp {
    TestApp::builder()
        .with_config(|c| moto.access().configure(c))
        .with_config(|c| {
            if let Some(v) = max {
                c.s3_stage_max_bytes = v
            }
        })
        .spawn()
        .await
}

async fn sh(app: &TestApp, id: &str, command: &str) -> String {
    let (code, out, err) = app.exec(id, command).await;
    assert_eq!(code, 0, "{command}: {out}{err}");
    out.trim().to_owned()
}

async fn fails(app: &TestApp, id: &str, command: &str) {
    let (code, out, _) = app.exec(id, command).await;
    assert_ne!(code, 0, "the sandbox user could: {command} ({out})");
}

async fn post(app: &TestApp, path: &str, body: Value) -> Value {
    let r = app
        .http
        .post(app.url(path))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert!(
        r.status().is_success(),
        "{path}: {}",
        r.text().await.unwrap()
    );
    r.json().await.unwrap()
}

/// The entry names of every tar under `dir` (recursively).
fn tar_names(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(tar_names(&p));
        } else if p.extension().is_some_and(|x| x == "tar") {
            let f = std::fs::File::open(&p).unwrap();
            let mut a = tar::Archive::new(f);
            for e in a.entries().unwrap() {
                out.push(e.unwrap().path().unwrap().display().to_string());
            }
        }
    }
    out
}

#[tokio::test]
async fn a_read_only_mount_is_staged_and_the_sandbox_user_cannot_change_it_or_find_a_key() {
    let moto = MotoServer::start().await;
    moto.create_bucket("inputs").await;
    moto.put("inputs", "data/a.txt", "alpha\n").await;
    moto.put("inputs", "data/sub/b.txt", "beta\n").await;
    moto.put("inputs", "elsewhere/c.txt", "not mounted\n").await;
    // Folder markers as consoles make them: neither becomes a file.
    moto.folder_marker("inputs", "data").await;
    moto.folder_marker("inputs", "data/sub").await;
    moto.folder_marker("inputs", "data/empty").await;
    moto.put("inputs", "data/zero.txt", "").await;
    assert!(moto.keys("inputs").await.contains(&"data/sub".to_owned()));
    let app = app_for(&moto, None).await;
    let id = app
        .running_session(
            "reader",
            json!({"manifest": {"entries": {
                "mnt/in": {"kind": "s3_mount", "bucket": "inputs", "prefix": "data"},
                "notes.md": {"kind": "file", "content": "mine\n"},
            }}}),
        )
        .await;

    assert_eq!(sh(&app, &id, "cat mnt/in/a.txt").await, "alpha");
    assert_eq!(sh(&app, &id, "cat mnt/in/sub/b.txt").await, "beta");
    assert_eq!(
        sh(&app, &id, "find mnt/in -type f | sort | tr '\\n' ' '").await,
        "mnt/in/a.txt mnt/in/sub/b.txt mnt/in/zero.txt"
    );
    sh(
        &app,
        &id,
        "test -d mnt/in/empty && test -f mnt/in/zero.txt && test ! -s mnt/in/zero.txt",
    )
    .await;
    assert_eq!(
        sh(&app, &id, "stat -c '%u %a' mnt/in mnt/in/sub mnt/in/a.txt mnt/in/sub/b.txt | sort -u | tr '\\n' ' '").await,
        "0 644 0 755"
    );
    assert_eq!(
        sh(&app, &id, "stat -c %u mnt").await,
        "1000",
        "the parent is the sandbox user's"
    );
    fails(&app, &id, "echo x >> mnt/in/a.txt").await;
    fails(&app, &id, "rm -f mnt/in/a.txt").await;
    fails(&app, &id, "touch mnt/in/new.txt").await;
    fails(&app, &id, "rm -rf mnt/in").await;
    assert_eq!(sh(&app, &id, "cat mnt/in/a.txt").await, "alpha");

    // Nothing of the server's S3 credentials is in the sandbox: not in a command's
    // environment, not in its processes', not in any file a sandbox user could read.
    for needle in [SECRET_ACCESS_KEY, ACCESS_KEY_ID] {
        assert_eq!(
            sh(&app, &id, &format!("env | grep -c '{needle}' || true")).await,
            "0"
        );
        assert_eq!(
            sh(
                &app,
                &id,
                &format!("grep -rlsI '{needle}' /workspace /home /tmp /etc /root /opt /proc/1/environ 2>/dev/null | wc -l")
            )
            .await,
            "0",
            "{needle} found in the sandbox"
        );
    }

    // A stop's archive leaves the mount out; the next boot stages it again.
    post(&app, &format!("/api/sessions/{id}/stop"), json!({})).await;
    let names = tar_names(&app.blobs_dir.join("sessions"));
    assert!(names.iter().any(|n| n.ends_with("notes.md")), "{names:?}");
    assert!(!names.iter().any(|n| n.contains("mnt/in")), "{names:?}");
    moto.put("inputs", "data/a.txt", "alpha 2\n").await;
    post(&app, &format!("/api/sessions/{id}/start"), json!({})).await;
    app.wait_for_status(&id, "running", BOOT).await;
    assert_eq!(sh(&app, &id, "cat mnt/in/a.txt").await, "alpha 2");
    assert_eq!(sh(&app, &id, "cat notes.md").await, "mine");
    app.stop().await;
}

#[tokio::test]
async fn a_writable_mount_is_written_back_at_snapshot_and_stop_and_left_out_of_both_archives() {
    let moto = MotoServer::start().await;
    moto.create_bucket("work").await;
    for (k, v) in [
        ("proj/keep.txt", "keep\n"),
        ("proj/change.txt", "before\n"),
        ("proj/gone.txt", "gone\n"),
        ("other/untouched.txt", "outside the prefix\n"),
    ] {
        moto.put("work", k, v).await;
    }
    let keep_version = moto.version("work", "proj/keep.txt").await;
    assert!(keep_version.is_some(), "the bucket is versioned");
    let app = app_for(&moto, None).await;
    let id = app
        .running_session(
            "writer",
            json!({"manifest": {"entries": {
                "out": {"kind": "s3_mount", "bucket": "work", "prefix": "proj",
                        "read_only": false, "acknowledge_credential_exposure": true},
                "notes.md": {"kind": "file", "content": "mine\n"},
            }}}),
        )
        .await;
    assert_eq!(
        sh(&app, &id, "stat -c %u out out/keep.txt | sort -u").await,
        "1000"
    );
    sh(
        &app,
        &id,
        "echo changed > out/change.txt && rm out/gone.txt && echo new > out/new.txt \
         && mkdir -p out/d && echo deep > out/d/deep.txt",
    )
    .await;

    let snap = post(
        &app,
        &format!("/api/sessions/{id}/snapshots"),
        json!({"label": "s"}),
    )
    .await;
    assert_eq!(
        moto.get("work", "proj/change.txt").await.unwrap(),
        b"changed\n"
    );
    assert_eq!(moto.get("work", "proj/new.txt").await.unwrap(), b"new\n");
    assert_eq!(
        moto.get("work", "proj/d/deep.txt").await.unwrap(),
        b"deep\n"
    );
    assert_eq!(moto.get("work", "proj/gone.txt").await, None);
    assert_eq!(
        moto.version("work", "proj/keep.txt").await,
        keep_version,
        "an untouched file is not uploaded again"
    );
    assert_eq!(
        moto.keys("work").await,
        [
            "other/untouched.txt",
            "proj/change.txt",
            "proj/d/deep.txt",
            "proj/keep.txt",
            "proj/new.txt"
        ]
    );
    let names = tar_names(&app.blobs_dir.join("snapshots"));
    assert!(names.iter().any(|n| n.ends_with("notes.md")), "{names:?}");
    assert!(
        !names.iter().any(|n| n.contains("workspace/out")),
        "{names:?}"
    );
    // Nor does its image: the workspace is a volume, which a commit leaves out, so the image
    // holds what lives outside it and none of the bucket's files.
    let image: String = sqlx::query_scalar("select image from snapshots where id = $1::uuid")
        .bind(snap["id"].as_str().unwrap())
        .fetch_one(&app.db)
        .await
        .unwrap();
    let listed = std::process::Command::new("docker")
        .args([
            "run",
            "--rm",
            "--network",
            "none",
            "--entrypoint",
            "ls",
            &image,
            "-A",
            "/workspace",
        ])
        .output()
        .unwrap();
    assert!(listed.status.success(), "{listed:?}");
    assert_eq!(
        String::from_utf8_lossy(&listed.stdout),
        "",
        "the snapshot's image holds no workspace file"
    );

    // After the snapshot, a change and a deletion, written back at stop.
    let new_version = moto.version("work", "proj/new.txt").await;
    sh(
        &app,
        &id,
        "echo again > out/change.txt && rm out/d/deep.txt",
    )
    .await;
    post(&app, &format!("/api/sessions/{id}/stop"), json!({})).await;
    assert_eq!(
        moto.get("work", "proj/change.txt").await.unwrap(),
        b"again\n"
    );
    assert_eq!(moto.get("work", "proj/d/deep.txt").await, None);
    assert_eq!(moto.version("work", "proj/new.txt").await, new_version);
    assert_eq!(moto.version("work", "proj/keep.txt").await, keep_version);
    let names = tar_names(&app.blobs_dir.join("sessions"));
    assert!(
        !names.iter().any(|n| n.contains("workspace/out")),
        "{names:?}"
    );

    // A fork of the snapshot stages the bucket as it is now, not as it was.
    let fork = app
        .boot_session(json!({"agent_id": "writer", "from_snapshot_id": snap["id"]}))
        .await;
    assert_eq!(sh(&app, &fork, "cat out/change.txt").await, "again");
    assert_eq!(sh(&app, &fork, "cat notes.md").await, "mine");
    assert_eq!(sh(&app, &fork, "ls out/d | wc -l").await, "0");
    app.stop().await;
}

#[tokio::test]
async fn a_prefix_over_the_cap_a_missing_bucket_and_missing_credentials_fail_the_boot_naming_them()
{
    let moto = MotoServer::start().await;
    moto.create_bucket("big").await;
    moto.put("big", "p/blob.bin", vec![7u8; 100]).await;
    let app = app_for(&moto, Some(64)).await;
    let mount = |bucket: &str, prefix: &str| json!({"manifest": {"entries": {"m": {"kind": "s3_mount", "bucket": bucket, "prefix": prefix}}}});
    app.create_agent("big", mount("big", "p")).await;
    app.create_agent("missing", mount("no-such-bucket", "x"))
        .await;
    for (agent, needles) in [
        (
            "big",
            vec!["s3://big/p", "--s3-stage-max-bytes", "64 bytes"],
        ),
        ("missing", vec!["s3://no-such-bucket/x", "cannot list"]),
    ] {
        let s = app.create_session(json!({"agent_id": agent})).await;
        let s = app
            .wait_for_status(s["id"].as_str().unwrap(), "error", BOOT)
            .await;
        let error = s["error"].as_str().unwrap();
        for n in needles {
            assert!(error.contains(n), "{agent}: {error} lacks {n}");
        }
    }
    app.stop().await;

    let keyless = TestApp::builder().spawn().await;
    keyless.create_agent("big", mount("big", "p")).await;
    let s = keyless.create_session(json!({"agent_id": "big"})).await;
    let s = keyless
        .wait_for_status(s["id"].as_str().unwrap(), "error", BOOT)
        .await;
    let error = s["error"].as_str().unwrap();
    assert!(
        error.contains("s3://big/p") && error.contains("AWS_ACCESS_KEY_ID"),
        "{error}"
    );
    keyless.stop().await;
}

#[tokio::test]
async fn a_writable_mount_without_the_acknowledgement_is_a_422_and_nothing_is_stored() {
    let app = TestApp::builder().spawn().await;
    let entry = json!({"kind": "s3_mount", "bucket": "b", "read_only": false});
    let r = app
        .http
        .post(app.url("/api/agents"))
        .json(&json!({"slug": "w", "name": "w", "manifest": {"entries": {"out": entry}}}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 422);
    let body = r.text().await.unwrap();
    assert!(body.contains("acknowledge_credential_exposure"), "{body}");
    let r = app.http.get(app.url("/api/agents/w")).send().await.unwrap();
    assert_eq!(r.status(), 404, "no agent was stored");

    app.create_agent("plain", json!({})).await;
    let r = app
        .http
        .post(app.url("/api/sessions"))
        .json(&json!({"agent_id": "plain", "manifest": {"entries": {"out": entry}}}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 422);
    let r = app.http.get(app.url("/api/sessions")).send().await.unwrap();
    let list: Value = r.json().await.unwrap();
    let n = list
        .as_array()
        .map(Vec::len)
        .or_else(|| list["data"].as_array().map(Vec::len));
    assert_eq!(n, Some(0), "no session was stored: {list}");
    app.stop().await;
}

#[tokio::test]
async fn an_idle_release_writes_a_writable_mount_back_and_the_wake_stages_it_again() {
    let moto = MotoServer::start().await;
    moto.create_bucket("idle").await;
    moto.put("idle", "notes/a.txt", "a\n").await;
    let app = app_for(&moto, None).await;
    let id = app
        .running_session(
            "idler",
            json!({"idle_ttl_seconds": 60, "manifest": {"entries": {
                "notes": {"kind": "s3_mount", "bucket": "idle", "prefix": "notes",
                          "read_only": false, "acknowledge_credential_exposure": true},
            }}}),
        )
        .await;
    // Over the single-request size: uploaded in parts.
    sh(
        &app,
        &id,
        "echo b > notes/b.txt && rm notes/a.txt && head -c 9437184 /dev/urandom > notes/big.bin",
    )
    .await;
    let big = sh(&app, &id, "sha256sum notes/big.bin | cut -d' ' -f1").await;
    sqlx::query(
        "update sessions set last_used_at = now() - interval '2 minutes' where id = $1::uuid",
    )
    .bind(&id)
    .execute(&app.db)
    .await
    .unwrap();
    assert_eq!(app.sessions.release_idle().await.unwrap(), 1);
    assert_eq!(app.session(&id).await["stopped_reason"], "idle");
    assert_eq!(moto.keys("idle").await, ["notes/b.txt", "notes/big.bin"]);
    assert_eq!(moto.get("idle", "notes/b.txt").await.unwrap(), b"b\n");
    let uploaded = moto.get("idle", "notes/big.bin").await.unwrap();
    use sha2::Digest;
    assert_eq!(hex::encode(sha2::Sha256::digest(&uploaded)), big);

    moto.put("idle", "notes/c.txt", "from elsewhere\n").await;
    post(&app, &format!("/api/sessions/{id}/start"), json!({})).await;
    app.wait_for_status(&id, "running", BOOT).await;
    assert_eq!(
        sh(&app, &id, "ls notes | tr '\\n' ' '").await,
        "b.txt big.bin c.txt"
    );
    assert_eq!(
        sh(&app, &id, "sha256sum notes/big.bin | cut -d' ' -f1").await,
        big,
        "staged back whole"
    );
    app.stop().await;
}

/// The secret of the credentials the role endpoints hand out (moto takes any key); distinctive
/// so that a test can look for it in a sandbox.
const ROLE_SECRET: &str = "role-secret-never-in-a-sandbox-51d0";
const IMDS_TOKEN: &str = "imds-session-token-1";
const POD_TOKEN: &str = "pod-identity-token-1";

/// A role's credential endpoints as AWS serves them, for a server without keys: the EC2
/// metadata service (IMDSv2: a session token first, then the role's name and its credentials,
/// each asked with the token) and an EKS Pod Identity agent (credentials for the token in the
/// Authorization header). Each credentials answer is counted; a request without the right
/// token is a 401, as the real ones answer.
struct RoleEndpoints {
    url: String,
    fetched: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl RoleEndpoints {
    async fn start() -> Self {
        use axum::http::{HeaderMap, StatusCode};
        use axum::routing::{get, put};
        use std::sync::atomic::{AtomicUsize, Ordering};
        let fetched = std::sync::Arc::new(AtomicUsize::new(0));
        let header = |h: &HeaderMap, name: &str| {
            h.get(name).and_then(|v| v.to_str().ok()).map(str::to_owned)
        };
        let credentials = {
            let fetched = fetched.clone();
            move || {
                fetched.fetch_add(1, Ordering::SeqCst);
                axum::Json(json!({
                    "Code": "Success",
                    "AccessKeyId": "ASIAROLECREDENTIALS1",
                    "SecretAccessKey": ROLE_SECRET,
                    "Token": "role-session-token",
                    "Expiration": "2099-01-01T00:00:00Z",
                }))
            }
        };
        let imds = move |h: &HeaderMap| {
            header(h, "x-aws-ec2-metadata-token").as_deref() == Some(IMDS_TOKEN)
        };
        let instance_creds = credentials.clone();
        let router = axum::Router::new()
            .route(
                "/latest/api/token",
                put(move |h: HeaderMap| async move {
                    match header(&h, "x-aws-ec2-metadata-token-ttl-seconds") {
                        Some(_) => Ok(IMDS_TOKEN),
                        None => Err(StatusCode::BAD_REQUEST),
                    }
                }),
            )
            .route(
                "/latest/meta-data/iam/security-credentials/",
                get(move |h: HeaderMap| async move {
                    if imds(&h) {
                        Ok("sandbox-role")
                    } else {
                        Err(StatusCode::UNAUTHORIZED)
                    }
                }),
            )
            .route(
                "/latest/meta-data/iam/security-credentials/sandbox-role",
                get(move |h: HeaderMap| async move {
                    if imds(&h) {
                        Ok(instance_creds())
                    } else {
                        Err(StatusCode::UNAUTHORIZED)
                    }
                }),
            )
            .route(
                "/pod/credentials",
                get(move |h: HeaderMap| async move {
                    if header(&h, "authorization").as_deref() == Some(POD_TOKEN) {
                        Ok(credentials())
                    } else {
                        Err(StatusCode::UNAUTHORIZED)
                    }
                }),
            );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let task = tokio::spawn(async move {
            axum::serve(listener, router).await.unwrap();
        });
        RoleEndpoints { url, fetched, task }
    }

    fn fetched(&self) -> usize {
        self.fetched.load(std::sync::atomic::Ordering::SeqCst)
    }
}

impl Drop for RoleEndpoints {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Boots a session mounting `bucket/in` writable at `m`, checks what was staged, writes a file
/// and stops, which writes it back; the role's secret is nowhere in the sandbox.
async fn mount_round_trip(app: &TestApp, moto: &MotoServer, bucket: &str) {
    moto.create_bucket(bucket).await;
    moto.put(bucket, "in/a.txt", "alpha\n").await;
    let id = app
        .running_session(
            bucket,
            json!({"manifest": {"entries": {
                "m": {"kind": "s3_mount", "bucket": bucket, "prefix": "in", "read_only": false,
                      "acknowledge_credential_exposure": true},
            }}}),
        )
        .await;
    assert_eq!(sh(app, &id, "cat m/a.txt").await, "alpha");
    sh(app, &id, "echo written > m/new.txt").await;
    assert_eq!(
        sh(
            app,
            &id,
            &format!("(env | grep '{ROLE_SECRET}'; grep -rlsI '{ROLE_SECRET}' /workspace /home /tmp /etc /proc/1/environ) | wc -l")
        )
        .await,
        "0",
        "the role's secret is in the sandbox"
    );
    post(app, &format!("/api/sessions/{id}/stop"), json!({})).await;
    assert_eq!(
        moto.get(bucket, "in/new.txt").await.as_deref(),
        Some(&b"written\n"[..])
    );
}

#[tokio::test]
async fn without_keys_the_instance_profile_is_used_when_asked_and_its_credentials_are_fetched_once()
{
    let roles = RoleEndpoints::start().await;
    let moto = MotoServer::start().await;
    // What `--s3-instance-credentials` with AWS_EC2_METADATA_SERVICE_ENDPOINT resolves to
    // (the resolution itself is a unit test of the server's config).
    let app = TestApp::builder()
        .with_config(|c| moto.endpoint_only().configure(c))
        .with_settings(|s| {
            s.services.sessions.s3.ambient = Some(AmbientCredentials::Instance {
                metadata_endpoint: Some(roles.url.clone()),
            })
        })
        .spawn()
        .await;
    mount_round_trip(&app, &moto, "first").await;
    mount_round_trip(&app, &moto, "second").await;
    assert_eq!(
        roles.fetched(),
        1,
        "two buckets, two boots and two write-backs share one fetch of the role's credentials"
    );
    app.stop().await;

    // Not asked: the same server refuses the mount at once, naming every way to give it keys.
    let keyless = TestApp::builder()
        .with_config(|c| moto.endpoint_only().configure(c))
        .spawn()
        .await;
    keyless
        .create_agent(
            "m",
            json!({"manifest": {"entries": {"m": {"kind": "s3_mount", "bucket": "first", "prefix": "in"}}}}),
        )
        .await;
    let s = keyless.create_session(json!({"agent_id": "m"})).await;
    let s = keyless
        .wait_for_status(s["id"].as_str().unwrap(), "error", BOOT)
        .await;
    let error = s["error"].as_str().unwrap();
    assert!(
        error.contains("--s3-instance-credentials")
            && error.contains("AWS_WEB_IDENTITY_TOKEN_FILE"),
        "{error}"
    );
    assert_eq!(roles.fetched(), 1);
    keyless.stop().await;
}

#[tokio::test]
async fn without_keys_an_eks_pod_identity_from_the_environment_is_used() {
    let roles = RoleEndpoints::start().await;
    let token_file = std::env::temp_dir().join(format!("pod-token-{}", uuid::Uuid::new_v4()));
    std::fs::write(&token_file, POD_TOKEN).unwrap();
    let moto = MotoServer::start().await;
    // What AWS_CONTAINER_CREDENTIALS_FULL_URI and AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE, as
    // EKS sets them for a pod, resolve to.
    let app = TestApp::builder()
        .with_config(|c| moto.endpoint_only().configure(c))
        .with_settings(|s| {
            s.services.sessions.s3.ambient = Some(AmbientCredentials::PodIdentity {
                full_uri: format!("{}/pod/credentials", roles.url),
                token_file: token_file.display().to_string(),
            })
        })
        .spawn()
        .await;
    mount_round_trip(&app, &moto, "pods").await;
    assert_eq!(roles.fetched(), 1);
    app.stop().await;
    let _ = std::fs::remove_file(token_file);
}

#[tokio::test]
async fn what_the_bucket_changed_meanwhile_is_kept_and_the_sandboxs_version_lands_beside_it() {
    const BIG: usize = 9 * 1024 * 1024; // uploaded in parts
    let moto = MotoServer::start().await;
    moto.create_bucket("shared").await;
    for (k, v) in [
        ("p/a.txt", "base\n"),
        ("p/gone.txt", "g\n"),
        ("p/b.txt", "b\n"),
    ] {
        moto.put("shared", k, v).await;
    }
    moto.put("shared", "p/big.bin", vec![0u8; BIG]).await;
    let app = app_for(&moto, None).await;
    let id = app
        .running_session(
            "sharer",
            json!({"manifest": {"entries": {
                "m": {"kind": "s3_mount", "bucket": "shared", "prefix": "p",
                      "read_only": false, "acknowledge_credential_exposure": true},
            }}}),
        )
        .await;
    // Someone else writes to the prefix while the session works on it.
    moto.put("shared", "p/a.txt", "theirs\n").await;
    moto.put("shared", "p/new.txt", "their new\n").await;
    moto.put("shared", "p/gone.txt", "their g\n").await;
    moto.put("shared", "p/big.bin", "their big\n").await;
    sh(
        &app,
        &id,
        &format!(
            "cd m && echo mine > a.txt && echo my new > new.txt && rm gone.txt && echo my b > b.txt \
             && head -c {BIG} /dev/zero | tr '\\0' x > big.bin"
        ),
    )
    .await;

    // A snapshot writes back: theirs stays, the sandbox's lands beside it; the file nobody
    // else touched is written as before.
    post(
        &app,
        &format!("/api/sessions/{id}/snapshots"),
        json!({"label": "s"}),
    )
    .await;
    let get = |k: &str| {
        let moto = &moto;
        let k = k.to_owned();
        async move {
            moto.get("shared", &k)
                .await
                .map(String::from_utf8)
                .map(Result::unwrap)
        }
    };
    assert_eq!(get("p/a.txt").await.as_deref(), Some("theirs\n"));
    assert_eq!(
        get(&format!("p/a.conflict-{id}.txt")).await.as_deref(),
        Some("mine\n")
    );
    assert_eq!(get("p/new.txt").await.as_deref(), Some("their new\n"));
    assert_eq!(
        get(&format!("p/new.conflict-{id}.txt")).await.as_deref(),
        Some("my new\n")
    );
    assert_eq!(get("p/gone.txt").await.as_deref(), Some("their g\n"));
    assert_eq!(get("p/b.txt").await.as_deref(), Some("my b\n"));
    assert_eq!(get("p/big.bin").await.as_deref(), Some("their big\n"));
    assert_eq!(
        moto.get("shared", &format!("p/big.conflict-{id}.bin"))
            .await
            .map(|b| b.len()),
        Some(BIG)
    );
    let conflicts = |events: &[Value]| -> Vec<Value> {
        events
            .iter()
            .filter(|e| e["type"] == "session.s3_conflict")
            .cloned()
            .collect()
    };
    let found = conflicts(&app.events(&id).await);
    assert_eq!(found.len(), 1, "{found:?}");
    let payload = &found[0]["payload"];
    assert_eq!(
        (&payload["mount"], &payload["bucket"], &payload["prefix"]),
        (&json!("m"), &json!("shared"), &json!("p"))
    );
    let mut got: Vec<(String, String, Value)> = payload["conflicts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["key"].as_str().unwrap().to_owned(),
                c["kind"].as_str().unwrap().to_owned(),
                c["sandbox_copy"].clone(),
            )
        })
        .collect();
    got.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        got,
        vec![
            (
                "a.txt".into(),
                "changed".into(),
                json!(format!("a.conflict-{id}.txt"))
            ),
            (
                "big.bin".into(),
                "changed".into(),
                json!(format!("big.conflict-{id}.bin"))
            ),
            ("gone.txt".into(), "deleted".into(), Value::Null),
            (
                "new.txt".into(),
                "created".into(),
                json!(format!("new.conflict-{id}.txt"))
            ),
        ]
    );

    // The sandbox has not seen theirs: changing its file again conflicts again (the copy is
    // refreshed, theirs stays); the files it left alone since are not conflicts again.
    sh(&app, &id, "echo mine again > m/a.txt").await;
    post(&app, &format!("/api/sessions/{id}/stop"), json!({})).await;
    let found = conflicts(&app.events(&id).await);
    assert_eq!(found.len(), 2, "{found:?}");
    assert_eq!(
        found[1]["payload"]["conflicts"],
        json!([{"key": "a.txt", "kind": "changed", "sandbox_copy": format!("a.conflict-{id}.txt")}])
    );
    assert_eq!(get("p/a.txt").await.as_deref(), Some("theirs\n"));
    assert_eq!(
        get(&format!("p/a.conflict-{id}.txt")).await.as_deref(),
        Some("mine again\n")
    );

    // The next boot stages the bucket as it is; a change made from there is written plainly.
    post(&app, &format!("/api/sessions/{id}/start"), json!({})).await;
    app.wait_for_status(&id, "running", BOOT).await;
    assert_eq!(sh(&app, &id, "cat m/a.txt").await, "theirs");
    assert_eq!(
        sh(&app, &id, &format!("cat m/a.conflict-{id}.txt")).await,
        "mine again"
    );
    sh(&app, &id, "echo again > m/a.txt").await;
    post(&app, &format!("/api/sessions/{id}/stop"), json!({})).await;
    assert_eq!(get("p/a.txt").await.as_deref(), Some("again\n"));
    assert_eq!(conflicts(&app.events(&id).await).len(), 2);
    app.stop().await;
}
