//! Port previews: `/preview/{token}/…` reverse-proxies a browser to a service listening inside
//! a session's sandbox, WebSockets included (API.md §2.6, §8.1).
//!
//! Security invariants:
//! * **The token is the only authority, and it binds one session to one port.** It reads
//!   `<session uuid, simple>-<port>-<first 32 hex of HMAC-SHA256(key, "<session uuid>:<port>")>`.
//!   Nobody without the server key can mint one, and changing the session or the port breaks
//!   the MAC, so one session's URL never reaches another session or another port. The MAC is
//!   checked in constant time. This is why the session is read by id in any project.
//! * **Upstreams are only ever `127.0.0.1:<host port>`**, the host port read from the
//!   session's `port_map` (which the runtime wrote when Docker published the port), never
//!   from the request.
//! * **On every request the port must be in `exposed_ports` and the session running**: a
//!   token outlives a stop, the check does not.
//! * **Upstream connections are never reused**: a host port freed by one sandbox can be
//!   published by another's, so a kept-alive connection could reach the wrong session.
//! * The control plane's own credentials (`Authorization: Bearer ak_…`, Kratos `ory_`
//!   cookies) are not forwarded to sandbox code. Previews share the control plane's origin
//!   unless `public_url` names a host of their own; browser-facing deployments should give
//!   them one.

use crate::error::ApiError;
use crate::state::{ApiSettings, AppState};
use axum::body::Body;
use axum::extract::connect_info::ConnectInfo;
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderName, HeaderValue, StatusCode, Uri, Version};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::any;
use axum::{Json, Router};
use hmac::{Hmac, Mac};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use sandbox_agents_domain::SessionId;
use sandbox_agents_store::sessions::{self, SessionRecord};
use sha2::Sha256;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use uuid::Uuid;

/// Hex characters of the MAC kept in a token (128 bits).
const MAC_HEX: usize = 32;
/// A proxied session's `last_used_at` is written at most this often.
const TOUCH_EVERY: Duration = Duration::from_secs(5);
/// How often an open WebSocket tunnel counts as use.
const TUNNEL_TOUCH_EVERY: Duration = Duration::from_secs(30);

/// The key that signs preview tokens. Every process of a deployment must hold the same one;
/// Debug never shows it.
#[derive(Clone)]
pub struct PreviewKey(Arc<[u8]>);

impl std::fmt::Debug for PreviewKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PreviewKey(***)")
    }
}

impl PreviewKey {
    /// A key from secret bytes (e.g. `SANDBOX_AGENTS_PREVIEW_KEY`); at least 32 of them.
    pub fn new(bytes: impl Into<Vec<u8>>) -> Result<Self, String> {
        let bytes = bytes.into();
        if bytes.len() < 32 {
            return Err(format!(
                "the preview key is {} bytes long; use at least 32 random bytes (e.g. `openssl rand -hex 32`)",
                bytes.len()
            ));
        }
        Ok(PreviewKey(bytes.into()))
    }

    /// A fresh random key, for tests and single-process tools.
    pub fn random() -> Self {
        PreviewKey(random_bytes().expect("the OS random source works").into())
    }

