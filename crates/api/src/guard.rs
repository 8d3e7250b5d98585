//! Guards in front of every route against requests a browser was tricked into sending: DNS
//! rebinding (a hostile name that resolves to this server), cross-site requests (a page on
//! another origin, a sandbox's preview included, posting to the API), and the headers every
//! page of ours carries.
//!
//! Invariants:
//! * **The `Host` names this server.** IP literals cannot be rebound, so any is accepted;
//!   names must be loopback names (`localhost`, `*.localhost`, which browsers resolve to
//!   loopback themselves), the public URLs' hosts, or listed in `--allowed-hosts`. Anything
//!   else is a 421 before any handler, credential check or database query runs.
//! * **State changes come from our own pages or from non-browsers.** A request other than
//!   GET, HEAD or OPTIONS that carries an `Origin` must name this server's own origin (the
//!   public URL's, the loopback names' or the allowed hosts' at the server's port, or exactly
//!   the origin the request was sent to), and a `Sec-Fetch-Site` of `cross-site` or
//!   `same-site` is refused whatever the `Origin`: previews on another port of the same host
//!   are same-site. Clients such as the published one send neither header.
//! * There is no CORS allowance, so the custom header the auth layer asks of cookie sessions
//!   cannot be sent by another origin without a preflight that fails.

// The checks' `Err` is the refusal itself, a response built once and sent at once: boxing it
// would only move it to the heap.
#![allow(clippy::result_large_err)]

use crate::error::ApiError;
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

// The text of `HTML_CSP`, for `concat!`.
macro_rules! html_csp {
    () => {
        "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; \
img-src 'self' data: blob:; font-src 'self' data:; connect-src 'self'; worker-src 'self' blob:; \
object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
    };
}
/// The policy of HTML pages (the web UI, the reference, the account pages): scripts only from
/// our own files (no inline script, no eval), requests only to this origin, nothing framing
/// us. Inline styles stay allowed: the reference page's renderer and the UI's component
/// library inject style tags at run time. `blob:` images and workers are the UI's own
/// (downloads previewed, editors' workers). What may be framed is added by [`page_csp`]:
/// only previews.
pub const HTML_CSP: &str = html_csp!();

/// [`HTML_CSP`] with `frame-src` naming the previews' origins (`'none'` without any): a page
/// of ours may frame a sandbox's preview, never anything else.
pub fn page_csp(frame_sources: &[String]) -> HeaderValue {
    let frames = if frame_sources.is_empty() {
        "'none'".to_owned()
    } else {
        frame_sources.join(" ")
    };
    HeaderValue::from_str(&format!("{HTML_CSP}; frame-src {frames}"))
        .unwrap_or_else(|_| HeaderValue::from_static(HTML_CSP_NO_FRAMES))
}

const HTML_CSP_NO_FRAMES: &str = concat!(html_csp!(), "; frame-src 'none'");

/// What the API listener's guard checks, and the policy its pages carry.
#[derive(Clone, Debug)]
pub struct Guard {
    pub hosts: Arc<HostPolicy>,
    /// [`page_csp`] for this deployment's previews.
    pub page_csp: HeaderValue,
}

/// Everything else (JSON, event streams, styles, images) is never a document.
const NON_HTML_CSP: &str = "default-src 'none'; frame-ancestors 'none'";

/// The hosts and origins a listener answers for.
#[derive(Clone, Debug, Default)]
pub struct HostPolicy {
    /// Exact host names, lowercase, without a port.
    names: Vec<String>,
    /// Domains whose subdomains are accepted too (`.example.com` in `--allowed-hosts`, and the
    /// preview domain).
    suffixes: Vec<String>,
    /// `*` in `--allowed-hosts`: the check is off (a proxy in front validates hosts).
    any: bool,
    /// Origins whose pages may change state, normalised (see [`Origin`]).
    origins: Vec<Origin>,
}

