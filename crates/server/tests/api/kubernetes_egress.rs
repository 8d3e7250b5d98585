//! Egress control on Kubernetes (`--egress-proxy` with `--backend kubernetes`, issue 37):
//! a sandbox pod reaches the proxy on its TCP listener, its connections named and proven by
//! its daemon with the pod's egress token, and the session's policy decides them as on
//! Docker; its names are answered by the daemon, which asks the proxy; and each pod has its
//! NetworkPolicy, accepted by the real API server, admitting only the control plane in and
//! the proxy out.
//!
//! What the test cluster cannot show: that the policy is enforced. Its node agent runs pods
//! as Docker containers on a bridge and enforces no NetworkPolicy (`docs/kubernetes.md`), so
//! "no other route" is the cluster's network plugin's part, tested nowhere here.

use crate::egress::{builder, status, TestNetwork, PORT};
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube::api::ListParams;
use sandbox_agents_sandbox::BackendSettings;
use sandbox_agents_testkit::eventually;
use sandbox_agents_testkit::kube::TestNamespace;
use serde_json::json;
use std::net::IpAddr;
use std::time::Duration;

/// The test node's InternalIP: the host's address on the pod network (its bridge's
/// gateway), which pods reach.
async fn node_address(ns: &TestNamespace) -> IpAddr {
    let nodes = kube::Api::<Node>::all(ns.admin.clone())
        .list(&ListParams::default())
        .await
        .unwrap();
    nodes
        .items
        .iter()
        .flat_map(|n| n.status.iter().flat_map(|s| s.addresses.iter().flatten()))
        .find(|a| a.type_ == "InternalIP")
        .and_then(|a| a.address.parse().ok())
        .expect("the test node has an InternalIP")
}

async fn policies(ns: &TestNamespace) -> Vec<NetworkPolicy> {
    kube::Api::<NetworkPolicy>::namespaced(ns.admin.clone(), &ns.name)
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
}

