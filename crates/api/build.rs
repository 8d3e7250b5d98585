//! Rebuilds the crate when the web UI it embeds changes. A release build embeds `web/dist`
//! (see `src/ui.rs`), but the derive that does it only tracks the files that were there, so
//! a new build of the UI (new hashed names) or a first one would go unnoticed. Debug builds
//! read the folder at run time and need nothing.
//!
//! Only existing paths are watched: Cargo re-runs a build script on every build while a
//! watched path is missing. Without `web/dist`, `web/` is watched instead (where the folder
//! appears); without `web/` either, nothing is.

use std::path::Path;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    if std::env::var_os("CARGO_CFG_DEBUG_ASSERTIONS").is_some() {
        return;
    }
    let web = Path::new("../../web");
    let dist = web.join("dist");
    if dist.is_dir() {
        println!("cargo:rerun-if-changed={}", dist.display());
    } else if web.is_dir() {
        println!("cargo:rerun-if-changed={}", web.display());
    }
}
