//! A session's other Python kernels ("contexts", as E2B's code interpreter calls them): each
//! one its own controller under `{KERNEL_ROOT}/contexts/<id>`, with its own working
//! directory, started when it is made and kept until it is deleted or the sandbox stops.
//!
//! Invariants:
//! * a context's description (`context.json`) lives beside its controller in the sandbox, so
//!   every server replica sees the same contexts, and a sandbox that stops takes them with it
//!   (with their state: a context is memory, like the session's kernel);
//! * a context runs only where its description is: a cell for a context never made, or one
//!   gone with its sandbox, is a 404 rather than a kernel started under a made-up name;
//! * a context's cells are not journaled; the notebook is the session's kernel's.

use super::{Answer, Called, KERNEL_ROOT};
use crate::processes::daemon_error;
use crate::Sessions;
use bytes::Bytes;
use futures::StreamExt;
use sandbox_agents_domain::{ProjectId, SessionId};
use sandbox_agents_errors::{Result, ServiceError};
use sandbox_agents_sandbox::sandboxd::proto::FileKind;
use sandbox_agents_sandbox::WORKDIR;
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::time::Duration;

/// The most contexts a session keeps at once (each is a Python process of its own).
pub const MAX_CONTEXTS: usize = 16;
/// The largest `context.json` read back (it holds an id and a path).
const MAX_DESCRIPTION: usize = 64 * 1024;
/// How long a restart or a shutdown may take.
const CONTROL_DEADLINE: Duration = Duration::from_secs(120);

fn contexts_root() -> String {
    format!("{KERNEL_ROOT}/contexts")
}

/// One kernel's controller: where it answers, and which context it is (none for the
/// session's own).
pub(crate) struct Kernel {
    pub(crate) root: String,
    context: Option<String>,
}

impl Kernel {
    pub(crate) fn session() -> Self {
        Self {
            root: KERNEL_ROOT.into(),
            context: None,
        }
    }

    /// A context's kernel; its id is a path component, so only letters, digits and `-`.
    pub(crate) fn context(id: &str) -> Result<Self> {
        let ok = !id.is_empty()
            && id.len() <= 64
            && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-');
        if !ok {
            return Err(ServiceError::NotFound(format!(
                "context {id} was not found"
            )));
        }
        Ok(Self {
            root: format!("{}/{id}", contexts_root()),
            context: Some(id.into()),
        })
    }

    fn description(&self) -> String {
        format!("{}/context.json", self.root)
    }
}

/// A context as it was made: its id and the directory its kernel started in.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct KernelContext {
    pub id: String,
    pub cwd: String,
}

impl Sessions {
    /// The directory `kernel` starts in: the workspace for the session's kernel, a context's
    /// own for a context (404 for one whose description is not in the sandbox).
    pub(super) async fn kernel_cwd(&self, sandbox: &str, kernel: &Kernel) -> Result<String> {
        let Some(id) = &kernel.context else {
            return Ok(WORKDIR.into());
        };
        let client = self.kernel_daemon(sandbox).await?;
        let gone = || ServiceError::NotFound(format!("context {id} was not found"));
        let (_, mut body) =
            client
                .read_file(&kernel.description())
                .await
                .map_err(|e| match daemon_error(e) {
                    ServiceError::NotFound(_) => gone(),
                    other => other,
                })?;
        let mut raw = Vec::new();
        while let Some(chunk) = body.next().await {
            raw.extend_from_slice(&chunk.map_err(daemon_error)?);
            if raw.len() > MAX_DESCRIPTION {
                return Err(gone());
            }
        }
        let context: KernelContext = serde_json::from_slice(&raw).map_err(|_| gone())?;
        Ok(context.cwd)
    }

    /// Makes a context whose kernel starts in `cwd` (an absolute path in the sandbox) and
    /// starts it, so that a kernel that cannot start is said here, not at its first cell.
    #[tracing::instrument(skip_all, fields(session.id = %id))]
    pub async fn create_kernel_context(
        &self,
        project: ProjectId,
        id: SessionId,
        cwd: &str,
    ) -> Result<KernelContext> {
        if !cwd.starts_with('/') {
            return Err(ServiceError::BadRequest(format!(
                "a context's working directory is an absolute path (got {cwd:?})"
            )));
        }
        if self.kernel_contexts(project, id).await?.len() >= MAX_CONTEXTS {
            return Err(ServiceError::Conflict(format!(
                "a sandbox keeps at most {MAX_CONTEXTS} contexts; delete one first"
            )));
        }
        let (session, sandbox) = self.running(project, id).await?;
        let env = self.command_env(&session)?;
        let client = self.kernel_daemon(&sandbox).await?;
        let context = KernelContext {
            id: uuid::Uuid::new_v4().simple().to_string(),
            cwd: cwd.into(),
        };
        let kernel = Kernel::context(&context.id)?;
        let description = serde_json::to_vec(&context).map_err(anyhow::Error::from)?;
        let body = futures::stream::iter([Ok::<_, std::io::Error>(Bytes::from(description))]);
        client
            .write_file(&kernel.description(), Some(0o600), true, Box::pin(body))
            .await
            .map_err(daemon_error)?;
        if let Err(e) = self.start_controller(&sandbox, &env, &kernel, cwd).await {
            let _ = client.remove(&kernel.root, true).await;
            return Err(e);
        }
        tracing::info!(context = %context.id, "kernel context made");
        Ok(context)
    }

