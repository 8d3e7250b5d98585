//! Agent memory in the run loop: the system prompt's memory section (`prompt.rs`), and the
//! consolidation that merges what a stopped session learnt into its agent's store
//! (`consolidate.rs` the worker, `reply.rs` the strict format the model answers in).
//!
//! The lifecycle (`sandbox-agents-sessions`, `memory.rs`) stages the store under `memories/`
//! at boot and queues a consolidation at a stop; this crate runs the queue, because the model
//! call needs the model clients and the lifecycle never imports the loop.

mod consolidate;
mod prompt;
mod reply;

pub use consolidate::CONSOLIDATION_MARKER;
pub(crate) use prompt::section;
