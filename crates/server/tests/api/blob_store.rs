//! Blobs in a bucket (`--blob-url s3://bucket/prefix`) against a real S3-compatible server
//! (moto, `testkit::s3`), shared by two server processes of one deployment: what one archives
//! the other restores, a snapshot made through one forks through the other, an upload spools
//! through the bucket, nothing lands on the host's disk, and the garbage queue removes the
//! objects again. A bucket the server cannot use stops it at start.

use sandbox_agents_server::config::Config;
use sandbox_agents_testkit::s3::MotoServer;
use sandbox_agents_testkit::{eventually, TestApp, BOOT};
use serde_json::json;
use std::time::Duration;

fn options<'a>(moto: &'a MotoServer, url: &'a str) -> sandbox_agents_testkit::TestAppBuilder<'a> {
    TestApp::builder()
        .with_config(move |c| moto.access().configure(c))
        .with_config(move |c| c.blob_url = Some(url.into()))
}

/// Another server process of `app`'s deployment, its flags changed by `change`, or why it
/// does not start.
async fn another_process(
    app: &TestApp,
    change: impl FnOnce(&mut Config) + Send,
) -> anyhow::Result<TestApp> {
    TestApp::builder()
        .with_db(app.db.clone(), app.db_options.clone())
        .with_config(change)
        .try_spawn()
        .await
}

async fn sh(app: &TestApp, id: &str, command: &str) -> String {
    let (code, out, err) = app.exec(id, command).await;
    assert_eq!(code, 0, "{command}: {out}{err}");
    out.trim().to_owned()
}

/// The bucket's keys under `deploy/`, with the prefix removed.
async fn objects(moto: &MotoServer) -> Vec<String> {
    moto.keys("blobs")
        .await
        .into_iter()
        .map(|k| {
            k.strip_prefix("deploy/")
                .unwrap_or_else(|| panic!("{k} is outside the prefix"))
                .to_owned()
        })
        .collect()
}

#[tokio::test]
async fn two_processes_share_workspaces_and_snapshots_through_the_bucket() {
    let moto = MotoServer::start().await;
    moto.create_bucket("blobs").await;
    let a = options(&moto, "s3://blobs/deploy/").spawn().await;
    let b = options(&moto, "s3://blobs/deploy")
        .with_db(a.db.clone(), a.db_options.clone())
        .spawn()
        .await;

    let id = a
        .running_session(
            "shared",
            json!({"manifest": {"entries": {"notes.md": {"kind": "file", "content": "from a\n"}}}}),
        )
        .await;
    // A file larger than a multipart upload's part, so the archive goes up in parts.
    sh(
        &a,
        &id,
        "head -c 20000000 /dev/urandom > big.bin && sha256sum big.bin",
    )
    .await;
    let digest = sh(&a, &id, "sha256sum big.bin | cut -d' ' -f1").await;
    a.stop_session(&id).await;
    let stored = objects(&moto).await;
    assert!(
        stored.iter().any(|k| k.starts_with("sessions/")),
        "the stop's archive is in the bucket: {stored:?}"
    );

    // The other process restores it.
    b.start_session(&id).await;
    b.wait_for_status(&id, "running", BOOT).await;
    assert_eq!(sh(&b, &id, "cat notes.md").await, "from a");
    assert_eq!(
        sh(&b, &id, "sha256sum big.bin | cut -d' ' -f1").await,
        digest
    );

    // An upload spools through the bucket, and a snapshot made by one forks through the other.
    let r = b
        .http
        .post(b.url(&format!("/api/sessions/{id}/files")))
        .query(&[("path", "up/hello.txt")])
        .multipart(
            reqwest::multipart::Form::new().part(
                "file",
                reqwest::multipart::Part::bytes(b"uploaded through b\n".to_vec())
                    .file_name("hello.txt"),
            ),
        )
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "{}", r.text().await.unwrap());
    let (s, snap) = b
        .post_json(
            &format!("/api/sessions/{id}/snapshots"),
            json!({"label": "s"}),
        )
        .await;
    assert_eq!(s, 201, "{snap}");
    let fork = a
        .boot_session(json!({"agent_id": "shared", "from_snapshot_id": snap["id"]}))
        .await;
    assert_eq!(
        sh(&a, &fork, "cat up/hello.txt").await,
        "uploaded through b"
    );
    assert_eq!(
        sh(&a, &fork, "sha256sum big.bin | cut -d' ' -f1").await,
        digest
    );

    // Nothing went to either host's disk.
    for app in [&a, &b] {
        assert!(
            !app.blobs_dir.exists() || std::fs::read_dir(&app.blobs_dir).unwrap().next().is_none(),
            "{} holds blobs",
            app.blobs_dir.display()
        );
    }

    // Deleting the sessions removes their archives (and the spool went when the upload was
    // done), through the garbage queue; what is left is the snapshot, which outlives them.
    for s in [&id, &fork] {
        a.delete_session(s).await;
    }
    eventually(
        "the garbage queue to remove the archives",
        Duration::from_secs(60),
        async || {
            a.sessions
                .collect_garbage()
                .await
                .map_err(|e| e.to_string())?;
            let left = objects(&moto).await;
            if !left.is_empty() && left.iter().all(|k| k.starts_with("snapshots/")) {
                Ok(())
            } else {
                Err(format!("stored: {left:?}"))
            }
        },
    )
    .await;
    b.stop().await;
    a.stop().await;
}

