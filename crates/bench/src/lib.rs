//! What the benchmark binaries share: the PostgreSQL cluster they run in (and a database of
//! their own in it), and percentiles.

pub mod cluster;
pub mod stats;
