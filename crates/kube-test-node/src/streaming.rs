//! The node's streaming server, as far as port-forward over WebSocket: what the API server
//! proxies `pods/portforward` to (`GET /portForward/{namespace}/{pod}?port=N`, the kubelet's
//! path), so that a client outside the pod network (the Kubernetes backend's `port-forward`
//! daemon route) reaches a pod's port through the API server as it would on a real cluster.
//!
//! The protocol is the kubelet's WebSocket port-forward (`v4.channel.k8s.io`, binary): every
//! message is a channel byte and data; port `i` of the request has the data channel `2i` and
//! the error channel `2i + 1`, and the first message on each is the port, two bytes
//! little-endian. Each port is connected once at the upgrade; bytes on a data channel go to
//! it, what it sends comes back on that channel, a refused connect is a message on the error
//! channel, and the WebSocket closes when every port's connection has ended.
//!
//! Unlike a kubelet: the port is reached at the pod's IP (not inside its network namespace:
//! the pods' containers here answer on their IP as on `localhost`), SPDY is not spoken (so
//! `kubectl port-forward`, which tunnels SPDY, is refused, while the WebSocket protocol
//! clients such as `kube`'s use works), and the server's certificate is its own, self-signed,
//! and callers are not authenticated (the test API server is started without
//! `--kubelet-certificate-authority`, so it does not check it). Only the host reaches it: it
//! listens on the pod network's gateway.

use anyhow::Context as _;
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use futures::{SinkExt, StreamExt};
use k8s_openapi::api::core::v1::Pod;
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// The subprotocol served (the kubelet's binary channel protocol, version 4).
pub const PROTOCOL: &str = "v4.channel.k8s.io";

/// Starts the server on the pod network's gateway; its port, for the Node's
/// `daemonEndpoints.kubeletEndpoint`.
pub async fn start(
    client: kube::Client,
    gateway: std::net::Ipv4Addr,
    shutdown: CancellationToken,
) -> anyhow::Result<u16> {
    let listener = TcpListener::bind(SocketAddr::new(IpAddr::V4(gateway), 0))
        .await
        .with_context(|| format!("listening on {gateway} for port-forwards"))?;
    let port = listener.local_addr()?.port();
    let tls = tokio_rustls::TlsAcceptor::from(Arc::new(server_config(gateway)?));
    let app = axum::Router::new()
        .route(
            "/portForward/{namespace}/{pod}",
            axum::routing::get(port_forward),
        )
        .with_state(client);
    tokio::spawn(async move {
        loop {
            let accepted = tokio::select! {
                () = shutdown.cancelled() => return,
                accepted = listener.accept() => accepted,
            };
            let Ok((tcp, peer)) = accepted else { continue };
            // Small writes both ways (a command's request, its answer): Nagle's algorithm
            // against the peer's delayed ACK would add 40 ms to each.
            let _ = tcp.set_nodelay(true);
            let (tls, app) = (tls.clone(), app.clone());
            tokio::spawn(async move {
                let stream = match tls.accept(tcp).await {
                    Ok(s) => s,
                    Err(e) => {
                        tracing::debug!(%peer, error = %e, "a TLS handshake failed");
                        return;
                    }
                };
                let service = hyper_util::service::TowerToHyperService::new(app);
                let served = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                    .with_upgrades()
                    .await;
                if let Err(e) = served {
                    tracing::debug!(%peer, error = %e, "a streaming connection ended in error");
                }
            });
        }
    });
    Ok(port)
}

/// A self-signed certificate for `ip`, as a kubelet's own serving certificate is.
fn server_config(ip: std::net::Ipv4Addr) -> anyhow::Result<rustls::ServerConfig> {
    let key = rcgen::KeyPair::generate().context("generating the streaming server's key")?;
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new())?;
    params
        .subject_alt_names
        .push(rcgen::SanType::IpAddress(IpAddr::V4(ip)));
    let cert = params.self_signed(&key)?;
    let key = rustls_pki_types::PrivateKeyDer::Pkcs8(rustls_pki_types::PrivatePkcs8KeyDer::from(
        key.serialize_der(),
    ));
    let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()?
    .with_no_client_auth()
    .with_single_cert(vec![cert.der().clone()], key)?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

/// The ports of the request: `port` values, each one port or several separated by commas.
fn ports_of(query: Option<&str>) -> Result<Vec<u16>, String> {
    let mut ports = Vec::new();
    for pair in query.unwrap_or_default().split('&') {
        let Some(("port", value)) = pair.split_once('=') else {
            continue;
        };
        for p in value.split("%2C").flat_map(|v| v.split(',')) {
            match p.parse::<u16>() {
                Ok(port) if port > 0 => ports.push(port),
                _ => return Err(format!("invalid port {p:?}")),
            }
        }
    }
    if ports.is_empty() {
        return Err("no port to forward".to_owned());
    }
    Ok(ports)
}

