use clap::Parser;
use sandbox_agents_server::config::{Cli, Command};
use sandbox_agents_server::{migrate, serve, shutdown_signal, teardown, telemetry};
use tokio_util::sync::CancellationToken;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    // Kept to the end: dropping it flushes the traces still batched.
    let telemetry = telemetry::init(cli.config.log_format);
    tracing::debug!(config = ?cli.config, "configuration");
    let result = match cli.command.unwrap_or(Command::Serve) {
        Command::Serve => {
            let shutdown = CancellationToken::new();
            let trigger = shutdown.clone();
            tokio::spawn(async move {
                shutdown_signal().await;
                trigger.cancel();
            });
            serve(cli.config, shutdown).await
        }
        Command::Migrate => migrate(cli.config).await,
        Command::Teardown => teardown(cli.config).await,
    };
    let code = match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{e:#}");
            std::process::ExitCode::FAILURE
        }
    };
    drop(telemetry);
    code
}
