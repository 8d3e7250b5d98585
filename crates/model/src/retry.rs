//! How long to wait before the next attempt.
//!
//! `Retry-After` (delta-seconds, possibly fractional) wins when the provider sends it, cut to
//! `retry_after_max`; otherwise `min(base · 2^attempt, max) × jitter`, the jitter uniform in
//! 0.5–1.5 so that many clients refused at once do not come back at once (the workspace's
//! one jittered schedule, `sandbox_agents_backoff::Jittered`).

use std::time::Duration;

use reqwest::header::{HeaderMap, RETRY_AFTER};
use sandbox_agents_backoff::{unit_random, Jittered};

use crate::config::ModelConfig;

/// The delay before retry number `attempt + 1` (`attempt` counts from 0).
pub fn delay(config: &ModelConfig, attempt: u32, retry_after: Option<Duration>) -> Duration {
    if let Some(wait) = retry_after {
        return wait.min(config.retry_after_max);
    }
    let backoff = Jittered {
        base: config.backoff_base,
        factor: 2.0,
        max: config.backoff_max,
        jitter: 0.5,
    };
    backoff.delay(attempt, unit_random())
}

/// `Retry-After` as seconds. An HTTP-date, or anything else unreadable, is ignored (and the
/// backoff is used instead).
pub fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let text = headers.get(RETRY_AFTER)?.to_str().ok()?;
    let secs: f64 = text.trim().parse().ok()?;
    (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs.min(86_400.0)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Transport;
    use reqwest::header::HeaderValue;

    fn config() -> ModelConfig {
        ModelConfig::new(Transport::Proxy {
            base: "http://x".into(),
            api_key: None,
        })
    }

    #[test]
    fn backoff_doubles_up_to_the_cap_with_jitter() {
        let c = config();
        for _ in 0..100 {
            let first = delay(&c, 0, None);
            assert!(first >= Duration::from_millis(250) && first <= Duration::from_millis(750));
            let late = delay(&c, 10, None);
            assert!(late >= Duration::from_secs(4) && late <= Duration::from_secs(12));
        }
    }

    #[test]
    fn retry_after_wins_and_is_capped() {
        let c = config();
        assert_eq!(
            delay(&c, 3, Some(Duration::from_secs(2))),
            Duration::from_secs(2)
        );
        assert_eq!(
            delay(&c, 0, Some(Duration::from_secs(600))),
            Duration::from_secs(60)
        );
        let mut headers = HeaderMap::new();
        headers.insert(RETRY_AFTER, HeaderValue::from_static("1.5"));
        assert_eq!(retry_after(&headers), Some(Duration::from_millis(1500)));
        headers.insert(
            RETRY_AFTER,
            HeaderValue::from_static("Wed, 21 Oct 2015 07:28:00 GMT"),
        );
        assert_eq!(retry_after(&headers), None);
    }
}
