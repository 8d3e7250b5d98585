//! The daemon: an HTTP/2 server on the sandbox's abstract socket (`crate::socket`), and on
//! TCP behind a token when asked (`crate::tcp`), one connection per control-plane process
//! (each reaches it through a bridge of its own, or over the network), all connections
//! sharing the background processes.
//!
//! It runs as the sandbox user and holds no privilege that user lacks: paths are whatever
//! the user may read or write, and commands are the user's. What it guards is itself: every
//! body and frame has a limit, a malformed exec stream closes the connection it came on, and
//! nothing a request sends can take the daemon down.

mod archive;
mod error;
mod exec;
mod files;
mod kill;
mod output;
mod pack;
mod ports;
mod processes;
mod pty;
mod shutdown;
mod tunnel;

pub use error::Failure;

use axum::routing::{get, post};
use axum::Router;
use std::sync::Arc;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::Notify;

/// What every connection shares.
#[derive(Default)]
pub struct Daemon {
    processes: processes::Processes,
    tunnels: tunnel::Tunnels,
}

/// Closes its connection when notified (a protocol error on one of its streams).
#[derive(Clone, Default)]
pub(crate) struct ConnectionGuard(Arc<Notify>);

impl ConnectionGuard {
    pub(crate) fn close(&self) {
        self.0.notify_one();
    }
}

/// The routes; `guard` closes the connection they are served on.
fn router(daemon: Arc<Daemon>, guard: ConnectionGuard) -> Router {
    Router::new()
        .route("/v1/hello", get(hello))
        .route("/v1/exec", post(exec::exec))
        .route("/v1/processes", post(processes::start).get(processes::list))
        .route(
            "/v1/processes/{id}",
            get(processes::detail).delete(processes::kill),
        )
        .route("/v1/processes/{id}/wait", post(processes::wait))
        .route("/v1/processes/{id}/signal", post(processes::signal))
        .route(
            "/v1/files",
            get(files::read).put(files::write).delete(files::remove),
        )
        .route("/v1/archive", get(pack::pack).put(archive::extract))
        .route("/v1/stat", get(files::stat))
        .route("/v1/dir", get(files::list))
        .route("/v1/rename", post(files::rename))
        .route("/v1/mkdir", post(files::mkdir))
        .route("/v1/ports/wait", post(ports::wait))
        .route("/v1/ports/{port}/connect", post(tunnel::connect))
        .route("/v1/shutdown", post(shutdown::shutdown))
        .layer(axum::Extension(guard))
        .with_state(daemon)
}

async fn hello() -> axum::Json<crate::proto::Hello> {
    axum::Json(crate::proto::Hello {
        protocol: crate::proto::PROTOCOL,
        version: env!("CARGO_PKG_VERSION").to_owned(),
        pid: std::process::id(),
        uid: nix::unistd::getuid().as_raw(),
    })
}

/// Serves one connection until it closes, or until one of its streams breaks the protocol.
pub async fn serve_connection<IO>(daemon: Arc<Daemon>, io: IO)
where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let guard = ConnectionGuard::default();
    let service = hyper_util::service::TowerToHyperService::new(router(daemon, guard.clone()));
    let connection = hyper::server::conn::http2::Builder::new(hyper_util::rt::TokioExecutor::new())
        .max_concurrent_streams(256)
        .max_header_list_size(16 * 1024)
        .initial_stream_window_size(1 << 20)
        .initial_connection_window_size(8 << 20)
        .max_send_buf_size(1 << 20)
        .serve_connection(hyper_util::rt::TokioIo::new(io), service);
    tokio::select! {
        result = connection => {
            if let Err(e) = result {
                tracing::debug!(error = %e, "connection ended");
            }
        }
        () = guard.0.notified() => tracing::warn!("closed a connection that broke the protocol"),
    }
}

/// Accepts connections on `listener` for ever, serving each whose preamble carries the token
/// that hashes to `expected` (`crate::tcp`). A transient accept failure (out of descriptors,
/// a connection aborted before it was taken) is logged and the loop goes on; another ends it.
async fn serve_tcp(
    listener: tokio::net::TcpListener,
    daemon: Arc<Daemon>,
    expected: crate::tcp::TokenHash,
) -> std::io::Result<()> {
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(e) => {
                accept_failed("TCP", e).await?;
                continue;
            }
        };
        let daemon = daemon.clone();
        tokio::spawn(async move {
            match crate::tcp::admit(stream, &expected).await {
                Ok(stream) => serve_connection(daemon, stream).await,
                // One line per refusal, on stderr (the pod's log): the daemon has no other.
                Err(why) => eprintln!("sandboxd: refused a connection from {peer}: {why}"),
            }
        });
    }
}

/// Accepts connections on `listener` for ever.
pub async fn serve(listener: tokio::net::UnixListener) -> std::io::Result<()> {
    serve_on(Some(listener), None, None).await
}

/// Accepts connections on the abstract socket's `listener` and on `tcp` (behind its token),
/// whichever are given, for ever; all share one [`Daemon`]. `egress`: the proxy on a pod
/// network, when the sandbox has no socket to it mounted.
pub async fn serve_on(
    unix: Option<tokio::net::UnixListener>,
    tcp: Option<(tokio::net::TcpListener, crate::tcp::TokenHash)>,
    egress: Option<crate::egress::Upstream>,
) -> std::io::Result<()> {
    let daemon = Arc::new(Daemon::default());
    // The daemon starts with the sandbox (the control plane connects right after the
    // start), before anything runs in it: the proxy is there for the first command.
    tokio::spawn(crate::egress::forward(egress));
    let tcp = async {
        match tcp {
            Some((listener, expected)) => serve_tcp(listener, daemon.clone(), expected).await,
            None => std::future::pending().await,
        }
    };
    let unix = async {
        let Some(listener) = unix else {
            return std::future::pending().await;
        };
        loop {
            match listener.accept().await {
                Ok((stream, _)) => {
                    tokio::spawn(serve_connection(daemon.clone(), stream));
                }
                Err(e) => accept_failed("the socket", e).await?,
            }
        }
    };
    tokio::select! {
        result = tcp => result,
        result = unix => result,
    }
}

/// After a failed accept: a transient failure (out of file descriptors or memory, a
/// connection aborted before it was taken) is a line on stderr and a pause, so that a
/// listener out of descriptors does not spin while connections close and free some; any
/// other is the daemon's end.
async fn accept_failed(listener: &str, e: std::io::Error) -> std::io::Result<()> {
    use nix::errno::Errno;
    let transient = matches!(
        e.raw_os_error().map(Errno::from_raw),
        Some(
            Errno::EMFILE
                | Errno::ENFILE
                | Errno::ENOBUFS
                | Errno::ENOMEM
                | Errno::ECONNABORTED
                | Errno::EINTR
                | Errno::EPROTO
                | Errno::EPERM
                | Errno::ETIMEDOUT
        )
    );
    if !transient {
        return Err(e);
    }
    eprintln!("sandboxd: accepting a connection on {listener} failed: {e}; going on");
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    Ok(())
}
