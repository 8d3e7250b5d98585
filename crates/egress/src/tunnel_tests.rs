//! The untouched tunnel's checks, with a real TLS client and server on either side of it
//! (rustls, a certificate from a test CA), over in-memory pipes.

use crate::count::Counted;
use crate::decide::{Denial, Host, Policy};
use crate::observe::{Done, Observer};
use crate::tls::{generate_ca, Authority};
use crate::tunnel::join;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, ServerName};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{duplex, AsyncReadExt, AsyncWriteExt, DuplexStream};

#[derive(Default)]
struct Denials(Mutex<Vec<(String, String, String)>>);

impl Observer for Denials {
    fn denied(&self, sandbox_id: &str, _: &Policy, host: &Host, _: u16, denial: &Denial) {
        self.0.lock().unwrap().push((
            sandbox_id.to_owned(),
            host.to_string(),
            format!("{}: {}", denial.label, denial.reason),
        ));
    }
    fn closed(&self, _: &Policy, _: &Host, _: u16, _: u64, _: u64) {}
}

fn done(host: Host, seen: &Arc<Denials>) -> Done {
    Done {
        observer: seen.clone(),
        policy: Arc::new(Policy::closed()),
        host,
        port: 443,
        sent: Arc::new(AtomicU64::new(0)),
        received: Arc::new(AtomicU64::new(0)),
    }
}

fn name(n: &str) -> Host {
    Host::Name(n.to_owned())
}

/// A tunnel to `host` between two pipes: the sandbox's end and the upstream's end.
fn tunnel(host: Host, seen: &Arc<Denials>) -> (DuplexStream, DuplexStream) {
    let (sandbox, client) = duplex(64 * 1024);
    let (upstream, server) = duplex(64 * 1024);
    let done = done(host, seen);
    let upstream = Counted::new(upstream, done.received.clone(), done.sent.clone());
    tokio::spawn(async move {
        let _ = join(client, upstream, &done, "sb-1", Duration::from_secs(60)).await;
    });
    (sandbox, server)
}

/// Asserts that the tunnel answered the sandbox with the `access_denied` alert and closed,
/// and that not one byte of what the sandbox sent went up.
async fn assert_refused_with_alert(sandbox: &mut DuplexStream, server: &mut DuplexStream) {
    let mut back = Vec::new();
    sandbox.read_to_end(&mut back).await.unwrap();
    assert_eq!(back, [0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x31], "an alert");
    let mut up = Vec::new();
    server.read_to_end(&mut up).await.unwrap();
    assert!(up.is_empty(), "{} bytes went up", up.len());
}

fn authority() -> Authority {
    let (cert, key) = generate_ca().unwrap();
    Authority::load(&cert, &key, Vec::new()).unwrap()
}

fn client_config(a: &Authority) -> Arc<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_slice(a.cert_pem().as_bytes()).unwrap())
        .unwrap();
    Arc::new(
        rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth(),
    )
}

#[tokio::test]
async fn a_tls_hello_for_the_tunnels_host_goes_through_and_the_handshake_completes() {
    let seen = Arc::new(Denials::default());
    let (sandbox, server) = tunnel(name("api.test"), &seen);
    let a = authority();
    let acceptor = tokio_rustls::TlsAcceptor::from(a.server_config("api.test").unwrap());
    let served = tokio::spawn(async move {
        let mut tls = acceptor.accept(server).await.unwrap();
        tls.write_all(b"hello from api.test").await.unwrap();
        tls.shutdown().await.unwrap();
    });
    let connector = tokio_rustls::TlsConnector::from(client_config(&a));
    let mut tls = connector
        .connect(ServerName::try_from("API.test").unwrap(), sandbox)
        .await
        .unwrap();
    let mut got = String::new();
    tls.read_to_string(&mut got).await.unwrap();
    assert_eq!(got, "hello from api.test");
    served.await.unwrap();
    assert!(seen.0.lock().unwrap().is_empty());
}

#[tokio::test]
async fn another_server_name_ends_the_tunnel_with_an_alert_and_a_denial_and_sends_nothing_up() {
    let seen = Arc::new(Denials::default());
    let (sandbox, mut server) = tunnel(name("allowed.test"), &seen);
    let a = authority();
    let connector = tokio_rustls::TlsConnector::from(client_config(&a));
    let err = connector
        .connect(ServerName::try_from("elsewhere.test").unwrap(), sandbox)
        .await
        .unwrap_err();
    assert!(
        err.to_string().to_lowercase().contains("accessdenied"),
        "the client is told: {err}"
    );
    // The upstream saw not one byte of it, only the end.
    let mut up = Vec::new();
    server.read_to_end(&mut up).await.unwrap();
    assert!(up.is_empty(), "{} bytes went up", up.len());
    let denials = seen.0.lock().unwrap().clone();
    assert_eq!(denials.len(), 1, "{denials:?}");
    let (sandbox_id, host, why) = &denials[0];
    assert_eq!(
        (sandbox_id.as_str(), host.as_str()),
        ("sb-1", "allowed.test")
    );
    assert!(
        why.starts_with("server_name: ") && why.contains("'elsewhere.test'"),
        "{why}"
    );
}