#[tokio::test]
async fn a_pod_reaches_what_its_policy_allows_through_the_proxy_and_its_network_policy_says_so() {
    let net = TestNetwork::start("k8s-egress").await;
    let ns = TestNamespace::new().await;
    // A free port on the pod network's gateway for the proxy's pod listener.
    let listen = {
        let probe = std::net::TcpListener::bind((node_address(&ns).await, 0)).unwrap();
        probe.local_addr().unwrap()
    };
    let app = builder(&net)
        .with_kubernetes(&ns)
        .with_settings(move |s| {
            if let Some(egress) = s.services.egress.as_mut() {
                egress.pod_listen = Some(listen);
            }
            if let BackendSettings::Kubernetes(k) = &mut s.services.backend {
                k.egress_proxy = Some(listen.to_string());
            }
        })
        .spawn()
        .await;
    let policy = json!({"egress": "allowlist", "allow": [format!("allowed.test:{PORT}")]});
    let id = app
        .running_session("k8s-egress", json!({"network": policy}))
        .await;

    // The tools are pointed at the daemon's forwarder; the daemon took its own two variables
    // out of the environment.
    let (_, env, _) = app
        .exec(&id, "echo $HTTPS_PROXY; env | grep -c SANDBOXD_ || true")
        .await;
    assert_eq!(env, "http://127.0.0.1:3128\n0\n");

    assert_eq!(
        status(&app, &id, &format!("http://allowed.test:{PORT}/")).await,
        "200"
    );
    assert_eq!(
        status(&app, &id, &format!("http://other.test:{PORT}/")).await,
        "403"
    );
    assert_eq!(status(&app, &id, "http://metadata.test/").await, "403");

    // Names are the daemon's to answer, from the policy: the pod's resolver is its loopback.
    let (code, conf, err) = app.exec(&id, "cat /etc/resolv.conf").await;
    assert_eq!(code, 0, "{err}");
    let servers: Vec<&str> = conf
        .lines()
        .filter(|l| l.starts_with("nameserver"))
        .collect();
    assert_eq!(servers, ["nameserver 127.0.0.1"], "{conf}");
    let (code, out, err) = app.exec(&id, "getent hosts allowed.test").await;
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(
        out.split_whitespace().collect::<Vec<_>>(),
        [net.server_ip.as_str(), "allowed.test"]
    );
    let (code, out, _) = app.exec(&id, "getent hosts other.test").await;
    assert_ne!(code, 0, "other.test is not in the allowlist: {out}");

    // The refusals are on the session's log, as on Docker.
    eventually(
        "the refusals are logged",
        Duration::from_secs(10),
        async || {
            let hosts: Vec<String> = app
                .events(&id)
                .await
                .into_iter()
                .filter(|e| e["type"] == "sandbox.egress_denied")
                .filter_map(|e| e["payload"]["host"].as_str().map(str::to_owned))
                .collect();
            (hosts.iter().any(|h| h == "other.test") && hosts.iter().any(|h| h == "metadata.test"))
                .then_some(())
        },
    )
    .await;

    // The pod's NetworkPolicy: it selects the pod alone, lets in the control plane's pods on
    // the daemon's port, and lets out to them on the proxy's port only.
    let pod_name = pod_of(&ns, &id).await;
    let all = policies(&ns).await;
    assert_eq!(all.len(), 1, "one policy per pod");
    let policy = serde_json::to_value(&all[0]).unwrap();
    assert_eq!(policy["metadata"]["name"], pod_name.as_str());
    assert_eq!(
        policy["spec"]["podSelector"]["matchLabels"]["sandbox-agents.io/sandbox"],
        pod_name.as_str()
    );
    assert_eq!(
        policy["metadata"]["ownerReferences"][0]["name"],
        pod_name.as_str(),
        "owned by its pod: {policy}"
    );
    let control_plane = json!({
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "sandbox-agents"}},
        "podSelector": {"matchLabels": {"app.kubernetes.io/name": "sandbox-agents"}},
    });
    assert_eq!(
        policy["spec"]["ingress"],
        json!([{"from": [control_plane], "ports": [{"port": 7077, "protocol": "TCP"}]}])
    );
    assert_eq!(
        policy["spec"]["egress"],
        json!([{"to": [control_plane], "ports": [{"port": listen.port(), "protocol": "TCP"}]}])
    );

    // A credential the proxy would add inside TLS needs the sandbox to trust the deployment's
    // CA, which a pod has no root to install: refused at create, nothing made.
    let (status, body) = app
        .post_json(
            "/api/sessions",
            json!({"agent_id": "k8s-egress", "secret_bindings": [
                {"secret": "TOKEN", "inject": {"host": "api.test", "header": "X-Token"}}]}),
        )
        .await;
    assert_eq!(status, 409, "{body}");
    let detail = body["detail"].as_str().unwrap_or_default();
    assert!(
        detail.contains("secret binding of 'TOKEN' is for egress")
            && detail.contains("(kubernetes) cannot apply"),
        "{detail}"
    );

    // Deleted with its pod.
    app.delete_session(&id).await;
    eventually(
        "the deleted session's NetworkPolicy is gone",
        Duration::from_secs(30),
        async || policies(&ns).await.is_empty().then_some(()),
    )
    .await;
    app.stop().await;
    ns.remove().await;
}

/// The name of the pod session `id` runs in.
async fn pod_of(ns: &TestNamespace, id: &str) -> String {
    let pods = kube::Api::<k8s_openapi::api::core::v1::Pod>::namespaced(ns.admin.clone(), &ns.name)
        .list(&ListParams::default().labels(&format!("sandbox-agents.io/session={id}")))
        .await
        .unwrap()
        .items;
    let names: Vec<String> = pods.into_iter().filter_map(|p| p.metadata.name).collect();
    assert_eq!(names.len(), 1, "one pod per session: {names:?}");
    names[0].clone()
}
