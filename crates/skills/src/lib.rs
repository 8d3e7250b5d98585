//! Skills: what an agent knows how to do beyond its instructions, as trees of `SKILL.md`
//! folders. This crate owns skill bundles (named trees of a project that CI pushes to as
//! archives, [`Bundles`]), what a `bundle` source means at a boot
//! ([`source::resolve_bundle`]) and the index of a staged tree that the model is told about
//! ([`source::index`]). Putting the tree into the sandbox is the lifecycle's
//! (`sandbox-agents-sessions`, `skills.rs`), which calls this crate.
//!
//! Why a crate of its own: bundles need the database and the blob store, which
//! `sandbox-agents-workspace` (pure functions of bytes) must not, and they are not part of a
//! sandbox's lifecycle, which `sandbox-agents-sessions` owns. The lifecycle will call this
//! crate to stage an agent's skills, never the other way round.

mod bundles;
pub mod source;

pub use bundles::Bundles;
