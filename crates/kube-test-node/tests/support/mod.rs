//! A test cluster per test: `scripts/kube-test-cluster up` in a directory of its own, with
//! the agent binary this package built, and `down` when dropped. Needs Docker and the sandbox
//! image (`. scripts/lib.sh && ensure_docker && ensure_sandbox_image`; [`Cluster::start`]
//! runs them, which costs nothing when both are there).

use bollard::query_parameters::ListContainersOptions;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams};
use kube::runtime::wait::{await_condition, Condition};
use std::collections::HashMap;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

/// How long any wait in these tests may take before it fails.
pub const DEADLINE: Duration = Duration::from_secs(60);

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

pub struct Cluster {
    dir: PathBuf,
    pub client: kube::Client,
    pub docker: bollard::Docker,
    /// The sandbox image (`sandbox-agents-sandbox:N`).
    pub image: String,
}

impl Cluster {
    pub async fn start() -> Self {
        let image = Command::new("bash")
            .args([
                "-c",
                ". scripts/lib.sh && ensure_sandbox_image >&2 && sandbox_image_ref",
            ])
            .current_dir(repo())
            .stderr(Stdio::inherit())
            .output()
            .expect("bash runs");
        assert!(
            image.status.success(),
            "ensure_sandbox_image failed (its output is above)"
        );
        let image = String::from_utf8_lossy(&image.stdout).trim().to_owned();
        let dir = tempfile::Builder::new()
            .prefix("kube-test-node-")
            .tempdir()
            .expect("a temporary directory")
            .keep();
        let up = Command::new(repo().join("scripts/kube-test-cluster"))
            .arg("up")
            .arg(&dir)
            .env("KUBE_TEST_NODE_BIN", env!("CARGO_BIN_EXE_kube-test-node"))
            .stderr(Stdio::inherit())
            .output()
            .expect("scripts/kube-test-cluster runs");
        let cluster_down_on_failure = Down(dir.clone());
        assert!(
            up.status.success(),
            "scripts/kube-test-cluster up failed (its output is above)"
        );
        let kubeconfig = String::from_utf8_lossy(&up.stdout)
            .lines()
            .last()
            .unwrap_or_default()
            .to_owned();
        let kubeconfig =
            kube::config::Kubeconfig::read_from(kubeconfig).expect("the kubeconfig reads");
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
            .await
            .expect("the kubeconfig loads");
        let client = kube::Client::try_from(config).expect("a client");
        let docker = bollard::Docker::connect_with_defaults()
            .expect("Docker")
            .negotiate_version()
            .await
            .expect("Docker answers");
        std::mem::forget(cluster_down_on_failure);
        Self {
            dir,
            client,
            docker,
            image,
        }
    }

    pub fn pods(&self) -> Api<Pod> {
        Api::namespaced(self.client.clone(), "default")
    }

    /// Creates the pod described by `json` (merged into a Pod in `default`).
    pub async fn create(&self, json: serde_json::Value) -> Pod {
        let pod: Pod = serde_json::from_value(json).expect("a pod");
        self.pods()
            .create(&PostParams::default(), &pod)
            .await
            .expect("the API server accepts the pod")
    }

    /// Waits until the pod `name` satisfies `cond` (a watch, not a poll), or fails.
    pub async fn wait_for(&self, name: &str, what: &str, cond: impl Condition<Pod>) -> Pod {
        match tokio::time::timeout(DEADLINE, await_condition(self.pods(), name, cond)).await {
            Ok(Ok(Some(pod))) => pod,
            Ok(Ok(None)) => panic!("pod {name} was deleted while waiting until {what}"),
            Ok(Err(e)) => panic!("watching pod {name}: {e}"),
            Err(_) => {
                let now = self
                    .pods()
                    .get_opt(name)
                    .await
                    .ok()
                    .flatten()
                    .and_then(|p| p.status);
                panic!("pod {name} did not get to {what} within {DEADLINE:?}; its status: {now:#?}")
            }
        }
    }

    /// Waits until the pod `name` with this uid is gone from the API.
    pub async fn wait_until_deleted(&self, name: &str, uid: &str) {
        let gone = await_condition(
            self.pods(),
            name,
            kube::runtime::wait::conditions::is_deleted(uid),
        );
        match tokio::time::timeout(DEADLINE, gone).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => panic!("watching pod {name}: {e}"),
            Err(_) => panic!("pod {name} was not deleted within {DEADLINE:?}"),
        }
    }

    /// Stops the node agent (SIGSTOP) until the guard is dropped (SIGCONT): what happens
    /// meanwhile, it learns all at once, as after a stall.
    pub fn pause_agent(&self) -> Paused {
        let pid =
            std::fs::read_to_string(self.dir.join("kube-test-node.pid")).expect("the agent's pid");
        let pid = pid.trim().to_owned();
        signal("STOP", &pid);
        Paused(pid)
    }

    /// Docker's containers (running or not) of the pod with this uid.
    pub async fn containers_of(&self, uid: &str) -> Vec<bollard::models::ContainerSummary> {
        let options = ListContainersOptions {
            all: true,
            filters: Some(HashMap::from([(
                "label".to_owned(),
                vec![format!("io.sandbox-agents.kube-test-node.uid={uid}")],
            )])),
            ..Default::default()
        };
        self.docker
            .list_containers(Some(options))
            .await
            .expect("Docker lists containers")
    }
}

/// Polls `check` until it holds, for at most [`DEADLINE`].
pub async fn eventually<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + DEADLINE;
    while !check().await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{what} did not happen within {DEADLINE:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        down(&self.dir);
    }
}

pub struct Paused(String);

impl Drop for Paused {
    fn drop(&mut self) {
        signal("CONT", &self.0);
    }
}

fn signal(name: &str, pid: &str) {
    let status = Command::new("kill")
        .args([&format!("-{name}"), pid])
        .status();
    assert!(
        matches!(status, Ok(s) if s.success()),
        "kill -{name} {pid} failed"
    );
}

/// Stops a cluster whose start failed half-way.
struct Down(PathBuf);

impl Drop for Down {
    fn drop(&mut self) {
        down(&self.0);
    }
}

fn down(dir: &std::path::Path) {
    let status = Command::new(repo().join("scripts/kube-test-cluster"))
        .arg("down")
        .arg(dir)
        .stdout(Stdio::null())
        .status();
    if !matches!(status, Ok(s) if s.success()) {
        eprintln!("scripts/kube-test-cluster down {} failed", dir.display());
    }
}

/// The pod's first container's state (`waiting`, `running` or `terminated`), as JSON.
pub fn state(pod: &Pod) -> serde_json::Value {
    let status = pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|s| s.first());
    serde_json::to_value(status.and_then(|s| s.state.clone())).unwrap_or_default()
}

pub fn phase(pod: Option<&Pod>) -> &str {
    pod.and_then(|p| p.status.as_ref())
        .and_then(|s| s.phase.as_deref())
        .unwrap_or_default()
}