#[tokio::test]
async fn a_bucket_the_server_cannot_use_stops_it_at_start() {
    let moto = MotoServer::start().await;
    let app = sandbox_agents_testkit::TestApp::builder().spawn().await;
    let build = |url: &'static str| {
        another_process(&app, |config| {
            config.blob_url = Some(url.into());
            moto.access().configure(config);
        })
    };
    let err = build("s3://no-such-bucket/x")
        .await
        .err()
        .expect("a missing bucket is refused");
    let said = format!("{err:#}");
    assert!(
        said.contains("s3://no-such-bucket/x") && said.contains("not usable"),
        "{said}"
    );

    let err = build("gs://blobs/x")
        .await
        .err()
        .expect("another scheme is refused");
    assert!(
        format!("{err:#}").contains("expected s3://bucket/prefix"),
        "{err:#}"
    );
    app.stop().await;
}

/// A bucket behind a private CA (an in-house S3-compatible store) is reached with
/// `--extra-ca-certs`, and refused without it: the control plane's S3 client trusts the same
/// extra certificates as its model and webhook clients.
#[tokio::test]
async fn a_bucket_behind_a_private_ca_is_reached_with_the_extra_ca_certs() {
    let ca = sandbox_agents_testkit::tls::TestCa::new();
    let moto = MotoServer::start_tls(&ca).await;
    moto.create_bucket("blobs").await;
    let app = sandbox_agents_testkit::TestApp::builder().spawn().await;
    let (moto, ca) = (&moto, &ca);
    let build = |extra_ca: bool| {
        another_process(&app, move |config| {
            config.blob_url = Some("s3://blobs/private".into());
            let access = moto.access();
            assert!(access.endpoint.starts_with("https://"));
            access.configure(config);
            config.extra_ca_certs = extra_ca.then(|| ca.cert());
        })
    };
    let err = build(false)
        .await
        .err()
        .expect("a certificate of an unknown CA is refused");
    let said = format!("{err:#}");
    assert!(
        said.contains("s3://blobs/private") && said.contains("not usable"),
        "{said}"
    );
    match build(true).await {
        Ok(other) => other.stop().await,
        Err(e) => panic!("with the CA the bucket is usable: {e:#}"),
    }
    app.stop().await;
}

/// `--s3-addressing-style virtual`: a bucket is named by the host a request goes to
/// (`bucket.s3.test`, reached through moto as the `--s3-proxy`:
/// `MotoServer::virtual_hosted_access`), for the blob store and `s3_mount` entries alike.
/// Path-style requests to the same endpoint name the bucket `s3`, so with the default style
/// the server refuses to start: the setting is what reaches the buckets.
#[tokio::test]
async fn buckets_addressed_by_host_name_hold_the_blobs_and_the_mounts() {
    let moto = MotoServer::start().await;
    moto.create_bucket("vblobs").await;
    moto.create_bucket("vdata").await;
    moto.put("vdata", "in/a.txt", "alpha\n").await;
    let app = TestApp::builder()
        .with_config(|c| moto.virtual_hosted_access().configure(c))
        .with_config(|c| c.blob_url = Some("s3://vblobs/deploy".into()))
        .spawn()
        .await;
    let id = app
        .running_session(
            "virtual",
            json!({"manifest": {"entries": {
                "notes.md": {"kind": "file", "content": "kept\n"},
                "m": {"kind": "s3_mount", "bucket": "vdata", "prefix": "in", "read_only": false,
                      "acknowledge_credential_exposure": true},
            }}}),
        )
        .await;
    assert_eq!(sh(&app, &id, "cat m/a.txt").await, "alpha");
    sh(
        &app,
        &id,
        "echo written > m/new.txt && echo more >> notes.md",
    )
    .await;
    app.stop_session(&id).await;
    assert_eq!(
        moto.get("vdata", "in/new.txt").await.as_deref(),
        Some(&b"written\n"[..]),
        "the mount was written back"
    );
    let stored = moto.keys("vblobs").await;
    assert!(
        stored.iter().any(|k| k.starts_with("deploy/sessions/")),
        "the stop's archive is in the blob bucket: {stored:?}"
    );
    app.start_session(&id).await;
    app.wait_for_status(&id, "running", BOOT).await;
    assert_eq!(sh(&app, &id, "cat notes.md").await, "kept\nmore");
    assert_eq!(sh(&app, &id, "cat m/new.txt").await, "written");

    let path_style = |config: &mut Config| {
        sandbox_agents_testkit::s3::S3Access {
            virtual_hosted: false,
            ..moto.virtual_hosted_access()
        }
        .configure(config);
        config.blob_url = Some("s3://vblobs/deploy".into());
    };
    let err = another_process(&app, path_style)
        .await
        .err()
        .expect("path-style requests to this endpoint find no bucket");
    assert!(format!("{err:#}").contains("not usable"), "{err:#}");

    // A virtual-hosted style the endpoint cannot carry is refused before anything starts.
    let err = another_process(&app, |config| {
        path_style(config);
        config.s3_endpoint = Some("http://127.0.0.1:9000".into());
        config.s3_addressing_style = sandbox_agents_server::config::S3AddressingStyle::Virtual;
    })
    .await
    .err()
    .expect("an address cannot take a bucket in front of it");
    assert!(
        format!("{err:#}").contains("--s3-addressing-style path"),
        "{err:#}"
    );
    app.stop().await;
}
