//! The server outside the cluster (`--kubernetes-daemon-route auto` with a kubeconfig: the
//! API server's port-forward), as a team runs it against a cluster whose pod network it does
//! not reach: a session's commands reach its daemon through `pods/portforward`, and its
//! exposed ports are served as previews through the daemon's tunnel, not at the pod's IP.

use crate::egress_previews::body_of;
use crate::ports::{preview_url, websocket_echoes_through, ws_echo_server};
use sandbox_agents_testkit::kube::TestNamespace;
use sandbox_agents_testkit::TestApp;
use serde_json::json;

#[tokio::test]
async fn through_a_port_forward_a_session_runs_commands_and_serves_previews() {
    let ns = TestNamespace::new().await;
    let app = TestApp::builder()
        .with_kubernetes_route(&ns, "auto")
        .spawn()
        .await;
    let id = app
        .running_session("k8s-port-forward", json!({"exposed_ports": [8000, 8001]}))
        .await;
    let (code, out, err) = app.exec(&id, "id -u; echo through").await;
    assert_eq!((code, out.as_str()), (0, "1000\nthrough\n"), "{err}");

    let serve = "mkdir -p /workspace/site && cd /workspace/site && echo hi > hello.txt \
                 && nohup python3 -m http.server 8000 >/dev/null 2>&1 &";
    assert_eq!(app.exec(&id, serve).await.0, 0);
    let url = preview_url(&app, &id, 8000).await;
    assert_eq!(body_of(&app, &format!("{url}hello.txt")).await, "hi\n");
    let script = format!(
        "cat > /tmp/ws.py <<'EOF'\n{}EOF\nnohup python3 /tmp/ws.py >/dev/null 2>&1 &",
        ws_echo_server(8001)
    );
    assert_eq!(app.exec(&id, &script).await.0, 0);
    websocket_echoes_through(&app, &preview_url(&app, &id, 8001).await).await;

    app.delete_session(&id).await;
    ns.remove().await;
}
