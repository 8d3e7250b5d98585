//! The backend conformance suite: what every [`SandboxBackend`] must do, written once against
//! the trait and run against each implementation ([`conformance_suite!`] in `backends.rs`).
//!
//! A [`Subject`] makes backends of one implementation, each on a fresh deployment id (so
//! `list` sees only its own sandboxes). What a backend can do is what it declares
//! (`SandboxBackend::capabilities`, also what `GET /api/backends` shows): a case holds it to
//! every part it declares, and one that needs what it does not declare says so on stderr and
//! passes. Every case cleans up
//! through a [`Harness`], even when it fails.

pub mod cases;
pub mod exec_cases;

use async_trait::async_trait;
use sandbox_agents_sandbox::{
    Capabilities, ExecOutput, ExecRequest, Limits, Sandbox, SandboxBackend, SandboxSpec,
};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// One implementation under test.
#[async_trait]
pub trait Subject: Clone + Send + Sync + 'static {
    /// A backend of this implementation on `deployment`.
    async fn backend(&self, deployment: &str) -> Arc<dyn SandboxBackend>;
    /// The image sandboxes are created from.
    fn image(&self) -> String;
}

/// A spec of `subject`'s image for `session`, with limits small enough for many at once.
pub fn spec(subject: &impl Subject, session: &str) -> SandboxSpec {
    SandboxSpec {
        session: session.to_owned(),
        image: subject.image(),
        env: BTreeMap::new(),
        exposed_ports: vec![],
        limits: Limits {
            cpus: 1.0,
            memory_bytes: 512 << 20,
            pids: 256,
        },
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

/// Says on stderr that a case does not apply to an implementation (and why).
pub fn not_applicable(case: &str, why: &str) {
    eprintln!("{case}: not applicable to this backend ({why})");
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
        spec(&self.subject, session)
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

/// The whole suite as `#[tokio::test]`s in a module `$name`, for the [`Subject`] `$subject`.
#[macro_export]
macro_rules! conformance_suite {
    ($name:ident, $subject:expr) => {
        mod $name {
            use $crate::conformance::{cases, exec_cases};
            $crate::conformance_suite!(@cases $subject;
                cases::lifecycle_labels_stop_and_idempotent_remove,
                cases::the_same_session_replaces_its_old_sandbox_and_missing_images_are_reported,
                cases::archives_round_trip_as_the_sandbox_user,
                cases::the_sandbox_is_unprivileged_and_limited,
                cases::a_snapshot_keeps_the_filesystem_but_not_the_workspace_or_the_session_env,
                cases::a_snapshot_while_commands_start_completes,
                cases::a_pooled_sandbox_is_handed_to_a_session,
                cases::disk_usage_counts_what_a_sandbox_writes,
                exec_cases::exit_codes_stdin_env_and_workdir,
                exec_cases::a_timeout_kills_the_command_tree_not_the_sandbox,
                exec_cases::output_beyond_the_cap_is_drained,
                exec_cases::output_streams_as_it_is_written,
                exec_cases::background_processes_through_the_daemon,
            );
        }
    };
    (@cases $subject:expr; $($module:ident :: $case:ident),+ $(,)?) => {
        $(
            #[tokio::test]
            async fn $case() {
                $module::$case($subject).await;
            }
        )+
    };
}
