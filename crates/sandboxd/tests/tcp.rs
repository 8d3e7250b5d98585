//! The daemon's TCP listener (`sandboxd serve --listen`), the binary itself on port 0 of
//! loopback: a connection with the token is served as one on the socket; a wrong token, a
//! line too long and an HTTP/2 preface with no preamble are closed without a byte of answer;
//! the token's hash is not in what the daemon runs; and `--listen` without the hash refuses
//! to start.
//!
//! The daemon also binds the abstract socket of the host's network namespace when it is
//! free; a daemon that finds it taken (another test's) serves TCP alone, which is all these
//! tests use.

use sandboxd::client::{Client, Stream};
use sandboxd::proto::ExecSpec;
use sandboxd::tcp::{connect, preamble, token_hash, PREAMBLE_PREFIX, TOKEN_ENV};
use std::net::SocketAddr;
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::process::{Child, Command};
use tokio::sync::mpsc;

const TOKEN: [u8; 32] = [0x5a; 32];

/// A daemon on loopback; killed when dropped.
struct Daemon {
    addr: SocketAddr,
    /// What it writes on stderr after the line that says where it listens.
    log: mpsc::UnboundedReceiver<String>,
    _child: Child,
}

fn daemon_command() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_sandboxd"));
    command
        .args(["serve", "--listen", "127.0.0.1:0"])
        .env_remove(TOKEN_ENV)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    command
}

async fn start() -> Daemon {
    let mut child = daemon_command()
        .env(TOKEN_ENV, token_hash(&TOKEN))
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let addr = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            let line = lines.next_line().await.unwrap().expect("the daemon exited");
            if let Some(addr) = line.strip_prefix("sandboxd: listening on ") {
                return addr.parse().unwrap();
            }
        }
    })
    .await
    .expect("the daemon said where it listens");
    let (tx, log) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Ok(Some(line)) = lines.next_line().await {
            let _ = tx.send(line);
        }
    });
    Daemon {
        addr,
        log,
        _child: child,
    }
}

impl Daemon {
    async fn client(&self) -> Client {
        let stream = connect(self.addr, &TOKEN).await.unwrap();
        let (client, driver) = Client::handshake(stream).await.unwrap();
        tokio::spawn(driver);
        client
    }

    /// Waits for a log line that contains `needle`.
    async fn logged(&mut self, needle: &str) -> String {
        tokio::time::timeout(Duration::from_secs(10), async {
            loop {
                let line = self.log.recv().await.expect("the daemon's stderr closed");
                if line.contains(needle) {
                    return line;
                }
            }
        })
        .await
        .unwrap_or_else(|_| panic!("the daemon never logged '{needle}'"))
    }
}

/// Sends `bytes` on a fresh connection and reads until the daemon closes it (a reset, when
/// it closed with bytes of ours unread, is a close too): what it answered.
async fn answer_to(addr: SocketAddr, bytes: &[u8]) -> Vec<u8> {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream.write_all(bytes).await.unwrap();
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(15), async {
        let mut buf = [0u8; 1024];
        loop {
            match stream.read(&mut buf).await {
                Ok(0) => break,
                Ok(n) => answer.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break,
                Err(e) => panic!("reading the answer: {e}"),
            }
        }
    })
    .await
    .expect("the daemon closed the connection");
    answer
}

#[tokio::test]
async fn a_connection_with_the_token_is_served_and_the_hash_is_not_passed_on() {
    let daemon = start().await;
    let client = daemon.client().await;
    assert_eq!(
        client.hello().await.unwrap().protocol,
        sandboxd::proto::PROTOCOL
    );
    let mut out = Vec::new();
    let exit = client
        .run(
            ExecSpec {
                argv: vec!["env".into()],
                timeout_ms: Some(30_000),
                ..Default::default()
            },
            None,
            |stream, bytes| {
                if stream == Stream::Stdout {
                    out.extend_from_slice(&bytes)
                }
            },
        )
        .await
        .unwrap();
    assert_eq!(exit.code, 0);
    let env = String::from_utf8(out).unwrap();
    assert!(env.contains("PATH="), "{env}");
    assert!(!env.contains(TOKEN_ENV), "{env}");
}

#[tokio::test]
async fn a_wrong_token_or_a_line_too_long_is_closed_without_an_answer() {
    let mut daemon = start().await;
    assert_eq!(answer_to(daemon.addr, &preamble(&[0xa5; 32])).await, b"");
    daemon.logged("a wrong token").await;

    let mut long = PREAMBLE_PREFIX.to_vec();
    long.extend_from_slice(hex_digits(200).as_bytes());
    long.push(b'\n');
    assert_eq!(answer_to(daemon.addr, &long).await, b"");
    daemon.logged("a malformed preamble").await;

    // The daemon goes on serving connections that have the token.
    daemon.client().await.hello().await.unwrap();
}

#[tokio::test]
async fn http2_without_a_preamble_is_closed_without_an_answer() {
    let mut daemon = start().await;
    // The client's preface and an empty SETTINGS frame, then nothing: shorter than a
    // preamble, so the daemon waits for the rest until its deadline.
    let mut preface = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    preface.extend_from_slice(&[0, 0, 0, 4, 0, 0, 0, 0, 0]);
    assert_eq!(answer_to(daemon.addr, &preface).await, b"");
    daemon.logged("no preamble within").await;

    // A client that starts HTTP/2 at once gets no answer to its request either.
    let stream = TcpStream::connect(daemon.addr).await.unwrap();
    let (client, driver) = Client::handshake(stream).await.unwrap();
    tokio::spawn(driver);
    let e = client.hello().await.unwrap_err();
    assert!(e.is_transport(), "{e}");
}

#[tokio::test]
async fn listen_without_the_hash_refuses_to_start() {
    let output = daemon_command().output().await.unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains(TOKEN_ENV), "{stderr}");

    let output = daemon_command()
        .env(TOKEN_ENV, "not-a-digest")
        .output()
        .await
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("64 hex digits"),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

fn hex_digits(n: usize) -> String {
    "0123456789abcdef".chars().cycle().take(n).collect()
}
