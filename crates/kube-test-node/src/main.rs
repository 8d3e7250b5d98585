//! `kube-test-node`: the test node agent (see the library's docs). Runs until SIGTERM or
//! SIGINT, leaving its containers for the next agent to adopt.

use clap::Parser as _;
use sandbox_agents_kube_test_node::{run, Settings};
use tokio_util::sync::CancellationToken;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "info,kube_client=warn,kube_runtime=warn,hyper=warn".into()),
        )
        .init();
    let settings = Settings::parse();
    let shutdown = CancellationToken::new();
    let signal = shutdown.clone();
    // Installed before anything else runs, so that no SIGTERM finds the default action.
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::spawn(async move {
        tokio::select! {
            _ = term.recv() => {}
            _ = tokio::signal::ctrl_c() => {}
        }
        tracing::info!("stopping; the pods' containers are left running");
        signal.cancel();
    });
    run(settings, shutdown).await
}
