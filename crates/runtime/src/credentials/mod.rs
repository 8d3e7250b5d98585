//! Credentials a project stores for its sandboxes: secrets (values that become environment
//! variables at boot) and git deploy keys (used by the control plane, never by a sandbox).
//! Every stored value is sealed under the deployment's master key with its owner's id as
//! associated data; nothing here returns or logs a plaintext except to the code that uses it.

pub mod git_keys;
pub mod git_probe;
pub mod secrets;
