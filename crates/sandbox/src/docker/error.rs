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

/// A 404 about the container itself becomes `NotFound(id)`; anything else `Backend`.
pub(crate) fn container(id: &str) -> impl FnOnce(DockerError) -> SandboxError + '_ {
    move |e| {
        if is_not_found(&e) {
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
        DockerError::DockerResponseServerError {
            status_code: 404, ..
        } => SandboxError::NoSuchPath(path.to_owned()),
        _ => backend(e),
    }
}
