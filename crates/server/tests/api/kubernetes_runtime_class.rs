//! Runtime classes per agent and environment, from the operator's list
//! (`--kubernetes-runtime-classes`), on the test cluster: the list is shown in
//! `GET /api/backends`, a name outside it is a 422 at its field, a class the cluster lacks
//! stops the server at start, and a session of an agent naming one boots in a pod under it
//! (cold: the warm pool holds the default's).

use crate::kubernetes::refused;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::node::v1::RuntimeClass;
use kube::api::{DeleteParams, ListParams, PostParams};
use sandbox_agents_testkit::kube::TestNamespace;
use sandbox_agents_testkit::TestApp;
use serde_json::json;

/// A RuntimeClass of the cluster (cluster-wide, so each test's is its own), deleted by
/// [`drop_class`].
async fn make_class(ns: &TestNamespace) -> String {
    let name = format!("rc-{}", &uuid::Uuid::new_v4().simple().to_string()[..12]);
    let class: RuntimeClass = serde_json::from_value(json!({
        "apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass",
        "metadata": {"name": name}, "handler": "runsc",
    }))
    .unwrap();
    kube::Api::<RuntimeClass>::all(ns.admin.clone())
        .create(&PostParams::default(), &class)
        .await
        .unwrap();
    name
}

async fn drop_class(ns: &TestNamespace, name: &str) {
    let _ = kube::Api::<RuntimeClass>::all(ns.admin.clone())
        .delete(name, &DeleteParams::default())
        .await;
}

#[tokio::test]
async fn an_agent_names_an_offered_runtime_class_and_its_sessions_pod_runs_under_it() {
    let ns = TestNamespace::new().await;
    let class = make_class(&ns).await;

    // A class the cluster does not have stops the server, naming it.
    let missing = format!("{class}-missing");
    let listed = format!("{class},{missing}");
    let e = refused(&ns, move |c| c.kubernetes_runtime_classes = Some(listed)).await;
    assert!(
        e.contains(&format!("under the runtime class {missing}")) && e.contains("RuntimeClass"),
        "{e}"
    );

    let offered = class.clone();
    let app = TestApp::builder()
        .with_kubernetes(&ns)
        .with_config(move |c| c.kubernetes_runtime_classes = Some(offered))
        .spawn()
        .await;
    let (_, backends) = app.get_json("/api/backends").await;
    assert_eq!(backends[0]["runtime_classes"], json!([class]), "{backends}");

    // A name the server does not offer is a 422 at its field, and nothing is made.
    let (code, body) = app
        .post_json(
            "/api/agents",
            json!({"slug": "other-rc", "name": "x", "runtime_class": "kata"}),
        )
        .await;
    assert_eq!(code, 422, "{body}");
    assert_eq!(body["detail"][0]["loc"], json!(["body", "runtime_class"]));
    let msg = body["detail"][0]["msg"].as_str().unwrap();
    assert!(msg.contains("'kata'") && msg.contains(&class), "{msg}");
    let (code, _) = app.get_json("/api/agents/other-rc").await;
    assert_eq!(code, 404);
    let (code, body) = app
        .post_json(
            "/api/environments",
            json!({"name": "rc-env", "config": {"runtime_class": "kata"}}),
        )
        .await;
    assert_eq!(code, 422, "{body}");
    assert_eq!(
        body["detail"][0]["loc"],
        json!(["body", "config", "runtime_class"])
    );

    // An agent naming the offered class: its session's pod runs under it.
    let agent = app
        .create_agent("gvisor-agent", json!({"runtime_class": class}))
        .await;
    assert_eq!(agent["runtime_class"], json!(class));
    let id = app
        .boot_session(json!({"agent_id": "gvisor-agent", "title": "t"}))
        .await;
    let (code, out, err) = app.exec(&id, "echo under").await;
    assert_eq!((code, out.as_str()), (0, "under\n"), "{err}");
    let pods = kube::Api::<Pod>::namespaced(ns.admin.clone(), &ns.name)
        .list(&ListParams::default().labels(&format!("sandbox-agents.io/session={id}")))
        .await
        .unwrap()
        .items;
    assert_eq!(pods.len(), 1);
    assert_eq!(
        pods[0].spec.as_ref().unwrap().runtime_class_name.as_deref(),
        Some(class.as_str())
    );

    // Cleared, it goes back to the default.
    let (code, body) = app
        .patch_json(
            "/api/agents/gvisor-agent",
            json!({"version": agent["version"], "runtime_class": null}),
        )
        .await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(body["runtime_class"], json!(null));

    app.delete_session(&id).await;
    ns.remove().await;
    drop_class(&ns, &class).await;
}
