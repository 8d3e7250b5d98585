//! When a failed delivery is tried again: exponential backoff with jitter, a fixed number of
//! attempts, then `failed`. With the defaults (8 attempts, 10 s base, factor 5, 12 h cap) the
//! waits are about 10 s, 50 s, 4 min, 21 min, 1.7 h, 8.7 h and 12 h: the last attempt comes
//! roughly a day after the first.
//!
//! The wait follows from the number of failed attempts, which the outbox row stores, so the
//! schedule carries on across restarts; the formula is the workspace's one jittered schedule
//! (`sandbox_agents_backoff::Jittered`).

use std::time::Duration;

/// A uniform random number in [0, 1), for [`RetryPolicy::next_wait`].
pub use sandbox_agents_backoff::unit_random;
use sandbox_agents_backoff::Jittered;

/// Each wait is multiplied by this much per attempt made.
pub const FACTOR: f64 = 5.0;
/// Waits are spread by up to this fraction either way, so that deliveries which failed
/// together (a receiver outage) do not all come back at the same instant.
pub const JITTER: f64 = 0.2;

#[derive(Clone, Debug)]
pub struct RetryPolicy {
    /// Attempts in all, the first included (at least 1).
    pub max_attempts: u32,
    /// The wait after the first failure.
    pub base: Duration,
    /// No wait is longer than this.
    pub max: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_attempts: 8,
            base: Duration::from_secs(10),
            max: Duration::from_secs(12 * 3600),
        }
    }
}

impl RetryPolicy {
    /// The wait after `failed` attempts (1 for the first failure), or None when the budget is
    /// spent. `unit` is a uniform random number in [0, 1) that picks the jitter.
    pub fn next_wait(&self, failed: u32, unit: f64) -> Option<Duration> {
        if failed >= self.max_attempts.max(1) {
            return None;
        }
        let backoff = Jittered {
            base: self.base,
            factor: FACTOR,
            max: self.max,
            jitter: JITTER,
        };
        Some(backoff.delay(failed.saturating_sub(1), unit))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_grow_exponentially_are_capped_jittered_and_stop_after_the_budget() {
        let p = RetryPolicy::default();
        let waits: Vec<u64> = (1..8)
            .map(|n| p.next_wait(n, 0.5).unwrap().as_secs())
            .collect();
        assert_eq!(waits, vec![10, 50, 250, 1250, 6250, 31250, 43200]);
        let total: u64 = waits.iter().sum();
        assert!((20 * 3600..28 * 3600).contains(&total), "{total}");
        assert_eq!(p.next_wait(8, 0.5), None);
        assert_eq!(p.next_wait(1, 0.0).unwrap(), Duration::from_secs(8));
        assert_eq!(p.next_wait(1, 1.0).unwrap(), Duration::from_secs(12));
        let u = unit_random();
        assert!((0.0..1.0).contains(&u));
    }
}
