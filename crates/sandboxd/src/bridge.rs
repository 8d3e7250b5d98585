//! `sandboxd connect`: what the control plane runs (as a Docker exec) to reach the daemon.
//! Its stdin and stdout become one end of a connection to the daemon's socket; the daemon
//! is started first when none answers, so the first connection after a boot, or after the
//! daemon died, brings it (back) up.

use crate::socket;
use std::io;
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite};

/// How long a connection waits for a daemon it started to listen.
const START_WAIT: Duration = Duration::from_secs(5);

/// Connects (starting the daemon if need be) and relays until either side closes.
pub async fn run() -> io::Result<()> {
    let stream = connect_or_start().await?;
    let (mut from_daemon, mut to_daemon) = stream.into_split();
    let (mut stdin, mut stdout) = stdio()?;
    tokio::select! {
        r = tokio::io::copy(&mut stdin, &mut to_daemon) => { r?; }
        r = tokio::io::copy(&mut from_daemon, &mut stdout) => { r?; }
    }
    Ok(())
}

async fn connect_or_start() -> io::Result<tokio::net::UnixStream> {
    if let Ok(s) = socket::connect() {
        return Ok(s);
    }
    start_daemon()?;
    let deadline = Instant::now() + START_WAIT;
    let mut pause = Duration::from_millis(1);
    loop {
        match socket::connect() {
            Ok(s) => return Ok(s),
            Err(e) if Instant::now() >= deadline => {
                return Err(io::Error::new(
                    e.kind(),
                    format!("the daemon did not start listening within {START_WAIT:?}: {e}"),
                ))
            }
            Err(_) => {
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_millis(50));
            }
        }
    }
}

/// Starts `sandboxd serve` in a process group of its own, detached from this connection:
/// it outlives it, and whoever is PID 1 reaps it. Two connections starting one each is
/// fine: the second cannot bind the socket and exits.
fn start_daemon() -> io::Result<()> {
    use std::os::unix::process::CommandExt;
    let exe = std::env::current_exe()?;
    std::process::Command::new(exe)
        .arg("serve")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .process_group(0)
        .spawn()?;
    Ok(())
}

type Reader = Box<dyn AsyncRead + Unpin + Send>;
type Writer = Box<dyn AsyncWrite + Unpin + Send>;

/// Stdin and stdout, as non-blocking pipes when they are pipes (a Docker exec's are), so no
/// byte waits for a thread hop; tokio's blocking wrappers otherwise.
fn stdio() -> io::Result<(Reader, Writer)> {
    use std::os::fd::AsFd;
    use tokio::net::unix::pipe;
    let stdin: Reader = match io::stdin()
        .as_fd()
        .try_clone_to_owned()
        .and_then(pipe::Receiver::from_owned_fd)
    {
        Ok(r) => Box::new(r),
        Err(_) => Box::new(tokio::io::stdin()),
    };
    let stdout: Writer = match io::stdout()
        .as_fd()
        .try_clone_to_owned()
        .and_then(pipe::Sender::from_owned_fd)
    {
        Ok(w) => Box::new(w),
        Err(_) => Box::new(tokio::io::stdout()),
    };
    Ok((stdin, stdout))
}
