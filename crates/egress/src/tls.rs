//! The deployment's egress CA and the TLS of both sides of an intercepted connection.
//!
//! The proxy reads a sandbox's HTTPS traffic only for hosts a credential is bound to (see
//! `intercept`): it answers the sandbox with a certificate for the host signed by this CA,
//! which sandboxes trust (the control plane's extra CA mechanism installs it), and speaks TLS
//! to the real host itself, verifying it against the host's trust store and the operator's
//! extra CA. Every other host is tunnelled untouched, its TLS the sandbox's own.

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType,
};
use rustls::{ClientConfig, RootCertStore, ServerConfig};
use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a host's certificate is used before a new one is made (it is valid for longer).
const LEAF_REUSE: Duration = Duration::from_secs(24 * 3600);
/// Hosts whose certificates are kept at once.
const MAX_LEAVES: usize = 1024;

#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct TlsError(pub String);

fn err(what: &str) -> impl Fn(&dyn std::fmt::Display) -> TlsError + '_ {
    move |e| TlsError(format!("{what}: {e}"))
}

/// The CA's subject: the same in every certificate it issues, so an authority loaded again
/// from its PEM signs exactly as the one that made it.
fn ca_params() -> CertificateParams {
    let mut params = CertificateParams::default();
    let mut dn = DistinguishedName::new();
    dn.push(DnType::OrganizationName, "Sandbox Agents");
    dn.push(DnType::CommonName, "Sandbox Agents egress CA");
    params.distinguished_name = dn;
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    params
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A new CA: its certificate and its key, both PEM (the key is for the caller to seal).
pub fn generate_ca() -> Result<(String, String), TlsError> {
    let key = KeyPair::generate().map_err(|e| err("making the CA's key")(&e))?;
    let mut params = ca_params();
    let now = time::OffsetDateTime::now_utc();
    params.not_before = now - time::Duration::days(1);
    params.not_after = now + time::Duration::days(3650);
    let cert = params
        .self_signed(&key)
        .map_err(|e| err("signing the CA")(&e))?;
    Ok((cert.pem(), key.serialize_pem()))
}

/// The CA, the certificates it made per host, and the upstream trust.
pub struct Authority {
    issuer: Issuer<'static, KeyPair>,
    cert_pem: String,
    cert_der: CertificateDer<'static>,
    leaves: Mutex<HashMap<String, (Arc<ServerConfig>, Instant)>>,
    upstream: Arc<ClientConfig>,
}

impl std::fmt::Debug for Authority {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authority").finish_non_exhaustive()
    }
}

impl Authority {
    /// The CA of `cert_pem` and `key_pem`; real hosts are verified against the host's trust
    /// store and `extra_roots` (the operator's extra CA certificates).
    pub fn load(
        cert_pem: &str,
        key_pem: &str,
        extra_roots: Vec<CertificateDer<'static>>,
    ) -> Result<Self, TlsError> {
        let key = KeyPair::from_pem(key_pem).map_err(|e| err("reading the CA's key")(&e))?;
        let cert_der = rustls_pki_types::pem::PemObject::from_pem_slice(cert_pem.as_bytes())
            .map_err(|e| err("reading the CA's certificate")(&e))?;
        let mut roots = RootCertStore::empty();
        let native = rustls_native_certs::load_native_certs();
        for e in &native.errors {
            tracing::warn!(error = %e, "a certificate of the host's trust store could not be read");
        }
        roots.add_parsable_certificates(native.certs);
        roots.add_parsable_certificates(extra_roots);
        let mut upstream = ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| err("TLS settings")(&e))?
            .with_root_certificates(roots)
            .with_no_client_auth();
        upstream.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Authority {
            issuer: Issuer::new(ca_params(), key),
            cert_pem: cert_pem.to_owned(),
            cert_der,
            leaves: Mutex::default(),
            upstream: Arc::new(upstream),
        })
    }

    /// The CA's certificate (PEM), for sandboxes to trust.
    pub fn cert_pem(&self) -> &str {
        &self.cert_pem
    }

    /// How the proxy speaks to real hosts.
    pub fn upstream(&self) -> Arc<ClientConfig> {
        self.upstream.clone()
    }

    /// How the proxy answers a sandbox for `host`: a certificate for it, made on first use.
    pub fn server_config(&self, host: &str) -> Result<Arc<ServerConfig>, TlsError> {
        let mut leaves = self.leaves.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((config, at)) = leaves.get(host) {
            if at.elapsed() < LEAF_REUSE {
                return Ok(config.clone());
            }
        }
        let config = Arc::new(self.leaf(host)?);
        if leaves.len() >= MAX_LEAVES {
            leaves.clear();
        }
        leaves.insert(host.to_owned(), (config.clone(), Instant::now()));
        Ok(config)
    }

    fn leaf(&self, host: &str) -> Result<ServerConfig, TlsError> {
        let key = KeyPair::generate().map_err(|e| err("making a host's key")(&e))?;
        let mut params = CertificateParams::default();
        let san = match host.parse::<std::net::IpAddr>() {
            Ok(ip) => SanType::IpAddress(ip),
            Err(_) => SanType::DnsName(
                host.to_owned()
                    .try_into()
                    .map_err(|e| err("a host's name")(&e))?,
            ),
        };
        params.subject_alt_names = vec![san];
        params.distinguished_name.push(DnType::CommonName, host);
        let now = time::OffsetDateTime::now_utc();
        params.not_before = now - time::Duration::hours(1);
        params.not_after = now + time::Duration::days(7);
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
        let cert = params
            .signed_by(&key, &self.issuer)
            .map_err(|e| err("signing a host's certificate")(&e))?;
        let chain = vec![cert.der().clone(), self.cert_der.clone()];
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
        let mut config = ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| err("TLS settings")(&e))?
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .map_err(|e| err("a host's certificate")(&e))?;
        // One request at a time, each read and forwarded whole: HTTP/1.1 only.
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(config)
    }
}
