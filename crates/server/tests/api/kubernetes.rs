//! The server on `--backend kubernetes`, against the test cluster (a real kube-apiserver and
//! etcd, our test node agent; `testkit::kube`), under a service account holding only the
//! Role of `deploy/kubernetes/`: a session lives in a pod and keeps its workspace across a
//! stop, and a cluster configuration that cannot work stops the server at start with a
//! sentence that says what is wrong and where it looked.

use k8s_openapi::api::core::v1::Pod;
use kube::api::ListParams;
use sandbox_agents_fake_model::{FakeModel, Rule, Script};
use sandbox_agents_testkit::kube::TestNamespace;
use sandbox_agents_testkit::{eventually, runs, TestApp};
use serde_json::json;
use std::time::Duration;

async fn pods(ns: &TestNamespace) -> Vec<Pod> {
    kube::Api::<Pod>::namespaced(ns.admin.clone(), &ns.name)
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
}

#[tokio::test]
async fn a_session_runs_in_a_pod_and_its_workspace_outlives_a_stop() {
    let ns = TestNamespace::new().await;
    let app = TestApp::builder().with_kubernetes(&ns).spawn().await;
    // The watch on pods runs, as in a server: a stop's own end of the pod is no loss.
    app.sessions.spawn_sandbox_watch();
    let (_, backends) = app.get_json("/api/backends").await;
    assert_eq!(backends[0]["name"], "kubernetes", "{backends}");
    assert_eq!(backends[0]["capabilities"]["snapshots"], "archive_only");

    let id = app.running_session("k8s", json!({})).await;
    let (code, out, err) = app
        .exec(&id, "id -u; echo kept > /workspace/kept.txt; echo ok")
        .await;
    assert_eq!((code, out.as_str()), (0, "1000\nok\n"), "{err}");
    let first = pods(&ns).await;
    assert_eq!(first.len(), 1, "one pod per session");
    let labels = first[0].metadata.labels.clone().unwrap_or_default();
    assert_eq!(labels["sandbox-agents.io/session"], id);

    // A stop archives the workspace and ends the pod; a start restores it into a new one.
    app.stop_session(&id).await;
    app.wait_for_status(&id, "stopped", Duration::from_secs(60))
        .await;
    eventually(
        "the stopped session's pod is gone",
        Duration::from_secs(30),
        async || pods(&ns).await.is_empty().then_some(()),
    )
    .await;
    app.start_session(&id).await;
    app.wait_for_status(&id, "running", Duration::from_secs(90))
        .await;
    let (code, out, err) = app.exec(&id, "cat /workspace/kept.txt").await;
    assert_eq!((code, out.as_str()), (0, "kept\n"), "{err}");
    let second = pods(&ns).await;
    assert_eq!(second.len(), 1);
    assert_ne!(second[0].metadata.uid, first[0].metadata.uid, "a new pod");

    app.delete_session(&id).await;
    eventually(
        "the deleted session's pod is gone",
        Duration::from_secs(30),
        async || pods(&ns).await.is_empty().then_some(()),
    )
    .await;
    ns.remove().await;
}

/// Builds a server with `change` on top of the namespace's settings; the error it stops with.
pub(crate) async fn refused(
    ns: &TestNamespace,
    change: impl FnOnce(&mut sandbox_agents_server::config::Config) + Send,
) -> String {
    match TestApp::builder()
        .with_kubernetes(ns)
        .with_config(change)
        .try_spawn()
        .await
    {
        Ok(_) => panic!("the server started"),
        Err(e) => format!("{e:#}"),
    }
}