impl HostPolicy {
    /// The policy of a listener bound to `bind`, reached at `public_urls`, with `extra` hosts
    /// from `--allowed-hosts` (`name`, `.domain` for it and its subdomains, or `*`).
    pub fn new(bind: SocketAddr, public_urls: &[&str], extra: &[String]) -> Result<Self, String> {
        let mut p = HostPolicy {
            names: vec!["localhost".into()],
            suffixes: vec![".localhost".into()],
            ..Default::default()
        };
        for raw in extra {
            let h = raw.trim().to_ascii_lowercase();
            match h.as_str() {
                "" => {}
                "*" => p.any = true,
                _ if h.contains(['/', ':', ' ']) && h.parse::<IpAddr>().is_err() => {
                    return Err(format!(
                        "--allowed-hosts: '{raw}' is not a host name (no scheme, port or path)"
                    ))
                }
                // `.example.com`: the domain itself and every name under it.
                _ if h.starts_with('.') => {
                    p.names.push(h[1..].to_owned());
                    p.suffixes.push(h);
                }
                _ => p.names.push(h),
            }
        }
        for url in public_urls {
            let o = Origin::parse(url)
                .ok_or_else(|| format!("'{url}' is not an http(s) URL with a host"))?;
            p.names.push(o.host.clone());
            p.origins.push(o);
        }
        let port = bind.port();
        let mut local: Vec<String> = vec!["localhost".into(), "127.0.0.1".into(), "[::1]".into()];
        if !bind.ip().is_unspecified() {
            local.push(match bind.ip() {
                IpAddr::V4(v4) => v4.to_string(),
                IpAddr::V6(v6) => format!("[{v6}]"),
            });
        }
        local.extend(p.names.iter().cloned());
        for host in local {
            for scheme in ["http", "https"] {
                p.origins.push(Origin {
                    scheme: scheme.into(),
                    host: host.clone(),
                    port,
                });
            }
        }
        Ok(p)
    }

    /// Also accepts every subdomain of `domain` (the preview domain).
    pub fn with_subdomains_of(mut self, domain: &str) -> Self {
        self.suffixes.push(format!(
            ".{}",
            domain.trim_start_matches('.').to_ascii_lowercase()
        ));
        self
    }

    /// Whether `host` (a `Host` header: name or address, optional port) is answered for.
    pub fn allows_host(&self, host: &str) -> bool {
        if self.any {
            return true;
        }
        let Some((name, _)) = split_host(host) else {
            return false;
        };
        if name.starts_with('[') || name.parse::<IpAddr>().is_ok() {
            return true; // split_host let only a real IPv6 address keep its brackets
        }
        self.names.contains(&name) || self.suffixes.iter().any(|s| name.ends_with(s.as_str()))
    }

    /// Whether a page of `origin` may change state through a request sent to `host`.
    fn allows_origin(&self, origin: &str, host: &str) -> bool {
        let Some(o) = Origin::parse(origin).filter(|_| origin.matches('/').count() == 2) else {
            return false;
        };
        if self.origins.contains(&o) {
            return true;
        }
        // The origin the browser sent this very request to: a page of ours behind a name or
        // proxy the policy was not told about, with the Host check already passed.
        split_host(host).is_some_and(|(name, port)| {
            name == o.host && port.unwrap_or_else(|| default_port(&o.scheme)) == o.port
        })
    }
}

/// `scheme://host:port`, lowercase, with the scheme's default port made explicit.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Origin {
    scheme: String,
    host: String,
    port: u16,
}

impl Origin {
    /// The origin of an http(s) URL (anything after the authority is ignored).
    fn parse(url: &str) -> Option<Origin> {
        let (scheme, rest) = url.split_once("://")?;
        let scheme = scheme.to_ascii_lowercase();
        if scheme != "http" && scheme != "https" {
            return None;
        }
        let authority = rest.split(['/', '?', '#']).next()?;
        if authority.contains('@') {
            return None;
        }
        let (host, port) = split_host(authority)?;
        Some(Origin {
            port: port.unwrap_or_else(|| default_port(&scheme)),
            scheme,
            host,
        })
    }
}

fn default_port(scheme: &str) -> u16 {
    if scheme == "https" {
        443
    } else {
        80
    }
}

/// A `Host`-style authority as (lowercase host, port): a name, an IPv4 address, or an IPv6
/// address in brackets (kept with them). Userinfo, and brackets around anything but an IPv6
/// address, are no host at all.
pub(crate) fn split_host(authority: &str) -> Option<(String, Option<u16>)> {
    let authority = authority.trim();
    if authority.contains('@') {
        return None;
    }
    let a: axum::http::uri::Authority = authority.parse().ok()?;
    let host = a.host().to_ascii_lowercase();
    if host.is_empty() {
        return None;
    }
    if let Some(inner) = host.strip_prefix('[') {
        inner
            .strip_suffix(']')?
            .parse::<std::net::Ipv6Addr>()
            .ok()?;
    }
    Some((host, a.port_u16()))
}

