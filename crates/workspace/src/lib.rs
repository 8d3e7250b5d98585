//! What a sandbox starts from, and how files cross its boundary.
//!
//! This crate owns the bytes, not the sessions: turning a manifest into the workspace's first
//! archive ([`manifest`]), where archives live between boots ([`blobs`]), reading workspaces
//! out of tar archives without following links ([`archive`], [`stream`]), the tar framing of
//! an upload ([`upload`]), and the confinement scripts that keep every path a caller names
//! inside `/workspace` ([`scripts`], [`paths`]), and `s3_mount` entries read and written back
//! by the control plane's own S3 client ([`s3`]; archives leave them out, [`exclude`]).
//!
//! Why the boundary is here: everything in it is a pure function of bytes and a sandbox
//! backend, with no session rows and no transactions, so it can be tested on its own and
//! grown without touching the lifecycle. What a sandbox starts from goes here as it arrives:
//! skills trees, skill bundles, git checkouts and bucket mounts are more
//! sources of a first workspace, staged like the manifest is. The lifecycle
//! (`sandbox-agents-sessions`) decides *when* to stage, archive or restore; this crate says
//! *how*.
//!
//! Entry points: [`ManifestPolicy`] with [`build_archive`] for a first workspace, and
//! [`BlobStore`] for archives.

pub mod archive;
pub mod blobs;
pub mod bundle;
pub mod exclude;
pub mod listing;
pub mod manifest;
pub mod paths;
pub mod s3;
pub mod scripts;
pub mod skills_tree;
pub mod stream;
pub mod upload;

#[cfg(test)]
mod test_tar;

pub use blobs::{BlobLocation, BlobStore, ByteStream, LocalBlobStore, ObjectBlobStore};
pub use manifest::{build_archive, git_checkouts, ManifestPolicy};
pub use stream::FileContent;