#[tokio::test]
async fn a_cluster_configuration_that_cannot_work_stops_the_server_saying_why() {
    let ns = TestNamespace::new().await;

    let e = refused(&ns, |c| {
        c.kubernetes_kubeconfig = Some("/nonexistent/kubeconfig".into())
    })
    .await;
    assert!(
        e.contains("cannot read the kubeconfig /nonexistent/kubeconfig"),
        "{e}"
    );

    let e = refused(&ns, |c| c.kubernetes_sandboxd_image = None).await;
    assert!(e.contains("--kubernetes-sandboxd-image"), "{e}");

    let e = refused(&ns, |c| {
        c.kubernetes_namespace = "sa-no-such-namespace".into()
    })
    .await;
    assert!(
        e.contains("may not") || e.contains("does not exist"),
        "a namespace the identity has no Role in: {e}"
    );

    // A cluster that does not answer: the same credentials, a closed port.
    let unreachable = ns.kubeconfig.with_file_name("unreachable");
    let text = std::fs::read_to_string(&ns.kubeconfig).unwrap();
    let mut config: serde_json::Value = serde_json::from_str(&text).unwrap();
    config["clusters"][0]["cluster"]["server"] = json!("https://127.0.0.1:1");
    std::fs::write(&unreachable, config.to_string()).unwrap();
    let e = refused(&ns, |c| c.kubernetes_kubeconfig = Some(unreachable)).await;
    assert!(
        e.contains("https://127.0.0.1:1") && e.contains("does not answer"),
        "{e}"
    );
    ns.remove().await;

    // An identity without the Role.
    let bare = TestNamespace::with_role(false).await;
    let e = refused(&bare, |_| {}).await;
    assert!(
        e.contains("may not create pods, get pods, list pods, watch pods, patch pods, delete pods")
            && e.contains(&bare.name)
            && e.contains("deploy/kubernetes/"),
        "{e}"
    );
    bare.remove().await;
}

/// An identity that may act in any namespace (the cluster's admin) pointed at one that does
/// not exist: the dry run of the pod names it.
#[tokio::test]
async fn a_missing_namespace_is_named() {
    let ns = TestNamespace::new().await;
    let admin = sandbox_agents_testkit::kube::cluster_kubeconfig();
    let e = refused(&ns, move |c| {
        c.kubernetes_kubeconfig = Some(admin);
        c.kubernetes_namespace = "sa-no-such-namespace".into();
    })
    .await;
    assert!(
        e.contains("the namespace sa-no-such-namespace (--kubernetes-namespace) does not exist"),
        "{e}"
    );
    ns.remove().await;
}

/// A backend that builds no images and has no root in a sandbox refuses, at create, a session
/// whose environment installs packages (it would wait forever for the build) or whose
/// manifest mounts a bucket (staged as root), and says what to do instead; nothing is
/// created.
#[tokio::test]
async fn an_environment_with_packages_and_a_bucket_mount_are_refused_at_create() {
    let ns = TestNamespace::new().await;
    let app = TestApp::builder().with_kubernetes(&ns).spawn().await;
    app.create_agent("a", json!({})).await;
    let (status, env) = app
        .post_json(
            "/api/environments",
            json!({"name": "tools", "config": {"packages": {"pip": ["six"]}}}),
        )
        .await;
    assert_eq!(status, 201, "{env}");
    let (status, body) = app
        .post_json(
            "/api/sessions",
            json!({"agent_id": "a", "environment_id": "tools"}),
        )
        .await;
    assert_eq!(status, 409, "{body}");
    let detail = body["detail"].as_str().unwrap();
    assert!(
        detail.contains("environment 'tools' installs packages")
            && detail.contains("(kubernetes) builds no images"),
        "{detail}"
    );
    // The environment's build ends at once, failed, saying why in its own words.
    let failed = eventually("the build to fail", Duration::from_secs(30), async || {
        let (_, env) = app.get_json("/api/environments/tools").await;
        (env["build"]["status"] == "failed").then_some(env)
    })
    .await;
    let error = failed["build"]["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("sandbox backend (kubernetes) builds no images"),
        "{failed}"
    );
    // A bucket mount is staged as root: refused at create too, naming the entry.
    let (status, body) = app
        .post_json(
            "/api/sessions",
            json!({"agent_id": "a", "manifest": {"entries": {
                "mnt/in": {"kind": "s3_mount", "bucket": "inputs"}}}}),
        )
        .await;
    assert_eq!(status, 409, "{body}");
    assert!(
        body["detail"]
            .as_str()
            .is_some_and(|d| d.contains("the s3_mount entry 'mnt/in' cannot be staged")),
        "{body}"
    );
    let (_, sessions) = app.get_json("/api/sessions").await;
    assert_eq!(sessions.as_array().map(Vec::len), Some(0), "{sessions}");
    assert!(pods(&ns).await.is_empty());
    ns.remove().await;
}

