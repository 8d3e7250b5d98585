//! How long to wait before trying again, for every retry in the workspace.
//!
//! Two kinds of schedule:
//! - [`DATABASE_WRITE`]: a fixed one (0.5 s, 2 s, 8 s) for a write that must not be lost to a
//!   database restart or fail-over; a `backon` builder, as backon expresses it exactly.
//! - [`Jittered`]: exponential growth to a cap, spread by a symmetric jitter, for the model
//!   client (`× 0.5–1.5`) and the webhooks (`× 0.8–1.2`). backon cannot say this: its jitter
//!   only ever adds (`× 1–2`), and the webhooks' attempt count is stored in the database
//!   across restarts, so the wait must follow from the count rather than from an iterator's
//!   state. One small function serves both.

use std::time::Duration;

use backon::ExponentialBuilder;

/// Retries of a write whose loss would leave a row stale until a sweep repairs it (a run's end,
/// a boot's outcome): 0.5 s, 2 s, then 8 s, about ten seconds in all, which a database restart
/// or fail-over fits in. No jitter: these are few, and not synchronised across processes.
pub const DATABASE_WRITE: ExponentialBuilder = ExponentialBuilder::new()
    .with_min_delay(Duration::from_millis(500))
    .with_factor(4.0)
    .without_max_delay()
    .with_max_times(3);

/// `min(base · factor^retry, max) × (1 ± jitter)`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Jittered {
    /// The wait before the first retry, before jitter.
    pub base: Duration,
    /// Each wait is this many times the one before (at least 1).
    pub factor: f64,
    /// No wait is longer than this before jitter.
    pub max: Duration,
    /// Waits are spread by up to this fraction either way (0 to 1), so that calls which
    /// failed together (a provider's or receiver's outage) do not all come back at once.
    pub jitter: f64,
}

impl Jittered {
    /// The wait before retry number `retry + 1` (`retry` counts from 0). `unit` is a number in
    /// [0, 1] that picks the jitter (0 the shortest wait, 1 the longest; see [`unit_random`]).
    pub fn delay(&self, retry: u32, unit: f64) -> Duration {
        // The exponent stops growing where any sensible cap has long been reached, so that the
        // product stays finite (a zero base stays zero rather than becoming 0 · ∞).
        let growth = self.factor.max(1.0).powi(retry.min(60) as i32);
        let wait = (self.base.as_secs_f64() * growth).min(self.max.as_secs_f64());
        let spread = 1.0 + self.jitter.clamp(0.0, 1.0) * (2.0 * unit.clamp(0.0, 1.0) - 1.0);
        Duration::try_from_secs_f64(wait * spread).unwrap_or(Duration::MAX)
    }
}

/// A uniform random number in [0, 1), for the jitter.
pub fn unit_random() -> f64 {
    fastrand::f64()
}

#[cfg(test)]
mod tests {
    use super::*;
    use backon::BackoffBuilder;

    #[test]
    fn database_writes_wait_half_a_second_two_then_eight_then_give_up() {
        let waits: Vec<Duration> = DATABASE_WRITE.build().collect();
        assert_eq!(
            waits,
            [
                Duration::from_millis(500),
                Duration::from_secs(2),
                Duration::from_secs(8)
            ]
        );
    }

    #[test]
    fn waits_grow_by_the_factor_up_to_the_cap_and_the_jitter_spreads_both_ways() {
        let policy = Jittered {
            base: Duration::from_secs(1),
            factor: 3.0,
            max: Duration::from_secs(20),
            jitter: 0.5,
        };
        let middle: Vec<Duration> = (0..5).map(|n| policy.delay(n, 0.5)).collect();
        assert_eq!(middle, [1, 3, 9, 20, 20].map(Duration::from_secs));
        assert_eq!(policy.delay(0, 0.0), Duration::from_millis(500));
        assert_eq!(policy.delay(0, 1.0), Duration::from_millis(1500));
        assert_eq!(policy.delay(u32::MAX, 1.0), Duration::from_secs(30));
        let zero = Jittered {
            base: Duration::ZERO,
            ..policy
        };
        assert_eq!(zero.delay(1000, 1.0), Duration::ZERO);
        for _ in 0..100 {
            let u = unit_random();
            assert!((0.0..1.0).contains(&u), "{u}");
        }
    }
}
