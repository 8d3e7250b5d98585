//! The node agent against a real kube-apiserver and etcd (one cluster per test), running pods
//! as real Docker containers.

mod support;

use k8s_openapi::api::core::v1::Pod;
use kube::api::DeleteParams;
use kube::runtime::wait::conditions;
use serde_json::json;
use support::{eventually, phase, state, Cluster};

/// A pod of the sandbox image in `default`, running `command` as uid 1000 with a grace
/// period of 1 s (`sleep` as pid 1 ignores SIGTERM), changed by `extra` (merged into spec).
fn pod(
    cluster: &Cluster,
    name: &str,
    command: &[&str],
    extra: serde_json::Value,
) -> serde_json::Value {
    let mut spec = json!({
        "automountServiceAccountToken": false,
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": 1,
        "securityContext": {"runAsUser": 1000, "runAsGroup": 1000, "runAsNonRoot": true},
        "containers": [{"name": "main", "image": cluster.image, "command": command}],
    });
    for (k, v) in extra.as_object().cloned().unwrap_or_default() {
        if k == "container" {
            for (ck, cv) in v.as_object().cloned().unwrap_or_default() {
                spec["containers"][0][ck] = cv;
            }
        } else {
            spec[k] = v;
        }
    }
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"}, "spec": spec})
}

fn uid(pod: &Pod) -> String {
    pod.metadata.uid.clone().expect("a uid")
}

