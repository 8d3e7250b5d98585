//! What crosses the proxy in headers, each way.
//!
//! Invariants:
//! * **No credential of the control plane reaches sandbox code**: no cookie whose name is in
//!   our namespace (`sa_…`, which holds the sign-in session, and Kratos' `ory_…`), no
//!   `Authorization` carrying an API key or the shared token. Browsers send cookies to every
//!   port of a host, so a preview on the API's host but another port would otherwise get the
//!   operator's session.
//! * **No sandbox sets a cookie in our namespace**: `Set-Cookie` answers naming `sa_…` or
//!   `ory_…` are dropped, so a preview cannot plant a session for the API on a shared host.
//! * No preview widens a service worker's scope (`Service-Worker-Allowed`) or clears the
//!   origin's data (`Clear-Site-Data`): on the shared path origin both would reach the
//!   other previews.
//! * Hop-by-hop headers are never forwarded; only WebSocket upgrades are.

use crate::authenticator::Auth;
use axum::http::{header, HeaderMap, HeaderName, HeaderValue, Uri};

/// Cookie name prefixes that belong to the control plane.
const OUR_COOKIES: [&str; 2] = ["sa_", "ory_"];

fn is_ours(cookie_name: &str) -> bool {
    let name = cookie_name.trim().to_ascii_lowercase();
    OUR_COOKIES.iter().any(|p| name.starts_with(p))
}

/// A WebSocket handshake: `Connection: upgrade` and `Upgrade: websocket`. Other upgrades are
/// not forwarded.
pub fn wants_websocket(h: &HeaderMap) -> bool {
    let has = |name: HeaderName, token: &str| {
        h.get_all(name)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .any(|v| v.split(',').any(|t| t.trim().eq_ignore_ascii_case(token)))
    };
    has(header::CONNECTION, "upgrade") && has(header::UPGRADE, "websocket")
}

#[rustfmt::skip]
const HOP_BY_HOP: [&str; 9] = [
    "connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "proxy-connection",
    "te", "trailer", "transfer-encoding", "upgrade",
];

/// Removes hop-by-hop headers: the fixed set and whatever `Connection` names.
pub fn strip_hop_by_hop(h: &mut HeaderMap) {
    let named: Vec<String> = h
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(',').map(|t| t.trim().to_ascii_lowercase()))
        .collect();
    for name in HOP_BY_HOP
        .iter()
        .copied()
        .chain(named.iter().map(String::as_str))
    {
        h.remove(name);
    }
}

/// The public side of a proxied request, as `X-Forwarded-*` tells the sandbox.
pub struct Forwarded<'a> {
    /// The port in the sandbox: `Host` becomes `localhost:<port>` (dev servers refuse
    /// unknown hosts).
    pub port: u16,
    /// The path prefix the browser sees before the sandbox's own paths (`""` on a preview
    /// domain).
    pub prefix: &'a str,
    pub peer: Option<std::net::IpAddr>,
    pub proto: &'a str,
}

/// The headers the sandbox sees: the browser's, less hop-by-hop ones and the control plane's
/// credentials, with `Host` naming the service itself and `X-Forwarded-*` describing the
/// public side.
pub fn upstream(
    incoming: &HeaderMap,
    uri: &Uri,
    upgrade: bool,
    auth: &Auth,
    fwd: &Forwarded<'_>,
) -> HeaderMap {
    let mut h = incoming.clone();
    strip_hop_by_hop(&mut h);
    if upgrade {
        h.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
        h.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
    }
    let ours = h
        .get_all(header::AUTHORIZATION)
        .iter()
        .any(|v| v.to_str().map_or(true, |v| auth.is_our_credential(v)));
    if ours {
        h.remove(header::AUTHORIZATION);
    }
    let cookies: Vec<String> = h
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';').map(str::trim))
        .filter(|c| !c.is_empty() && !is_ours(c.split('=').next().unwrap_or("")))
        .map(str::to_owned)
        .collect();
    h.remove(header::COOKIE);
    if !cookies.is_empty() {
        if let Ok(v) = HeaderValue::try_from(cookies.join("; ")) {
            h.insert(header::COOKIE, v);
        }
    }
    let public_host = h.get(header::HOST).cloned().or_else(|| {
        uri.authority()
            .and_then(|a| HeaderValue::try_from(a.as_str()).ok())
    });
    let host =
        HeaderValue::try_from(format!("localhost:{}", fwd.port)).expect("a valid header value");
    h.insert(header::HOST, host);
    if let Some(ip) = fwd.peer {
        let xff = match h.get("x-forwarded-for").and_then(|v| v.to_str().ok()) {
            Some(prev) => format!("{prev}, {ip}"),
            None => ip.to_string(),
        };
        if let Ok(v) = HeaderValue::try_from(xff) {
            h.insert("x-forwarded-for", v);
        }
    }
    if !h.contains_key("x-forwarded-proto") {
        if let Ok(v) = HeaderValue::try_from(fwd.proto) {
            h.insert("x-forwarded-proto", v);
        }
    }
    if let Some(host) = public_host.filter(|_| !h.contains_key("x-forwarded-host")) {
        h.insert("x-forwarded-host", host);
    }
    if !fwd.prefix.is_empty() {
        if let Ok(v) = HeaderValue::try_from(fwd.prefix) {
            h.insert("x-forwarded-prefix", v);
        }
    }
    h
}

