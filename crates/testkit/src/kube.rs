//! A real Kubernetes API server for tests: the test cluster of `scripts/kube-test-cluster`
//! (etcd, kube-apiserver and our test node agent), and per test a namespace of its own with
//! a service account bound to the Role in `deploy/kubernetes/role.yaml`, so the backend runs
//! with exactly the permissions a deployment grants it.
//!
//! The cluster is `SANDBOX_AGENTS_TEST_KUBECONFIG` when set (the test script starts one for
//! the whole run), else the one under `target/kube-test-cluster`, started by the first test
//! that needs it (under a lock) and left running for the next.

use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{Namespace, Pod, ServiceAccount};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding, RoleRef, Subject};
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client, Config};
use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The admin kubeconfig of the test cluster, starting it if need be.
pub fn cluster_kubeconfig() -> PathBuf {
    if let Some(path) = std::env::var_os("SANDBOX_AGENTS_TEST_KUBECONFIG") {
        return PathBuf::from(path);
    }
    let dir = repo().join("target/kube-test-cluster");
    let lock = repo().join("target/kube-test-cluster.lock");
    // One starter at a time; the others find it running.
    let script = format!(
        "exec 9>'{lock}'; flock 9; \
         if [ -f '{dir}/kube-apiserver.pid' ] && kill -0 \"$(cat '{dir}/kube-apiserver.pid')\" 2>/dev/null; then \
           echo '{dir}/kubeconfig'; \
         else rm -rf '{dir}'; '{script}' up '{dir}' | tail -n 1; fi",
        lock = lock.display(),
        dir = dir.display(),
        script = repo().join("scripts/kube-test-cluster").display(),
    );
    let out = std::process::Command::new("bash")
        .args(["-c", &script])
        .stderr(std::process::Stdio::inherit())
        .output()
        .expect("bash runs");
    assert!(
        out.status.success(),
        "scripts/kube-test-cluster up failed (its output is above)"
    );
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
}

