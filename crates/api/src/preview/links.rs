//! Where previews are served and how their URLs are made: the settings state holds, and
//! nothing that needs the server's state.

use super::token::PreviewKey;
use sandbox_agents_domain::SessionId;

/// Where previews are served, and what signs them.
#[derive(Clone, Debug)]
pub struct PreviewSettings {
    /// Signs preview tokens; every process of a deployment holds the same one.
    pub key: PreviewKey,
    /// Where browsers reach the preview listener, without a trailing slash: path-mode URLs are
    /// `{public_url}/preview/{token}/`.
    pub public_url: String,
    /// With a preview domain, URLs are `{scheme}://<label>.{domain}[:port]/` instead.
    pub domain: Option<PreviewDomain>,
}

impl PreviewSettings {
    /// Where preview pages come from, as Content-Security-Policy sources for `frame-src` (the
    /// UI shows previews in a frame): the preview listener's public origin, and with a domain
    /// every host directly under it. A URL that is no plain origin is left out.
    pub fn frame_sources(&self) -> Vec<String> {
        let mut out = Vec::new();
        if let Some((scheme, rest)) = self.public_url.split_once("://") {
            let authority = rest.split('/').next().unwrap_or_default();
            let plain = |s: &str| {
                !s.is_empty()
                    && s.bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b".-:[]".contains(&b))
            };
            if (scheme == "http" || scheme == "https") && plain(authority) {
                out.push(format!("{scheme}://{}", authority.to_ascii_lowercase()));
            }
        }
        if let Some(d) = &self.domain {
            let port = d.port.map(|p| format!(":{p}")).unwrap_or_default();
            out.push(format!("{}://*.{}{port}", d.scheme, d.domain));
        }
        out
    }
}

/// `--preview-domain`: a bare domain (`preview.example.com`, served over https) or an origin
/// (`http://preview.localhost:8001`) whose scheme and port the URLs keep.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PreviewDomain {
    pub scheme: String,
    pub domain: String,
    pub port: Option<u16>,
}

impl PreviewDomain {
    pub fn parse(raw: &str) -> Result<Self, String> {
        let bad = || {
            format!("--preview-domain '{raw}' is not a domain (like preview.example.com) or an origin (like https://preview.example.com:8443)")
        };
        let (scheme, rest) = match raw.trim().split_once("://") {
            Some((s, r)) if s == "http" || s == "https" => (s.to_owned(), r),
            Some(_) => return Err(bad()),
            None => ("https".to_owned(), raw.trim()),
        };
        let rest = rest.trim_end_matches('/');
        if rest.contains(['/', '?', '#', '@']) {
            return Err(bad());
        }
        let a: axum::http::uri::Authority = rest.parse().map_err(|_| bad())?;
        let domain = a.host().trim_start_matches('.').to_ascii_lowercase();
        let labels_ok = domain.split('.').all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
        });
        if !labels_ok || domain.parse::<std::net::IpAddr>().is_ok() {
            return Err(bad());
        }
        Ok(PreviewDomain {
            scheme,
            domain,
            port: a.port_u16(),
        })
    }

    /// The label of a `Host` under this domain (one level only), if it is one.
    pub(super) fn label_of(&self, host: &str) -> Option<String> {
        let (name, _) = crate::guard::split_host(host)?;
        let label = name.strip_suffix(&self.domain)?.strip_suffix('.')?;
        (!label.is_empty() && !label.contains('.')).then(|| label.to_owned())
    }
}

/// The preview URL of `port` of `session`, on the preview origin.
pub fn url(settings: &PreviewSettings, session: SessionId, port: u16) -> String {
    match &settings.domain {
        Some(d) => {
            let label = settings.key.host_label(session, port);
            let port = d.port.map(|p| format!(":{p}")).unwrap_or_default();
            format!("{}://{label}.{}{port}/", d.scheme, d.domain)
        }
        None => format!(
            "{}/preview/{}/",
            settings.public_url.trim_end_matches('/'),
            settings.key.token(session, port)
        ),
    }
}
