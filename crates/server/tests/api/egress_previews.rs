//! Exposed ports and previews of a sandbox behind the egress proxy (issue 36): it has no
//! network but loopback and publishes nothing, so its ports are reached through its daemon
//! (a tunnel to the port on the sandbox's loopback), HTTP and WebSocket alike.

use crate::egress::{app, builder, docker, TestNetwork};
use crate::ports::{preview_url, websocket_echoes_through, ws_echo_server};
use sandbox_agents_testkit::{eventually, TestApp};
use serde_json::{json, Value};
use std::time::Duration;

/// GETs `url` until it answers 200; its body.
pub(crate) async fn body_of(app: &TestApp, url: &str) -> String {
    eventually(
        &format!("{url} to answer 200"),
        Duration::from_secs(20),
        async || {
            let r = app.http.get(url).send().await.unwrap();
            let status = r.status();
            let text = r.text().await.unwrap();
            if status == 200 {
                Ok(text)
            } else {
                Err(format!("{status}: {text}"))
            }
        },
    )
    .await
}

#[tokio::test]
async fn a_sandbox_behind_the_proxy_serves_its_exposed_ports_through_previews() {
    let net = TestNetwork::start("previews").await;
    let app = app(&net).await;
    let id = app
        .running_session("egress-previews", json!({"exposed_ports": [8000, 8001]}))
        .await;
    // Booted with its ports exposed, yet confined: no network, nothing published.
    let (_, s) = app.get_json(&format!("/api/sessions/{id}")).await;
    let container = s["container_id"].as_str().unwrap().to_owned();
    assert_eq!(
        docker(&["inspect", "-f", "{{.HostConfig.NetworkMode}}", &container]),
        "none"
    );
    assert_eq!(docker(&["port", &container]), "");

    // Nothing listens yet: the same answer as for a published port.
    let url = preview_url(&app, &id, 8000).await;
    let r = app.http.get(&url).send().await.unwrap();
    assert_eq!(r.status(), 502);
    let v: Value = r.json().await.unwrap();
    assert_eq!(
        v["detail"],
        "nothing is listening on port 8000 in the sandbox"
    );

    let serve = "mkdir -p /workspace/site && cd /workspace/site && echo hi > hello.txt \
                 && yes abcdefgh | head -c 1000000 > big.txt \
                 && nohup python3 -m http.server 8000 >/dev/null 2>&1 &";
    assert_eq!(app.exec(&id, serve).await.0, 0);
    let listing = body_of(&app, &url).await;
    assert!(listing.contains("Directory listing"), "{listing}");
    assert!(listing.contains("hello.txt"), "{listing}");
    assert_eq!(body_of(&app, &format!("{url}hello.txt")).await, "hi\n");
    // A body larger than any window or buffer on the way streams whole.
    let big = body_of(&app, &format!("{url}big.txt?x=1")).await;
    assert_eq!(big.len(), 1_000_000);
    assert!(big.starts_with("abcdefgh\nabcdefgh\n"));

    // WebSockets: the upgrade and frames go through the tunnel too.
    let script = format!(
        "cat > /tmp/ws.py <<'EOF'\n{}EOF\nnohup python3 /tmp/ws.py >/dev/null 2>&1 &",
        ws_echo_server(8001)
    );
    assert_eq!(app.exec(&id, &script).await.0, 0);
    websocket_echoes_through(&app, &preview_url(&app, &id, 8001).await).await;
}

#[tokio::test]
async fn behind_the_proxy_a_session_with_exposed_ports_boots_from_the_warm_pool() {
    let net = TestNetwork::start("previews-pool").await;
    let app = builder(&net).with_pool(1).with_pool_worker().spawn().await;
    let waiting: String = eventually("a pooled sandbox", Duration::from_secs(90), async || {
        sqlx::query_scalar::<_, String>(
            "select sandbox_id from sandbox_pool where sandbox_id is not null",
        )
        .fetch_optional(&app.db)
        .await
        .unwrap()
        .ok_or_else(|| "none yet".to_owned())
    })
    .await;
    let id = app
        .running_session("egress-pooled-ports", json!({"exposed_ports": [8000]}))
        .await;
    // Its ports need nothing published, so the pooled sandbox serves the session.
    let (_, s) = app.get_json(&format!("/api/sessions/{id}")).await;
    assert_eq!(s["container_id"], waiting.as_str(), "{s}");
    let serve = "mkdir -p /workspace/p && cd /workspace/p && echo pooled > a.txt \
                 && nohup python3 -m http.server 8000 >/dev/null 2>&1 &";
    assert_eq!(app.exec(&id, serve).await.0, 0);
    let url = preview_url(&app, &id, 8000).await;
    assert_eq!(body_of(&app, &format!("{url}a.txt")).await, "pooled\n");
}
