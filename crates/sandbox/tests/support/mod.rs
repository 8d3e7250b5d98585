//! What the sandbox crate's test binaries share: the image, specs, commands, the Docker
//! backend as the tests connect it, and the subjects of the conformance suite.

#![allow(dead_code)] // each test binary uses its own part

use async_trait::async_trait;
use sandbox_agents_sandbox::{
    Capabilities, DockerBackend, ExecOutput, ExecRequest, Limits, MemoryBackend, Sandbox,
    SandboxBackend, SandboxSpec,
};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// The sandbox image the tests run (`SANDBOX_AGENTS_IMAGE`, default `sandbox-agents-sandbox:1`).
pub fn image() -> String {
    std::env::var("SANDBOX_AGENTS_IMAGE").unwrap_or_else(|_| "sandbox-agents-sandbox:1".to_owned())
}

/// A spec of `image` for `session`, with limits small enough for many at once.
pub fn spec_of(image: String, session: &str) -> SandboxSpec {
    SandboxSpec {
        session: session.to_owned(),
        image,
        env: BTreeMap::new(),
        exposed_ports: vec![],
        limits: Limits {
            cpus: 1.0,
            memory_bytes: 512 << 20,
            pids: 256,
        },
        runtime_class: None,
    }
}

pub fn session() -> String {
    uuid::Uuid::new_v4().to_string()
}

pub fn req(argv: &[&str]) -> ExecRequest {
    ExecRequest {
        argv: argv.iter().map(|s| s.to_string()).collect(),
        workdir: None,
        env: vec![],
        timeout: Duration::from_secs(20),
        max_output: 1 << 20,
        stdin: None,
    }
}

pub fn sh(script: &str) -> ExecRequest {
    req(&["sh", "-c", script])
}

pub fn text(b: &[u8]) -> &str {
    std::str::from_utf8(b).unwrap()
}

/// The Docker backend of `deployment` on the Engine at `DOCKER_HOST` (or the default
/// socket); its sandboxes get the daemon (`testkit::test_sandboxd`) when `daemon`, and run
/// every command as a Docker exec otherwise.
pub async fn docker(deployment: &str, daemon: bool) -> DockerBackend {
    let backend = DockerBackend::connect(deployment)
        .await
        .expect("the Docker Engine answers");
    if !daemon {
        return backend;
    }
    let binary = sandbox_agents_testkit::test_sandboxd();
    let binary = sandbox_agents_sandbox::docker::daemon::DaemonBinary::load(&binary)
        .unwrap_or_else(|e| {
            panic!(
                "the sandbox daemon {} ({e}): build it with scripts/build-sandboxd",
                binary.display()
            )
        });
    backend.with_daemon(binary)
}

/// One implementation under test.
#[async_trait]
pub trait Subject: Clone + Send + Sync + 'static {
    /// A backend of this implementation on `deployment`.
    async fn backend(&self, deployment: &str) -> Arc<dyn SandboxBackend>;
    /// The image sandboxes are created from.
    fn image(&self) -> String;
}

/// The Docker backend as a [`Subject`].
#[derive(Clone, Copy)]
pub struct Docker {
    /// Sandboxes get the daemon; without it every command is a Docker exec.
    pub daemon: bool,
}

#[async_trait]
impl Subject for Docker {
    async fn backend(&self, deployment: &str) -> Arc<dyn SandboxBackend> {
        Arc::new(docker(deployment, self.daemon).await)
    }

    fn image(&self) -> String {
        image()
    }
}

/// The in-memory backend as a [`Subject`]: each backend a world of its own, so the
/// harness's clean-up after a failed case (a backend made anew) finds nothing, and nothing
/// is left anywhere once the case's backend is dropped.
#[derive(Clone, Copy)]
pub struct Memory;

#[async_trait]
impl Subject for Memory {
    async fn backend(&self, deployment: &str) -> Arc<dyn SandboxBackend> {
        Arc::new(MemoryBackend::new(deployment))
    }

    fn image(&self) -> String {
        sandbox_agents_sandbox::memory::BASE_IMAGE.to_owned()
    }
}

