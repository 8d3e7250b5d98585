//! Extra CA certificates (`--extra-ca-certs`): PEM certificates trusted in addition to the
//! system's by the control plane's own clients, by every sandbox and by environment builds.
//! Networks that inspect TLS need this for anything to reach a package index or a git host.

use rustls_pki_types::pem::{PemObject, SectionKind};
use std::sync::Arc;

/// A checked PEM bundle: one or more certificates, nothing else that PEM could hold (a
/// private key in this file would otherwise be copied into every sandbox).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExtraCaCerts {
    pem: Arc<str>,
    count: usize,
}

impl ExtraCaCerts {
    /// Parses `pem`; the reason when it holds no certificate, a malformed one, or any PEM
    /// section that is not a certificate.
    pub fn parse(pem: &str) -> Result<Self, String> {
        let mut count = 0;
        for item in <(SectionKind, Vec<u8>)>::pem_slice_iter(pem.as_bytes()) {
            let (kind, _) = item.map_err(|e| format!("not a valid PEM file: {e}"))?;
            if kind != SectionKind::Certificate {
                return Err(format!(
                    "holds a {kind:?} section; only CERTIFICATE sections belong in a CA file"
                ));
            }
            count += 1;
        }
        if count == 0 {
            return Err("holds no PEM certificate (-----BEGIN CERTIFICATE-----)".into());
        }
        let mut text = pem.trim_end().to_owned();
        text.push('\n');
        Ok(Self {
            pem: text.into(),
            count,
        })
    }

    /// The certificates, as PEM text ending in a newline (ready to append to a bundle).
    pub fn pem(&self) -> &str {
        &self.pem
    }

    /// How many certificates it holds.
    pub fn count(&self) -> usize {
        self.count
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CERT: &str = "-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIUJ5c3p3u7Gm6m8n0fWq6xJ1q9G0wwCgYIKoZIzj0EAwIw\n-----END CERTIFICATE-----\n";

    #[test]
    fn refuses_files_without_certificates_and_keys() {
        assert!(ExtraCaCerts::parse("").is_err());
        assert!(ExtraCaCerts::parse("hello").is_err());
        let key = "-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIJ+DYvh6SEqVTm50DFtMDoQikTmiCqirVv9mWG9qfSnF\n-----END PRIVATE KEY-----\n";
        let err = ExtraCaCerts::parse(&format!("{CERT}{key}")).unwrap_err();
        assert!(err.contains("only CERTIFICATE"), "{err}");
    }

    #[test]
    fn counts_certificates_and_ends_with_a_newline() {
        let ca = ExtraCaCerts::parse(&format!("{CERT}{CERT}")).unwrap();
        assert_eq!(ca.count(), 2);
        assert!(ca.pem().ends_with("-----END CERTIFICATE-----\n"));
    }
}