    /// The key in `path`, created on first use (32 random bytes, mode 0600). Concurrent first
    /// starts agree: each writes a private temp file and hard-links it into place, and whoever
    /// loses reads the winner's key.
    pub fn load_or_create(path: &Path) -> std::io::Result<Self> {
        use std::io::{Error, ErrorKind, Write};
        use std::os::unix::fs::OpenOptionsExt;
        let read = |path: &Path| {
            PreviewKey::new(std::fs::read(path)?)
                .map_err(|e| Error::new(ErrorKind::InvalidData, format!("{}: {e}", path.display())))
        };
        match read(path) {
            Err(e) if e.kind() == ErrorKind::NotFound => {}
            other => return other,
        }
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let tmp = path.with_extension(format!("tmp-{}", Uuid::new_v4().simple()));
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)?;
        f.write_all(&random_bytes()?)?;
        f.sync_all()?;
        let linked = std::fs::hard_link(&tmp, path);
        let _ = std::fs::remove_file(&tmp);
        match linked {
            Err(e) if e.kind() != ErrorKind::AlreadyExists => Err(e),
            _ => read(path),
        }
    }

    fn mac(&self, session: Uuid, port: u16) -> Hmac<Sha256> {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.0).expect("HMAC takes any key length");
        mac.update(format!("{session}:{port}").as_bytes());
        mac
    }

    /// The URL-safe token for `port` of `session`.
    pub fn token(&self, session: SessionId, port: u16) -> String {
        let tag = hex::encode(self.mac(session.0, port).finalize().into_bytes());
        format!("{}-{port}-{}", session.0.simple(), &tag[..MAC_HEX])
    }

    /// The session and port a token names, when this key signed it. Only the canonical
    /// spelling is accepted, so each (session, port) has exactly one token.
    pub fn verify(&self, token: &str) -> Option<(SessionId, u16)> {
        let mut parts = token.splitn(3, '-');
        let (id, port, tag) = (parts.next()?, parts.next()?, parts.next()?);
        let session = Uuid::try_parse(id)
            .ok()
            .filter(|u| u.simple().to_string() == id)?;
        let port = port.parse::<u16>().ok().filter(|p| p.to_string() == port)?;
        if tag.len() != MAC_HEX || tag.bytes().any(|b| b.is_ascii_uppercase()) {
            return None;
        }
        let tag = hex::decode(tag).ok()?;
        self.mac(session, port).verify_truncated_left(&tag).ok()?;
        Some((SessionId(session), port))
    }
}

fn random_bytes() -> std::io::Result<[u8; 32]> {
    let mut key = [0u8; 32];
    getrandom::getrandom(&mut key).map_err(|e| std::io::Error::other(e.to_string()))?;
    Ok(key)
}

/// The preview URL of `port` of `session`: `{public_url}/preview/{token}/`.
pub fn url(settings: &ApiSettings, session: SessionId, port: u16) -> String {
    let token = settings.preview_key.token(session, port);
    format!(
        "{}/preview/{token}/",
        settings.public_url.trim_end_matches('/')
    )
}

/// The 409 for a session whose sandbox is not up, worded as the runtime words it.
pub fn not_running(s: &SessionRecord) -> ApiError {
    let state = match s.stopped_reason.as_deref() {
        Some(r) if s.status == "stopped" => format!("stopped, {r}"),
        _ => s.status.clone(),
    };
    ApiError::Conflict(format!(
        "session is not running (it is {state}); start it first"
    ))
}

/// What every proxied request shares: the upstream client and the touch throttle.
struct Proxy {
    client: Client<HttpConnector, Body>,
    touched: Mutex<HashMap<Uuid, Instant>>,
}

impl Proxy {
    /// Whether `last_used_at` is due a write; remembers that it is being written.
    fn touch_due(&self, id: Uuid) -> bool {
        let mut touched = self.touched.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        if touched.len() > 4096 {
            touched.retain(|_, t| now.duration_since(*t) < TOUCH_EVERY);
        }
        match touched.get(&id) {
            Some(t) if now.duration_since(*t) < TOUCH_EVERY => false,
            _ => {
                touched.insert(id, now);
                true
            }
        }
    }
}

/// The proxy's routes, outside `/api` and outside the OpenAPI document.
pub fn routes() -> Router<AppState> {
    let mut http = HttpConnector::new();
    http.set_connect_timeout(Some(Duration::from_secs(5)));
    http.set_nodelay(true);
    let proxy = Arc::new(Proxy {
        client: Client::builder(TokioExecutor::new())
            .pool_max_idle_per_host(0)
            .build(http),
        touched: Mutex::default(),
    });
    let handler = move |State(st): State<AppState>, req: Request| {
        let proxy = proxy.clone();
        async move { forward(&st, &proxy, req).await.unwrap_or_else(|e| e) }
    };
    Router::new()
        .route("/preview/{token}", any(bare))
        .route("/preview/{token}/", any(handler.clone()))
        .route("/preview/{token}/{*rest}", any(handler))
}

/// `/preview/{token}` without the slash: relative links need it, so redirect.
async fn bare(State(st): State<AppState>, req: Request) -> Response {
    let token = req.uri().path().trim_start_matches("/preview/");
    let query = req
        .uri()
        .query()
        .map(|q| format!("?{q}"))
        .unwrap_or_default();
    match st.settings.preview_key.verify(token) {
        Some(_) => Redirect::permanent(&format!("/preview/{token}/{query}")).into_response(),
        None => invalid_link(),
    }
}