/// The host a request was sent to: `Host`, or the URI's authority (HTTP/2).
fn request_host(req: &Request) -> Option<String> {
    req.headers()
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
        .or_else(|| req.uri().authority().map(|a| a.as_str().to_owned()))
}

/// 400 without a host, 421 for one this listener does not answer for.
pub fn check_host(policy: &HostPolicy, req: &Request) -> Result<(), Response> {
    let Some(host) = request_host(req) else {
        return Err(ApiError::BadRequest("the request names no Host".into()).into_response());
    };
    if policy.allows_host(&host) {
        return Ok(());
    }
    tracing::info!(host = %host, "refused a request for a host this server does not answer for");
    Err(ApiError::MisdirectedRequest(format!(
        "this server does not answer for the host '{}'; if it is this server's name, add it to \
         --allowed-hosts (SANDBOX_AGENTS_ALLOWED_HOSTS) or --public-url",
        host.chars().take(200).collect::<String>()
    ))
    .into_response())
}

/// Whether the method may change state.
pub fn changes_state(method: &Method) -> bool {
    !matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS)
}

/// Whether the request asks to become a WebSocket (HTTP/1.1 `Upgrade: websocket`; over
/// HTTP/2 it is a CONNECT, which is a change anyway).
fn is_websocket(req: &Request) -> bool {
    req.headers()
        .get(header::UPGRADE)
        .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"websocket"))
}

/// 403 for a request a page of another origin (or site) sent: any that changes state, and
/// any other that is not a navigation (an `<img>`, a `fetch`, a beacon: nothing another site
/// needs, and each would spend this caller's rate limit).
fn check_cross_site(policy: &HostPolicy, req: &Request) -> Result<(), Response> {
    let h = req.headers();
    let refuse = |why: String| {
        tracing::info!(reason = %why, "refused a cross-site request");
        Err(ApiError::Forbidden(why).into_response())
    };
    let site = h.get("sec-fetch-site").and_then(|v| v.to_str().ok());
    let other_site = site.is_some_and(|s| {
        s.eq_ignore_ascii_case("cross-site") || s.eq_ignore_ascii_case("same-site")
    });
    // A WebSocket opens with a GET, but what it carries (a terminal) acts: its Origin is
    // checked as a change's is. Browsers always send one with an upgrade, and a page cannot
    // put a header on it, so the cookie's CSRF header cannot be asked for.
    if !changes_state(req.method()) && !is_websocket(req) {
        let navigation = h
            .get("sec-fetch-mode")
            .is_some_and(|m| m.as_bytes().eq_ignore_ascii_case(b"navigate"));
        if other_site && !navigation {
            return refuse(format!(
                "cross-site request refused: pages of other sites may only link to this server \
                 (Sec-Fetch-Site: {})",
                site.unwrap_or_default()
            ));
        }
        return Ok(());
    }
    if let Some(origin) = h.get(header::ORIGIN) {
        let origin = origin.to_str().unwrap_or("");
        let host = request_host(req).unwrap_or_default();
        if !policy.allows_origin(origin, &host) {
            return refuse(format!(
                "cross-site request refused: a page of origin '{}' may not change this server's \
                 state (only this server's own pages and clients that send no Origin may); if \
                 that is this server's own address behind a proxy, set --public-url to it",
                origin.chars().take(200).collect::<String>()
            ));
        }
    }
    if other_site {
        return refuse(format!(
            "cross-site request refused: the browser says this request comes from another \
             site or origin (Sec-Fetch-Site: {})",
            site.unwrap_or_default()
        ));
    }
    Ok(())
}

/// The API listener's guard: host, cross-site checks, then the security headers on whatever
/// the route answered.
pub async fn layer(State(guard): State<Arc<Guard>>, req: Request, next: Next) -> Response {
    let policy = &guard.hosts;
    if let Err(r) = check_host(policy, &req).and_then(|()| check_cross_site(policy, &req)) {
        return with_headers(r, &guard.page_csp);
    }
    with_headers(next.run(req).await, &guard.page_csp)
}