async fn port_forward(
    State(client): State<kube::Client>,
    Path((namespace, name)): Path<(String, String)>,
    RawQuery(query): RawQuery,
    upgrade: WebSocketUpgrade,
) -> Response {
    let ports = match ports_of(query.as_deref()) {
        Ok(p) => p,
        Err(e) => return (StatusCode::BAD_REQUEST, e).into_response(),
    };
    let pod = kube::Api::<Pod>::namespaced(client, &namespace)
        .get_opt(&name)
        .await;
    let ip = match pod {
        Ok(Some(pod)) => pod
            .status
            .and_then(|s| s.pod_ip)
            .and_then(|ip| ip.parse::<IpAddr>().ok()),
        Ok(None) => {
            return (
                StatusCode::NOT_FOUND,
                format!("pod {namespace}/{name} not found"),
            )
                .into_response()
        }
        Err(e) => return (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    };
    let Some(ip) = ip else {
        return (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("pod {namespace}/{name} has no IP yet"),
        )
            .into_response();
    };
    tracing::info!(pod = %name, ?ports, "port-forward");
    upgrade
        .protocols([PROTOCOL])
        .on_upgrade(move |socket| forward(socket, ip, ports))
}

/// Runs one port-forward until every port's connection, or the WebSocket, has ended.
async fn forward(socket: WebSocket, ip: IpAddr, ports: Vec<u16>) {
    let (mut sink, mut incoming) = socket.split();
    for (i, port) in ports.iter().enumerate() {
        let [lo, hi] = port.to_le_bytes();
        for channel in [2 * i, 2 * i + 1] {
            let first = vec![channel as u8, lo, hi];
            if sink.send(Message::Binary(first.into())).await.is_err() {
                return;
            }
        }
    }
    let (out_tx, mut out_rx) = tokio::sync::mpsc::channel::<Message>(64);
    let mut writers = HashMap::new();
    for (i, port) in ports.iter().enumerate() {
        let (data, error) = ((2 * i) as u8, (2 * i + 1) as u8);
        match tokio::net::TcpStream::connect((ip, *port)).await {
            Ok(stream) => {
                let _ = stream.set_nodelay(true);
                let (mut read, write) = stream.into_split();
                writers.insert(data, write);
                let out = out_tx.clone();
                tokio::spawn(async move {
                    let mut buf = vec![0u8; 32 * 1024];
                    loop {
                        match read.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => {
                                let mut message = Vec::with_capacity(n + 1);
                                message.push(data);
                                message.extend_from_slice(&buf[..n]);
                                if out.send(Message::Binary(message.into())).await.is_err() {
                                    return;
                                }
                            }
                        }
                    }
                });
            }
            Err(e) => {
                let mut message = vec![error];
                message.extend_from_slice(
                    format!("error forwarding port {port} to pod at {ip}: {e}").as_bytes(),
                );
                let _ = out_tx.send(Message::Binary(message.into())).await;
            }
        }
    }
    // The readers hold the only senders left: the channel ends when every connection has.
    drop(out_tx);
    loop {
        tokio::select! {
            out = out_rx.recv() => match out {
                Some(message) => if sink.send(message).await.is_err() { return },
                None => break,
            },
            message = incoming.next() => match message {
                Some(Ok(Message::Binary(bytes))) => {
                    let Some((channel, data)) = bytes.split_first() else { continue };
                    if let Some(writer) = writers.get_mut(channel) {
                        if writer.write_all(data).await.is_err() {
                            writers.remove(channel);
                        }
                    }
                }
                Some(Ok(Message::Close(_))) | Some(Err(_)) | None => return,
                Some(Ok(_)) => {}
            },
        }
    }
    let _ = sink.send(Message::Close(None)).await;
}

#[cfg(test)]
mod tests {
    use super::ports_of;

    #[test]
    fn ports_are_read_from_every_port_value_and_commas() {
        assert_eq!(ports_of(Some("port=7077")), Ok(vec![7077]));
        assert_eq!(
            ports_of(Some("port=80%2C443&port=8080")),
            Ok(vec![80, 443, 8080])
        );
        assert_eq!(ports_of(Some("port=80,81")), Ok(vec![80, 81]));
        assert!(ports_of(Some("port=0")).is_err());
        assert!(ports_of(Some("port=x")).is_err());
        assert!(ports_of(None).is_err());
    }
}
