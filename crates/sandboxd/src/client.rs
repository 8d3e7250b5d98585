//! The control plane's side: an HTTP/2 client of the daemon over any byte stream (a bridge
//! exec's stdio in production, a socket pair in tests). Cheap to clone; every clone shares
//! the one connection, each call is a stream of its own.

use crate::proto::{
    ArchiveReport, DirListing, ErrorBody, ErrorKind, ExecSpec, ExitInfo, FileStat, Frame,
    FrameCodec, Hello, MkdirRequest, PortState, ProcessDetail, ProcessInfo, ProcessSpec,
    RenameRequest, SignalRequest, WaitPort, PROTOCOL, SIZE_HEADER,
};
use bytes::Bytes;
use futures::stream::BoxStream;
use futures::{SinkExt, StreamExt, TryStreamExt};
use http::{Method, Request};
use http_body_util::{BodyExt, StreamBody};
use serde::de::DeserializeOwned;
use std::future::Future;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::mpsc;
use tokio_util::codec::FramedRead;

type ReqBody = http_body_util::combinators::UnsyncBoxBody<Bytes, std::io::Error>;

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The daemon answered with an error.
    #[error("{}", .0.detail)]
    Daemon(ErrorBody),
    /// The connection is gone or broken; a new one may work.
    #[error("the connection to the sandbox's daemon failed: {0}")]
    Transport(String),
    /// The daemon answered something this client does not understand.
    #[error("the sandbox's daemon broke the protocol: {0}")]
    Protocol(String),
    /// The daemon does not know the operation: it is older than this client (a sandbox
    /// started before an upgrade keeps the daemon it started with). The caller does it
    /// another way.
    #[error("the sandbox's daemon is too old for {0}")]
    Unsupported(String),
}

impl ClientError {
    /// Whether the connection is unusable (the caller should reconnect).
    pub fn is_transport(&self) -> bool {
        matches!(self, ClientError::Transport(_))
    }

    pub fn kind(&self) -> Option<ErrorKind> {
        match self {
            ClientError::Daemon(b) => Some(b.kind),
            _ => None,
        }
    }
}

pub type Result<T, E = ClientError> = std::result::Result<T, E>;

fn transport(e: impl std::fmt::Display) -> ClientError {
    ClientError::Transport(e.to_string())
}

#[derive(Clone, Debug)]
pub struct Client {
    send: hyper::client::conn::http2::SendRequest<ReqBody>,
}

/// A running command: its frames (pid, output, then the exit or an error) and, while kept,
/// a way to send it input. Dropping it abandons the command (the daemon kills its tree).
pub struct Execution {
    pub frames: FramedRead<
        tokio_util::io::StreamReader<BoxStream<'static, std::io::Result<Bytes>>, Bytes>,
        FrameCodec,
    >,
    /// Stdin, signals and resizes; dropping it closes the request (not stdin: send
    /// `Frame::StdinEnd` for that).
    pub input: mpsc::Sender<Frame>,
}

/// Which stream an output chunk came on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stream {
    Stdout,
    Stderr,
}

