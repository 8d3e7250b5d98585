//! Mapping the Engine's errors onto [`SandboxError`].

use crate::SandboxError;
use bollard::errors::Error as DockerError;

/// The HTTP status the Engine answered with, if the error is an answer at all.
pub(crate) fn status(e: &DockerError) -> Option<u16> {
    match e {
        DockerError::DockerResponseServerError { status_code, .. } => Some(*status_code),
        _ => None,
    }
}

pub(crate) fn is_not_found(e: &DockerError) -> bool {
    status(e) == Some(404)
}

/// Any error as `Backend`, with the Engine's own message when it sent one.
pub(crate) fn backend(e: DockerError) -> SandboxError {
    match e {
        DockerError::DockerResponseServerError {
            status_code,
            message,
        } => SandboxError::Backend(format!("Docker Engine ({status_code}): {message}")),
        other => SandboxError::Backend(format!("Docker Engine: {other}")),
    }
}

/// The Engine's 409 for a container that stopped or is being removed under the call ("is not
/// running", "removal ... in progress"): a concurrent stop, which to the caller is the sandbox
/// gone (it is about to be), not a failure of ours.
pub(crate) fn is_stopping(e: &DockerError) -> bool {
    match e {
        DockerError::DockerResponseServerError {
            status_code: 409,
            message,
        } => {
            let m = message.to_ascii_lowercase();
            m.contains("is not running")
                || m.contains("removal of container")
                || m.contains("is restarting")
        }
        _ => false,
    }
}

/// A 404 about the container itself, or its stopping under the call ([`is_stopping`]),
/// becomes `NotFound(id)`; anything else `Backend`.
pub(crate) fn container(id: &str) -> impl FnOnce(DockerError) -> SandboxError + '_ {
    move |e| {
        if is_not_found(&e) || is_stopping(&e) {
            SandboxError::NotFound(id.to_owned())
        } else {
            backend(e)
        }
    }
}

/// For archive calls, where a 404 is either the container or the path.
pub(crate) fn archive(id: &str, path: &str, e: DockerError) -> SandboxError {
    match &e {
        DockerError::DockerResponseServerError {
            status_code: 404,
            message,
        } if message.to_ascii_lowercase().contains("no such container") => {
            SandboxError::NotFound(id.to_owned())
        }
        _ if is_stopping(&e) => SandboxError::NotFound(id.to_owned()),
        DockerError::DockerResponseServerError {
            status_code: 404, ..
        } => SandboxError::NoSuchPath(path.to_owned()),
        _ => backend(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(status_code: u16, message: &str) -> DockerError {
        DockerError::DockerResponseServerError {
            status_code,
            message: message.to_owned(),
        }
    }

    #[test]
    fn a_container_stopping_under_a_call_is_gone_to_the_caller() {
        for m in [
            "Container 3f2a is not running",
            "removal of container 3f2a is already in progress",
            "Container 3f2a is restarting, wait until the container is running",
        ] {
            assert!(
                matches!(container("3f2a")(answer(409, m)), SandboxError::NotFound(_)),
                "{m}"
            );
            assert!(
                matches!(
                    archive("3f2a", "/w", answer(409, m)),
                    SandboxError::NotFound(_)
                ),
                "{m}"
            );
        }
        assert!(matches!(
            container("3f2a")(answer(409, "conflict: name in use")),
            SandboxError::Backend(_)
        ));
        assert!(matches!(
            container("3f2a")(answer(500, "is not running")),
            SandboxError::Backend(_)
        ));
    }
}
