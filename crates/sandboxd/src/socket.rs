//! Where the daemon listens inside the sandbox: an abstract Unix socket. It needs no
//! writable directory (any image works, a read-only root included) and is private to the
//! sandbox's network namespace: other sandboxes cannot reach it, and nothing is published.
//!
//! Every process of the sandbox can connect to it, as it can to anything the sandbox user
//! runs: the daemon holds no privilege the sandbox user lacks, and the control plane treats
//! what it answers as the sandbox's own (untrusted) output.

use std::io;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::SocketAddr;

/// The socket's abstract name.
pub const NAME: &[u8] = b"sandbox-agents-sandboxd";

fn address() -> io::Result<SocketAddr> {
    SocketAddr::from_abstract_name(NAME)
}

/// Binds the daemon's socket; `AddrInUse` when a daemon runs already.
pub fn bind() -> io::Result<tokio::net::UnixListener> {
    let listener = std::os::unix::net::UnixListener::bind_addr(&address()?)?;
    listener.set_nonblocking(true)?;
    tokio::net::UnixListener::from_std(listener)
}

/// Connects to the running daemon.
pub fn connect() -> io::Result<tokio::net::UnixStream> {
    let stream = std::os::unix::net::UnixStream::connect_addr(&address()?)?;
    stream.set_nonblocking(true)?;
    tokio::net::UnixStream::from_std(stream)
}
