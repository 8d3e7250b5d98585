//! Extra CA certificates in sandboxes (`--extra-ca-certs`): appended to the image's system
//! bundle at boot, and named by the variables the usual tools read, so that pip, npm, curl,
//! git and Python's `requests` trust them without being told.
//!
//! Invariants:
//! - the bundle is written by the control plane as root, 0644: the sandbox user (uid 1000,
//!   unprivileged) can read it and cannot change what every later command trusts;
//! - with no extra CA, nothing happens and no variable is set;
//! - installing is idempotent: an image that already holds the certificates (a snapshot of a
//!   sandbox that had them) is left as it is.

use crate::Sessions;
use bytes::Bytes;
use futures::TryStreamExt;
use sandbox_agents_domain::ca::ExtraCaCerts;
use sandbox_agents_errors::Result;
use sandbox_agents_sandbox::SandboxError;
use std::collections::BTreeMap;
use std::io::Read;

/// The system bundle of Debian-like images, which `curl`, `git` and Python's `ssl` read.
pub const SYSTEM_BUNDLE: &str = "/etc/ssl/certs/ca-certificates.crt";

/// The variables that point each tool at the bundle; set only when there are extra
/// certificates.
pub const CA_VARIABLES: [&str; 5] = [
    "SSL_CERT_FILE",
    "REQUESTS_CA_BUNDLE",
    "PIP_CERT",
    "NODE_EXTRA_CA_CERTS",
    "GIT_SSL_CAINFO",
];

/// Largest system bundle read back from a sandbox (Debian's is about 220 KiB).
const MAX_BUNDLE: usize = 16 * 1024 * 1024;
/// How many symbolic links are followed to find the bundle's file.
const MAX_LINKS: usize = 4;

/// The variables a sandbox's commands get for `extra`: each of [`CA_VARIABLES`] naming
/// [`SYSTEM_BUNDLE`]; empty without extra certificates.
pub fn ca_env(extra: Option<&ExtraCaCerts>) -> BTreeMap<String, String> {
    match extra {
        None => BTreeMap::new(),
        Some(_) => CA_VARIABLES
            .iter()
            .map(|k| (k.to_string(), SYSTEM_BUNDLE.to_owned()))
            .collect(),
    }
}

/// The bundle with `extra` appended, or `None` when it holds them already.
pub fn appended(system: &str, extra: &ExtraCaCerts) -> Option<String> {
    if system.contains(extra.pem().trim_end()) {
        return None;
    }
    let mut out = system.to_owned();
    if !out.is_empty() && !out.ends_with('\n') {
        out.push('\n');
    }
    out.push_str(extra.pem());
    Some(out)
}

/// What an archive of one path holds: a file's bytes, or a symbolic link's target.
enum Found {
    File(Vec<u8>),
    Link(String),
}

fn first_entry(tar: &[u8]) -> std::io::Result<Option<Found>> {
    let mut archive = tar::Archive::new(tar);
    let Some(entry) = archive.entries()?.next() else {
        return Ok(None);
    };
    let mut entry = entry?;
    match entry.header().entry_type() {
        tar::EntryType::Symlink => Ok(entry
            .link_name()?
            .map(|t| Found::Link(t.to_string_lossy().into_owned()))),
        t if t.is_file() => {
            let mut data = Vec::new();
            (&mut entry)
                .take(MAX_BUNDLE as u64 + 1)
                .read_to_end(&mut data)?;
            Ok(Some(Found::File(data)))
        }
        _ => Ok(None),
    }
}

impl Sessions {
    /// Appends the extra certificates to the sandbox's [`SYSTEM_BUNDLE`] (created when the
    /// image has none), as root, 0644. A no-op without extra certificates, and on a backend
    /// that cannot write as root in a sandbox (Kubernetes).
    pub(crate) async fn install_extra_ca(&self, sandbox_id: &str) -> Result<()> {
        let Some(extra) = &self.inner.settings.extra_ca else {
            return Ok(());
        };
        let backend = &self.inner.backend;
        if !backend.capabilities().system_files {
            // No root in the sandbox to write the bundle (said once at start, `server::app`).
            return Ok(());
        }
        // Follow a link or two (some images link the bundle elsewhere); the file written is
        // the one the link ends at, so every name of it sees the certificates.
        let mut path = SYSTEM_BUNDLE.to_owned();
        let mut system = String::new();
        for _ in 0..=MAX_LINKS {
            let chunks: Vec<Bytes> = match backend.get_archive(sandbox_id, &path).await {
                Ok(stream) => stream.try_collect().await?,
                Err(SandboxError::NoSuchPath(_)) => break,
                Err(e) => return Err(e.into()),
            };
            let tar = chunks.concat();
            if tar.len() > MAX_BUNDLE {
                return Err(anyhow::anyhow!("{path} in the sandbox is larger than 16 MiB").into());
            }
            match first_entry(&tar).map_err(|e| anyhow::anyhow!("reading {path}: {e}"))? {
                Some(Found::File(data)) => {
                    system = String::from_utf8_lossy(&data).into_owned();
                    break;
                }
                Some(Found::Link(target)) => {
                    path = if target.starts_with('/') {
                        target
                    } else {
                        let dir = path.rsplit_once('/').map_or("", |(d, _)| d);
                        format!("{dir}/{target}")
                    };
                }
                None => break,
            }
        }
        let Some(bundle) = appended(&system, extra) else {
            return Ok(());
        };
        backend
            .put_system_file(sandbox_id, &path, Bytes::from(bundle), 0o644)
            .await?;
        tracing::debug!(container.id = %sandbox_id, %path, certificates = extra.count(), "extra CA certificates installed");
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CERT: &str = "-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIUJ5c3p3u7Gm6m8n0fWq6xJ1q9G0wwCgYIKoZIzj0EAwIw\n-----END CERTIFICATE-----\n";

    #[test]
    fn certificates_are_appended_once() {
        let extra = ExtraCaCerts::parse(CERT).unwrap();
        let once = appended("system-cert", &extra).unwrap();
        assert_eq!(once, format!("system-cert\n{CERT}"));
        assert_eq!(appended(&once, &extra), None);
        assert_eq!(appended("", &extra).unwrap(), CERT);
    }

    #[test]
    fn variables_are_set_only_with_extra_certificates() {
        assert!(ca_env(None).is_empty());
        let env = ca_env(Some(&ExtraCaCerts::parse(CERT).unwrap()));
        assert_eq!(env.len(), 5);
        assert!(env.values().all(|v| v == SYSTEM_BUNDLE));
    }
}