/// [`with_headers`] with the pages' policy that frames nothing (the previews' listener).
pub fn with_security_headers(resp: Response) -> Response {
    with_headers(resp, &HeaderValue::from_static(HTML_CSP_NO_FRAMES))
}

/// `nosniff`, no referrer, no framing, no embedding by other origins, and a content security
/// policy: `page_csp` for HTML pages and scripts (a worker runs under its script's policy),
/// the one that allows nothing for everything else.
pub fn with_headers(mut resp: Response, page_csp: &HeaderValue) -> Response {
    let page = is_page_or_script(resp.headers());
    let h = resp.headers_mut();
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(
        "cross-origin-resource-policy",
        HeaderValue::from_static("same-origin"),
    );
    // A 304 carries no body and no content type, and the browser merges its headers into the
    // response it stored: a policy here would replace the page's own (an index.html
    // revalidated with its ETag would come back allowing nothing). Without one, the stored
    // policy stands.
    if resp.status() == axum::http::StatusCode::NOT_MODIFIED {
        return resp;
    }
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        if page {
            page_csp.clone()
        } else {
            HeaderValue::from_static(NON_HTML_CSP)
        },
    );
    resp
}

fn is_page_or_script(h: &HeaderMap) -> bool {
    let Some(v) = h.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()) else {
        return false;
    };
    let v = v.trim_start().to_ascii_lowercase();
    ["text/html", "text/javascript", "application/javascript"]
        .iter()
        .any(|t| v.starts_with(t))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> HostPolicy {
        HostPolicy::new(
            "127.0.0.1:8000".parse().unwrap(),
            &["https://agents.example.com"],
            &["ops.internal".into(), ".corp.example".into()],
        )
        .unwrap()
    }

    #[test]
    fn hosts_are_addresses_loopback_names_public_hosts_and_listed_ones() {
        let p = policy();
        for ok in [
            "127.0.0.1:8000",
            "10.1.2.3",
            "[::1]:8000",
            "localhost:8000",
            "LOCALHOST",
            "ui.localhost:8000",
            "agents.example.com",
            "ops.internal:8000",
            "a.corp.example",
            "corp.example",
        ] {
            assert!(p.allows_host(ok), "{ok}");
        }
        for bad in [
            "evil.example",
            "agents.example.com.evil.example",
            "localhost.evil.example",
            "corp.example.evil",
            "",
            "a b",
            "[evil]",
            "[evil]:8000",
            "evil.example@localhost",
            "localhost.",
        ] {
            assert!(!p.allows_host(bad), "{bad}");
        }
        let any = HostPolicy::new("0.0.0.0:1".parse().unwrap(), &[], &["*".into()]).unwrap();
        assert!(any.allows_host("whatever.example"));
        assert!(HostPolicy::new("0.0.0.0:1".parse().unwrap(), &[], &["http://x".into()]).is_err());
    }

    #[test]
    fn origins_are_our_own_or_the_one_the_request_went_to() {
        let p = policy();
        for (origin, host) in [
            ("http://127.0.0.1:8000", "127.0.0.1:8000"),
            ("http://localhost:8000", "127.0.0.1:8000"),
            ("https://agents.example.com", "127.0.0.1:8000"),
            ("https://agents.example.com:443", "127.0.0.1:8000"),
            ("http://192.168.1.4:8000", "192.168.1.4:8000"),
            ("https://a.corp.example", "a.corp.example"),
        ] {
            assert!(p.allows_origin(origin, host), "{origin} -> {host}");
        }
        for (origin, host) in [
            ("http://127.0.0.1:8001", "127.0.0.1:8000"),
            ("http://evil.example", "127.0.0.1:8000"),
            ("http://192.168.1.4:8000", "127.0.0.1:8000"),
            ("null", "127.0.0.1:8000"),
            ("http://agents.example.com", "127.0.0.1:8000"),
            ("https://agents.example.com/x", "127.0.0.1:8000"),
            ("", "127.0.0.1:8000"),
        ] {
            assert!(!p.allows_origin(origin, host), "{origin} -> {host}");
        }
    }
}
