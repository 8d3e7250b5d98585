//! The runs this process drives, each with the token that cancels it.

use sandbox_agents_domain::RunId;
use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use tokio_util::sync::CancellationToken;

/// The runs this process drives, by run id, with their cancellation tokens.
#[derive(Default)]
pub struct LocalRuns {
    driving: Mutex<HashMap<RunId, CancellationToken>>,
    /// Runs stamped with this process's key that it did not drive at the last
    /// [`LocalRuns::abandoned`] check.
    suspects: Mutex<HashSet<RunId>>,
}

impl LocalRuns {
    pub(crate) fn insert(&self, id: RunId) -> CancellationToken {
        let t = CancellationToken::new();
        self.driving
            .lock()
            .expect("not poisoned")
            .insert(id, t.clone());
        t
    }

    pub(crate) fn remove(&self, id: RunId) {
        self.driving.lock().expect("not poisoned").remove(&id);
    }

    pub(crate) fn cancel(&self, id: RunId) -> bool {
        match self.driving.lock().expect("not poisoned").get(&id) {
            Some(t) => {
                t.cancel();
                true
            }
            None => false,
        }
    }

    /// Of `stamped`, the runs in flight that carry this process's key, those it has not been
    /// driving at this check nor at the one before: their driver ended without writing their
    /// end (it panicked, or the database refused the write). Two checks, because a run is
    /// stamped in a transaction that commits a moment before its driver starts here.
    pub(crate) fn abandoned(&self, stamped: impl IntoIterator<Item = RunId>) -> Vec<RunId> {
        let undriven: HashSet<RunId> = {
            let driving = self.driving.lock().expect("not poisoned");
            stamped
                .into_iter()
                .filter(|r| !driving.contains_key(r))
                .collect()
        };
        let mut suspects = self.suspects.lock().expect("not poisoned");
        let abandoned = undriven.intersection(&suspects).copied().collect();
        *suspects = undriven;
        abandoned
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_is_abandoned_once_two_checks_in_a_row_find_it_undriven() {
        let local = LocalRuns::default();
        let (driven, starting, lost) = (RunId::new(), RunId::new(), RunId::new());
        local.insert(driven);
        // First check: `starting` and `lost` are only suspects.
        assert!(local.abandoned([driven, starting, lost]).is_empty());
        // `starting`'s driver began meanwhile; `lost` never had one.
        local.insert(starting);
        assert_eq!(local.abandoned([driven, starting, lost]), [lost]);
        // A run whose driver ended after the previous check is only a suspect again.
        local.remove(driven);
        assert!(local.abandoned([driven]).is_empty());
        assert_eq!(local.abandoned([driven]), [driven]);
    }
}
