//! The daemon: an HTTP/2 server on the sandbox's abstract socket (`crate::socket`), one
//! connection per control-plane process (each reaches it through a bridge of its own), all
//! connections sharing the background processes.
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
mod ports;
mod processes;
mod pty;
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
        .route("/v1/archive", axum::routing::put(archive::extract))
        .route("/v1/stat", get(files::stat))
        .route("/v1/dir", get(files::list))
        .route("/v1/rename", post(files::rename))
        .route("/v1/mkdir", post(files::mkdir))
        .route("/v1/ports/wait", post(ports::wait))
        .route("/v1/ports/{port}/connect", post(tunnel::connect))
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

/// Accepts connections on `listener` for ever.
pub async fn serve(listener: tokio::net::UnixListener) -> std::io::Result<()> {
    let daemon = Arc::new(Daemon::default());
    // The daemon starts with the sandbox (the control plane connects right after the
    // start), before anything runs in it: the proxy is there for the first command.
    tokio::spawn(crate::egress::forward());
    loop {
        let (stream, _) = listener.accept().await?;
        tokio::spawn(serve_connection(daemon.clone(), stream));
    }
}
