//! `fake-model --script script.json --bind 127.0.0.1:0`: serves a script until interrupted.
//! The first line on stdout is `listening on http://ADDR`, so a test can read the port.

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context;
use clap::Parser;
use sandbox_agents_fake_model::{router, FakeState, Script};

/// A scripted fake model server (OpenAI chat-completions wire format).
#[derive(Parser)]
struct Args {
    /// A JSON script: `{"rules": [...]}` or a bare array of rules. None = no rules yet (set one
    /// with PUT /_script).
    #[arg(long)]
    script: Option<PathBuf>,
    /// The address to listen on; port 0 picks a free one.
    #[arg(long, default_value = "127.0.0.1:0")]
    bind: SocketAddr,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let script = match &args.script {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("could not read the script {}", path.display()))?;
            Script::from_json(&text)
                .with_context(|| format!("{} is not a valid script", path.display()))?
        }
        None => Script::default(),
    };
    let listener = tokio::net::TcpListener::bind(args.bind)
        .await
        .with_context(|| format!("could not listen on {}", args.bind))?;
    let addr = listener.local_addr()?;
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "listening on http://{addr}")?;
    stdout.flush()?;
    drop(stdout);
    axum::serve(listener, router(FakeState::new(script)))
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await?;
    Ok(())
}
