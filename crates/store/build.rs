//! Recompiles the crate when a migration changes: `sqlx::migrate!` embeds them, and the query
//! macros check every query against the schema they make, but neither can tell cargo to watch
//! the directory itself.

fn main() {
    println!("cargo:rerun-if-changed=../../migrations");
}
