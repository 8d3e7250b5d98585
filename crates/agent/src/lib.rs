//! Runs: one turn of the agent loop (steps, tools, client tools, usage, exactly one
//! terminal event), from `POST .../messages` to its
//! terminal event.
//!
//! * starting a turn (`start.rs`), and driving it (`drive.rs`): the turn loop (`turn.rs`)
//!   builds the turn's context (`context.rs`), then its frame (`frame.rs`) takes model
//!   steps (`step.rs`) and runs their tool calls (`tool_round.rs`) until the model answers
//!   without tool calls, the turn limit, a failure, a cancel or a park (`stop.rs`), adding
//!   to what the turn accumulates (`tally.rs`);
//! * who speaks (`speaker.rs`): the conversation's holder (the session's agent, or the one a
//!   handoff gave it to), or a subagent called as a tool in a nested frame (`subagents.rs`),
//!   each with its own instructions, model and tools, in the same sandbox;
//! * compaction of what the model sees when it nears the model's input window
//!   (`compaction.rs`), before each model call of any frame;
//! * the tools: sandbox tools (`tools.rs`, run through the lifecycle's `exec` and files API)
//!   and client tools (`client_tools.rs`), whose deferrable calls park the run
//!   (`park.rs`);
//! * memory (`memory/`): the system prompt's memory section, and the worker that
//!   consolidates what a stopped session learnt into its agent's store;
//! * the end: exactly one terminal event per run (`finish.rs`), with usage (`usage.rs`);
//!   cancellation (`cancel.rs`); which process drives which run, and the recovery of runs
//!   whose process died (`liveness.rs`).
//!
//! Invariants:
//! * Interrupt and stop return only after the cancelled terminal event is committed.
//! * A run is driven by the process whose liveness key it carries; a run whose process is gone
//!   is failed by the recovery sweep. A parked run has no process and survives restarts until
//!   its calls are answered or it is cancelled.
//! * Exactly one terminal event per run, whatever the nesting: only the run's frame ends it;
//!   a subagent's end is its caller's tool result.
//!
//! Why the boundary is here: this crate depends on the lifecycle (`sandbox-agents-sessions`)
//! and never the other way round. What the lifecycle needs from runs goes through its
//! `RunHooks` trait, which [`Runs::new`] gives the lifecycle as it builds it (`hooks.rs`).
//! What grows the loop goes here: memory and compaction (the turn's context), more tools; a
//! Python kernel or an in-sandbox daemon is reached through the lifecycle like `exec`.
//!
//! Entry point: [`Runs`].

mod admission;
mod approvals;
mod budget;
mod cancel;
mod client_tools;
mod compaction;
mod context;
pub mod definitions;
mod drive;
mod finish;
mod frame;
mod hooks;
mod liveness;
mod local;
mod mcp;
mod memory;
mod models;
mod park;
mod service;
mod speaker;
mod spend;
mod start;
mod step;
mod stop;
mod subagents;
mod tally;
mod tool_output;
mod tool_round;
mod tools;
mod turn;
mod usage;
mod wiring;

pub use mcp::hub as mcp_hub;
pub use memory::CONSOLIDATION_MARKER;
pub use models::ModelClients;
pub use service::Runs;
pub use start::{PreparedMessage, DEFAULT_MAX_TURNS, MAX_MAX_TURNS};
pub use tools::MAX_TOOL_OUTPUT;