fn invalid_link() -> Response {
    ApiError::NotFound("this preview link is not valid; ask for a new one with GET /api/sessions/{id}/ports/{port}".into())
        .into_response()
}

fn bad_gateway(detail: String) -> Response {
    (
        StatusCode::BAD_GATEWAY,
        Json(serde_json::json!({ "detail": detail })),
    )
        .into_response()
}

/// Checks the token and the session, then forwards the request and streams the answer back.
#[tracing::instrument(skip_all, fields(session.id, port))]
async fn forward(st: &AppState, proxy: &Proxy, mut req: Request) -> Result<Response, Response> {
    let path = req.uri().path().trim_start_matches("/preview/").to_owned();
    let (token, rest) = path.split_at(path.find('/').unwrap_or(path.len()));
    let (id, port) = st
        .settings
        .preview_key
        .verify(token)
        .ok_or_else(invalid_link)?;
    let prefix = format!("/preview/{token}");
    tracing::Span::current()
        .record("session.id", tracing::field::display(id))
        .record("port", port);
    let s = sessions::get_for_worker(&st.db, id)
        .await
        .map_err(|e| ApiError::from(e).into_response())?
        .ok_or_else(|| {
            ApiError::NotFound(format!("session '{}' not found", id.0)).into_response()
        })?;
    if !s.exposed_ports.contains(&i32::from(port)) {
        return Err(ApiError::NotFound(format!("port {port} is not exposed")).into_response());
    }
    if s.status != "running" {
        return Err(not_running(&s).into_response());
    }
    let not_listening = || {
        bad_gateway(format!(
            "nothing is listening on port {port} in the sandbox"
        ))
    };
    let host_port = *s
        .port_map
        .0
        .get(&port.to_string())
        .ok_or_else(not_listening)?;
    if proxy.touch_due(id.0) {
        if let Err(e) = sessions::touch(&st.db, id).await {
            tracing::warn!(error = %e, "could not record the preview's use of the session");
        }
    }

    let upgrade = wants_websocket(req.headers()).then(|| hyper::upgrade::on(&mut req));
    let (mut parts, body) = req.into_parts();
    let peer = parts
        .extensions
        .get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0.ip());
    let public_proto = st.settings.public_url.split("://").next().unwrap_or("http");
    // `rest` is the raw path after the token, still percent-encoded, and starts with `/`.
    let target = match parts.uri.query() {
        Some(q) => format!("http://127.0.0.1:{host_port}{rest}?{q}"),
        None => format!("http://127.0.0.1:{host_port}{rest}"),
    };
    let headers = upstream_headers(
        &parts.headers,
        &parts.uri,
        upgrade.is_some(),
        port,
        &prefix,
        peer,
        public_proto,
    );
    parts.uri = Uri::try_from(target).map_err(|_| {
        ApiError::BadRequest("the preview path is not a valid URL path".into()).into_response()
    })?;
    parts.headers = headers;
    parts.version = Version::HTTP_11;
    parts.extensions = Default::default();
    // Docker's loopback proxy accepts the connection and then closes it when nothing listens
    // in the container, so a refused connect and a close before any answer look alike.
    let mut resp = proxy
        .client
        .request(Request::from_parts(parts, body))
        .await
        .map_err(|e| {
            tracing::debug!(error = %e, connect = e.is_connect(), "the upstream gave no answer");
            not_listening()
        })?;

    if let (StatusCode::SWITCHING_PROTOCOLS, Some(downstream)) = (resp.status(), upgrade) {
        let upstream = hyper::upgrade::on(&mut resp);
        let (st, id) = (st.clone(), id);
        tokio::spawn(async move {
            match tokio::try_join!(downstream, upstream) {
                Ok((down, up)) => tunnel(&st, id, TokioIo::new(down), TokioIo::new(up)).await,
                Err(e) => tracing::debug!(error = %e, "a preview WebSocket upgrade failed"),
            }
        });
        return Ok(resp.map(|_| Body::empty()));
    }
    strip_hop_by_hop(resp.headers_mut());
    if let Some(loc) = resp
        .headers()
        .get(header::LOCATION)
        .and_then(|v| v.to_str().ok())
    {
        let upstream_origin = format!("http://localhost:{port}");
        let rewritten = if loc.starts_with('/') && !loc.starts_with("//") {
            Some(format!("{prefix}{loc}"))
        } else {
            loc.strip_prefix(&upstream_origin)
                .map(|p| format!("{prefix}{}", if p.is_empty() { "/" } else { p }))
        };
        if let Some(v) = rewritten.and_then(|v| HeaderValue::try_from(v).ok()) {
            resp.headers_mut().insert(header::LOCATION, v);
        }
    }
    Ok(resp.map(Body::new))
}

