//! The sandbox's DNS server (issue 36): queries on [`DNS_ADDR`], UDP and TCP, served by
//! hickory-server, each sent to the control plane over the proxy's socket as one HTTP/1.1
//! request in the style of RFC 8484 (`POST` to [`DNS_HOST`], the wire message as the
//! body) and its answer relayed. The control plane decides (a name the session's policy
//! does not allow is `REFUSED` there); the daemon only carries.
//!
//! hickory-server fits the relayed answer to the transport: on UDP, to the client's EDNS
//! size (512 bytes without EDNS), with the TC bit set when records were left out, so the
//! client asks again over TCP. A control plane that cannot be reached, or does not answer
//! in [`TIMEOUT`], is `SERVFAIL`: never a query left without an answer.

use super::{
    Upstream, DNS_ADDR, DNS_CONTENT_TYPE as CONTENT_TYPE, DNS_HOST, DNS_MAX_MESSAGE as MAX_MESSAGE,
    DNS_PATH,
};
use bytes::Bytes;
use hickory_server::authority::MessageResponseBuilder;
use hickory_server::proto::op::{Edns, Header, Message, ResponseCode};
use hickory_server::proto::serialize::binary::BinEncodable;
use hickory_server::server::{Request, RequestHandler, ResponseHandler, ResponseInfo};
use hickory_server::ServerFuture;
use http_body_util::{BodyExt, Full, Limited};
use hyper_util::rt::TokioIo;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{TcpListener, UdpSocket};

/// How long one query may take the control plane (a resolution upstream included).
const TIMEOUT: Duration = Duration::from_secs(10);
/// How long a TCP client may stay silent before its connection is closed.
const TCP_IDLE: Duration = Duration::from_secs(10);

/// Serves DNS on [`DNS_ADDR`], asking `upstream`, until the sockets fail. Logs and returns
/// when it cannot listen: the sandbox then has no names, as before.
pub async fn serve(upstream: Arc<Upstream>) {
    let udp = match UdpSocket::bind(DNS_ADDR).await {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(error = %e, "cannot listen for DNS on UDP; names do not resolve in this sandbox");
            return;
        }
    };
    let tcp = match TcpListener::bind(DNS_ADDR).await {
        Ok(l) => l,
        Err(e) => {
            tracing::warn!(error = %e, "cannot listen for DNS on TCP; names do not resolve in this sandbox");
            return;
        }
    };
    let mut server = ServerFuture::new(Relay(upstream));
    server.register_socket(udp);
    server.register_listener(tcp, TCP_IDLE);
    if let Err(e) = server.block_until_done().await {
        tracing::warn!(error = %e, "the DNS server stopped");
    }
}

/// Relays each query to the control plane.
struct Relay(Arc<Upstream>);

#[async_trait::async_trait]
impl RequestHandler for Relay {
    async fn handle_request<R: ResponseHandler>(
        &self,
        request: &Request,
        mut response: R,
    ) -> ResponseInfo {
        let answer = match tokio::time::timeout(TIMEOUT, ask(&self.0, request)).await {
            Ok(Ok(m)) => Some(m),
            Ok(Err(e)) => {
                tracing::debug!(error = %e, "a DNS query got no answer from the control plane");
                None
            }
            Err(_) => {
                tracing::debug!("a DNS query timed out at the control plane");
                None
            }
        };
        let mut header = Header::response_from_request(request.header());
        header.set_recursion_available(true);
        let mut builder = MessageResponseBuilder::from_message_request(request);
        // The client's size, not the control plane's: what the UDP answer is cut to.
        if let Some(asked) = request.edns() {
            let mut edns = Edns::new();
            edns.set_max_payload(asked.max_payload().max(512));
            builder.edns(edns);
        }
        let sent = match &answer {
            Some(m) => {
                header.set_response_code(m.response_code());
                let built = builder.build(
                    header,
                    m.answers(),
                    m.name_servers(),
                    std::iter::empty(),
                    m.additionals(),
                );
                response.send_response(built).await
            }
            None => {
                header.set_response_code(ResponseCode::ServFail);
                response
                    .send_response(builder.build_no_records(header))
                    .await
            }
        };
        sent.unwrap_or_else(|e| {
            tracing::debug!(error = %e, "a DNS answer could not be sent");
            let mut failed = Header::new();
            failed.set_response_code(ResponseCode::ServFail);
            failed.into()
        })
    }
}

/// The control plane's answer to `request`.
async fn ask(upstream: &Upstream, request: &Request) -> Result<Message, String> {
    let query = request.to_bytes().map_err(|e| e.to_string())?;
    let stream = upstream
        .connect()
        .await
        .map_err(|e| format!("the egress proxy: {e}"))?;
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| e.to_string())?;
    tokio::spawn(async move {
        if let Err(e) = connection.await {
            tracing::debug!(error = %e, "a DNS request's connection failed");
        }
    });
    let http = http::Request::post(format!("http://{DNS_HOST}{DNS_PATH}"))
        .header(http::header::HOST, DNS_HOST)
        .header(http::header::CONTENT_TYPE, CONTENT_TYPE)
        .header(http::header::ACCEPT, CONTENT_TYPE)
        .body(Full::new(Bytes::from(query)))
        .map_err(|e| e.to_string())?;
    let answer = sender.send_request(http).await.map_err(|e| e.to_string())?;
    if answer.status() != http::StatusCode::OK {
        return Err(format!("the control plane answered {}", answer.status()));
    }
    let body = Limited::new(answer.into_body(), MAX_MESSAGE)
        .collect()
        .await
        .map_err(|e| e.to_string())?
        .to_bytes();
    Message::from_vec(&body).map_err(|e| e.to_string())
}