impl Client {
    /// Starts HTTP/2 on `io`. The returned future drives the connection and must be polled
    /// (spawned) for any call to progress; it ends when the connection does.
    pub async fn handshake<IO>(io: IO) -> Result<(Client, impl Future<Output = ()> + Send)>
    where
        IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let (send, connection) =
            hyper::client::conn::http2::Builder::new(hyper_util::rt::TokioExecutor::new())
                .initial_stream_window_size(1 << 20)
                .initial_connection_window_size(8 << 20)
                .max_header_list_size(16 * 1024)
                .handshake(hyper_util::rt::TokioIo::new(io))
                .await
                .map_err(transport)?;
        let driver = async move {
            if let Err(e) = connection.await {
                tracing::debug!(error = %e, "the connection to a sandbox's daemon ended");
            }
        };
        Ok((Client { send }, driver))
    }

    /// Whether the connection can still carry calls.
    pub fn is_open(&self) -> bool {
        !self.send.is_closed()
    }

    async fn request(
        &self,
        method: Method,
        path: &str,
        body: ReqBody,
    ) -> Result<http::Response<hyper::body::Incoming>> {
        let request = Request::builder()
            .method(method)
            .uri(format!("http://sandboxd{path}"))
            .body(body)
            .map_err(|e| ClientError::Protocol(e.to_string()))?;
        let mut send = self.send.clone();
        send.ready().await.map_err(transport)?;
        let response = send.send_request(request).await.map_err(transport)?;
        if response.status().is_success() {
            return Ok(response);
        }
        let status = response.status();
        let bytes = collect(response.into_body()).await?;
        Err(match serde_json::from_slice::<ErrorBody>(&bytes) {
            Ok(body) => ClientError::Daemon(body),
            // Every error of the daemon's own has a body; a bare 404 is a route it lacks, a
            // bare 405 a method it lacks on a route it has (`GET /v1/archive` of a daemon
            // that only extracts).
            Err(_)
                if status == http::StatusCode::NOT_FOUND
                    || status == http::StatusCode::METHOD_NOT_ALLOWED =>
            {
                ClientError::Unsupported(path.split('?').next().unwrap_or(path).to_owned())
            }
            Err(_) => {
                ClientError::Protocol(format!("{status}: {}", String::from_utf8_lossy(&bytes)))
            }
        })
    }

    async fn json<T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        body: Option<Vec<u8>>,
    ) -> Result<T> {
        let response = self
            .request(method, path, full(body.unwrap_or_default()))
            .await?;
        let bytes = collect(response.into_body()).await?;
        serde_json::from_slice(&bytes).map_err(|e| ClientError::Protocol(e.to_string()))
    }

    async fn empty(&self, method: Method, path: &str, body: Option<Vec<u8>>) -> Result<()> {
        let response = self
            .request(method, path, full(body.unwrap_or_default()))
            .await?;
        collect(response.into_body()).await?;
        Ok(())
    }

    /// The daemon's greeting; refuses another protocol version.
    pub async fn hello(&self) -> Result<Hello> {
        let hello: Hello = self.json(Method::GET, "/v1/hello", None).await?;
        if hello.protocol != PROTOCOL {
            return Err(ClientError::Protocol(format!(
                "the daemon speaks protocol {}, this control plane {PROTOCOL}",
                hello.protocol
            )));
        }
        Ok(hello)
    }

    /// Starts a command. Its first frame is `Started` (or, for a command that could not
    /// run, its stderr and exit).
    pub async fn exec(&self, spec: ExecSpec) -> Result<Execution> {
        let (input, rx) = mpsc::channel::<Frame>(16);
        input
            .try_send(Frame::Spec(Box::new(spec)))
            .map_err(|e| ClientError::Protocol(e.to_string()))?;
        let body = StreamBody::new(
            tokio_stream::wrappers::ReceiverStream::new(rx)
                .map(|f| Ok(hyper::body::Frame::data(f.encode_to_bytes()))),
        );
        let response = self
            .request(Method::POST, "/v1/exec", BodyExt::boxed_unsync(body))
            .await?;
        let stream = response
            .into_body()
            .into_data_stream()
            .map_err(std::io::Error::other)
            .boxed();
        Ok(Execution {
            frames: FramedRead::new(tokio_util::io::StreamReader::new(stream), FrameCodec),
            input,
        })
    }

    /// Runs a command to its end, handing each output chunk to `on_output`; `stdin`, when
    /// given, is written and closed.
    pub async fn run(
        &self,
        mut spec: ExecSpec,
        stdin: Option<Bytes>,
        mut on_output: impl FnMut(Stream, Bytes) + Send,
    ) -> Result<ExitInfo> {
        spec.stdin = stdin.is_some();
        let mut execution = self.exec(spec).await?;
        let input = execution.input.clone();
        drop(execution.input);
        let feed = async move {
            if let Some(data) = stdin {
                for chunk in data.chunks(crate::proto::CHUNK) {
                    if input
                        .send(Frame::Stdin(Bytes::copy_from_slice(chunk)))
                        .await
                        .is_err()
                    {
                        return;
                    }
                }
                let _ = input.send(Frame::StdinEnd).await;
            }
        };
        let read = async {
            while let Some(frame) = execution.frames.next().await {
                match frame.map_err(|e| match e {
                    crate::proto::FrameError::Io(e) => transport(e),
                    other => ClientError::Protocol(other.to_string()),
                })? {
                    Frame::Started(_) => {}
                    Frame::Stdout(b) => on_output(Stream::Stdout, b),
                    Frame::Stderr(b) => on_output(Stream::Stderr, b),
                    Frame::Exit(exit) => return Ok(*exit),
                    Frame::Error(e) => return Err(ClientError::Daemon(*e)),
                    other => {
                        return Err(ClientError::Protocol(format!("unexpected frame {other:?}")))
                    }
                }
            }
            Err(ClientError::Transport(
                "the command's stream ended before its exit".into(),
            ))
        };
        let ((), result) = tokio::join!(feed, read);
        result
    }

    pub async fn start_process(&self, spec: &ProcessSpec) -> Result<ProcessInfo> {
        self.json(Method::POST, "/v1/processes", Some(to_json(spec)))
            .await
    }

    pub async fn processes(&self) -> Result<Vec<ProcessInfo>> {
        self.json(Method::GET, "/v1/processes", None).await
    }

    pub async fn process(&self, id: &str) -> Result<ProcessDetail> {
        self.json(Method::GET, &format!("/v1/processes/{}", segment(id)), None)
            .await
    }

    /// Kills the process's tree and forgets it; answers with its final state and output.
    pub async fn kill_process(&self, id: &str) -> Result<ProcessDetail> {
        self.json(
            Method::DELETE,
            &format!("/v1/processes/{}", segment(id)),
            None,
        )
        .await
    }

    pub async fn wait_process(&self, id: &str, timeout_ms: u64) -> Result<ProcessInfo> {
        let path = format!("/v1/processes/{}/wait?timeout_ms={timeout_ms}", segment(id));
        self.json(Method::POST, &path, None).await
    }

    pub async fn signal_process(&self, id: &str, signal: i32) -> Result<ProcessInfo> {
        let path = format!("/v1/processes/{}/signal", segment(id));
        self.json(
            Method::POST,
            &path,
            Some(to_json(&SignalRequest { signal })),
        )
        .await
    }

    pub async fn stat(&self, path: &str) -> Result<FileStat> {
        self.json(
            Method::GET,
            &with_query("/v1/stat", &[("path", path)]),
            None,
        )
        .await
    }

    pub async fn list_dir(&self, path: &str) -> Result<DirListing> {
        self.json(Method::GET, &with_query("/v1/dir", &[("path", path)]), None)
            .await
    }

    /// A file's bytes, streamed, with its size.
    pub async fn read_file(
        &self,
        path: &str,
    ) -> Result<(Option<u64>, BoxStream<'static, Result<Bytes>>)> {
        let response = self
            .request(
                Method::GET,
                &with_query("/v1/files", &[("path", path)]),
                full(Vec::new()),
            )
            .await?;
        let size = response
            .headers()
            .get(SIZE_HEADER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse().ok());
        let stream = response
            .into_body()
            .into_data_stream()
            .map_err(transport)
            .boxed();
        Ok((size, stream))
    }

    /// Writes a file from a stream of chunks (replacing it whole once the stream ended).
    pub async fn write_file(
        &self,
        path: &str,
        mode: Option<u32>,
        mkdirs: bool,
        data: BoxStream<'static, std::io::Result<Bytes>>,
    ) -> Result<FileStat> {
        let mut query = vec![("path", path.to_owned()), ("mkdirs", mkdirs.to_string())];
        if let Some(mode) = mode {
            query.push(("mode", mode.to_string()));
        }
        let uri = format!(
            "/v1/files?{}",
            serde_urlencoded::to_string(&query).unwrap_or_default()
        );
        self.put_streamed(&uri, data).await
    }

    /// Extracts a tar archive, streamed, into the directory `dir` (which must exist), as the
    /// daemon's user. [`ClientError::Unsupported`] from a daemon older than this operation.
    pub async fn put_archive(
        &self,
        dir: &str,
        tar: BoxStream<'static, std::io::Result<Bytes>>,
    ) -> Result<ArchiveReport> {
        let uri = with_query("/v1/archive", &[("dir", dir)]);
        self.put_streamed(&uri, tar).await
    }

    /// A tar archive of `path` (absolute), streamed, as the Engine's archive download makes
    /// it: entries named from the path's last component down, symlinks not followed. A
    /// missing path is [`ClientError::Daemon`] of kind `NotFound` (before any byte);
    /// [`ClientError::Unsupported`] from a daemon older than this operation. A stream that
    /// ends in an error is a cut archive, never to be taken for a whole one.
    pub async fn get_archive(&self, path: &str) -> Result<BoxStream<'static, Result<Bytes>>> {
        let response = self
            .request(
                Method::GET,
                &with_query("/v1/archive", &[("path", path)]),
                full(Vec::new()),
            )
            .await?;
        Ok(response
            .into_body()
            .into_data_stream()
            .map_err(transport)
            .boxed())
    }

    /// A `PUT` whose body is streamed, answered with JSON.
    async fn put_streamed<T: DeserializeOwned>(
        &self,
        uri: &str,
        data: BoxStream<'static, std::io::Result<Bytes>>,
    ) -> Result<T> {
        let body = StreamBody::new(data.map_ok(hyper::body::Frame::data));
        let response = self
            .request(Method::PUT, uri, BodyExt::boxed_unsync(body))
            .await?;
        let bytes = collect(response.into_body()).await?;
        serde_json::from_slice(&bytes).map_err(|e| ClientError::Protocol(e.to_string()))
    }

    /// Ends the sandbox: every process gets `SIGTERM`, what is left after `grace_ms` gets
    /// `SIGKILL`, then the daemon exits (and its container with it). The answer comes before
    /// the end; when nothing was left to wait for, the connection may close instead, which
    /// is [`ClientError::is_transport`] and means the same.
    pub async fn shutdown(&self, grace_ms: u64) -> Result<()> {
        let body = serde_json::json!({ "grace_ms": grace_ms });
        self.empty(Method::POST, "/v1/shutdown", Some(to_json(&body)))
            .await
    }

    pub async fn remove(&self, path: &str, recursive: bool) -> Result<()> {
        let recursive = recursive.to_string();
        let uri = with_query("/v1/files", &[("path", path), ("recursive", &recursive)]);
        self.empty(Method::DELETE, &uri, None).await
    }

    pub async fn rename(&self, from: &str, to: &str) -> Result<()> {
        let body = RenameRequest {
            from: from.to_owned(),
            to: to.to_owned(),
        };
        self.empty(Method::POST, "/v1/rename", Some(to_json(&body)))
            .await
    }

    pub async fn mkdir(&self, path: &str, parents: bool) -> Result<FileStat> {
        let body = MkdirRequest {
            path: path.to_owned(),
            parents,
        };
        self.json(Method::POST, "/v1/mkdir", Some(to_json(&body)))
            .await
    }

    pub async fn wait_port(&self, port: u16, timeout_ms: u64) -> Result<PortState> {
        let body = WaitPort { port, timeout_ms };
        self.json(Method::POST, "/v1/ports/wait", Some(to_json(&body)))
            .await
    }

    /// A TCP connection to `port` on the sandbox's loopback, through the daemon: what is
    /// written goes to the socket, what the socket sends is read, and shutting the write side
    /// shuts the socket's. Dropping it closes the socket. Nothing listening on the port is
    /// [`ClientError::Daemon`] of kind `NotFound`; a daemon older than tunnels answers
    /// [`ClientError::Unsupported`].
    pub async fn connect_port(&self, port: u16) -> Result<PortStream> {
        // A small queue: the HTTP/2 stream's flow control is what bounds the bytes in flight.
        let (tx, rx) = mpsc::channel::<Bytes>(4);
        let body = StreamBody::new(
            tokio_stream::wrappers::ReceiverStream::new(rx)
                .map(|b| Ok(hyper::body::Frame::data(b))),
        );
        let response = self
            .request(
                Method::POST,
                &format!("/v1/ports/{port}/connect"),
                BodyExt::boxed_unsync(body),
            )
            .await?;
        let incoming: BoxStream<'static, std::io::Result<Bytes>> = response
            .into_body()
            .into_data_stream()
            .map_err(std::io::Error::other)
            .boxed();
        let sink = tokio_util::sync::PollSender::new(tx).sink_map_err(closed as fn(_) -> _);
        Ok(tokio::io::join(
            tokio_util::io::StreamReader::new(incoming),
            tokio_util::io::SinkWriter::new(tokio_util::io::CopyToBytes::new(sink)),
        ))
    }
}

