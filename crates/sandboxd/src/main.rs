//! `sandboxd`, the in-sandbox daemon (see the library's docs).
//!
//! - `sandboxd serve`: the daemon, on the sandbox's abstract socket; exits quietly when one
//!   runs already.
//! - `sandboxd connect`: a connection to it on stdin/stdout (starting it if need be); what
//!   the control plane runs.
//! - `sandboxd version`.

#[allow(clippy::print_stdout)]
fn main() -> std::process::ExitCode {
    let command = std::env::args().nth(1).unwrap_or_default();
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("sandboxd: cannot start: {e}");
            return std::process::ExitCode::from(1);
        }
    };
    let result = match command.as_str() {
        "serve" => runtime.block_on(async {
            match sandboxd::socket::bind() {
                Ok(listener) => sandboxd::daemon::serve(listener).await,
                // Another daemon listens already: nothing to do.
                Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => Ok(()),
                Err(e) => Err(e),
            }
        }),
        "connect" => runtime.block_on(sandboxd::bridge::run()),
        "version" => {
            println!(
                "sandboxd {} (protocol {})",
                env!("CARGO_PKG_VERSION"),
                sandboxd::proto::PROTOCOL
            );
            Ok(())
        }
        _ => {
            eprintln!("usage: sandboxd serve | connect | version");
            return std::process::ExitCode::from(2);
        }
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("sandboxd {command}: {e}");
            std::process::ExitCode::from(1)
        }
    }
}
