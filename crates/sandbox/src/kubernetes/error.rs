//! The API server's errors in sandbox terms.

use crate::SandboxError;

/// The HTTP status of an error the API server answered with, if it answered.
pub fn status(e: &kube::Error) -> Option<u16> {
    match e {
        kube::Error::Api(s) => Some(s.code),
        _ => None,
    }
}

pub fn is_not_found(e: &kube::Error) -> bool {
    status(e) == Some(404)
}

/// Any other failure of a call to the API server.
pub fn api(e: kube::Error) -> SandboxError {
    SandboxError::Backend(format!("the Kubernetes API server: {e}"))
}
