//! The proxy itself: addressing a request (by host under the preview domain, or by path),
//! checking the session, forwarding, and WebSocket tunnels.

use super::headers;
use super::links::PreviewSettings;
use crate::error::ApiError;
use crate::state::AppState;
use axum::body::Body;
use axum::extract::connect_info::ConnectInfo;
use axum::extract::{Request, State};
use axum::http::{header, StatusCode, Uri, Version};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::any;
use axum::{Json, Router};
use hyper_util::rt::TokioIo;
use sandbox_agents_domain::SessionId;
use sandbox_agents_sandbox::{DaemonIo, PUBLISH_IP};
use sandbox_agents_store::sessions;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use uuid::Uuid;

/// A proxied session's `last_used_at` is written at most this often.
const TOUCH_EVERY: Duration = Duration::from_secs(5);
/// How often an open WebSocket tunnel counts as use.
const TUNNEL_TOUCH_EVERY: Duration = Duration::from_secs(30);
/// How long connecting to a published port may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// What every proxied request shares: the touch throttle.
struct Proxy {
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

/// The preview listener's service: every request is a preview, addressed by host (under the
/// preview domain) or by path (`/preview/{token}/…`).
pub fn router(state: AppState) -> Router {
    let proxy = Arc::new(Proxy {
        touched: Mutex::default(),
    });
    let handler = move |State(st): State<AppState>, req: Request| {
        let proxy = proxy.clone();
        async move {
            if let Err(r) = crate::guard::check_host(&st.settings.preview_hosts, &req) {
                return crate::guard::with_security_headers(r);
            }
            // Answers of our own carry our security headers; the sandbox's answers are its own.
            let ours = match address(&st.settings.preview, &req) {
                Address::Signed(target) if target.prefix.is_empty() || !is_service_worker(&req) => {
                    match forward(&st, &proxy, target, req).await {
                        Ok(theirs) => return theirs,
                        Err(ours) => ours,
                    }
                }
                Address::Signed(_) => ApiError::Forbidden(
                    "service workers are not allowed on the shared preview origin (they would \
                     see every other preview); give previews an origin each with --preview-domain"
                        .into(),
                )
                .into_response(),
                Address::AddSlash(to) => Redirect::permanent(&to).into_response(),
                Address::Invalid => invalid_link(),
            };
            crate::guard::with_security_headers(ours)
        }
    };
    Router::new()
        .fallback(handler)
        .layer(tower_http::trace::TraceLayer::new_for_http())
        .with_state(state)
}

/// `/preview/…` on the API's own listener: previews are not served there.
pub fn moved() -> Router<AppState> {
    let answer = || async {
        ApiError::NotFound(
            "previews are served from an origin of their own, not the API's; ask \
             GET /api/sessions/{id}/ports/{port} for the URL"
                .into(),
        )
    };
    Router::new()
        .route("/preview/{token}", any(answer))
        .route("/preview/{token}/", any(answer))
        .route("/preview/{token}/{*rest}", any(answer))
}

/// A signed preview: which session and port, the prefix the browser sees before the
/// sandbox's own paths, and that rest of the path (raw, starting with `/`).
struct Target {
    id: SessionId,
    port: u16,
    prefix: String,
    rest: String,
}

enum Address {
    Signed(Target),
    /// `/preview/{token}` without the slash: relative links need it.
    AddSlash(String),
    Invalid,
}

fn address(settings: &PreviewSettings, req: &Request) -> Address {
    let uri = req.uri();
    if let Some(domain) = &settings.domain {
        let host = req
            .headers()
            .get(header::HOST)
            .and_then(|v| v.to_str().ok())
            .or_else(|| uri.authority().map(|a| a.as_str()));
        if let Some(label) = host.and_then(|h| domain.label_of(h)) {
            return match settings.key.verify_label(&label) {
                Some((id, port)) => Address::Signed(Target {
                    id,
                    port,
                    prefix: String::new(),
                    rest: uri.path().to_owned(),
                }),
                None => Address::Invalid,
            };
        }
    }
    // With a preview domain every preview has an origin of its own: the shared path origin
    // is not served at all.
    if settings.domain.is_some() {
        return Address::Invalid;
    }
    let Some(path) = uri.path().strip_prefix("/preview/") else {
        return Address::Invalid;
    };
    let (token, rest) = path.split_at(path.find('/').unwrap_or(path.len()));
    let Some((id, port)) = settings.key.verify(token) else {
        return Address::Invalid;
    };
    if rest.is_empty() {
        let query = uri.query().map(|q| format!("?{q}")).unwrap_or_default();
        return Address::AddSlash(format!("/preview/{token}/{query}"));
    }
    Address::Signed(Target {
        id,
        port,
        prefix: format!("/preview/{token}"),
        rest: rest.to_owned(),
    })
}

/// The fetch of a service worker's script (`navigator.serviceWorker.register`).
fn is_service_worker(req: &Request) -> bool {
    req.headers()
        .get("service-worker")
        .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"script"))
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

