//! An intercepted `CONNECT`: for a host a credential is bound to, the proxy ends the
//! sandbox's TLS itself (a certificate for the host from the deployment's CA, `tls`), reads
//! each HTTP/1.1 request, applies the credentials to its headers, and sends it on over its
//! own TLS connection to the host, verified against the real trust store.

use crate::credentials::Credential;
use crate::http::{origin_form, strip_hop_by_hop, text, Body};
use crate::observe::Done;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper::{Request, StatusCode};
use hyper_util::rt::TokioIo;
use rustls::ServerConfig;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};

/// How long the sandbox may take to finish TLS with the proxy.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a request's head may take to arrive once it has begun.
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);

/// Serves the sandbox's side of an intercepted tunnel once `req` is upgraded; `upstream` is
/// the TLS connection to the host, made before the tunnel was answered.
pub(crate) async fn serve<U>(
    req: Request<Incoming>,
    upstream: U,
    config: Arc<ServerConfig>,
    credentials: Vec<Credential>,
    done: Done,
) where
    U: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let upgraded = match hyper::upgrade::on(req).await {
        Ok(u) => u,
        Err(e) => return tracing::debug!(error = %e, "an intercepted tunnel was not upgraded"),
    };
    let accept = tokio_rustls::TlsAcceptor::from(config).accept(TokioIo::new(upgraded));
    let tls = match tokio::time::timeout(HANDSHAKE_TIMEOUT, accept).await {
        Err(_) => {
            return tracing::info!(host = %done.host, "a sandbox did not finish TLS with the egress proxy in time")
        }
        Ok(Ok(t)) => t,
        // The sandbox does not trust the deployment's CA (a tool with a trust store of its
        // own), or gave up: nothing was sent, so no credential either.
        Ok(Err(e)) => {
            return tracing::info!(host = %done.host, error = %e, "a sandbox refused the egress CA's certificate")
        }
    };
    let (sender, conn) = match hyper::client::conn::http1::handshake(TokioIo::new(upstream)).await {
        Ok(pair) => pair,
        Err(e) => return tracing::debug!(error = %e, "an intercepted host's connection failed"),
    };
    tokio::spawn(async move {
        if let Err(e) = conn.await {
            tracing::debug!(error = %e, "an intercepted host's connection ended with an error");
        }
    });
    let sender = Arc::new(tokio::sync::Mutex::new(sender));
    let credentials = Arc::new(credentials);
    let host = done.host.to_string();
    let authority = match done.port {
        443 => host.clone(),
        port => format!("{host}:{port}"),
    };
    let service = service_fn(move |req: Request<Incoming>| {
        let sender = sender.clone();
        let credentials = credentials.clone();
        let (host, authority) = (host.clone(), authority.clone());
        async move { Ok::<_, Infallible>(forward(req, &sender, &credentials, &host, &authority).await) }
    });
    let served = hyper::server::conn::http1::Builder::new()
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT)
        .serve_connection(TokioIo::new(tls), service);
    // Idle as an untouched tunnel is: nothing either way for `IDLE` ends it.
    if let Some(Err(e)) = crate::tunnel::until_idle(served, &done, crate::tunnel::IDLE).await {
        tracing::debug!(error = %e, "an intercepted connection ended with an error");
    }
    drop(done);
}

async fn forward(
    req: Request<Incoming>,
    sender: &tokio::sync::Mutex<hyper::client::conn::http1::SendRequest<Incoming>>,
    credentials: &[Credential],
    host: &str,
    authority: &str,
) -> Response {
    let (mut parts, body) = req.into_parts();
    // The request goes to the host the tunnel was decided for, and says so: a `Host` (or an
    // absolute form) naming another would have a shared front end (a CDN) route it, with
    // the credential, to a host it is not bound to.
    if parts.headers.get_all(hyper::header::HOST).iter().count() > 1 {
        return text(
            StatusCode::BAD_REQUEST,
            "more than one Host header\n".into(),
        );
    }
    let named = parts
        .uri
        .authority()
        .map(|a| a.as_str().to_owned())
        .or_else(|| {
            parts
                .headers
                .get(hyper::header::HOST)
                .and_then(|h| h.to_str().ok())
                .map(str::to_owned)
        });
    if let Some(named) = named {
        let bare = named.rsplit_once(':').map_or(named.as_str(), |(h, _)| h);
        if !bare.trim_end_matches('.').eq_ignore_ascii_case(host) && named != authority {
            return text(
                StatusCode::MISDIRECTED_REQUEST,
                format!("this tunnel is to {authority}; a request for {named} needs a tunnel of its own\n"),
            );
        }
    }
    if let Ok(v) = hyper::header::HeaderValue::from_str(authority) {
        parts.headers.insert(hyper::header::HOST, v);
    }
    // Origin form, as a host expects it (a client may have sent the absolute form).
    if parts.uri.authority().is_some() {
        parts.uri = origin_form(&parts.uri);
    }
    strip_hop_by_hop(&mut parts.headers);
    for c in credentials {
        c.apply(&mut parts.headers);
    }
    let mut sender = sender.lock().await;
    match sender.send_request(Request::from_parts(parts, body)).await {
        Ok(resp) => {
            let (mut parts, body) = resp.into_parts();
            strip_hop_by_hop(&mut parts.headers);
            hyper::Response::from_parts(parts, body.boxed())
        }
        Err(e) => text(StatusCode::BAD_GATEWAY, format!("{host}: {e}\n")),
    }
}

type Response = hyper::Response<Body>;