/// A backend on a fresh deployment; removes every sandbox of that deployment and the images
/// the case made when dropped, also when the case fails.
pub struct Harness<S: Subject> {
    pub subject: S,
    pub backend: Arc<dyn SandboxBackend>,
    pub deployment: String,
    /// Images the case made, removed at the end.
    pub images: Vec<String>,
    done: bool,
}

impl<S: Subject> Harness<S> {
    pub async fn new(subject: S) -> Self {
        let deployment = format!("test-{}", uuid::Uuid::new_v4());
        let backend = subject.backend(&deployment).await;
        Harness {
            subject,
            backend,
            deployment,
            images: Vec::new(),
            done: false,
        }
    }

    /// What the backend declares it can do (`SandboxBackend::capabilities`): the cases hold
    /// it to each part it declares.
    pub fn caps(&self) -> Capabilities {
        self.backend.capabilities()
    }

    pub fn spec(&self, session: &str) -> SandboxSpec {
        spec_of(self.subject.image(), session)
    }

    pub async fn create(&self, spec: &SandboxSpec) -> Sandbox {
        self.backend.create(spec).await.expect("create")
    }

    pub async fn exec(&self, sb: &Sandbox, req: &ExecRequest) -> ExecOutput {
        self.backend.exec(&sb.id, req).await.expect("exec")
    }

    /// Removes what the case made and checks that nothing is left.
    pub async fn finish(mut self) {
        remove_all(self.backend.as_ref(), &self.images).await;
        assert!(
            self.backend.list().await.unwrap().is_empty(),
            "sandboxes left behind"
        );
        self.done = true;
    }
}

async fn remove_all(backend: &dyn SandboxBackend, images: &[String]) {
    for s in backend.list().await.unwrap_or_default() {
        let _ = backend.remove(&s.id).await;
    }
    for image in images {
        let _ = backend.remove_image(image).await;
    }
}

impl<S: Subject> Drop for Harness<S> {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        // A failed case: clean up with a backend of its own on a runtime of its own (the
        // case's runtime may be unwinding).
        let (subject, deployment) = (self.subject.clone(), self.deployment.clone());
        let images = std::mem::take(&mut self.images);
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async {
                let backend = subject.backend(&deployment).await;
                remove_all(backend.as_ref(), &images).await;
            })
        })
        .join();
    }
}

/// The Kubernetes backend as a [`Subject`]: on the test cluster (a real kube-apiserver and
/// etcd, our test node agent running pods as Docker containers), in a namespace of the case's
/// own, under a service account holding only the Role of `deploy/kubernetes/`.
#[derive(Clone)]
pub struct Kubernetes {
    pub settings: sandbox_agents_sandbox::KubernetesSettings,
}

impl Kubernetes {
    pub async fn new() -> Self {
        let ns = sandbox_agents_testkit::kube::TestNamespace::new().await;
        let key: [u8; 32] = rand_key();
        let mut settings = sandbox_agents_sandbox::KubernetesSettings::new(
            &ns.name,
            &sandbox_agents_testkit::kube::sandboxd_image(),
            key,
        );
        settings.kubeconfig = Some(ns.kubeconfig.clone());
        Kubernetes { settings }
    }

    /// As [`Kubernetes::new`], reaching the daemons through the API server's port-forward
    /// (the route of a control plane outside the cluster) instead of the pod network.
    pub async fn port_forward() -> Self {
        let mut k = Self::new().await;
        k.settings.route = sandbox_agents_sandbox::kubernetes::DaemonRoute::PortForward;
        k
    }
}

fn rand_key() -> [u8; 32] {
    let mut key = [0u8; 32];
    key[..16].copy_from_slice(uuid::Uuid::new_v4().as_bytes());
    key[16..].copy_from_slice(uuid::Uuid::new_v4().as_bytes());
    key
}

#[async_trait]
impl Subject for Kubernetes {
    async fn backend(&self, deployment: &str) -> Arc<dyn SandboxBackend> {
        Arc::new(
            sandbox_agents_sandbox::KubernetesBackend::connect(&self.settings, deployment)
                .await
                .expect("the test cluster takes the backend"),
        )
    }

    fn image(&self) -> String {
        image()
    }
}
