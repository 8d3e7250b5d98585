//! The runs this process drives, each with the token that cancels it.

use sandbox_agents_domain::RunId;
use std::collections::HashMap;
use std::sync::Mutex;
use tokio_util::sync::CancellationToken;

/// The runs this process drives, by run id, with their cancellation tokens.
#[derive(Default)]
pub struct LocalRuns(Mutex<HashMap<RunId, CancellationToken>>);

impl LocalRuns {
    pub(crate) fn insert(&self, id: RunId) -> CancellationToken {
        let t = CancellationToken::new();
        self.0.lock().expect("not poisoned").insert(id, t.clone());
        t
    }

    pub(crate) fn remove(&self, id: RunId) {
        self.0.lock().expect("not poisoned").remove(&id);
    }

    pub(crate) fn cancel(&self, id: RunId) -> bool {
        match self.0.lock().expect("not poisoned").get(&id) {
            Some(t) => {
                t.cancel();
                true
            }
            None => false,
        }
    }
}