#[tokio::test]
async fn a_broken_handshake_is_refused_and_bytes_that_are_not_tls_pass() {
    let seen = Arc::new(Denials::default());
    // A handshake record header, then garbage: not readable as a ClientHello.
    let (mut sandbox, mut server) = tunnel(name("allowed.test"), &seen);
    sandbox
        .write_all(&[0x16, 0x03, 0x01, 0x00, 0x05, 0xff, 0xff, 0xff, 0xff, 0xff])
        .await
        .unwrap();
    assert_refused_with_alert(&mut sandbox, &mut server).await;
    assert_eq!(seen.0.lock().unwrap().len(), 1);

    // A protocol whose server speaks first, and that is not TLS: both ways, untouched.
    let (mut sandbox, mut server) = tunnel(name("git.test"), &seen);
    server.write_all(b"SSH-2.0-test\r\n").await.unwrap();
    let mut banner = [0u8; 14];
    sandbox.read_exact(&mut banner).await.unwrap();
    assert_eq!(&banner, b"SSH-2.0-test\r\n");
    sandbox.write_all(b"SSH-2.0-client\r\n").await.unwrap();
    let mut hello = [0u8; 16];
    server.read_exact(&mut hello).await.unwrap();
    assert_eq!(&hello, b"SSH-2.0-client\r\n");
    assert_eq!(seen.0.lock().unwrap().len(), 1, "nothing more refused");
}

#[tokio::test]
async fn a_tunnel_to_an_address_takes_any_server_name() {
    let seen = Arc::new(Denials::default());
    let (sandbox, server) = tunnel(Host::Ip("203.0.113.7".parse().unwrap()), &seen);
    let a = authority();
    let acceptor = tokio_rustls::TlsAcceptor::from(a.server_config("named.test").unwrap());
    tokio::spawn(async move {
        let mut tls = acceptor.accept(server).await.unwrap();
        tls.shutdown().await.unwrap();
    });
    let connector = tokio_rustls::TlsConnector::from(client_config(&a));
    connector
        .connect(ServerName::try_from("named.test").unwrap(), sandbox)
        .await
        .unwrap();
    assert!(seen.0.lock().unwrap().is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_tunnel_idle_for_its_limit_is_closed_and_one_in_use_is_not() {
    let seen = Arc::new(Denials::default());
    let (sandbox, client) = duplex(1024);
    let (upstream, mut server) = duplex(1024);
    let d = done(name("quiet.test"), &seen);
    // Counted as the proxy counts it: what moves is what `done` sees.
    let upstream = Counted::new(upstream, d.received.clone(), d.sent.clone());
    let idle = Duration::from_secs(60);
    let tunnel = tokio::spawn(async move { join(client, upstream, &d, "sb-1", idle).await });
    // In use: bytes every 20 s for two minutes keep it open.
    let (mut from_sandbox, mut to_sandbox) = tokio::io::split(sandbox);
    for _ in 0..6 {
        to_sandbox.write_all(b"ping").await.unwrap();
        let mut got = [0u8; 4];
        server.read_exact(&mut got).await.unwrap();
        tokio::time::sleep(Duration::from_secs(20)).await;
        assert!(!tunnel.is_finished(), "closed while in use");
    }
    // Then nothing: closed within the limit and a quarter (the check's period).
    let quiet_from = tokio::time::Instant::now();
    tunnel.await.unwrap().unwrap();
    assert!(quiet_from.elapsed() <= idle + idle / 4);
    let mut rest = Vec::new();
    from_sandbox.read_to_end(&mut rest).await.unwrap();
    assert!(rest.is_empty());
}

#[tokio::test]
async fn a_tls_record_before_the_hello_is_refused_whatever_follows() {
    let seen = Arc::new(Denials::default());
    let (mut sandbox, mut server) = tunnel(name("allowed.test"), &seen);
    // A warning alert (some servers skip it and read the ClientHello behind it), sent in two
    // writes so that the first read holds one byte.
    sandbox.write_all(&[0x15]).await.unwrap();
    tokio::task::yield_now().await;
    sandbox
        .write_all(&[0x03, 0x01, 0x00, 0x02, 0x01, 0x5a])
        .await
        .unwrap();
    assert_refused_with_alert(&mut sandbox, &mut server).await;
    let denials = seen.0.lock().unwrap().clone();
    assert_eq!(denials.len(), 1);
    assert!(denials[0].2.contains("not a ClientHello"), "{denials:?}");
}

#[tokio::test]
async fn each_side_may_finish_sending_and_still_hear_the_other() {
    let seen = Arc::new(Denials::default());
    let (sandbox, server) = tunnel(name("plain.test"), &seen);
    let (mut from_sandbox, mut to_sandbox) = tokio::io::split(sandbox);
    let (mut from_server, mut to_server) = tokio::io::split(server);
    // The sandbox sends its request and closes its side, as `curl -T` or a shell pipe does.
    to_sandbox.write_all(b"request").await.unwrap();
    to_sandbox.shutdown().await.unwrap();
    let mut got = Vec::new();
    from_server.read_to_end(&mut got).await.unwrap();
    assert_eq!(got, b"request", "the request, then the end of it");
    // The answer still flows back after that, then its own end.
    to_server.write_all(b"answer").await.unwrap();
    to_server.shutdown().await.unwrap();
    let mut back = Vec::new();
    from_sandbox.read_to_end(&mut back).await.unwrap();
    assert_eq!(back, b"answer");
    assert!(seen.0.lock().unwrap().is_empty());
}