/// A tunnel to a port of the sandbox ([`Client::connect_port`]): the response body read,
/// the request body written.
pub type PortStream = tokio::io::Join<
    tokio_util::io::StreamReader<BoxStream<'static, std::io::Result<Bytes>>, Bytes>,
    tokio_util::io::SinkWriter<
        tokio_util::io::CopyToBytes<
            futures::sink::SinkMapErr<
                tokio_util::sync::PollSender<Bytes>,
                fn(tokio_util::sync::PollSendError<Bytes>) -> std::io::Error,
            >,
        >,
    >,
>;

/// A write to a tunnel whose stream is gone.
fn closed(_: tokio_util::sync::PollSendError<Bytes>) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::BrokenPipe,
        "the connection to the sandbox's port is closed",
    )
}

fn to_json<T: serde::Serialize>(v: &T) -> Vec<u8> {
    serde_json::to_vec(v).unwrap_or_default()
}

fn full(bytes: Vec<u8>) -> ReqBody {
    http_body_util::Full::new(Bytes::from(bytes))
        .map_err(|never| match never {})
        .boxed_unsync()
}

fn with_query(path: &str, query: &[(&str, &str)]) -> String {
    format!(
        "{path}?{}",
        serde_urlencoded::to_string(query).unwrap_or_default()
    )
}

/// A path segment, percent-encoded.
fn segment(s: &str) -> String {
    serde_urlencoded::to_string([("", s)])
        .unwrap_or_default()
        .trim_start_matches('=')
        .replace('+', "%20")
}

async fn collect(body: hyper::body::Incoming) -> Result<Bytes> {
    Ok(body.collect().await.map_err(transport)?.to_bytes())
}

/// Whether the status is one the daemon uses for a missing path or process.
pub fn is_not_found(e: &ClientError) -> bool {
    e.kind() == Some(ErrorKind::NotFound)
}