    /// The session's contexts, in no particular order (none while its sandbox has none).
    pub async fn kernel_contexts(
        &self,
        project: ProjectId,
        id: SessionId,
    ) -> Result<Vec<KernelContext>> {
        let (_, sandbox) = self.running(project, id).await?;
        let client = self.kernel_daemon(&sandbox).await?;
        let listing = match client
            .list_dir(&contexts_root())
            .await
            .map_err(daemon_error)
        {
            Ok(listing) => listing,
            Err(ServiceError::NotFound(_)) => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        let mut contexts = Vec::new();
        for entry in listing.entries.iter().filter(|e| e.kind == FileKind::Dir) {
            let Ok(kernel) = Kernel::context(&entry.name) else {
                continue;
            };
            // A directory whose description is missing is one being made or deleted.
            match self.kernel_cwd(&sandbox, &kernel).await {
                Ok(cwd) => contexts.push(KernelContext {
                    id: entry.name.clone(),
                    cwd,
                }),
                Err(ServiceError::NotFound(_)) => continue,
                Err(e) => return Err(e),
            }
        }
        Ok(contexts)
    }

    /// A new kernel for the context (`None`: the session's own), its state gone; a kernel
    /// that was not running is started.
    #[tracing::instrument(skip_all, fields(session.id = %id, context = ?context))]
    pub async fn restart_kernel(
        &self,
        project: ProjectId,
        id: SessionId,
        context: Option<&str>,
    ) -> Result<()> {
        let (session, sandbox) = self.running(project, id).await?;
        let env = self.command_env(&session)?;
        let kernel = match context {
            None => Kernel::session(),
            Some(c) => Kernel::context(c)?,
        };
        let cwd = self.kernel_cwd(&sandbox, &kernel).await?;
        let called = self.control(&sandbox, &env, &kernel, "restart").await?;
        if matches!(called, Called::NoController) {
            self.start_controller(&sandbox, &env, &kernel, &cwd).await?;
        }
        Ok(())
    }

    /// Ends the context's kernel and forgets the context (404 for one not there).
    #[tracing::instrument(skip_all, fields(session.id = %id, context = %context))]
    pub async fn delete_kernel_context(
        &self,
        project: ProjectId,
        id: SessionId,
        context: &str,
    ) -> Result<()> {
        let (session, sandbox) = self.running(project, id).await?;
        let env = self.command_env(&session)?;
        let kernel = Kernel::context(context)?;
        self.kernel_cwd(&sandbox, &kernel).await?;
        let client = self.kernel_daemon(&sandbox).await?;
        // The description goes first, so the context is gone for everyone from here on.
        client
            .remove(&kernel.description(), false)
            .await
            .map_err(daemon_error)?;
        self.control(&sandbox, &env, &kernel, "shutdown").await?;
        let _ = client.remove(&kernel.root, true).await;
        Ok(())
    }

    /// One of the controller's own operations (`restart`, `shutdown`), answered or not.
    async fn control(
        &self,
        sandbox: &str,
        env: &[(String, String)],
        kernel: &Kernel,
        op: &str,
    ) -> Result<Called> {
        let mut answer = Answer::default();
        self.call_controller(
            sandbox,
            env,
            kernel,
            &json!({ "op": op }),
            CONTROL_DEADLINE,
            &mut answer,
            &mut |_, _| {},
        )
        .await
    }
}

impl Sessions {
    /// The daemon of `sandbox`, which kernels need.
    async fn kernel_daemon(
        &self,
        sandbox: &str,
    ) -> Result<sandbox_agents_sandbox::sandboxd::client::Client> {
        self.inner
            .backend
            .daemon(sandbox)
            .await
            .ok_or_else(no_daemon)
    }
}

fn no_daemon() -> ServiceError {
    ServiceError::Conflict(
        "Python kernels need the sandbox's daemon, which this sandbox does not have (its image cannot run it, or the server runs without one)".into(),
    )
}
