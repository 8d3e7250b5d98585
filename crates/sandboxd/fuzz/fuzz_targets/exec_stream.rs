//! A command's whole stream through a daemon served in-process over HTTP/2: a fixed first
//! frame (`true` in /tmp, so nothing the fuzzer writes can run), then the fuzzer's bytes, raw,
//! as the rest of the request body for the daemon's codec to parse in place. The daemon
//! answers or refuses that stream, and keeps serving: a call on a fresh connection works.
#![no_main]

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use libfuzzer_sys::fuzz_target;
use sandboxd::client::Client;
use sandboxd::daemon::{serve_connection, Daemon};
use sandboxd::proto::{ExecSpec, Frame};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime")
    })
}

fn daemon() -> Arc<Daemon> {
    static D: OnceLock<Arc<Daemon>> = OnceLock::new();
    D.get_or_init(|| Arc::new(Daemon::default())).clone()
}

/// One connection to the daemon, and the task serving it (awaited before the input ends, so
/// nothing is left half done between inputs, or leaked at exit).
fn served() -> (tokio::io::DuplexStream, tokio::task::JoinHandle<()>) {
    let (ours, theirs) = tokio::io::duplex(1 << 20);
    (ours, tokio::spawn(serve_connection(daemon(), theirs)))
}

async fn raw_exec(
    io: tokio::io::DuplexStream,
    data: &[u8],
) -> Result<(), Box<dyn std::error::Error>> {
    let (mut send, connection) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        hyper_util::rt::TokioIo::new(io),
    )
    .await?;
    let connection = tokio::spawn(connection);
    let spec = ExecSpec {
        argv: vec!["true".into()],
        cwd: Some("/tmp".into()),
        stdin: true,
        ..ExecSpec::default()
    };
    let mut body = Frame::Spec(Box::new(spec)).encode_to_bytes().to_vec();
    body.extend_from_slice(data);
    let request =
        hyper::Request::post("http://sandboxd/v1/exec").body(Full::new(Bytes::from(body)))?;
    let response = send.send_request(request).await;
    if let Ok(response) = response {
        let _ = response.into_body().collect().await;
    }
    drop(send);
    let _ = connection.await;
    Ok(())
}

fuzz_target!(|data: &[u8]| {
    runtime().block_on(async {
        let (io, server) = served();
        let _ = tokio::time::timeout(Duration::from_secs(10), raw_exec(io, data)).await;
        let _ = tokio::time::timeout(Duration::from_secs(10), server).await;
        let (io, server) = served();
        let (client, driver) = Client::handshake(io).await.expect("a handshake");
        let driver = tokio::spawn(driver);
        let hello = tokio::time::timeout(Duration::from_secs(5), client.hello()).await;
        assert!(matches!(hello, Ok(Ok(_))), "the daemon stopped answering");
        drop(client);
        let _ = tokio::time::timeout(Duration::from_secs(10), driver).await;
        let _ = tokio::time::timeout(Duration::from_secs(10), server).await;
    });
});