/// The sandbox's answer headers as the browser gets them: no hop-by-hop headers, no cookie in
/// our namespace, and redirects to the service's own root kept under the preview prefix.
pub fn downstream(h: &mut HeaderMap, port: u16, prefix: &str) {
    strip_hop_by_hop(h);
    // A service worker may never claim more than its own preview (on the shared path origin
    // it would see every other preview the browser opens), and no preview may wipe the
    // origin's storage for the others.
    h.remove("service-worker-allowed");
    h.remove("clear-site-data");
    let kept: Vec<HeaderValue> = h
        .get_all(header::SET_COOKIE)
        .iter()
        .filter(|v| {
            // A nameless cookie (`=sa_session=x`) some browsers read as a name: dropped too.
            let name = v.to_str().ok().and_then(|v| v.split('=').next());
            name.is_some_and(|n| !(n.trim().is_empty() || is_ours(n)))
        })
        .cloned()
        .collect();
    h.remove(header::SET_COOKIE);
    for v in kept {
        h.append(header::SET_COOKIE, v);
    }
    if let Some(loc) = h.get(header::LOCATION).and_then(|v| v.to_str().ok()) {
        let upstream_origin = format!("http://localhost:{port}");
        let rewritten = if loc.starts_with('/') && !loc.starts_with("//") {
            Some(format!("{prefix}{loc}"))
        } else {
            loc.strip_prefix(&upstream_origin)
                .map(|p| format!("{prefix}{}", if p.is_empty() { "/" } else { p }))
        };
        if let Some(v) = rewritten.and_then(|v| HeaderValue::try_from(v).ok()) {
            h.insert(header::LOCATION, v);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn our_credentials_never_go_upstream() {
        let auth = Auth::new(Some("the-shared-token"));
        let fwd = Forwarded {
            port: 8080,
            prefix: "/preview/x",
            peer: None,
            proto: "http",
        };
        let mut h = HeaderMap::new();
        h.insert(
            header::COOKIE,
            HeaderValue::from_static("sa_session=abc; theme=dark; SA_csrf=1; ory_kratos=x"),
        );
        h.insert(
            header::AUTHORIZATION,
            HeaderValue::from_static("Bearer the-shared-token"),
        );
        let up = upstream(&h, &Uri::from_static("/"), false, &auth, &fwd);
        assert_eq!(up[header::COOKIE], "theme=dark");
        assert!(!up.contains_key(header::AUTHORIZATION));
        h.insert(
            header::AUTHORIZATION,
            HeaderValue::from_static("bearer ak_x"),
        );
        assert!(!upstream(&h, &Uri::from_static("/"), false, &auth, &fwd)
            .contains_key(header::AUTHORIZATION));
        h.insert(
            header::AUTHORIZATION,
            HeaderValue::from_static("Basic dXNlcg=="),
        );
        let up = upstream(&h, &Uri::from_static("/"), false, &auth, &fwd);
        assert_eq!(
            up[header::AUTHORIZATION],
            "Basic dXNlcg==",
            "the app's own stays"
        );

        let mut down = HeaderMap::new();
        down.append(
            header::SET_COOKIE,
            HeaderValue::from_static("sa_session=planted; Path=/"),
        );
        down.append(
            header::SET_COOKIE,
            HeaderValue::from_static("app=1; Path=/"),
        );
        downstream(&mut down, 8080, "/preview/x");
        let set: Vec<_> = down.get_all(header::SET_COOKIE).iter().collect();
        assert_eq!(set, ["app=1; Path=/"]);
    }
}
