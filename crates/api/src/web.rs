//! What browsers see of a server: its public URLs, the hosts each listener answers for, and
//! how preview URLs are made, from the flags that say so. The binary and the test harness
//! both build their settings here, so what the flags mean is tested as it runs.

use crate::guard::HostPolicy;
use crate::preview::{PreviewDomain, PreviewKey, PreviewSettings};
use std::net::SocketAddr;

/// The flags (`--public-url` and `--preview-public-url` already resolved against the
/// listeners' addresses).
pub struct WebOptions<'a> {
    pub preview_key: PreviewKey,
    pub public_url: String,
    pub preview_public_url: String,
    /// `--preview-domain`, as given.
    pub preview_domain: Option<&'a str>,
    /// `--e2b-domain`: E2B sandbox hosts under it reach the API listener.
    pub e2b_domain: Option<&'a str>,
    /// `--allowed-hosts`, as given.
    pub allowed_hosts: &'a [String],
}

/// The settings of the API's and the previews' listeners.
pub struct WebSettings {
    pub public_url: String,
    pub hosts: HostPolicy,
    pub preview: PreviewSettings,
    pub preview_hosts: HostPolicy,
}

/// The settings for listeners bound to `api` and `preview`; a flag that does not parse is an
/// error naming it.
pub fn web_settings(
    o: WebOptions<'_>,
    api: SocketAddr,
    preview: SocketAddr,
) -> Result<WebSettings, String> {
    let domain = o.preview_domain.map(PreviewDomain::parse).transpose()?;
    let mut hosts = HostPolicy::new(api, &[&o.public_url], o.allowed_hosts)
        .map_err(|e| format!("--public-url or --allowed-hosts: {e}"))?;
    if let Some(d) = o.e2b_domain {
        hosts = hosts.with_subdomains_of(d);
    }
    let mut preview_hosts = HostPolicy::new(preview, &[&o.preview_public_url], o.allowed_hosts)
        .map_err(|e| format!("--preview-public-url: {e}"))?;
    if let Some(d) = &domain {
        preview_hosts = preview_hosts.with_subdomains_of(&d.domain);
    }
    Ok(WebSettings {
        public_url: o.public_url,
        hosts,
        preview: PreviewSettings {
            key: o.preview_key,
            public_url: o.preview_public_url,
            domain,
        },
        preview_hosts,
    })
}
