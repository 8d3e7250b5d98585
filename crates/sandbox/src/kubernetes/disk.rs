//! What each running sandbox pod has written, for the disk limit (`--sandbox-disk-mb`,
//! enforced by measurement as on Docker: `sessions/src/disk.rs`). A pod's root filesystem is
//! read-only, so what it writes is in its `emptyDir`s: `du` over them, run through each
//! pod's daemon (the API server is not asked; the kubelet's own accounting is not readable
//! with the Role's permissions), a few pods at a time.

use super::KubernetesBackend;
use crate::{ExecRequest, Result};
use futures::StreamExt;
use std::time::Duration;

/// The directories a pod writes to (its `emptyDir`s).
const WRITABLE: &[&str] = &["/workspace", "/home/sandbox", "/tmp", "/var/tmp"];
/// Pods measured at once.
const AT_ONCE: usize = 4;
/// How long one pod's measurement may take.
const TIMEOUT: Duration = Duration::from_secs(30);

impl KubernetesBackend {
    pub(super) async fn measure_pods(&self) -> Result<Vec<(String, u64)>> {
        let running: Vec<String> = self
            .pods_of(None)
            .await?
            .into_iter()
            .filter(super::status::is_running)
            .filter_map(|p| p.metadata.name)
            .collect();
        let measured = futures::stream::iter(running)
            .map(|id| async move {
                let bytes = self.written(&id).await;
                bytes.map(|b| (id, b))
            })
            .buffer_unordered(AT_ONCE)
            .filter_map(|m| async move { m })
            .collect()
            .await;
        Ok(measured)
    }

    /// The bytes under the pod's writable directories; `None` when it cannot be told (the
    /// daemon does not answer, the image has no `du`), logged.
    async fn written(&self, id: &str) -> Option<u64> {
        let mut argv = vec![
            "du".to_owned(),
            "-s".to_owned(),
            "-b".to_owned(),
            "-c".to_owned(),
        ];
        argv.extend(WRITABLE.iter().map(|d| (*d).to_owned()));
        let req = ExecRequest {
            argv,
            workdir: Some("/".to_owned()),
            env: vec![],
            timeout: TIMEOUT,
            max_output: 4096,
            stdin: None,
        };
        let out = match crate::SandboxBackend::exec(self, id, &req).await {
            Ok(out) => out,
            Err(e) => {
                tracing::debug!(pod = %id, error = %e, "could not measure the pod's disk");
                return None;
            }
        };
        // `du -c` ends with the total; files it may not read still count what it could.
        let total = String::from_utf8_lossy(&out.stdout)
            .lines()
            .last()
            .and_then(|l| l.split_whitespace().next().map(str::to_owned))
            .and_then(|n| n.parse().ok());
        if total.is_none() {
            tracing::warn!(pod = %id, exit = out.exit_code, stderr = %String::from_utf8_lossy(&out.stderr), "the pod's disk could not be measured (does its image have du?)");
        }
        total
    }
}
