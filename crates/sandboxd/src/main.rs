//! `sandboxd`, the in-sandbox daemon (see the library's docs).
//!
//! - `sandboxd serve [--listen <ip:port>]`: the daemon, on the sandbox's abstract socket;
//!   exits quietly when one runs already. With `--listen`, on TCP too, for connections that
//!   start with the token whose SHA-256 is in `SANDBOXD_TOKEN_SHA256` (`sandboxd::tcp`);
//!   then a daemon already on the socket leaves this one serving TCP alone.
//! - `sandboxd connect`: a connection to it on stdin/stdout (starting it if need be); what
//!   the control plane runs.
//! - `sandboxd install <dir>`: copies this executable to `<dir>/sandboxd` (what an init
//!   container runs to put the daemon into a volume the sandbox mounts).
//! - `sandboxd version`.

use sandboxd::tcp::{TokenHash, TOKEN_ENV};
use std::ffi::OsString;
use std::net::SocketAddr;
use std::process::ExitCode;

const USAGE: &str =
    "usage: sandboxd serve [--listen <ip:port>] | connect | install <dir> | version";

#[allow(clippy::print_stdout)]
fn main() -> ExitCode {
    // The token's hash is taken out of the environment first, while this process has one
    // thread (no runtime yet, nothing spawned): every command and terminal the daemon starts
    // inherits its environment, and the sandbox's code has no use for the hash.
    // `remove_var` is sound here because no other thread can read the environment
    // concurrently; this edition does not mark it `unsafe`, a 2024 one will, and this is
    // the place its `unsafe` block belongs.
    let token_hash = std::env::var_os(TOKEN_ENV);
    std::env::remove_var(TOKEN_ENV);
    // The way to the egress proxy on a pod network, likewise: the daemon dials it, the
    // sandbox's tools reach it through the daemon's forwarder and need neither.
    let egress_proxy = std::env::var_os(sandboxd::egress::PROXY_ENV);
    let egress_token = std::env::var_os(sandboxd::egress::TOKEN_ENV);
    std::env::remove_var(sandboxd::egress::PROXY_ENV);
    std::env::remove_var(sandboxd::egress::TOKEN_ENV);

    let args: Vec<String> = std::env::args().skip(1).collect();
    let command = args.first().cloned().unwrap_or_default();
    let rest = args.get(1..).unwrap_or_default();
    let result = match command.as_str() {
        "serve" => {
            let listen = match listen_flag(rest) {
                Ok(listen) => listen,
                Err(e) => return usage(&e),
            };
            let tcp = match listen.map(|addr| token(token_hash).map(|hash| (addr, hash))) {
                None => None,
                Some(Ok(tcp)) => Some(tcp),
                Some(Err(e)) => {
                    eprintln!("sandboxd serve: {e}");
                    return ExitCode::from(1);
                }
            };
            let egress = match sandboxd::egress::Upstream::from_env(egress_proxy, egress_token) {
                Ok(egress) => egress,
                Err(e) => {
                    eprintln!("sandboxd serve: {e}");
                    return ExitCode::from(1);
                }
            };
            runtime().and_then(|rt| rt.block_on(serve(tcp, egress)))
        }
        "connect" => runtime().and_then(|rt| rt.block_on(sandboxd::bridge::run())),
        "install" => match rest {
            [dir] => install(std::path::Path::new(dir)),
            _ => return usage("install takes one directory"),
        },
        "version" => {
            println!(
                "sandboxd {} (protocol {})",
                env!("CARGO_PKG_VERSION"),
                sandboxd::proto::PROTOCOL
            );
            Ok(())
        }
        _ => return usage(""),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("sandboxd {command}: {e}");
            ExitCode::from(1)
        }
    }
}

fn usage(problem: &str) -> ExitCode {
    if !problem.is_empty() {
        eprintln!("sandboxd: {problem}");
    }
    eprintln!("{USAGE}");
    ExitCode::from(2)
}

fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| std::io::Error::new(e.kind(), format!("cannot start: {e}")))
}

/// `--listen <ip:port>` or `--listen=<ip:port>`, the only flag of `serve`.
fn listen_flag(args: &[String]) -> Result<Option<SocketAddr>, String> {
    let value = match args {
        [] => return Ok(None),
        [flag, value] if flag == "--listen" => value.as_str(),
        [flag] if flag.starts_with("--listen=") => &flag["--listen=".len()..],
        _ => return Err(format!("serve does not take {}", args.join(" "))),
    };
    value.parse().map(Some).map_err(|_| {
        format!("--listen takes an address and port such as 0.0.0.0:7077, not '{value}'")
    })
}

/// The hash `--listen` needs; a sentence saying what to set when it is missing or malformed.
fn token(hash: Option<OsString>) -> Result<TokenHash, String> {
    let Some(hash) = hash else {
        return Err(format!(
            "--listen needs {TOKEN_ENV} set to the hex SHA-256 of the sandbox's token, so that \
             only the control plane can connect; it is not set"
        ));
    };
    TokenHash::parse(&hash.to_string_lossy())
}

async fn serve(
    tcp: Option<(SocketAddr, TokenHash)>,
    egress: Option<sandboxd::egress::Upstream>,
) -> std::io::Result<()> {
    let Some((addr, expected)) = tcp else {
        return match sandboxd::socket::bind() {
            Ok(listener) => sandboxd::daemon::serve_on(Some(listener), None, egress).await,
            // Another daemon listens already: nothing to do.
            Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => Ok(()),
            Err(e) => Err(e),
        };
    };
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| std::io::Error::new(e.kind(), format!("cannot listen on {addr}: {e}")))?;
    // One parseable line: what `--listen` with port 0 bound, for whoever started it.
    eprintln!("sandboxd: listening on {}", listener.local_addr()?);
    let unix = match sandboxd::socket::bind() {
        Ok(unix) => Some(unix),
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => {
            eprintln!(
                "sandboxd: another daemon holds the sandbox's socket; this one serves TCP only"
            );
            None
        }
        Err(e) => return Err(e),
    };
    sandboxd::daemon::serve_on(unix, Some((listener, expected)), egress).await
}

/// Copies this executable to `<dir>/sandboxd`, 0755, through a temporary name renamed over
/// it, so that a reader sees the old file or the whole new one, never part of one.
fn install(dir: &std::path::Path) -> std::io::Result<()> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let named = |what: &str, e: std::io::Error| {
        std::io::Error::new(e.kind(), format!("{what} {}: {e}", dir.display()))
    };
    std::fs::create_dir_all(dir).map_err(|e| named("cannot create", e))?;
    let target = dir.join("sandboxd");
    let temporary = dir.join(format!(".sandboxd.{}.tmp", std::process::id()));
    let copy = || -> std::io::Result<()> {
        let mut source = std::fs::File::open("/proc/self/exe")?;
        let mut copy = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o755)
            .open(&temporary)?;
        std::io::copy(&mut source, &mut copy)?;
        // The mode asked at creation is cut by the umask.
        copy.set_permissions(std::fs::Permissions::from_mode(0o755))?;
        copy.sync_all()?;
        std::fs::rename(&temporary, &target)
    };
    copy().map_err(|e| {
        let _ = std::fs::remove_file(&temporary);
        named("cannot install into", e)
    })
}
