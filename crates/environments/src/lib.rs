//! Environments: named sandbox configurations of a project that sessions start in
//! ([`Environments`]: create, update, archive, delete), and, on a backend that builds images,
//! the image builds that bake their packages in (`builds`: the backend is handed a recipe in
//! sandbox terms): started when a configuration with packages is saved, bounded in number,
//! recovered after a restart, and collected when nothing needs them.
//!
//! Why a crate of its own: environments need the sandbox backend (builds) and the lifecycle
//! (a finished build boots the sessions that waited for it), and the lifecycle must not
//! depend on them: `sessions` reads the rows it needs from the store (`store::environments`)
//! and this crate tells it when a build is done (`Sessions::boot_waiting`).

pub mod analysis;
mod builds;
pub mod image;
mod service;
mod wiring;

pub use service::{EnvironmentSettings, Environments};
