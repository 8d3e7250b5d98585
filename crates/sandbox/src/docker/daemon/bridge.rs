//! The control plane's end of a bridge: `sandboxd connect` started as a Docker exec, its
//! stdin and stdout (the Engine's attach stream, hijacked from the exec's start) joined into
//! one byte stream for the HTTP/2 client.
//!
//! Why this transport: it needs no port (nothing another sandbox could reach), it is the
//! Engine API itself (a remote `DOCKER_HOST` works, and so would a Kubernetes exec), a new
//! control-plane process simply opens its own (background processes live in the daemon,
//! not in the connection), and the one Docker exec it costs (60–70 ms) is paid once per
//! sandbox and process instead of once per command (`docs/benchmarks.md`).

use super::volume::BINARY;
use crate::docker::{error, SANDBOX_GID, SANDBOX_UID};
use crate::{Result, SandboxError, WORKDIR};
use bollard::container::LogOutput;
use bollard::exec::{CreateExecOptions, StartExecOptions, StartExecResults};
use bollard::Docker;
use futures::StreamExt;

/// A byte stream to the daemon of one sandbox.
pub(crate) type Io = tokio::io::Join<
    tokio_util::io::StreamReader<
        futures::stream::BoxStream<'static, std::io::Result<bytes::Bytes>>,
        bytes::Bytes,
    >,
    std::pin::Pin<Box<dyn tokio::io::AsyncWrite + Send>>,
>;

/// Opens a bridge into the sandbox `id`.
pub(crate) async fn open(docker: &Docker, id: &str) -> Result<Io> {
    let options = CreateExecOptions {
        attach_stdin: Some(true),
        attach_stdout: Some(true),
        attach_stderr: Some(true),
        tty: Some(false),
        cmd: Some(vec![BINARY.to_owned(), "connect".to_owned()]),
        privileged: Some(false),
        user: Some(format!("{SANDBOX_UID}:{SANDBOX_GID}")),
        working_dir: Some(WORKDIR.to_owned()),
        ..Default::default()
    };
    let created = docker
        .create_exec(id, options)
        .await
        .map_err(error::container(id))?;
    let start = StartExecOptions {
        detach: false,
        tty: false,
        output_capacity: Some(256 * 1024),
    };
    let (output, input) = match docker
        .start_exec(&created.id, Some(start))
        .await
        .map_err(error::container(id))?
    {
        StartExecResults::Attached { output, input } => (output, input),
        StartExecResults::Detached => {
            return Err(SandboxError::Backend(
                "the Engine did not attach the daemon's bridge".into(),
            ))
        }
    };
    let container = id.to_owned();
    let bytes = output
        .filter_map(move |item| {
            let container = container.clone();
            async move {
                match item {
                    Ok(LogOutput::StdOut { message }) => Some(Ok(message)),
                    Ok(LogOutput::StdErr { message }) => {
                        // What the bridge says when it cannot reach or start the daemon.
                        tracing::warn!(container.id = %container, message = %String::from_utf8_lossy(&message).trim_end(), "the sandbox daemon's bridge");
                        None
                    }
                    Ok(_) => None,
                    Err(e) => Some(Err(std::io::Error::other(e))),
                }
            }
        })
        .boxed();
    Ok(tokio::io::join(
        tokio_util::io::StreamReader::new(bytes),
        input,
    ))
}
