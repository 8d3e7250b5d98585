//! How the run loop and the lifecycle are made together: each holds the other (runs drive
//! sandboxes; the lifecycle calls runs through its hooks), so [`Runs::new`] builds both in one
//! `Arc::new_cyclic`. Apart from `service.rs` (what runs hold) and `hooks.rs` (what the
//! lifecycle calls), so neither of those imports the other.

use crate::models::ModelClients;
use crate::service::Inner;
use crate::Runs;
use sandbox_agents_sessions::{RunHooks, Sessions};
use sandbox_agents_store::admission::Limits;
use std::sync::Arc;

impl Runs {
    /// The run loop and the lifecycle it drives, made together: `lifecycle` gets the hooks
    /// the lifecycle calls for runs (they hold these runs weakly, `hooks.rs`) and builds the
    /// [`Sessions`] these runs use, with whatever else is built around it, given back beside
    /// the runs. The lifecycle reaches runs only through the hooks, and requires them
    /// (`Sessions::new`), so a wiring cannot leave them out. `run_limits` bound turns in
    /// flight.
    pub fn new<T>(
        lifecycle: impl FnOnce(Arc<dyn RunHooks>) -> (Sessions, T),
        models: ModelClients,
        run_limits: Limits,
    ) -> (Self, T) {
        let mut around = None;
        let inner = Arc::new_cyclic(|weak| {
            let (sessions, other) = lifecycle(crate::hooks::for_lifecycle(weak.clone()));
            around = Some(other);
            Inner {
                db: sessions.db().clone(),
                shutdown: sessions.shutdown().clone(),
                sessions,
                models,
                runs: Default::default(),
                hub: Default::default(),
                windows: Default::default(),
                run_limits,
                run_room: Default::default(),
                admission_asks: tokio::sync::Semaphore::new(crate::admission::ASKS_AT_ONCE),
                mcp: Default::default(),
            }
        });
        let around = around.expect("Arc::new_cyclic calls its closure once");
        (Runs { inner }, around)
    }
}