// Multi-threaded: dropping the cluster blocks this thread on `down`, and the client's
// connections must still close meanwhile, or the API server waits for them to stop.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_runs_with_a_pod_ip_the_host_can_connect_to() {
    let cluster = Cluster::start().await;
    cluster
        .create(pod(
            &cluster,
            "web",
            &["python3", "-m", "http.server", "8080"],
            json!({}),
        ))
        .await;
    let running = cluster
        .wait_for("web", "Running with a podIP", |p: Option<&Pod>| {
            phase(p) == "Running" && p.and_then(|p| p.status.as_ref()?.pod_ip.clone()).is_some()
        })
        .await;
    let status = running.status.clone().unwrap();
    let ready = status
        .conditions
        .unwrap_or_default()
        .into_iter()
        .find(|c| c.type_ == "Ready")
        .unwrap();
    assert_eq!(ready.status, "True");
    assert!(
        state(&running)["running"]["startedAt"].is_string(),
        "{:?}",
        state(&running)
    );
    let ip = status.pod_ip.unwrap();
    eventually("a TCP connection to the pod's server", || async {
        tokio::net::TcpStream::connect((ip.as_str(), 8080))
            .await
            .is_ok()
    })
    .await;
    let containers = cluster.containers_of(&uid(&running)).await;
    assert_eq!(containers.len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn init_containers_run_first_and_share_the_pods_empty_dir() {
    let cluster = Cluster::start().await;
    let data = json!([{"name": "data", "mountPath": "/data"}]);
    cluster
        .create(pod(
            &cluster,
            "init",
            &["sh", "-c", "test \"$(cat /data/first)\" = one"],
            json!({
                "initContainers": [{"name": "first", "image": cluster.image,
                    "command": ["sh", "-c", "echo one > /data/first"], "volumeMounts": data}],
                "volumes": [{"name": "data", "emptyDir": {}}],
                "container": {"volumeMounts": data},
            }),
        ))
        .await;
    let done = cluster
        .wait_for("init", "a terminal phase", |p: Option<&Pod>| {
            matches!(phase(p), "Succeeded" | "Failed")
        })
        .await;
    assert_eq!(phase(Some(&done)), "Succeeded", "{:#?}", done.status);
    let init = &done
        .status
        .as_ref()
        .unwrap()
        .init_container_statuses
        .as_ref()
        .unwrap()[0];
    assert_eq!(
        init.state
            .as_ref()
            .unwrap()
            .terminated
            .as_ref()
            .unwrap()
            .reason
            .as_deref(),
        Some("Completed")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_container_over_its_memory_limit_is_oom_killed_and_the_pod_fails() {
    let cluster = Cluster::start().await;
    cluster
        .create(pod(
            &cluster,
            "hungry",
            &["python3", "-c", "b = bytearray(256 * 1024 * 1024)"],
            json!({"container": {"resources": {"limits": {"memory": "32Mi"}}}}),
        ))
        .await;
    let failed = cluster
        .wait_for("hungry", "a terminal phase", |p: Option<&Pod>| {
            matches!(phase(p), "Succeeded" | "Failed")
        })
        .await;
    assert_eq!(phase(Some(&failed)), "Failed");
    assert_eq!(
        state(&failed)["terminated"]["reason"],
        "OOMKilled",
        "{:?}",
        state(&failed)
    );
    assert_eq!(state(&failed)["terminated"]["exitCode"], 137);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_image_waits_with_err_image_never_pull() {
    let cluster = Cluster::start().await;
    cluster
        .create(pod(
            &cluster,
            "absent",
            &["true"],
            json!({"container": {"image": "sandbox-agents-no-such-image:0"}}),
        ))
        .await;
    let waiting = cluster
        .wait_for("absent", "a waiting reason", |p: Option<&Pod>| {
            p.is_some_and(|p| state(p)["waiting"]["reason"].is_string())
        })
        .await;
    assert_eq!(state(&waiting)["waiting"]["reason"], "ErrImageNeverPull");
    assert!(
        state(&waiting)["waiting"]["message"]
            .as_str()
            .unwrap()
            .contains("sandbox-agents-no-such-image:0"),
        "{:?}",
        state(&waiting)
    );
    assert_eq!(phase(Some(&waiting)), "Pending");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_whose_node_selector_does_not_match_stays_pending_unschedulable() {
    let cluster = Cluster::start().await;
    cluster
        .create(pod(
            &cluster,
            "elsewhere",
            &["true"],
            json!({"nodeSelector": {"gpu": "true"}}),
        ))
        .await;
    let pending = cluster
        .wait_for("elsewhere", "PodScheduled=False", |p: Option<&Pod>| {
            p.and_then(|p| p.status.as_ref()?.conditions.clone())
                .unwrap_or_default()
                .iter()
                .any(|c| c.type_ == "PodScheduled" && c.status == "False")
        })
        .await;
    let condition = pending
        .status
        .as_ref()
        .unwrap()
        .conditions
        .as_ref()
        .unwrap()[0]
        .clone();
    assert_eq!(condition.reason.as_deref(), Some("Unschedulable"));
    assert!(condition.message.unwrap().contains("gpu=true"));
    assert_eq!(phase(Some(&pending)), "Pending");
    assert!(
        pending.spec.unwrap().node_name.is_none(),
        "the pod was bound"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_pod_removes_its_container_and_volumes() {
    let cluster = Cluster::start().await;
    cluster
        .create(pod(
            &cluster,
            "doomed",
            &["sleep", "3600"],
            json!({"volumes": [{"name": "scratch", "emptyDir": {"medium": "Memory"}}],
                   "container": {"volumeMounts": [{"name": "scratch", "mountPath": "/scratch"}]}}),
        ))
        .await;
    let running = cluster
        .wait_for("doomed", "Running", conditions::is_pod_running())
        .await;
    let uid = uid(&running);
    assert_eq!(cluster.containers_of(&uid).await.len(), 1);
    cluster
        .pods()
        .delete("doomed", &DeleteParams::default())
        .await
        .unwrap();
    cluster.wait_until_deleted("doomed", &uid).await;
    // The agent deletes the pod only once its containers and volumes are gone.
    assert!(cluster.containers_of(&uid).await.is_empty());
    let volumes =
        cluster
            .docker
            .list_volumes(Some(bollard::query_parameters::ListVolumesOptions {
                filters: Some(std::collections::HashMap::from([(
                    "label".to_owned(),
                    vec![format!("io.sandbox-agents.kube-test-node.uid={uid}")],
                )])),
            }));
    assert!(volumes
        .await
        .unwrap()
        .volumes
        .unwrap_or_default()
        .is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_container_removed_behind_the_agents_back_fails_the_pod() {
    let cluster = Cluster::start().await;
    cluster
        .create(pod(&cluster, "lost", &["sleep", "3600"], json!({})))
        .await;
    let running = cluster
        .wait_for("lost", "Running", conditions::is_pod_running())
        .await;
    // `docker rm -f` kills, then removes: an agent looking in between sees an exit (137,
    // `Error`). Paused, it sees only what a node loss leaves: no container at all.
    let paused = cluster.pause_agent();
    for c in cluster.containers_of(&uid(&running)).await {
        let options = bollard::query_parameters::RemoveContainerOptions {
            force: true,
            ..Default::default()
        };
        cluster
            .docker
            .remove_container(&c.id.unwrap(), Some(options))
            .await
            .unwrap();
    }
    drop(paused);
    let failed = cluster
        .wait_for("lost", "Failed", |p: Option<&Pod>| phase(p) == "Failed")
        .await;
    assert_eq!(
        failed.status.as_ref().unwrap().reason.as_deref(),
        Some("ContainerGone")
    );
    assert_eq!(state(&failed)["terminated"]["reason"], "ContainerGone");
}
