//! The sandbox lifecycle service: a session's container from boot to delete, and everything
//! done to it while it lives.
//!
//! * boot: [`create`](Sessions::create) records the session and boots it in the background
//!   (`boot.rs` records the outcome, `provision.rs` gets the sandbox and its first workspace,
//!   `pool.rs` keeps started sandboxes waiting); [`start`](Sessions::start) boots a stopped
//!   one again and [`wake`](Sessions::wake) boots one for a run that needs it;
//! * [`stop`](Sessions::stop) archives the workspace and removes the container; the idle
//!   reaper (`periodic.rs`) stops sandboxes nobody used for their TTL;
//!   [`delete`](Sessions::delete) removes everything without leaks (`garbage.rs`, and
//!   `projects.rs` for a whole project);
//! * memory (`memory.rs`): the agent's store staged under `memories/` at every boot, and
//!   read back at a stop to queue its consolidation;
//! * while it runs: [`exec`](Sessions::exec), the files API (`files/`), snapshots
//!   (`snapshots.rs`);
//! * in any state: [`update`](Sessions::update) its title, metadata and own network policy
//!   (`update.rs`, with [`network_changed`](Sessions::network_changed), the egress proxy's
//!   hook);
//! * after a restart: the reconciler (`reconciler.rs`) adopts, stops or re-boots sessions and
//!   removes containers nobody owns.
//!
//! Lifecycle operations on one session are serialised across every server process by a lease
//! on the session (`lease.rs`): a row naming the holding process by its liveness key
//! (`liveness.rs`), held by no database connection while the work goes on. Boots are taken on
//! by one process at a time, a bounded number at once, the rest waiting their turn; the sweep
//! boots again whatever no live process drives (`boot_queue.rs`). A row change and the event
//! announcing it always commit in one transaction (the event log locks the session row), so a
//! reader who sees `session.status_running` finds the row running.
//!
//! Why the boundary is here: the lifecycle is what a sandbox backend, the blob store and the
//! session rows have in common, and it must work with no run loop at all. **The lifecycle
//! never imports the loop**: what it needs from runs (cancel the run in flight before a
//! stop, start the first prompt in the boot's transaction, recover runs whose process died)
//! goes through [`RunHooks`], which `sandbox-agents-agent` implements and [`Sessions::new`]
//! requires ([`SessionHooks`]). A second sandbox backend is a `sandbox` crate matter; what a
//! sandbox starts from (skills, git checkouts, bucket mounts) is staged by
//! `sandbox-agents-workspace` and chosen in `provision.rs`; an in-sandbox daemon or kernel is
//! started by the boot and reached like `exec`. Environments are
//! `sandbox-agents-environments`' (it imports this crate, never the other way round): a
//! session reads its environment's rows from the store at create and boot, waits while its
//! image builds, and is booted by the build's end ([`Sessions::boot_waiting`]).
//!
//! Entry point: [`Sessions`].

mod admission;
mod boot;
mod boot_queue;
mod checkout;
mod create;
mod disk;
mod exec;
pub mod files;
mod garbage;
mod hooks;
mod kernel;
mod lease;
mod liveness;
mod lost;
mod memory;
mod mounts;
mod periodic;
mod pin;
mod pool;
mod processes;
mod projects;
mod provision;
mod reconciler;
mod running;
mod sandbox_files;
mod service;
mod skills;
mod snapshots;
mod spend_limit;
mod start;
mod stdio;
mod stop;
mod terminal;
pub mod trust;
mod update;

pub use checkout::CHECKOUT_TIMEOUT;
pub use create::Prepared as PreparedSession;
pub use exec::{ExecOutcome, OutputPieces, PreparedExec, MAX_OUTPUT_BYTES};
pub use hooks::{EnvironmentHooks, RunHooks};
pub use kernel::{
    CellOptions, CellRun, KernelContext, DEFAULT_CELL_TIMEOUT, MAX_CELL_TIMEOUT, MAX_CONTEXTS,
};
pub use lease::not_found;
pub use liveness::AliveProcesses;
pub use processes::MAX_ENV as MAX_PROCESS_ENV;
pub use running::{not_running, require_running};
pub use sandbox_agents_sandbox::OutputStream;
pub use sandbox_files::SANDBOX_FILE_MAX_BYTES;
pub use service::{SessionHooks, SessionSettings, Sessions};
pub use spend_limit::refuse_over_monthly_limit;
pub use stdio::{Command, CommandSpec, StderrTail, StdioCommand, STDERR_TAIL};
pub use terminal::{
    terminal_size, Terminal, TerminalTarget, MAX_TERMINALS_PER_SESSION, MAX_TERMINAL_SIDE,
};