/// A pod that ends on its own (here deleted by someone else, as an eviction or a lost node
/// ends it) fails its session at once with the reason, from the watch on the deployment's
/// pods, and the run in flight fails with it; a start boots a new pod with the workspace of
/// the last stop.
#[tokio::test]
async fn a_pod_that_ends_on_its_own_fails_its_session_and_its_run_with_the_reason() {
    let fake = FakeModel::start(Script::new([Rule::when()
        .last_user_contains("wait")
        .reply_tool_call("shell", json!({"command": "sleep 600", "timeout": 600}))]));
    let ns = TestNamespace::new().await;
    let app = TestApp::builder()
        .with_kubernetes(&ns)
        .with_model_proxy(&fake.root_url())
        .spawn()
        .await;
    app.sessions.spawn_sandbox_watch();
    let id = app.running_session("k8s", runs::test_agent()).await;
    let run = runs::start_run(&app, &id, "wait a long time", serde_json::Value::Null).await;
    eventually("the tool to run", Duration::from_secs(60), async || {
        let (_, out, _) = app.exec(&id, "pgrep -c -f '^sleep 600$'").await;
        out.starts_with('1').then_some(())
    })
    .await;
    let pod = pods(&ns).await.remove(0);
    let name = pod.metadata.name.clone().unwrap();
    kube::Api::<Pod>::namespaced(ns.admin.clone(), &ns.name)
        .delete(
            &name,
            &kube::api::DeleteParams {
                grace_period_seconds: Some(0),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let failed = app
        .wait_for_status(&id, "error", Duration::from_secs(30))
        .await;
    let error = failed["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("the sandbox ended while the session ran: its pod was deleted"),
        "{failed}"
    );
    let (_, events) = app.get_json(&format!("/api/sessions/{id}/events")).await;
    let errors: Vec<&serde_json::Value> = events
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["type"] == "session.status_error" && e["run_id"].is_null())
        .collect();
    assert_eq!(errors.len(), 1, "one for the session: {events}");
    let ended = runs::wait_for_run(&app, &id, &run).await;
    let session = app.session(&id).await;
    let detail = session["runs"]
        .as_array()
        .and_then(|r| r.iter().find(|r| r["id"] == run.as_str()))
        .cloned()
        .unwrap_or_default();
    assert_eq!(detail["status"], "failed", "{detail} {ended:?}");
    assert!(
        detail["error"]
            .as_str()
            .is_some_and(|e| e.contains("its pod was deleted")),
        "{detail}"
    );

    app.start_session(&id).await;
    app.wait_for_status(&id, "running", Duration::from_secs(90))
        .await;
    let (code, out, _) = app.exec(&id, "echo back").await;
    assert_eq!((code, out.as_str()), (0, "back\n"));
    ns.remove().await;
}

/// A warm pool of pods: a session boots from it, and the pod it took is labelled as the
/// session's (a pod cannot be renamed) once handed over.
#[tokio::test]
async fn a_session_boots_from_a_warm_pool_of_pods() {
    let ns = TestNamespace::new().await;
    let app = TestApp::builder()
        .with_kubernetes(&ns)
        .with_pool(1)
        .with_pool_worker()
        .spawn()
        .await;
    app.create_agent("pooled", json!({})).await;
    let pooled: String = eventually("a pooled pod", Duration::from_secs(60), async || {
        sqlx::query_scalar::<_, String>(
            "select sandbox_id from sandbox_pool where sandbox_id is not null",
        )
        .fetch_optional(&app.db)
        .await
        .unwrap()
    })
    .await;
    let id = app.boot_session(json!({"agent_id": "pooled"})).await;
    let session = app.session(&id).await;
    let (code, out, _) = app.exec(&id, "id -u").await;
    assert_eq!((code, out.as_str()), (0, "1000\n"), "{session}");
    eventually(
        "the pooled pod labelled as the session's",
        Duration::from_secs(30),
        async || {
            let pod = pods(&ns)
                .await
                .into_iter()
                .find(|p| p.metadata.name.as_deref() == Some(pooled.as_str()))?;
            let labels = pod.metadata.labels.unwrap_or_default();
            (labels.get("sandbox-agents.io/session") == Some(&id)
                && !labels.contains_key("sandbox-agents.io/pool"))
            .then_some(())
        },
    )
    .await;
    ns.remove().await;
}

/// What `deploy/kubernetes/` deploys (the kustomization, as `kubectl apply -k` reads it) is
/// accepted by the real API server's validation: its namespaces applied, everything else
/// created with a server-side dry run.
#[tokio::test]
async fn the_deployment_manifests_are_accepted_by_the_api_server() {
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let admin = sandbox_agents_testkit::kube::cluster_kubeconfig();
    let built = std::process::Command::new(repo.join("scripts/kube-test-cluster"))
        .arg("build")
        .output()
        .unwrap();
    assert!(built.status.success());
    let bin = String::from_utf8_lossy(&built.stdout).trim().to_owned();
    let kubectl = |args: &[&str]| {
        let out = std::process::Command::new(format!("{bin}/kubectl"))
            .arg("--kubeconfig")
            .arg(&admin)
            .args(args)
            .current_dir(&repo)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "kubectl {args:?}: {text}");
        text
    };
    kubectl(&["apply", "-f", "deploy/kubernetes/namespaces.yaml"]);
    let applied = kubectl(&["apply", "--dry-run=server", "-k", "deploy/kubernetes/"]);
    for object in [
        "serviceaccount/sandbox-agents",
        "role.rbac.authorization.k8s.io/sandbox-agents",
        "rolebinding.rbac.authorization.k8s.io/sandbox-agents",
        "service/sandbox-agents",
        "deployment.apps/sandbox-agents",
        "ingress.networking.k8s.io/sandbox-agents-api",
        "ingress.networking.k8s.io/sandbox-agents-previews",
    ] {
        assert!(applied.contains(object), "{object} is not in: {applied}");
    }
}