/// The image the Kubernetes backend's init container copies the daemon from in tests
/// (`ensure_sandboxd_image` in scripts/lib.sh): `SANDBOX_AGENTS_TEST_SANDBOXD_IMAGE`, else
/// built now.
pub fn sandboxd_image() -> String {
    if let Ok(image) = std::env::var("SANDBOX_AGENTS_TEST_SANDBOXD_IMAGE") {
        return image;
    }
    let out = std::process::Command::new("bash")
        .args([
            "-c",
            ". scripts/lib.sh && ensure_sandboxd_image | tail -n 1",
        ])
        .current_dir(repo())
        .stderr(std::process::Stdio::inherit())
        .output()
        .expect("bash runs");
    assert!(out.status.success(), "ensure_sandboxd_image failed");
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

async fn client_of(path: &Path) -> Client {
    let kubeconfig = Kubeconfig::read_from(path).expect("the kubeconfig reads");
    let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .expect("the kubeconfig is usable");
    Client::try_from(config).expect("a client")
}

/// A namespace of one test, with a service account bound to the deployment's Role.
pub struct TestNamespace {
    pub name: String,
    /// A kubeconfig of the service account (what the backend is given).
    pub kubeconfig: PathBuf,
    pub admin: Client,
    dir: PathBuf,
}

impl TestNamespace {
    /// A new namespace on the test cluster, with the Role of `deploy/kubernetes/role.yaml`
    /// bound to a service account `sandbox-agents`, whose token the kubeconfig holds.
    pub async fn new() -> Self {
        Self::with_role(true).await
    }

    /// As [`TestNamespace::new`], with the Role bound or not (a server without permissions).
    pub async fn with_role(bind: bool) -> Self {
        let admin_path = cluster_kubeconfig();
        let admin = client_of(&admin_path).await;
        let name = format!(
            "sa-test-{}",
            &uuid::Uuid::new_v4().simple().to_string()[..12]
        );
        let post = PostParams::default();
        let ns: Namespace = serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "labels": {"sandbox-agents.io/test": "true"}}
        }))
        .unwrap();
        Api::<Namespace>::all(admin.clone())
            .create(&post, &ns)
            .await
            .expect("create the test namespace");
        let account: ServiceAccount =
            serde_json::from_value(serde_json::json!({"metadata": {"name": "sandbox-agents"}}))
                .unwrap();
        Api::<ServiceAccount>::namespaced(admin.clone(), &name)
            .create(&post, &account)
            .await
            .expect("create the service account");
        if bind {
            let text = std::fs::read_to_string(repo().join("deploy/kubernetes/role.yaml"))
                .expect("deploy/kubernetes/role.yaml");
            let mut role: Role = serde_saphyr::from_str(&text).expect("the Role parses");
            // The file names the sandboxes' namespace of a deployment; the test's is its own.
            role.metadata.namespace = None;
            Api::<Role>::namespaced(admin.clone(), &name)
                .create(&post, &role)
                .await
                .expect("the API server accepts the deployment's Role");
            let binding = RoleBinding {
                metadata: kube::api::ObjectMeta {
                    name: Some("sandbox-agents".to_owned()),
                    ..Default::default()
                },
                role_ref: RoleRef {
                    api_group: "rbac.authorization.k8s.io".to_owned(),
                    kind: "Role".to_owned(),
                    name: role.metadata.name.clone().unwrap_or_default(),
                },
                subjects: Some(vec![Subject {
                    kind: "ServiceAccount".to_owned(),
                    name: "sandbox-agents".to_owned(),
                    namespace: Some(name.clone()),
                    ..Default::default()
                }]),
            };
            Api::<RoleBinding>::namespaced(admin.clone(), &name)
                .create(&post, &binding)
                .await
                .expect("bind the Role");
        }
        let request = TokenRequest {
            spec: TokenRequestSpec {
                audiences: vec![],
                expiration_seconds: Some(3600),
                ..Default::default()
            },
            ..Default::default()
        };
        let token = Api::<ServiceAccount>::namespaced(admin.clone(), &name)
            .create_token_request("sandbox-agents", &post, &request)
            .await
            .expect("a token for the service account")
            .status
            .expect("the token")
            .token;
        let dir = std::env::temp_dir().join(format!("sa-kube-{name}"));
        std::fs::create_dir_all(&dir).unwrap();
        let kubeconfig = dir.join("kubeconfig");
        std::fs::write(
            &kubeconfig,
            service_account_kubeconfig(&admin_path, &name, &token),
        )
        .unwrap();
        TestNamespace {
            name,
            kubeconfig,
            admin,
            dir,
        }
    }

    /// Removes the namespace's pods, then the namespace.
    pub async fn remove(&self) {
        let pods = Api::<Pod>::namespaced(self.admin.clone(), &self.name);
        let _ = pods
            .delete_collection(
                &DeleteParams {
                    grace_period_seconds: Some(0),
                    ..Default::default()
                },
                &ListParams::default(),
            )
            .await;
        let _ = Api::<Namespace>::all(self.admin.clone())
            .delete(&self.name, &DeleteParams::default())
            .await;
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A kubeconfig naming the admin kubeconfig's cluster (its server and CA) and `token`.
fn service_account_kubeconfig(admin: &Path, namespace: &str, token: &str) -> String {
    let admin: serde_json::Value =
        serde_saphyr::from_str(&std::fs::read_to_string(admin).unwrap()).unwrap();
    let cluster = admin["clusters"][0]["cluster"].clone();
    serde_json::json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "test", "cluster": cluster}],
        "users": [{"name": "sandbox-agents", "user": {"token": token}}],
        "contexts": [{"name": "test", "context": {"cluster": "test", "user": "sandbox-agents", "namespace": namespace}}],
        "current-context": "test"
    })
    .to_string()
}
