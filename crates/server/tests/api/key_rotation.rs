//! Rotating the master key: a server started with a new key and the old one as previous
//! reseals every stored value, after which the new key alone opens them all.

use sandbox_agents_testkit::process::ServerProcess;
use sandbox_agents_testkit::receiver::{Answer, Receiver};
use sandbox_agents_testkit::webhooks::verify;
use sandbox_agents_testkit::{database_url, eventually, fresh_named_database};
use serde_json::{json, Value};
use std::time::Duration;

const OLD: &str = "1111111111111111111111111111111111111111111111111111111111111111";
const NEW: &str = "2222222222222222222222222222222222222222222222222222222222222222";

async fn post(base: &str, path: &str, body: Value) -> (u16, Value) {
    let r = reqwest::Client::new()
        .post(format!("{base}{path}"))
        .json(&body)
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
}

/// Whether every sealed value in the database opens with `key` alone.
async fn all_open_with(db: &sandbox_agents_store::Db, key: &str) -> bool {
    let key = sandbox_agents_vault::MasterKey::parse(key).unwrap();
    let rows: Vec<(uuid::Uuid, Vec<u8>, String)> = sqlx::query_as(
        "select id, value_sealed, 'secret' from secrets
         union all select id, secret_sealed, 'webhook' from webhooks
         union all select id, private_key_sealed, 'git key' from git_keys",
    )
    .fetch_all(db)
    .await
    .unwrap();
    assert_eq!(rows.len(), 3);
    rows.iter().all(|(id, sealed, kind)| {
        let aad = match kind.as_str() {
            "secret" => [b"secret:".as_slice(), id.as_bytes()].concat(),
            "git key" => [b"git-key:".as_slice(), id.as_bytes()].concat(),
            _ => id.as_bytes().to_vec(),
        };
        key.open(sealed, &aad).is_ok()
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rotation_moves_every_stored_value_to_the_new_key() {
    let (db, _options, name) = fresh_named_database().await;
    let url = database_url(&name).await;
    let data_dir =
        std::env::temp_dir().join(format!("sa-rotate-{}", uuid::Uuid::new_v4().simple()));
    let data = data_dir.to_str().unwrap().to_owned();
    let receiver = Receiver::start(Answer::Status(200)).await;
    let base_env = [
        ("SANDBOX_AGENTS_DATA_DIR", data.as_str()),
        ("SANDBOX_AGENTS_WEBHOOK_ALLOW_PRIVATE", "true"),
    ];

    let env_with = |key: &'static str, previous: &'static str| {
        let mut env = base_env.to_vec();
        env.push(("SANDBOX_AGENTS_MASTER_KEY", key));
        env.push(("SANDBOX_AGENTS_PREVIOUS_MASTER_KEYS", previous));
        env
    };
    let first = ServerProcess::start(&url, &env_with(OLD, "")).await;
    let (s, _) = post(
        &first.base,
        "/api/secrets",
        json!({"name": "ROTATED", "value": "survives-rotation"}),
    )
    .await;
    assert_eq!(s, 201);
    let (s, key) = post(&first.base, "/api/git-keys", json!({"name": "deploy"})).await;
    assert_eq!(s, 201, "{key}");
    let (s, hook) = post(
        &first.base,
        "/api/webhooks",
        json!({"name": "h", "url": receiver.url, "agent_id": null, "active": true}),
    )
    .await;
    assert_eq!(s, 201, "{hook}");
    let secret = hook["secret"].as_str().unwrap().to_owned();
    let hook_id = hook["id"].as_str().unwrap().to_owned();
    first.terminate().await;
    assert!(!all_open_with(&db, NEW).await);

    // The new key with the old one as previous: everything is resealed at start.
    let second = ServerProcess::start(&url, &env_with(NEW, OLD)).await;
    eventually(
        "the values to be resealed",
        Duration::from_secs(30),
        async || all_open_with(&db, NEW).await.then_some(()),
    )
    .await;
    second.terminate().await;
    assert!(
        !all_open_with(&db, OLD).await,
        "the old key opens nothing now"
    );

    // The new key alone: the webhook still signs with the secret its receiver knows.
    let third = ServerProcess::start(&url, &env_with(NEW, "")).await;
    let (s, ping) = post(
        &third.base,
        &format!("/api/webhooks/{hook_id}/ping"),
        json!({}),
    )
    .await;
    assert_eq!(s, 200, "{ping}");
    let got = receiver.received();
    let last = got.last().expect("the ping arrived");
    assert!(verify(&secret, last), "signed with the original secret");
    // And the deploy key opens (a closed port: git's failure, not a sealed key's).
    let key_id = key["id"].as_str().unwrap();
    let (s, tested) = post(
        &third.base,
        &format!("/api/git-keys/{key_id}/test"),
        json!({"repo": "o/r", "host": "127.0.0.1:1"}),
    )
    .await;
    assert_eq!(s, 200, "{tested}");
    assert_eq!(tested["ok"], false);
    third.terminate().await;
    let _ = std::fs::remove_dir_all(&data_dir);
}
