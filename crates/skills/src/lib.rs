//! Skills: what an agent knows how to do beyond its instructions, as trees of `SKILL.md`
//! folders. This crate owns skill bundles today (named trees of a project that CI pushes to as
//! archives, [`Bundles`]); resolving an agent's skills source at boot and the skills index the
//! model sees come here next.
//!
//! Why a crate of its own: bundles need the database and the blob store, which
//! `sandbox-agents-workspace` (pure functions of bytes) must not, and they are not part of a
//! sandbox's lifecycle, which `sandbox-agents-sessions` owns. The lifecycle will call this
//! crate to stage an agent's skills, never the other way round.

mod bundles;

pub use bundles::Bundles;