/// Copies both ways until either side closes or the server shuts down, counting the open
/// tunnel as use of the session.
async fn tunnel(
    st: &AppState,
    id: SessionId,
    mut down: TokioIo<hyper::upgrade::Upgraded>,
    mut up: TokioIo<hyper::upgrade::Upgraded>,
) {
    let copy = tokio::io::copy_bidirectional(&mut down, &mut up);
    tokio::pin!(copy);
    let mut tick = tokio::time::interval(TUNNEL_TOUCH_EVERY);
    tick.tick().await;
    loop {
        tokio::select! {
            r = &mut copy => {
                if let Err(e) = r {
                    tracing::debug!(error = %e, "a preview WebSocket ended with an error");
                }
                return;
            }
            _ = tick.tick() => {
                let _ = sessions::touch(&st.db, id).await;
            }
            () = st.shutdown.cancelled() => return,
        }
    }
}

/// A WebSocket handshake: `Connection: upgrade` and `Upgrade: websocket`. Other upgrades are
/// not forwarded.
fn wants_websocket(h: &HeaderMap) -> bool {
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
fn strip_hop_by_hop(h: &mut HeaderMap) {
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

/// The headers the sandbox sees: the browser's, less hop-by-hop ones and the control plane's
/// credentials, with `Host` naming the service itself (dev servers refuse unknown hosts) and
/// `X-Forwarded-*` describing the public side.
fn upstream_headers(
    incoming: &HeaderMap,
    uri: &Uri,
    upgrade: bool,
    port: u16,
    prefix: &str,
    peer: Option<std::net::IpAddr>,
    public_proto: &str,
) -> HeaderMap {
    let mut h = incoming.clone();
    strip_hop_by_hop(&mut h);
    if upgrade {
        h.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
        h.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
    }
    let ours = |v: &HeaderValue| v.as_bytes().starts_with(b"Bearer ak_");
    if h.get(header::AUTHORIZATION).is_some_and(ours) {
        h.remove(header::AUTHORIZATION);
    }
    let cookies: Vec<String> = h
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';').map(str::trim))
        .filter(|c| !c.is_empty() && !c.starts_with("ory_"))
        .map(str::to_owned)
        .collect();
    h.remove(header::COOKIE);
    if let Ok(v) = HeaderValue::try_from(cookies.join("; ")) {
        if !cookies.is_empty() {
            h.insert(header::COOKIE, v);
        }
    }
    let public_host = h.get(header::HOST).cloned().or_else(|| {
        uri.authority()
            .and_then(|a| HeaderValue::try_from(a.as_str()).ok())
    });
    let host = HeaderValue::try_from(format!("localhost:{port}")).expect("a valid header value");
    h.insert(header::HOST, host);
    if let Some(ip) = peer {
        let xff = match h.get("x-forwarded-for").and_then(|v| v.to_str().ok()) {
            Some(prev) => format!("{prev}, {ip}"),
            None => ip.to_string(),
        };
        if let Ok(v) = HeaderValue::try_from(xff) {
            h.insert("x-forwarded-for", v);
        }
    }
    if !h.contains_key("x-forwarded-proto") {
        if let Ok(v) = HeaderValue::try_from(public_proto) {
            h.insert("x-forwarded-proto", v);
        }
    }
    if let Some(host) = public_host.filter(|_| !h.contains_key("x-forwarded-host")) {
        h.insert("x-forwarded-host", host);
    }
    if let Ok(v) = HeaderValue::try_from(prefix) {
        h.insert("x-forwarded-prefix", v);
    }
    h
}