/// Checks the session, then forwards the request and streams the answer back.
#[tracing::instrument(skip_all, fields(session.id = %t.id, port = t.port))]
async fn forward(
    st: &AppState,
    proxy: &Proxy,
    t: Target,
    mut req: Request,
) -> Result<Response, Response> {
    let Target {
        id,
        port,
        prefix,
        rest,
    } = t;
    let s = sessions::get_for_worker(&st.db, id)
        .await
        .map_err(|e| ApiError::from(e).into_response())?
        .ok_or_else(|| {
            ApiError::NotFound(format!("session '{}' not found", id.0)).into_response()
        })?;
    if !s.exposed_ports.contains(&i32::from(port)) {
        return Err(ApiError::NotFound(format!("port {port} is not exposed")).into_response());
    }
    sandbox_agents_sessions::require_running(&s).map_err(|e| ApiError::from(e).into_response())?;
    let not_listening = || {
        bad_gateway(format!(
            "nothing is listening on port {port} in the sandbox"
        ))
    };
    // A port the backend published has an address; one of a sandbox without a network of
    // its own (behind the egress proxy) is reached on the sandbox's loopback, through the
    // backend.
    let upstream = match (s.port_map.0.get(&port.to_string()), &s.sandbox_id) {
        (Some(target), _) => Upstream::Address(target.addr(PUBLISH_IP)),
        (None, Some(sandbox)) => Upstream::Sandbox(sandbox.clone()),
        (None, None) => return Err(not_listening()),
    };
    if proxy.touch_due(id.0) {
        if let Err(e) = sessions::touch(&st.db, id).await {
            tracing::warn!(error = %e, "could not record the preview's use of the session");
        }
    }

    let upgrade = headers::wants_websocket(req.headers()).then(|| hyper::upgrade::on(&mut req));
    let (mut parts, body) = req.into_parts();
    let peer = parts
        .extensions
        .get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0.ip());
    let preview = &st.settings.preview;
    let proto = match &preview.domain {
        Some(d) => d.scheme.as_str(),
        None => preview.public_url.split("://").next().unwrap_or("http"),
    };
    // Origin-form: the connection is to the service itself, and `Host` names it.
    let target = match parts.uri.query() {
        Some(q) => format!("{rest}?{q}"),
        None => rest.clone(),
    };
    let fwd = headers::Forwarded {
        port,
        prefix: &prefix,
        peer,
        proto,
    };
    let upstream_headers = headers::upstream(
        &parts.headers,
        &parts.uri,
        upgrade.is_some(),
        &st.settings.auth,
        &fwd,
    );
    parts.uri = Uri::try_from(target).map_err(|_| {
        ApiError::BadRequest("the preview path is not a valid URL path".into()).into_response()
    })?;
    parts.headers = upstream_headers;
    parts.version = Version::HTTP_11;
    parts.extensions = Default::default();
    let io = connect(st, &upstream, port)
        .await?
        .ok_or_else(not_listening)?;
    // A backend's port forwarding may accept the connection and then close it when nothing
    // listens in the sandbox (Docker's loopback proxy does), so a refused connect and a close
    // before any answer look alike.
    let mut resp = send(io, Request::from_parts(parts, body))
        .await
        .map_err(|e| {
            tracing::debug!(error = %e, "the upstream gave no answer");
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
    headers::downstream(resp.headers_mut(), port, &prefix);
    Ok(resp.map(Body::new))
}

/// Where a preview's requests go: never taken from the request.
enum Upstream {
    /// The address the backend published the port on (`port_map`).
    Address(SocketAddr),
    /// The sandbox (by its backend id): the port on its loopback, through the backend.
    Sandbox(String),
}

/// A new connection to the upstream (never reused: see the module's invariants); `None`
/// when nothing listens there.
async fn connect(
    st: &AppState,
    upstream: &Upstream,
    port: u16,
) -> Result<Option<Box<dyn DaemonIo>>, Response> {
    match upstream {
        Upstream::Address(addr) => {
            match tokio::time::timeout(CONNECT_TIMEOUT, tokio::net::TcpStream::connect(addr)).await
            {
                Ok(Ok(socket)) => {
                    let _ = socket.set_nodelay(true);
                    Ok(Some(Box::new(socket)))
                }
                Ok(Err(e)) => {
                    tracing::debug!(error = %e, "the upstream refused the connection");
                    Ok(None)
                }
                Err(_) => {
                    tracing::debug!("the upstream did not accept within {CONNECT_TIMEOUT:?}");
                    Ok(None)
                }
            }
        }
        Upstream::Sandbox(sandbox) => st
            .sessions
            .backend()
            .connect_port(sandbox, port)
            .await
            .map_err(|e| {
                tracing::warn!(error = %e, "a preview could not reach the sandbox's port");
                bad_gateway(format!(
                    "port {port} of the sandbox cannot be reached now; try again, or restart \
                     the session if it persists"
                ))
            }),
    }
}

/// Sends one request over `io` as HTTP/1.1 and answers with the response; the connection
/// lives on for an upgrade (a WebSocket) and ends with it, or with the response otherwise.
async fn send(
    io: Box<dyn DaemonIo>,
    req: Request,
) -> Result<Response<hyper::body::Incoming>, hyper::Error> {
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(io)).await?;
    tokio::spawn(async move {
        if let Err(e) = connection.with_upgrades().await {
            tracing::debug!(error = %e, "a preview's upstream connection ended with an error");
        }
    });
    sender.send_request(req).await
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