/// A pod whose sandbox container is killed (as the OOM killer or a node's shutdown kills it)
/// fails its session with how the container ended, as the node reported it.
#[tokio::test]
async fn a_killed_sandbox_container_fails_its_session_with_its_exit() {
    let ns = TestNamespace::new().await;
    let app = TestApp::builder().with_kubernetes(&ns).spawn().await;
    app.sessions.spawn_sandbox_watch();
    let id = app.running_session("k8s", json!({})).await;
    let pod = pods(&ns).await.remove(0).metadata.name.unwrap();
    // The test node agent runs the pod's containers on Docker, labelled with the pod.
    let out = std::process::Command::new("docker")
        .args([
            "ps",
            "-q",
            "--filter",
            &format!("label=io.sandbox-agents.kube-test-node.pod={pod}"),
            "--filter",
            "label=io.sandbox-agents.kube-test-node.container=sandbox",
        ])
        .output()
        .unwrap();
    let container = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    assert!(!container.is_empty(), "the pod's container runs");
    let killed = std::process::Command::new("docker")
        .args(["kill", &container])
        .status()
        .unwrap();
    assert!(killed.success());
    let failed = app
        .wait_for_status(&id, "error", Duration::from_secs(30))
        .await;
    let error = failed["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("container sandbox ended") && error.contains("exit 137"),
        "{failed}"
    );
    ns.remove().await;
}
